"""Gluon's contributed packages (MXNet's ``mxnet.gluon.contrib``): ``nn`` (Concurrent,
HybridConcurrent, SyncBatchNorm, SparseEmbedding, ...), ``estimator`` (``Estimator.fit`` with
event handlers), ``data`` (IntervalSampler), ``rnn`` (LSTMPCell, VariationalDropoutCell, the
convolutional cells, dynamic_unroll) and ``cnn`` (the deformable convolutions).
Submodules load on first use."""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = {
    "nn": "mxtorch.gluon.contrib.nn",
    "estimator": "mxtorch.gluon.contrib.estimator",
    "data": "mxtorch.gluon.contrib.data",
    "rnn": "mxtorch.gluon.contrib.rnn",
    "cnn": "mxtorch.gluon.contrib.cnn",
}

__all__ = sorted(_SUBMODULES)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        mod = importlib.import_module(_SUBMODULES[name])
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'mxtorch.gluon.contrib' has no attribute {name!r}")
