"""KVStore: one interface for every way of sharing parameters and gradients.

``mx.kv.create(name)`` with 'local' or 'device' here; the distributed backends ('allreduce',
'horovod', 'nccl': :mod:`.allreduce`; 'dist_sync', 'dist_async', 'dist', ...: the parameter
server, :mod:`.ps`) are registered lazily and load when a store of theirs is first created, so
that a single-process program never imports ZeroMQ or the collectives.  Writing a backend:
``docs/kvstore_backend.md``.
"""

import importlib
from typing import Any

from . import local as _local  # noqa: F401  (registers 'local' and 'device')
from .base import (
           Capability,
           KVStoreBase,
           KVStoreError,
           capable,
           create,
           is_registered,
           register,
           register_factory,
           registered_names,
)
from .local import LocalKVStore

KVStore = KVStoreBase

__all__ = ["KVStoreBase", "KVStore", "KVStoreError", "Capability", "LocalKVStore", "AllreduceKVStore",
           "create", "register", "register_factory", "registered_names", "is_registered", "capable"]

_LAZY = {"AllreduceKVStore": ("mxtorch.kvstore.allreduce", "AllreduceKVStore"),
         "ps": ("mxtorch.kvstore.ps", None), "allreduce": ("mxtorch.kvstore.allreduce", None),
         "teststore": ("mxtorch.kvstore.teststore", None)}


def __getattr__(name: str) -> Any:
    """The backends load on first use (``mx.kv.AllreduceKVStore``, ``mxtorch.kvstore.ps``)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'mxtorch.kvstore' has no attribute {name!r}")
    module, attr = _LAZY[name]
    found = importlib.import_module(module)
    value = found if attr is None else getattr(found, attr)
    globals()[name] = value
    return value
