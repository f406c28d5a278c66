"""KVStore: one interface for every way of sharing parameters and gradients.

``mx.kv.create(name)`` with 'local' or 'device' here; distributed backends register
themselves under their own names ('allreduce', 'horovod', 'nccl': :mod:`.allreduce`;
'dist_sync', 'dist_async', 'dist', ...: the parameter server, :mod:`.ps`).
"""

from . import allreduce as _allreduce  # noqa: F401  (registers 'allreduce', 'horovod', 'nccl')
from . import local as _local  # noqa: F401  (registers 'local' and 'device')
from . import ps  # noqa: F401  (registers 'dist_sync', 'dist_async', 'dist', ...: the parameter server)
from . import teststore as _teststore  # noqa: F401  (registers 'teststore')
from .allreduce import AllreduceKVStore
from .base import (
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

__all__ = ["KVStoreBase", "KVStore", "KVStoreError", "LocalKVStore", "AllreduceKVStore", "create",
           "register", "register_factory", "registered_names", "is_registered", "capable"]
