"""Gluon blocks called with symbols: ``net(mx.sym.var('data'))`` builds the block's MXNet graph.

Each block runs under MXNet's naming (a ``Prefix`` name manager with the block's prefix, none
for a block with prefix ``''``), so nodes get the names MXNet gives them (``dense0_fwd``,
``resnetv10_stage1_activation0``).  Built-in layers translate to MXNet's operators with MXNet's
attributes through the translation each layer's module registers beside the layer
(:func:`symbol_translation`, keyed by the class: renaming a layer's field breaks that module's
translation and its type check, not a table elsewhere); blocks with ``hybrid_forward`` get
``F = mx.sym`` and their parameters as variables, and other blocks run their ``forward`` with
symbols flowing through (torch functions on symbols are mapped by ``Symbol.__torch_function__``).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Concatenate, TypeVar

from .. import symbol as sym
from ..base import MXNetError
from ..symbol._scope import NameManager, Prefix

__all__ = ["has_symbol", "call_symbolic", "symbol_translation", "translation_of", "input_names"]

L = TypeVar("L")
# ``fn(F, layer, *inputs, **kwargs)``: ``F`` is ``mx.sym`` (as in ``hybrid_forward``), so a layer's
# module registers its translation without importing the symbolic package
Translation = Callable[Concatenate[ModuleType, L, ...], Any]

_TRANSLATIONS: dict[type, Callable[..., Any]] = {}


def symbol_translation(cls: type[L]) -> Callable[[Translation[L]], Translation[L]]:
    """Register the decorated function as the MXNet graph of layer class ``cls`` (and of its
    subclasses that do not override ``forward``).  One translation per class: a second one for
    the same class is refused."""

    def register(fn: Translation[L]) -> Translation[L]:
        old = _TRANSLATIONS.get(cls)
        if old is not None and old is not fn:
            raise MXNetError(f"{cls.__qualname__} already has a symbol translation "
                             f"({old.__module__}.{old.__qualname__}): one class, one translation")
        _TRANSLATIONS[cls] = fn
        return fn

    return register


def translation_of(block: Any) -> Callable[..., Any] | None:
    """The translation that builds ``block``'s graph: that of its nearest registered class, none when
    a subclass below it overrides ``forward`` (it computes something else: its forward is traced)."""
    mro = type(block).__mro__
    for i, cls in enumerate(mro):
        fn = _TRANSLATIONS.get(cls)
        if fn is not None:
            return None if any("forward" in c.__dict__ for c in mro[:i]) else fn
    return None


def has_symbol(args: tuple[Any, ...]) -> bool:
    """Whether any argument is a Symbol (cheap when no symbol was ever made)."""
    mod = sys.modules.get("mxtorch.symbol.symbol")
    if mod is None:
        return False
    cls = mod.Symbol
    return any(isinstance(a, cls) for a in args)


def call_symbolic(block: Any, args: tuple[Any, ...], kwargs: dict[str, Any], prefix: str | None,
                  params: Mapping[str, Any]) -> Any:
    """The graph of ``block`` applied to symbolic ``args``, under the name scope ``prefix`` (none:
    no scope); ``params`` are the block's own parameters by attribute name (``hybrid_forward``'s
    keyword arguments)."""
    scope: NameManager | None = None if prefix is None else Prefix(prefix)
    if scope is not None:
        scope.__enter__()
    try:
        fn = translation_of(block)
        if fn is not None:
            return fn(sym, block, *args, **kwargs)
        hf = getattr(block, "hybrid_forward", None)
        if hf is not None:
            return hf(sym, *args, **kwargs, **{name: p.var() for name, p in params.items()})
        return block.forward(*args, **kwargs)
    finally:
        if scope is not None:
            scope.__exit__(None, None, None)


def input_names(block: Any) -> list[str]:
    """MXNet's names of a block's graph inputs: ``data`` for one, ``data0``, ``data1``... for more."""
    from .parameter_core import Parameter

    fn = getattr(block, "hybrid_forward", None)
    skip = 1 if fn is not None else 0
    fn = fn or block.forward
    params = list(inspect.signature(fn).parameters.values())[skip:]
    n = sum(
        1
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        and p.default is p.empty
        # a block's parameters are its attributes of that name (hybrid_forward's keyword arguments)
        and not isinstance(getattr(block, p.name, None), Parameter)
    )
    if n == 0:
        raise MXNetError(f"{type(block).__name__}: cannot tell how many inputs forward() takes")
    return ["data"] if n == 1 else [f"data{i}" for i in range(n)]
