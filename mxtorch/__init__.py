"""mxtorch: Apache MXNet's Gluon programming model and KVStore system, on PyTorch.

``import mxtorch as mx`` gives MXNet's namespaces: ``mx.nd``, ``mx.autograd``, ``mx.gluon``,
``mx.init``, ``mx.optimizer``, ``mx.lr_scheduler``, ``mx.metric``, ``mx.kv``, ``mx.random``,
``mx.test_utils`` and the contexts ``mx.cpu()``/``mx.gpu()``.  Submodules load on first use.
"""

from __future__ import annotations

import importlib
import os as _os
from typing import Any

from . import (
    _aliases,
    _autograd_symbol,  # noqa: F401 - registers mx.autograd.get_symbol / Symbol (a layer above)
    _logging,
    autograd,
)
from ._version import __version__
from .base import DeferredInitializationError, MXNetError
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus

_aliases.install()  # MXNet's module paths: mxtorch.ndarray.sparse, mxtorch.kv ...


def _tensor_methods_wanted() -> bool:
    # MXTORCH_TENSOR_METHODS (documented in mxtorch.distributed.env with every other variable)
    raw = _os.environ.get("MXTORCH_TENSOR_METHODS", "1").strip().lower()
    if raw in ("1", "true", "yes", "on", ""):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"MXTORCH_TENSOR_METHODS={raw!r} is not understood: set it to 1 (add MXNet's NDArray "
                     "methods to torch.Tensor, the default) or 0 (leave torch.Tensor untouched)")


_logging.install()  # the rank in every record, MXTORCH_LOG_LEVEL

if _tensor_methods_wanted():
    from . import ndarray_methods as _ndarray_methods

    _ndarray_methods.enable()

_SUBMODULES = {
    "nd": "mxtorch.nd",
    "ndarray": "mxtorch.nd",
    "np": "mxtorch.numpy",
    "numpy": "mxtorch.numpy",
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
    "util": "mxtorch.util",
    "sym": "mxtorch.symbol",
    "symbol": "mxtorch.symbol",
    "executor": "mxtorch.executor",
    "mod": "mxtorch.module",
    "module": "mxtorch.module",
    "model": "mxtorch.model",
    "operator": "mxtorch.operator",
    "callback": "mxtorch.callback",
    "viz": "mxtorch.viz",
    "mon": "mxtorch.monitor",
    "monitor": "mxtorch.monitor",
    "name": "mxtorch.symbol._scope",
    "attribute": "mxtorch.symbol._scope",
    "engine": "mxtorch.engine",
    "base": "mxtorch.base",
    "io": "mxtorch.io",
    "parallel": "mxtorch.parallel",
    "checkpoint": "mxtorch.checkpoint",
    "contrib": "mxtorch.contrib",
    "runtime": "mxtorch.runtime",
    "profiler": "mxtorch.profiler",
    "recordio": "mxtorch.recordio",
    "image": "mxtorch.image",
    "img": "mxtorch.image",  # MXNet's short name
    "rnn": "mxtorch.rnn",
}

_UTIL_NAMES = ("is_np_shape", "set_np_shape", "np_shape", "use_np_shape", "is_np_array", "np_array",
               "use_np_array", "use_np")  # MXNet's top level re-exports these from mxnet.util


__all__ = [
    "Context", "cpu", "gpu", "cpu_pinned", "num_gpus", "current_context", "autograd", "MXNetError",
    "DeferredInitializationError", "__version__", *sorted(_SUBMODULES), *_UTIL_NAMES,
]


def __getattr__(name: str) -> Any:
    if name in _UTIL_NAMES:
        from . import util

        return getattr(util, name)
    if name == "AttrScope":
        from .symbol._scope import AttrScope

        return AttrScope
    target = _SUBMODULES.get(name)
    if target is None:
        raise AttributeError(f"module 'mxtorch' has no attribute {name!r}")
    mod = importlib.import_module(target)
    globals()[name] = mod
    return mod


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES) | set(_UTIL_NAMES))
