"""Backward shape inference: unknown input dimensions from an operator's known output.

MXNet's operators infer some input shapes from their output shapes (FullyConnected's batch
size, a split's input from one of its outputs, a stride-1 Convolution's spatial size, Concat's
shared dimensions).  Here one rule covers every operator: each unknown input dimension is probed
with two sizes while the others stay fixed; where an output dimension moves by a whole multiple
of the step (an affine dependence with an integer slope: identity, concatenation, a stride-1
window) the known output size gives the input size.  Dimensions that only make sense moved
together (Concat's batch size in every input) are probed together.  A solution is kept only when
running the operator on it gives exactly the known outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..base import MXNetError
from . import _op_shapes

if TYPE_CHECKING:
    from ._graph import Node as _Node

Shape = tuple[int, ...]
Dim = tuple[int, int]  # (input position, dimension)

_BASE, _STEP = _op_shapes.PROBES[0], _op_shapes.PROBES[1] - _op_shapes.PROBES[0]


def _outputs(node: _Node, shapes: list[Shape], types: list[Any]) -> list[Shape | None] | None:
    try:
        res = _op_shapes.run_meta(node, shapes, types)
    except MXNetError:
        return None
    return [r[0] if r is not None else None for r in res]


def _with(partials: list[Shape], sizes: dict[Dim, int], default: int) -> list[Shape]:
    return [
        tuple(sizes.get((k, d), default) if v == 0 else v for d, v in enumerate(p))
        for k, p in enumerate(partials)
    ]


def _solve(
    node: _Node, partials: list[Shape], targets: list[Shape | None], types: list[Any], unknown: list[Dim]
) -> dict[Dim, int]:
    base = _outputs(node, _with(partials, {}, _BASE), types)
    if base is None:
        return {}
    found: dict[Dim, int] = {}
    coupled: list[Dim] = []

    def solve(moved: list[Dim]) -> int | None:
        res = _outputs(node, _with(partials, dict.fromkeys(moved, _BASE + _STEP), _BASE), types)
        if res is None:
            return None
        for b, r, t in zip(base, res, targets, strict=False):
            if b is None or r is None or t is None or len(b) != len(t) or len(r) != len(t):
                continue
            for bd, rd, td in zip(b, r, t, strict=True):
                delta = rd - bd
                if delta and delta % _STEP == 0 and (td - bd) % (delta // _STEP) == 0:
                    size = _BASE + (td - bd) // (delta // _STEP)
                    if size > 0:
                        return size
        return None

    for u in unknown:
        res = _outputs(node, _with(partials, {u: _BASE + _STEP}, _BASE), types)
        if res is None:
            coupled.append(u)  # it cannot move alone (Concat: every input's batch size at once)
            continue
        size = solve([u])
        if size is not None:
            found[u] = size
    if coupled:
        size = solve(coupled)
        if size is not None:
            found.update(dict.fromkeys(coupled, size))
    if not found:
        return {}
    # keep the solution only if the known outputs come out exactly (for either size of the rest)
    for rest in (_BASE, _BASE + _STEP):
        res = _outputs(node, _with(partials, found, rest), types)
        if res is None:
            return {}
        for r, t in zip(res, targets, strict=False):
            if t is not None and (r is None or tuple(r) != tuple(t)):
                if len(found) == len(unknown):
                    return {}
                # a dimension left unknown moves this output: judge only what the solution fixes
                break
    return found


def solve_backward(
    nodes: Sequence[_Node],
    out_shapes: dict[int, list[Any]],
    out_types: dict[int, list[Any]],
    var_shapes: dict[Any, Shape],
    part: dict[Any, Any],
) -> bool:
    """Fill unknown inputs of operators whose outputs are known (see the module docstring);
    True when something new was learned."""
    changed = False
    for n in reversed(nodes):
        if n.is_variable or not n.inputs:
            continue
        targets = out_shapes.get(id(n)) or []
        if not any(t is not None for t in targets):
            continue
        ins = [out_shapes[id(src)][i] for src, i in n.inputs]
        if all(s is not None for s in ins):
            continue
        partials = [s if s is not None else _op_shapes.partial_of(part, e)
                    for s, e in zip(ins, n.inputs, strict=True)]
        if any(p is None for p in partials):
            continue
        shapes = [tuple(int(d) for d in p) for p in partials]  # type: ignore[union-attr]
        unknown = [(k, d) for k, p in enumerate(shapes) for d, v in enumerate(p) if v == 0]
        if not unknown:
            continue
        types = [out_types[id(src)][i] for src, i in n.inputs]
        types = [t if t is not None else torch.float32 for t in types]
        found = _solve(n, shapes, list(targets), types, unknown)
        if not found:
            continue
        for k, (src, i) in enumerate(n.inputs):
            if ins[k] is not None:
                continue
            shape = tuple(found.get((k, d), v) if v == 0 else v for d, v in enumerate(shapes[k]))
            if shape == shapes[k]:
                continue
            changed = True
            if _op_shapes.known(shape):
                out_shapes[id(src)][i] = shape
                if src.is_variable:
                    part.pop(_op_shapes.var_key(src), None)
                    var_shapes[_op_shapes.var_key(src)] = shape
            elif src.is_variable:
                part[_op_shapes.var_key(src)] = shape
            else:
                outs = part.setdefault(id(src), [None] * src.num_total())
                outs[i] = shape
    return changed
