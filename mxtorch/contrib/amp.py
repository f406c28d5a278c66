"""MXNet 1.x's ``mx.contrib.amp`` (``from mxnet.contrib.amp import amp``): the API of
:mod:`mxtorch.amp`, which MXNet 2 moved to ``mx.amp``."""

from __future__ import annotations

from ..amp import *  # noqa: F403
from ..amp import __all__ as _amp_all
from ..amp import amp

__all__ = ["amp", *_amp_all]
