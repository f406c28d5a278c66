"""How much memory a bound graph's intermediate arrays take (``Executor.debug_str``'s total).

The outputs of operators on the gradient path (downstream of an argument that wants a gradient
and upstream of a graph output through differentiable operators, not cut by a stop_gradient) are
kept until the backward pass; every other intermediate lives from the operator that makes it to
its last user.  The total is the kept bytes plus the peak of the others.  Arguments, gradients
and auxiliary states are the caller's arrays and are not counted, as in MXNet's memory plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from ._graph import Graph
    from ._graph import Node as _Node

__all__ = ["gradient_path", "intermediate_bytes"]


def gradient_path(symbol: Graph, wanted: set[str]) -> set[int]:
    """Ids of the operator nodes a backward pass for the arguments in ``wanted`` goes through."""
    nodes = symbol._nodes()
    depends: set[int] = set()
    for n in nodes:
        if (n.is_variable and n.name in wanted) or any(id(src) in depends for src, _ in n.inputs):
            depends.add(id(n))
    path: set[int] = set()
    stack: list[_Node] = [n for n, _ in symbol._outputs]
    while stack:
        n = stack.pop()
        if id(n) in path or n.is_variable or id(n) not in depends or n.opdef().name == "BlockGrad":
            continue
        path.add(id(n))
        stack.extend(src for src, _ in n.inputs)
    return path


def intermediate_bytes(
    symbol: Graph, out_shapes: Mapping[int, list[Any]], out_types: Mapping[int, list[Any]], wanted: set[str]
) -> int:
    """Bytes of the intermediate arrays of ``symbol`` (see the module docstring); node output
    shapes and dtypes as :func:`~mxtorch.symbol._infer.infer_node_shapes` gives them."""
    nodes = [n for n in symbol._nodes() if not n.is_variable]
    kept = gradient_path(symbol, wanted)
    heads = {(id(n), i) for n, i in symbol._outputs}

    def size(n: _Node, i: int) -> int:
        shape = (out_shapes.get(id(n)) or [None] * (i + 1))[i]
        dtype = (out_types.get(id(n)) or [None] * (i + 1))[i] or torch.float32
        return 0 if shape is None else math.prod(shape) * torch.empty(0, dtype=dtype).element_size()

    last_use: dict[tuple[int, int], int] = {}
    for step, n in enumerate(nodes):
        for src, i in n.inputs:
            last_use[(id(src), i)] = step
    total_kept, live, peak = 0, 0, 0
    freeing: dict[int, int] = {}  # step -> bytes freed after it
    for step, n in enumerate(nodes):
        for i in range(n.num_total()):
            b = size(n, i)
            if id(n) in kept or (id(n), i) in heads:
                total_kept += b
            else:
                live += b
                freeing[last_use.get((id(n), i), step)] = freeing.get(last_use.get((id(n), i), step), 0) + b
        peak = max(peak, live)
        live -= freeing.pop(step, 0)
    return total_kept + peak
