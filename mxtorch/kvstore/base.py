"""The KVStore interface every backend implements, and the registry that names backends.

A key is an ``int`` or a ``str``; a value is a ``torch.Tensor`` (or, for a key pushed from
several contexts, a list of them, which the store sums).  Backends declare what they can do
through :meth:`KVStoreBase.is_capable`; the Trainer reads those declarations instead of
inspecting a backend's type name.
"""

from __future__ import annotations

import abc
import builtins
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..base import MXNetError

__all__ = ["KVStoreBase", "KVStoreError", "Key", "Value", "register", "create", "registered_names",
           "is_registered", "capable"]

Key = int | str
Value = torch.Tensor | Sequence[torch.Tensor]


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

    OPTIMIZER = "optimizer"
    """Capability: the store can run the optimizer itself (``set_optimizer``, update on kvstore)."""
    GRADIENT_COMPRESSION = "gradient_compression"
    """Capability: the store accepts ``set_gradient_compression``."""
    DISTRIBUTED = "distributed"
    """Capability: the store spans several processes (rank/num_workers meaningful)."""
    OVERLAP = "overlap"
    """Capability: the store reduces gradients while backward runs (``attach_gradient_hooks``)."""
    ASYNC = "async"
    """Capability: pushes are applied without waiting for the other workers (dist_async); a
    Trainer must then update on the store."""

    kv_registry: dict[str, Callable[..., KVStoreBase]]  # MXNet's name for the registry (see below)

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
        """Whether this store supports ``capability`` (see the class constants)."""
        return False

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


def capable(store: Any, capability: str) -> bool:
    """``store.is_capable(capability)``, False where a store raises for a capability it does not know
    (MXNet's own stores raise ValueError for unknown capabilities)."""
    try:
        return bool(store.is_capable(capability))
    except (ValueError, KeyError, NotImplementedError):
        return False


_REGISTRY: dict[str, Callable[..., KVStoreBase]] = {}


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
    """How :func:`create` builds ``cls``: with the name it was asked for when its constructor takes
    an argument (mxtorch's stores), without when it takes none (MXNet-style user stores)."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        params = []
    takes_name = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)

    def factory(name: str, **kwargs: Any) -> KVStoreBase:
        return cls(name, **kwargs) if takes_name else cls(**kwargs)  # type: ignore[call-arg]

    factory.klass = cls  # type: ignore[attr-defined]
    return factory


def register_factory(name: str, factory: Callable[..., KVStoreBase]) -> None:
    """Register a callable that builds a store (for names handled by one class, e.g. 'device').

    Registering a name again with the same class is a no-op (a module imported twice); with a
    different one it raises: a silent overwrite would hide a typo or a clash.
    """
    key = name.lower()
    old = _REGISTRY.get(key)
    if old is not None:
        same = getattr(old, "klass", old) is getattr(factory, "klass", factory)
        if same:
            return
        raise KVStoreError(f"a KVStore named {key!r} is already registered "
                           f"({getattr(old, 'klass', old)!r}): choose another class name")
    _REGISTRY[key] = factory


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def is_registered(name: str) -> bool:
    return isinstance(name, str) and name.lower() in _REGISTRY


def create(name: str | KVStoreBase = "local", **kwargs: Any) -> KVStoreBase:
    """Create the KVStore ``name`` ('local', 'device', ...); an instance is returned as is."""
    if isinstance(name, KVStoreBase):
        return name
    if not isinstance(name, str):
        raise TypeError(f"KVStore name must be a string, got {type(name).__name__}: {name!r}")
    factory = _REGISTRY.get(name.lower())
    if factory is None:
        raise KVStoreError(f"unknown KVStore type {name!r}: known types are {registered_names()}")
    return factory(name.lower(), **kwargs)


KVStoreBase.kv_registry = _REGISTRY
