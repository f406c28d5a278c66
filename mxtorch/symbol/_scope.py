"""Naming and attribute scopes of symbolic graphs: ``mx.name.NameManager``, ``mx.AttrScope``.

MXNet names an unnamed operator node ``<hint><count>`` (``fullyconnected0``, ``_plus1``), one
counter per hint in the current :class:`NameManager`; :class:`Prefix` puts a prefix before
every name.  :class:`AttrScope` adds attributes (``ctx_group``, ``lr_mult`` ...) to every node
created inside it.  Attribute values are strings, as in MXNet's graph files.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

__all__ = ["NameManager", "Prefix", "AttrScope", "HIDDEN_KEYS", "attr_string", "parse_attr"]

# operator keywords MXNet keeps as node attributes (stored as __key__): they are not operator parameters
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage", "profiler_scope")

_local = threading.local()


class NameManager:
    """Gives unnamed nodes MXNet's automatic names; ``with NameManager():`` starts fresh counters."""

    def __init__(self) -> None:
        self._counter: dict[str, int] = {}
        self._old: NameManager | None = None

    def get(self, name: str | None, hint: str) -> str:
        if name:
            return name
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return f"{hint}{n}"

    def __enter__(self) -> NameManager:
        self._old = NameManager.current()
        _local.name_manager = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.name_manager = self._old

    @staticmethod
    def current() -> NameManager:
        cur = getattr(_local, "name_manager", None)
        if cur is None:
            cur = _local.name_manager = NameManager()
        return cur  # type: ignore[no-any-return]


class Prefix(NameManager):
    """A NameManager that puts ``prefix`` before every name, given or automatic."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)


class AttrScope:
    """``with mx.AttrScope(ctx_group='dev1'):`` gives every node created inside these attributes."""

    def __init__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            if not isinstance(v, str):
                raise ValueError(
                    f"AttrScope: attribute {k}={v!r} must be a string (MXNet stores "
                    "attributes as strings); pass str(value)"
                )
        self._attr = dict(kwargs)
        self._old: AttrScope | None = None

    def get(self, attr: dict[str, str] | None) -> dict[str, str]:
        """The scope's attributes updated with ``attr`` (``attr`` wins)."""
        out = dict(self._attr)
        if attr:
            out.update(attr)
        return out

    def __enter__(self) -> AttrScope:
        self._old = AttrScope.current()
        merged = dict(self._old._attr)
        merged.update(self._attr)
        self._attr = merged
        _local.attr_scope = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.attr_scope = self._old

    @staticmethod
    def current() -> AttrScope:
        cur = getattr(_local, "attr_scope", None)
        if cur is None:
            cur = _local.attr_scope = AttrScope()
        return cur  # type: ignore[no-any-return]


def attr_string(value: Any) -> str:
    """MXNet's string form of an attribute value: ``(3, 3)``, ``True``, ``0.5``, ``relu``."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(attr_string(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if hasattr(value, "dtype") and not hasattr(value, "shape"):
        return str(value)
    if isinstance(value, type):  # numpy scalar types: np.float32 -> 'float32'
        return value.__name__
    return str(value)


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
