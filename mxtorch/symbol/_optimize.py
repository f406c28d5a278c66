"""MXNet's graph passes on a bound graph: common-subexpression elimination.

Two operator nodes that apply the same operator with the same attributes to the same inputs
compute the same values, so one of them is enough: MXNet's ``MXNET_ELIMINATE_COMMON_EXPR`` pass.
Nodes whose results are not a function of their inputs alone are kept apart: random operators and
Dropout (they draw random numbers), operators with auxiliary states (they update them) and Custom
operators (their Python code may do anything).  When merging makes two graph outputs the same
value, the later ones become ``_copy`` nodes, so each output stays its own array (as in MXNet).
"""

from __future__ import annotations

import os
from typing import TypeVar

from ..distributed.env import MXNET_ELIMINATE_COMMON_EXPR
from ._graph import Graph
from ._graph import Node as _Node

G = TypeVar("G", bound=Graph)  # the graph's own class (a Symbol gives a Symbol)

__all__ = ["eliminate_common_expr", "cse_enabled"]

_RANDOM_PREFIXES = ("_random", "_sample", "random_", "sample_", "_npi_random", "_np_random")
_KEPT_APART = {"Dropout", "Custom", "shuffle", "_shuffle"}


def _mergeable(node: _Node) -> bool:
    op = str(node.op)
    if op in _KEPT_APART or op.startswith(_RANDOM_PREFIXES):
        return False
    return not node.opdef().aux


def eliminate_common_expr(sym: G) -> G:
    """``sym`` with repeated computations merged (see the module docstring); ``sym`` is unchanged."""
    memo: dict[int, _Node] = {}  # old node id -> its node in the new graph
    seen: dict[tuple[object, ...], _Node] = {}
    for n in sym._nodes():
        if n.is_variable:
            memo[id(n)] = n
            continue
        ins = [(memo[id(src)], i) for src, i in n.inputs]
        key = (n.op, tuple(sorted(n.attrs.items())), tuple((id(src), i) for src, i in ins))
        if _mergeable(n) and key in seen:
            memo[id(n)] = seen[key]
            continue
        new = _Node(n.op, n.name, dict(n.attrs), ins)
        memo[id(n)] = new
        if _mergeable(n):
            seen[key] = new
    heads: list[tuple[_Node, int]] = []
    used: set[tuple[int, int]] = set()
    for n, i in sym._outputs:
        head = (memo[id(n)], i)
        if (id(head[0]), i) in used:  # the same value twice: a copy keeps the outputs apart
            head = (_Node("_copy", f"{n.name}_copy{len(heads)}", {}, [head]), 0)
        used.add((id(head[0]), head[1]))
        heads.append(head)
    return type(sym)(heads)


def cse_enabled() -> bool:
    """Whether ``MXNET_ELIMINATE_COMMON_EXPR`` asks for the pass (1, the default, or 0)."""
    raw = os.environ.get(MXNET_ELIMINATE_COMMON_EXPR, "1").strip().lower()
    if raw in ("1", "true", ""):
        return True
    if raw in ("0", "false"):
        return False
    raise ValueError(f"{MXNET_ELIMINATE_COMMON_EXPR}={raw!r} is not understood: set it to 1 (merge repeated "
                     "computations in get_optimized_symbol, the default) or 0")
