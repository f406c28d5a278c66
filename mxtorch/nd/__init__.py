"""``mx.nd``: MXNet's NDArray operators as functions returning plain ``torch.Tensor``.

There is no NDArray class: ``nd.NDArray`` is ``torch.Tensor`` (for ``isinstance`` checks).
The module also serves as the ``F`` of MXNet 1.x ``hybrid_forward(F, x, ...)`` code, so it
carries the symbol-style operators (``F.FullyConnected``, ``F.Convolution``, ``F.BatchNorm`` ...).

Differences from torch worth knowing: creation functions default to float32 (also for numpy
float64 input) and take ``ctx``; full reductions return shape (1,); index results
(``argmax``, ``topk``...) are float32; comparisons return 1/0 in the input dtype.
Sparse arrays are not here (``mxtorch.nd.sparse`` is separate).
"""

from __future__ import annotations

import torch

from . import _creation, _io, _nn, _ops, random, sparse
from ._creation import *  # noqa: F403
from ._io import *  # noqa: F403
from ._nn import *  # noqa: F403
from ._ops import *  # noqa: F403

NDArray = torch.Tensor
"""MXNet's array type: here simply ``torch.Tensor``."""

__all__ = ["NDArray", "random", "sparse"] + [
    n for n in (*_creation.__all__, *_io.__all__, *_nn.__all__, *_ops.__all__) if n != "infer_reshape"
]
