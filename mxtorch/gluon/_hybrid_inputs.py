"""MXNet's rules for what a HybridBlock may be called with.

Any HybridBlock: not a mix of arrays and Symbols, and at least one of them (``None`` stands for
an absent optional input).  A hybridized one, whose graph is fixed at the first call: only
(nested lists of) arrays and ``None``, all on one context, with ``None`` where the first call
had it (trailing ``None`` may be added or left out, so defaults keep working).  Breaking a rule
is a ``ValueError``, as in MXNet.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from ..context import context_of

__all__ = ["input_format", "check_kinds", "check_against", "check_one_context"]

Format = Any  # 0: an array, -1: None, n > 0: a Symbol with n outputs, a list: a nested list


def _symbol_class() -> type | None:
    mod = sys.modules.get("mxtorch.symbol.symbol")
    return None if mod is None else mod.Symbol  # type: ignore[no-any-return]


def _kinds(args: Any, sym_cls: type | None, found: set[str]) -> None:
    for a in args:
        if isinstance(a, torch.Tensor):
            found.add("array")
        elif sym_cls is not None and isinstance(a, sym_cls):
            found.add("symbol")
        elif isinstance(a, (list, tuple)):
            _kinds(a, sym_cls, found)


def check_kinds(block: Any, args: tuple[Any, ...]) -> None:
    """The rule for every HybridBlock call: arrays or Symbols, not both, not neither."""
    found: set[str] = set()
    _kinds(args, _symbol_class(), found)
    name = type(block).__name__
    if len(found) == 2:
        raise ValueError(f"{name}: the inputs mix arrays and Symbols; pass all arrays (to compute) or "
                         "all Symbols (to build a graph)")
    if not found:
        raise ValueError(f"{name}: there must be at least one array or Symbol among the inputs, got "
                         f"{[type(a).__name__ for a in args]}")


def input_format(args: Any, name: str) -> Format:
    """The structure of a hybridized block's inputs (MXNet's flattening rule)."""
    if isinstance(args, torch.Tensor):
        return 0
    if args is None:
        return -1
    if isinstance(args, (list, tuple)):
        return [input_format(a, name) for a in args]
    raise ValueError(f"{name} is hybridized: its inputs must be arrays, None or (nested) lists of them, "
                     f"got {type(args).__name__} {args!r}; call hybridize(False) to pass other values")


def check_against(stored: list[Format], fmt: list[Format], name: str) -> None:
    """``fmt`` must match the first call's ``stored`` format, up to trailing ``None`` inputs."""
    if fmt == stored:
        return
    short, long_ = (fmt, stored) if len(fmt) < len(stored) else (stored, fmt)
    if len(short) != len(long_) and long_[:len(short)] == short and all(f == -1 for f in long_[len(short):]):
        return
    raise ValueError(f"{name} is hybridized and was first called with inputs shaped {stored} (0: array, "
                     f"-1: None); now it gets {fmt}. Pass the same kinds of inputs, or hybridize() again")


def check_one_context(args: tuple[Any, ...], name: str) -> None:
    seen: set[Any] = set()

    def walk(items: Any) -> None:
        for a in items:
            if isinstance(a, torch.Tensor):
                seen.add(context_of(a))
            elif isinstance(a, (list, tuple)):
                walk(a)

    walk(args)
    if len(seen) > 1:
        raise ValueError(f"{name} is hybridized: its inputs must be on one context, got "
                         f"{sorted(map(str, seen))}")
