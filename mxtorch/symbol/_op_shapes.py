"""What one operator node makes of given input shapes (running it on small or ``meta`` tensors),
the sizes a partial inference probes unknown dimensions with, and the keys of the inference tables:
what forward inference (:mod:`._infer`) and backward inference (:mod:`._backward`) both build on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from ..base import MXNetError

if TYPE_CHECKING:
    from ._graph import Node

Shape = tuple[int, ...]

__all__ = ["PROBES", "known", "partial_of", "run_meta", "var_key"]


def known(shape: Any) -> bool:
    return shape is not None and len(shape) > 0 and all(int(d) > 0 for d in shape)


SMALL = 1 << 18  # elements


def run_meta(node: Node, shapes: list[Shape], dtypes: list[Any]) -> list[tuple[Shape, Any] | None]:
    op = node.opdef()
    if op.infer is not None:  # an operator that says its output shapes (Custom): nothing runs
        try:
            return list(op.infer(list(shapes), list(dtypes)))
        except Exception as e:
            raise MXNetError(
                f"infer_shape: operator {node.name!r} ({node.op}) cannot take inputs of shapes "
                f"{[tuple(s) for s in shapes]}: {e}"
            ) from e
    attrs = node.params()
    errors: list[BaseException] = []
    # small inputs run for real (meta tensors import ~1 s of torch machinery on first use);
    # large ones on meta tensors (no memory, no compute), with the CPU as fallback
    small = sum(math.prod(s) for s in shapes) <= SMALL
    for device in ("cpu", "meta") if small else ("meta", "cpu"):
        ins = [torch.zeros(s, dtype=d, device=device) for s, d in zip(shapes, dtypes, strict=True)]
        try:
            with torch.no_grad():
                out = op.run(ins, attrs, False)
        except Exception as e:  # an operator may need values (then the CPU try decides)
            errors.append(e)
            continue
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [(tuple(o.shape), o.dtype) if isinstance(o, torch.Tensor) else None for o in outs]
    raise MXNetError(
        f"infer_shape: operator {node.name!r} ({node.op}) cannot take inputs of shapes "
        f"{[tuple(s) for s in shapes]}: {errors[-1]}"
    ) from errors[-1]


# the sizes unknown dimensions take in the two runs of a partial inference: large enough for
# kernels, 29 apart so that a strided window (stride <= 29) maps them to different sizes
PROBES = (32, 61)


def var_key(node: Node) -> tuple[str, int]:
    """The key of a variable node in the inference tables: variables are nodes (MXNet infers per
    node), so two variables of one name (two layers both named 'fc') keep their own shapes."""
    return ("var", id(node))


def partial_of(part: Mapping[Any, Any], entry: tuple[Node, int]) -> Shape | None:
    src, i = entry
    if src.is_variable:
        return part.get(var_key(src))  # type: ignore[no-any-return]
    outs = part.get(id(src))
    return None if outs is None else outs[i]  # type: ignore[no-any-return]
