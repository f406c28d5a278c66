"""Graph operators that only ``mx.autograd.get_symbol`` creates: a hybridized block's call kept
whole (``_CachedOp``, as MXNet records one) and a recorded torch operation with no MXNet
operator (``_torch_op``: inspectable, not runnable)."""

from __future__ import annotations

import functools
from typing import Any

from ..base import MXNetError
from ._ops import OpDef, _add


@functools.lru_cache(maxsize=64)
def _subgraph(text: str) -> Any:
    from .symbol import load_json

    return load_json(text)


@functools.lru_cache(maxsize=64)
def _cached_op(text: str) -> Any:
    from ..nd._cached_op import CachedOp

    return CachedOp(_subgraph(text))


def _subgraph_text(attrs: dict[str, Any]) -> str:
    text = attrs.get("subgraph")
    if not isinstance(text, str):
        raise MXNetError("_CachedOp node without its 'subgraph' attribute (the block's graph as JSON)")
    return text


def _outputs(attrs: dict[str, Any]) -> list[str]:
    n = int(attrs.get("num_outputs", 1))
    return ["output"] if n == 1 else [f"output{i}" for i in range(n)]


def _run_cached(inputs: list[Any], attrs: dict[str, Any], train: bool) -> Any:
    out = _cached_op(_subgraph_text(attrs))(*inputs)
    return tuple(out) if isinstance(out, list) else out


def _run_torch(inputs: list[Any], attrs: dict[str, Any], train: bool) -> Any:
    raise MXNetError(
        f"this graph node stands for the recorded torch operation {attrs.get('torch_node')!r}, which has "
        "no MXNet operator here (or used a constant the record did not keep): a symbol from "
        "autograd.get_symbol can be inspected (list_arguments, tojson) but this node cannot run"
    )


_add(OpDef("_CachedOp", _run_cached, None, outputs=_outputs))
_add(OpDef("_torch_op", _run_torch, None, outputs=_outputs, differentiable=False))
