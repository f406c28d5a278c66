"""MXNet's ``Custom`` operator in symbolic graphs: a node ``op: "Custom"`` with attributes
``op_type`` and the operator's keyword strings runs the Python operator registered under that
name (:mod:`mxtorch.operator`).

Everything else in a graph has one :class:`~._opdef.OpDef` per operator name; a Custom node's
inputs, outputs, auxiliary states, shapes and whether it is a loss come from its registered
property class, so each configuration (``op_type`` and keywords) gets its own OpDef.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .. import operator as _operator
from ..base import MXNetError
from ._opdef import OpDef

Shape = tuple[int, ...]

__all__ = ["custom_opdef", "custom_kwargs"]


def custom_kwargs(attrs: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``(op_type, keyword strings)`` of a Custom node's attributes (``__x__`` ones left out)."""
    op_type = attrs.get("op_type")
    if not op_type:
        raise MXNetError("Custom: op_type is required (the name given to @mx.operator.register)")
    return str(op_type), {k: str(v) for k, v in attrs.items() if k != "op_type" and not k.startswith("__")}


_cache: dict[tuple[Any, ...], tuple[_operator.CustomSpec, OpDef]] = {}


def custom_opdef(attrs: Mapping[str, str]) -> OpDef:
    """The OpDef of a Custom node with (string) attributes ``attrs``; MXNetError naming the
    op_type when no operator of that name is registered."""
    op_type, kwargs = custom_kwargs(attrs)
    spec = _operator.spec_for(op_type, kwargs)
    key = (op_type, tuple(sorted(kwargs.items())))
    hit = _cache.get(key)
    if hit is None or hit[0] is not spec:  # a new registration made a new spec
        hit = _cache[key] = (spec, _build(spec))
    return hit[1]


class _Runner:
    """The OpDef callables of one configured custom operator."""

    def __init__(self, spec: _operator.CustomSpec) -> None:
        self.spec = spec

    def run(self, ins: list[Any], attrs: dict[str, Any], train: bool) -> list[torch.Tensor]:
        return _operator.CustomCall(self.spec)(ins, train)

    def compile(self, attrs: dict[str, Any]) -> Any:
        # one CustomCall per bound graph: its CustomOp is created once per input shapes
        return _operator.CustomCall(self.spec)

    def param_shapes(self, attrs: dict[str, Any], data: Shape) -> dict[str, Shape]:
        """Shapes of the other inputs from the first one's, where infer_shape can tell."""
        spec = self.spec
        given: list[Shape] = [data] + [()] * (len(spec.arguments) - 1)
        try:
            ins, _, aux = spec.infer_shape(given)
        except Exception:  # the property needs more than the first input's shape
            return {}
        known = {n: s for n, s in zip(spec.arguments, ins, strict=True) if s and all(d > 0 for d in s)}
        known.update({n: s for n, s in zip(spec.aux, aux, strict=True) if s and all(d > 0 for d in s)})
        return known

    def infer(self, shapes: list[Shape], dtypes: list[Any]) -> list[tuple[Shape, Any]]:
        spec = self.spec
        nargs = len(spec.arguments)
        ins, outs, aux = spec.infer_shape(shapes[:nargs])
        for what, names, want, got in (
            ("argument", spec.arguments, ins, shapes[:nargs]),
            ("auxiliary state", spec.aux, aux, shapes[nargs:]),
        ):
            for n, w, g in zip(names, want, got, strict=False):
                if tuple(w) != tuple(g):
                    raise MXNetError(
                        f"custom operator {spec.op_type!r}: its {what} {n!r} has shape {tuple(g)}, "
                        f"infer_shape wants {tuple(w)}"
                    )
        _, types, _ = spec.infer_type(dtypes[:nargs])
        return list(zip(outs, types, strict=True))

    def infer_types(self, dtypes: list[Any]) -> tuple[list[Any], list[Any]]:
        spec = self.spec
        ins, outs, aux = spec.infer_type(dtypes[: len(spec.arguments)])
        return ins + aux, outs


def _build(spec: _operator.CustomSpec) -> OpDef:
    r = _Runner(spec)
    names = [*spec.arguments, *spec.aux]
    outputs = list(spec.outputs)
    op = OpDef(
        "Custom",
        r.run,
        lambda attrs: list(names),
        aux=tuple(spec.aux),
        outputs=lambda attrs: list(outputs),
        param_shapes=r.param_shapes,
        is_loss=not spec.need_top_grad,
        compile=r.compile,
        infer=r.infer,
        infer_types=r.infer_types,
    )
    return op
