"""KVStore: one interface for every way of sharing parameters and gradients.

``mx.kv.create(name)`` with 'local' or 'device' here; distributed backends register
themselves under their own names.
"""

from . import local as _local  # noqa: F401  (registers 'local' and 'device')
from .base import (
           KVStoreBase,
           KVStoreError,
           create,
           is_registered,
           register,
           register_factory,
           registered_names,
)
from .local import LocalKVStore

KVStore = KVStoreBase

__all__ = ["KVStoreBase", "KVStore", "KVStoreError", "LocalKVStore", "create", "register",
           "register_factory", "registered_names", "is_registered"]
