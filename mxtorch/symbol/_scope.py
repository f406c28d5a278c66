"""Naming and attribute scopes of symbolic graphs: ``mx.name.NameManager``, ``mx.AttrScope``.

MXNet names an unnamed operator node ``<hint><count>`` (``fullyconnected0``, ``_plus1``), one
counter per hint in the current :class:`NameManager`; :class:`Prefix` puts a prefix before
every name.  :class:`AttrScope` adds attributes (``ctx_group``, ``lr_mult`` ...) to every node
created inside it.  Attribute values are strings, as in MXNet's graph files.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable
from typing import Any, TypeVar

# attr_string lives in base: mx.nd.Custom's keywords use it too
from ..base import ClassPropertyType, attr_string, classproperty

__all__ = ["NameManager", "Prefix", "AttrScope", "HIDDEN_KEYS", "attr_string", "parse_attr"]

# operator keywords MXNet keeps as node attributes (stored as __key__): they are not operator parameters
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage", "profiler_scope")

_local = threading.local()
_S = TypeVar("_S")


def _current(slot: str, make: Callable[[], _S]) -> _S:
    """This thread's scope in ``slot``, made by ``make()`` the first time."""
    cur = getattr(_local, slot, None)
    if cur is None:
        cur = make()
        setattr(_local, slot, cur)
    return cur  # type: ignore[no-any-return]


_T = TypeVar("_T", bound="_ThreadScope")


class _ThreadScope(metaclass=ClassPropertyType):
    """``with scope:`` makes it this thread's current one (kept in ``_local.<_slot>``) until the end.

    ``Cls.current`` is this thread's scope (a fresh one the first time); MXNet code also assigns
    it (``AttrScope.current = AttrScope(...)``), which changes this thread's only.
    """

    _slot = ""
    _old: Any = None

    @classmethod
    def _fresh(cls) -> Any:
        raise NotImplementedError

    def _get_current(cls) -> Any:  # noqa: N805 - called with the class
        return _current(cls._slot, cls._fresh)

    def _set_current(cls, scope: Any) -> None:  # noqa: N805
        setattr(_local, cls._slot, scope)

    current = classproperty(_get_current, _set_current)

    def __enter__(self: _T) -> _T:
        self._old = type(self).current
        setattr(_local, self._slot, self)
        return self

    def __exit__(self, *exc: Any) -> None:
        setattr(_local, self._slot, self._old)


class NameManager(_ThreadScope):
    """Gives unnamed nodes MXNet's automatic names; ``with NameManager():`` starts fresh counters."""

    _slot = "name_manager"

    def __init__(self) -> None:
        self._counter: dict[str, int] = {}

    def get(self, name: str | None, hint: str) -> str:
        if name:
            return name
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return f"{hint}{n}"

    @classmethod
    def _fresh(cls) -> NameManager:
        return NameManager()


class Prefix(NameManager):
    """A NameManager that puts ``prefix`` before every name, given or automatic."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)


class AttrScope(_ThreadScope):
    """``with mx.AttrScope(ctx_group='dev1'):`` gives every node created inside these attributes."""

    _slot = "attr_scope"

    def __init__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            if not isinstance(v, str):
                raise ValueError(
                    f"AttrScope: attribute {k}={v!r} must be a string (MXNet stores "
                    "attributes as strings); pass str(value)"
                )
        self._attr = dict(kwargs)

    def get(self, attr: dict[str, str] | None) -> dict[str, str]:
        """The scope's attributes updated with ``attr`` (``attr`` wins)."""
        out = dict(self._attr)
        if attr:
            out.update(attr)
        return out

    def __enter__(self) -> AttrScope:
        self._attr = {**AttrScope.current._attr, **self._attr}
        return super().__enter__()

    @classmethod
    def _fresh(cls) -> AttrScope:
        return AttrScope()


_CONSTANTS = {
    "True": True,
    "False": False,
    "None": None,
    "true": True,
    "false": False,
    "inf": float("inf"),
    "-inf": float("-inf"),
    "nan": float("nan"),
}


def parse_attr(text: str) -> Any:
    """The Python value of an attribute string (numbers, tuples, booleans; anything else stays text)."""
    if text in _CONSTANTS:
        return _CONSTANTS[text]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, (int, float, tuple, bool)) or value is None:
        return value
    return text
