"""mxtorch: Apache MXNet's Gluon programming model and KVStore system, on PyTorch.

``import mxtorch as mx`` gives MXNet's namespaces: ``mx.nd``, ``mx.autograd``, ``mx.gluon``,
``mx.init``, ``mx.optimizer``, ``mx.lr_scheduler``, ``mx.metric``, ``mx.kv``, ``mx.random``,
``mx.test_utils`` and the contexts ``mx.cpu()``/``mx.gpu()``.  Submodules load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import autograd  # applies MXNet's non-scalar backward rule (see mxtorch.autograd)
from .base import DeferredInitializationError, MXNetError
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus

__version__ = "0.1.0"

_SUBMODULES = {
    "nd": "mxtorch.nd",
    "ndarray": "mxtorch.nd",
    "gluon": "mxtorch.gluon",
    "init": "mxtorch.initializer",
    "initializer": "mxtorch.initializer",
    "optimizer": "mxtorch.optimizer",
    "lr_scheduler": "mxtorch.lr_scheduler",
    "metric": "mxtorch.metric",
    "kv": "mxtorch.kvstore",
    "kvstore": "mxtorch.kvstore",
    "random": "mxtorch.random",
    "test_utils": "mxtorch.test_utils",
    "ndarray_methods": "mxtorch.ndarray_methods",
    "context": "mxtorch.context",
    "horovod": "mxtorch.horovod",
    "amp": "mxtorch.amp",
    "compression": "mxtorch.compression",
    "distributed": "mxtorch.distributed",
}

__all__ = [
    "Context", "cpu", "gpu", "cpu_pinned", "num_gpus", "current_context", "autograd", "MXNetError",
    "DeferredInitializationError", "__version__", *sorted(_SUBMODULES),
]


def __getattr__(name: str) -> Any:
    target = _SUBMODULES.get(name)
    if target is None:
        raise AttributeError(f"module 'mxtorch' has no attribute {name!r}")
    mod = importlib.import_module(target)
    globals()[name] = mod
    return mod


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES))
