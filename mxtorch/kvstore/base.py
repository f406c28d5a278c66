"""The KVStore interface every backend implements, and the registry that names backends.

A key is an ``int`` or a ``str``; a value is a ``torch.Tensor`` (or, for a key pushed from
several contexts, a list of them, which the store sums).  Backends declare what they can do
through :meth:`KVStoreBase.is_capable`; the Trainer reads those declarations instead of
inspecting a backend's type name.
"""

from __future__ import annotations

import abc
import builtins
import enum
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..base import MXNetError
from ..registry import Registry

__all__ = ["KVStoreBase", "KVStoreError", "Capability", "Key", "Value", "register", "register_factory",
           "create", "registered_names", "is_registered", "capable", "UPDATE_ON_KVSTORE_ENV",
           "update_on_kvstore_from_env"]

Key = int | str
Value = torch.Tensor | Sequence[torch.Tensor]


class Capability(str, enum.Enum):
    """What a store can do beyond ``broadcast``/``pushpull``, declared by :meth:`KVStoreBase.is_capable`.

    A ``str`` enum: MXNet code that asks ``kv.is_capable('optimizer')`` or compares with the
    plain string keeps working.  What :class:`mxtorch.gluon.Trainer` does with each:
    """

    OPTIMIZER = "optimizer"
    """``set_optimizer``: the store runs the update (``update_on_kvstore``), and keeps its states."""
    GRADIENT_COMPRESSION = "gradient_compression"
    """``set_gradient_compression``: the Trainer's ``compression_params`` go to the store; its
    :attr:`KVStoreBase.compressor` holds the error-feedback residuals that ``save_states`` keeps."""
    DISTRIBUTED = "distributed"
    """The store spans processes: ``rank``/``num_workers`` are meaningful, weights are broadcast
    from rank 0, and one context per process still uses the store."""
    OVERLAP = "overlap"
    """``attach_gradient_hooks``/``synchronize_gradients``: gradients are reduced while backward
    runs; the Trainer attaches the hooks once and finishes the reduction in ``step``."""
    ASYNC = "async"
    """Pushes are applied without waiting for the other workers (dist_async): the Trainer must
    update on the store."""

    def __str__(self) -> str:
        return self.value


class KVStoreError(MXNetError):
    """A KVStore call failed: unknown key, shape mismatch, bad backend name, dead peer, ..."""


class KVStoreBase(abc.ABC):
    """The interface of every KVStore backend ('local', 'device', allreduce, parameter server).

    As in MXNet, a store written by a user needs only ``broadcast``, ``pushpull`` and ``type``
    (plus ``is_capable`` when it can do more): :class:`mxtorch.gluon.Trainer` initializes
    weights with ``broadcast`` and reduces dense gradients with ``pushpull``.  ``init``,
    ``push`` and ``pull`` are separate steps that the built-in stores offer as well; row-sparse
    gradients and update-on-kvstore use them.  Register a store with
    ``@mx.kv.KVStoreBase.register`` and create it by its lower-case class name.
    """

    # MXNet's names for the capabilities (members of :class:`Capability`)
    OPTIMIZER = Capability.OPTIMIZER
    GRADIENT_COMPRESSION = Capability.GRADIENT_COMPRESSION
    DISTRIBUTED = Capability.DISTRIBUTED
    OVERLAP = Capability.OVERLAP
    ASYNC = Capability.ASYNC

    @property
    def compressor(self) -> Any:
        """The gradient compressor this store applies (a :class:`mxtorch.compression.Compressor`,
        with its error-feedback residuals), or None.  Stores with GRADIENT_COMPRESSION create it in
        ``set_gradient_compression``; the Trainer saves and restores its state."""
        return None

    kv_registry: Registry[Callable[..., KVStoreBase]]  # MXNet's name for the registry (see below)

    @property
    @abc.abstractmethod
    def type(self) -> str:
        """The name this store was created with."""

    @property
    def rank(self) -> int:
        return 0

    @property
    def num_workers(self) -> int:
        return 1

    @property
    def local_rank(self) -> int:
        return 0

    def init(self, key: Key | Sequence[Key], value: Value | Sequence[Value]) -> None:
        """Create ``key`` with its initial ``value`` (once per key)."""
        raise KVStoreError(f"KVStore {self.type!r} has no init(): it offers broadcast() and pushpull()")

    def push(self, key: Key | Sequence[Key], value: Value | Sequence[Value], priority: int = 0) -> None:
        """Send values to the store; several values for one key are summed."""
        raise KVStoreError(f"KVStore {self.type!r} has no push(): use pushpull()")

    def pull(self, key: Key | Sequence[Key], out: Value | Sequence[Value] | None = None,
             priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copy the stored value of ``key`` into ``out`` (each tensor of a list)."""
        raise KVStoreError(f"KVStore {self.type!r} has no pull(): use pushpull()")

    def pushpull(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                 out: Value | Sequence[Value] | None = None, priority: int = 0) -> None:
        """``push`` then ``pull``; with ``out=None`` the result overwrites ``value``."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                  out: Value | Sequence[Value], priority: int = 0) -> None:
        """Initialize ``key`` with ``value`` (rank 0's in a distributed store) and pull it to ``out``."""
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key: Key, out: Any = None, priority: int = 0, row_ids: Any = None) -> None:
        raise KVStoreError(f"KVStore {self.type!r} has no row-sparse storage: use pull()")

    def set_optimizer(self, optimizer: Any) -> None:
        raise KVStoreError(f"KVStore {self.type!r} cannot run an optimizer: update on the workers instead")

    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None:
        raise KVStoreError(f"KVStore {self.type!r} does not support gradient compression")

    def is_capable(self, capability: str) -> bool:
        """Whether this store supports ``capability`` (a :class:`Capability` or its string)."""
        return False

    def attach_gradient_hooks(self, params: Sequence[Any]) -> bool:
        """Start reducing the gradients of ``params`` (tensors, or objects with ``list_data()``)
        while backward runs (stores with OVERLAP).  Collective; returns whether hooks were
        attached (False: :meth:`synchronize_gradients` reduces everything when called)."""
        raise KVStoreError(f"KVStore {self.type!r} does not reduce gradients during backward (no "
                           f"{Capability.OVERLAP.value!r} capability): use pushpull()")

    def synchronize_gradients(self, params: Sequence[Any]) -> None:
        """Finish the reduction :meth:`attach_gradient_hooks` started and write the sums into the
        gradients of ``params`` (stores with OVERLAP).  Collective."""
        raise KVStoreError(f"KVStore {self.type!r} does not reduce gradients during backward (no "
                           f"{Capability.OVERLAP.value!r} capability): use pushpull()")

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        raise KVStoreError(f"KVStore {self.type!r} holds no optimizer state")

    def load_optimizer_states(self, fname: str) -> None:
        raise KVStoreError(f"KVStore {self.type!r} holds no optimizer state")

    def barrier(self) -> None:
        """Wait until every worker reaches this point (no-op in one process)."""

    def close(self) -> None:
        """Release resources (connections, process groups)."""

    @staticmethod
    def register(klass: builtins.type[KVStoreBase]) -> builtins.type[KVStoreBase]:
        """Register a store class under its lower-case class name (MXNet's decorator)::

            @mx.kv.KVStoreBase.register
            class MyStore(mx.kv.KVStoreBase): ...
            kv = mx.kv.create('mystore')
        """
        return register(klass)


def capable(store: Any, capability: Capability | str) -> bool:
    """``store.is_capable(capability)``, False where a store raises for a capability it does not know
    (MXNet's own stores raise ValueError for unknown capabilities)."""
    try:
        return bool(store.is_capable(capability))
    except (ValueError, KeyError, NotImplementedError):
        return False


_REGISTRY: Registry[Callable[..., KVStoreBase]] = Registry("KVStore type", error=KVStoreError)
# Backends that load on first use: importing mxtorch.gluon loads neither ZeroMQ nor torch.distributed's
# collectives.  Each module registers its names when imported.
for _name in ("allreduce", "horovod", "nccl"):
    _REGISTRY.lazy(_name, "mxtorch.kvstore.allreduce")
for _name in ("dist_sync", "dist_async", "dist_device_sync", "dist_sync_device", "dist_async_device", "dist"):
    _REGISTRY.lazy(_name, "mxtorch.kvstore.ps")
_REGISTRY.lazy("teststore", "mxtorch.kvstore.teststore")


def register(name: str | type[KVStoreBase] | None = None) -> Any:
    """Register a backend class: ``@register`` (lower-case class name) or ``@register('name')``.

    The class is called as ``cls(name, **kwargs)`` by :func:`create`.  Registering a name twice
    raises: a silent overwrite would hide a typo or a clash.
    """

    def deco(cls: type[KVStoreBase], key: str | None = None) -> type[KVStoreBase]:
        if not (isinstance(cls, type) and issubclass(cls, KVStoreBase)):
            raise TypeError(f"only KVStoreBase subclasses can be registered, got {cls!r}")
        register_factory(key or cls.__name__, _class_factory(cls))
        return cls

    if isinstance(name, type):
        return deco(name)
    return lambda cls: deco(cls, name)


def _class_factory(cls: type[KVStoreBase]) -> Callable[..., KVStoreBase]:
    """How :func:`create` builds ``cls``: with the name it was asked for when its constructor has a
    ``name`` parameter (mxtorch's stores: one class serves several names), without arguments
    otherwise (MXNet-style user stores, whose other parameters keep their defaults)."""
    try:
        takes_name = "name" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        takes_name = False

    def factory(name: str, **kwargs: Any) -> KVStoreBase:
        return cls(name=name, **kwargs) if takes_name else cls(**kwargs)  # type: ignore[call-arg]

    factory.klass = cls  # type: ignore[attr-defined]
    return factory


def register_factory(name: str, factory: Callable[..., KVStoreBase]) -> None:
    """Register a callable that builds a store (for names handled by one class, e.g. 'device').

    The rules of :class:`mxtorch.registry.Registry`: registering a name again with the same class
    changes nothing (a module imported twice); another class replaces it with a warning (MXNet's
    rule).
    """
    _REGISTRY.add(name, factory)


def registered_names() -> list[str]:
    return _REGISTRY.names()


def is_registered(name: str) -> bool:
    return name in _REGISTRY


def create(name: str | KVStoreBase = "local", **kwargs: Any) -> KVStoreBase:
    """Create the KVStore ``name`` ('local', 'device', ...); an instance is returned as is."""
    if isinstance(name, KVStoreBase):
        return name
    if not isinstance(name, str):
        raise TypeError(f"KVStore name must be a string, got {type(name).__name__}: {name!r}")
    factory = _REGISTRY[name]
    return factory(name.lower(), **kwargs)


KVStoreBase.kv_registry = _REGISTRY


UPDATE_ON_KVSTORE_ENV = "MXNET_UPDATE_ON_KVSTORE"
"""MXNet's switch: 1 (default) a store that can run the optimizer does; 0 every context updates."""


def update_on_kvstore_from_env() -> bool:
    """:data:`UPDATE_ON_KVSTORE_ENV` read (gluon's Trainer and the symbolic Module both follow it)."""
    raw = os.environ.get(UPDATE_ON_KVSTORE_ENV, "1").strip()
    if raw not in ("0", "1"):
        raise KVStoreError(f"{UPDATE_ON_KVSTORE_ENV}={raw!r} is not understood: set it to 1 (stores that can "
                           "run the optimizer do, the default) or 0 (every context updates its own copy)")
    return raw == "1"
