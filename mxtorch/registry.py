"""One registry type for every family of named things: optimizers, initializers, metrics, KVStores,
compressors, ...

The rules, written once:

* **Names are case-insensitive** (``'SGD'``, ``'sgd'``); a class registered without a name goes
  under its lower-cased class name.  Aliases are further names for the same entry.
* **An unknown name** raises the family's error (a :class:`RegistryError` unless the family
  gives its own class) listing every known name: ``unknown optimizer 'sdg': known optimizers
  are ['adam', 'sgd', ...]``.
* **Registering a name again** with the same object, or with a class of the same module and
  qualified name (a module imported twice, a script run as ``__main__`` and imported; a factory
  function names the class it builds in a ``klass`` attribute), quietly
  keeps the newer one.  With a different object it replaces the old one and warns, naming
  both: MXNet's rule for its optimizer, initializer, metric and KVStore registries, and the one
  that lets a notebook cell be run again.
* **Lazy entries** name a module that registers the entry when imported (:meth:`Registry.lazy`):
  a backend costs nothing until somebody asks for it by name.

Example::

    from mxtorch.registry import Registry

    schedules = Registry("schedule")

    @schedules.register
    class Cosine: ...

    schedules["COSINE"]           # -> Cosine
    schedules["cosin"]            # RegistryError: unknown schedule 'cosin': known schedules are ['cosine']
    schedules.get("cosin")        # None, as a dict
"""

from __future__ import annotations

import importlib
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

from .base import MXNetError

__all__ = ["Registry", "RegistryError", "subclasses_of"]

T = TypeVar("T")
_O = TypeVar("_O")


class RegistryError(MXNetError, ValueError, KeyError):
    """An unknown name, or an invalid registration (the default error of a :class:`Registry`)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _same(a: Any, b: Any) -> bool:
    a, b = getattr(a, "klass", a), getattr(b, "klass", b)  # a factory names the class it builds
    if a is b:
        return True
    if isinstance(a, type) and isinstance(b, type):
        return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)
    return False


def _describe(obj: Any) -> str:
    obj = getattr(obj, "klass", obj)
    if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
        return f"{getattr(obj, '__module__', '?')}.{obj.__qualname__}"
    return repr(obj)


def subclasses_of(base: type, what: str) -> Callable[[Any], None]:
    """A ``check`` for :class:`Registry`: only subclasses of ``base`` (``what`` names them in the error)."""

    def check(obj: Any) -> None:
        if not (isinstance(obj, type) and issubclass(obj, base)):
            raise TypeError(f"only {what} can be registered here, got {obj!r}")

    return check


class Registry(Mapping[str, T], Generic[T]):
    """Names (lower case) mapped to objects of one family (``kind``: ``"optimizer"``).

    ``error`` is the exception class raised for an unknown name; ``check`` (optional) is called
    with every object registered and raises ``TypeError`` for one that does not belong.  A
    registry is a read-only :class:`~collections.abc.Mapping` of its loaded entries (MXNet code
    reads ``opt_registry`` and ``kv_registry`` as dicts).
    """

    def __init__(self, kind: str, *, plural: str | None = None, error: type[Exception] = RegistryError,
                 check: Callable[[Any], None] | None = None) -> None:
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self.error = error
        self._check = check
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._lock = threading.RLock()

    # ---- registering ------------------------------------------------------------------------

    @overload
    def register(self, obj: _O, *, name: str | None = None, aliases: tuple[str, ...] = ()) -> _O: ...

    @overload
    def register(self, obj: None = None, *, name: str | None = None,
                 aliases: tuple[str, ...] = ()) -> Callable[[_O], _O]: ...

    def register(self, obj: Any = None, *, name: str | None = None, aliases: tuple[str, ...] = ()) -> Any:
        """Register ``obj`` under ``name`` (default: its lower-cased ``__name__``) and ``aliases``.

        Works as ``@reg.register``, ``@reg.register(name="x", aliases=("y",))`` and
        ``reg.register(obj, name="x")``; returns ``obj``.
        """
        if obj is None:
            return lambda o: self.register(o, name=name, aliases=aliases)
        if self._check is not None:
            self._check(obj)
        key = name if name is not None else getattr(obj, "__name__", None)
        if not isinstance(key, str) or not key:
            raise TypeError(f"a {self.kind} name is a non-empty string, got {key!r}: pass name=")
        for n in (key, *aliases):
            self.add(n, obj)
        return obj

    def alias(self, *names: str) -> Callable[[_O], _O]:
        """Class decorator: register the class under further ``names`` (MXNet's ``@alias('acc')``)."""

        def deco(obj: _O) -> _O:
            if self._check is not None:
                self._check(obj)
            for n in names:
                self.add(n, obj)  # type: ignore[arg-type]
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        """Register ``obj`` under ``name`` by the rules in the module docstring."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.kind} name is a non-empty string, got {name!r}")
        key = name.lower()
        with self._lock:
            old = self._entries.get(key)
            if old is not None and not _same(old, obj):
                warnings.warn(f"{self.kind} {key!r}: {_describe(obj)} replaces {_describe(old)} registered "
                              "under the same name", UserWarning, stacklevel=3)
            self._entries[key] = obj
            self._lazy.pop(key, None)

    def lazy(self, name: str, module: str) -> None:
        """Make ``name`` known now, loaded on first use by importing ``module`` (which registers it)."""
        key = name.lower()
        with self._lock:
            if key not in self._entries:
                self._lazy[key] = module

    def remove(self, name: str) -> None:
        """Forget ``name`` (tests that register throw-away entries clean up with this)."""
        with self._lock:
            self._entries.pop(name.lower(), None)
            self._lazy.pop(name.lower(), None)

    # ---- looking up ---------------------------------------------------------------------------

    def loaded(self, name: str) -> T | None:
        """The entry named ``name`` if it is registered already (a lazy one is not loaded); else None."""
        with self._lock:
            return self._entries.get(name.lower()) if isinstance(name, str) else None

    def find(self, name: str) -> T | None:
        """The entry named ``name`` (any case), loading a lazy one; None when unknown."""
        if not isinstance(name, str):
            return None
        key = name.lower()
        with self._lock:
            if key in self._entries:
                return self._entries[key]
            module = self._lazy.get(key)
        if module is None:
            return None
        importlib.import_module(module)
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            raise self.error(f"{self.kind} {key!r} should be registered by importing {module!r}, which "
                             "did not: a bug in mxtorch, please report it")
        return entry

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The entry named ``name`` (loading a lazy one), or ``default``: a dict's ``get``.
        ``registry[name]`` raises the family's error listing the known names instead."""
        entry = self.find(name)
        return default if entry is None else entry

    def unknown(self, name: Any, hint: str = "") -> Exception:
        """The error for an unknown ``name`` (``hint``: what to do, appended)."""
        shown = repr(name) if isinstance(name, str) else f"{name!r} (a {type(name).__name__}, not a name)"
        text = f"unknown {self.kind} {shown}: known {self.plural} are {self.names()}"
        return self.error(text + (f"; {hint}" if hint else ""))

    def names(self) -> list[str]:
        """Every known name (loaded or lazy), sorted."""
        with self._lock:
            return sorted(set(self._entries) | set(self._lazy))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        key = name.lower()
        with self._lock:
            return key in self._entries or key in self._lazy

    def __getitem__(self, name: str) -> T:
        entry = self.find(name)
        if entry is None:
            raise self.unknown(name)
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
