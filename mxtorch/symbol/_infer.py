"""Shape and type inference of symbolic graphs.

Shapes flow forward: a node's parameter shapes (``fc1_weight``) come from its data shape and
its attributes (:mod:`._ops` ``param_shapes``), its output shapes from running the operator on
``meta`` tensors (no memory, no compute), so every operator infers exactly what it computes.

MXNet's partial shapes (0 for an unknown dimension: ``Variable('x', shape=(0, 10))``) flow too:
an operator runs twice with the unknown dimensions set to two different sizes, and the dimensions
of its results that differ are the ones that depend on them (unknown, 0); the others are known.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._dtype import to_torch_dtype
from ..base import MXNetError
from ..util import is_np_shape
from ._op_shapes import PROBES as _PROBES
from ._op_shapes import known as _known
from ._op_shapes import partial_of as _partial_of
from ._op_shapes import run_meta as _run_meta
from ._op_shapes import var_key as var_key
from ._scope import parse_attr

if TYPE_CHECKING:
    from ._graph import Graph
    from ._graph import Node as _Node

Shape = tuple[int, ...]

__all__ = ["infer_shape", "infer_type", "infer_node_shapes", "dtype_code", "code_dtype"]

# MXNet's type codes (mshadow): the __dtype__ attribute of variables
_CODES = {
    0: np.float32,
    1: np.float64,
    2: np.float16,
    3: np.uint8,
    4: np.int32,
    5: np.int8,
    6: np.int64,
    7: np.bool_,
}


def dtype_code(dtype: Any) -> int:
    try:
        np_type = np.dtype(str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else dtype).type
    except TypeError as e:
        raise TypeError(f"dtype {dtype!r} is not a data type; use e.g. 'float32' or np.float16") from e
    for code, t in _CODES.items():
        if t is np_type:
            return code
    raise TypeError(
        f"dtype {dtype!r} has no MXNet type code; use one of {[t.__name__ for t in _CODES.values()]}"
    )


def code_dtype(code: str | int) -> Any:
    try:
        return _CODES[int(code)]
    except (KeyError, ValueError):
        return np.dtype(str(code)).type


def _given(sym: Graph, args: Sequence[Any], kwargs: Mapping[str, Any], what: str) -> dict[str, Any]:
    names = sym.list_arguments()
    if args and kwargs:
        raise ValueError(f"{what}: give the arguments either positionally or by name, not both")
    given: dict[str, Any] = {}
    if args:
        if len(args) > len(names):
            raise ValueError(f"{what}: {len(args)} values for {len(names)} arguments {names}")
        given = {n: a for n, a in zip(names, args, strict=False) if a is not None}
    else:
        inputs = set(sym.list_inputs())
        unknown = [k for k in kwargs if k not in inputs]
        if unknown:
            raise ValueError(
                f"{what}: {unknown} are not inputs of the symbol; its inputs are {sym.list_inputs()}"
            )
        given = {k: v for k, v in kwargs.items() if v is not None}
    return given


def _probe(shape: Shape, size: int) -> Shape:
    return tuple(size if d == 0 else d for d in shape)


def _agree(a: Shape, b: Shape) -> Shape:
    """The partial shape of two probe results: dimensions that differ depend on unknown ones."""
    return tuple(x if x == y else 0 for x, y in zip(a, b, strict=True))


def _partial_param_shapes(op: Any, attrs: Mapping[str, Any], data: Shape) -> dict[str, Shape]:
    runs = [op.param_shapes(attrs, _probe(data, size)) for size in _PROBES]
    return {
        k: _agree(tuple(int(d) for d in v), tuple(int(d) for d in runs[1][k]))
        for k, v in runs[0].items()
        if k in runs[1] and len(v) == len(runs[1][k])
    }


# operators whose outputs stay unknown until these inputs are known in full (MXNet's where
# infers nothing from a partly known condition)
_NEEDS_KNOWN = {"where": (0,)}


def _partial_outputs(node: _Node, shapes: list[Shape], dtypes: list[Any]) -> list[Shape | None]:
    """Partial output shapes of ``node`` whose inputs have partial shapes (None where unknown)."""
    if any(k < len(shapes) and not _known(shapes[k]) for k in _NEEDS_KNOWN.get(str(node.op), ())):
        return [None] * node.num_total()
    runs = []
    for size in _PROBES:
        try:
            runs.append(_run_meta(node, [_probe(sh, size) for sh in shapes], dtypes))
        except MXNetError:  # the probe sizes do not fit the operator: nothing is known
            return [None] * node.num_total()
    out: list[Shape | None] = []
    for a, b in zip(*runs, strict=True):
        out.append(_agree(a[0], b[0]) if a is not None and b is not None and len(a[0]) == len(b[0]) else None)
    return out + [None] * (node.num_total() - len(out))


# operators whose inputs and outputs all have one shape: MXNet infers an unknown input from the
# other inputs or from the output (``fc(a) + b`` gives ``b`` the shape of ``fc(a)``)
_SAME_SHAPE = {
    "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_power", "_maximum", "_minimum",
    "_mod", "_hypot", "_hypot_scalar", "_equal", "_not_equal", "_greater", "_greater_equal", "_lesser",
    "_lesser_equal", "add_n",
    "_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar", "_rdiv_scalar",
    "_mod_scalar", "_rmod_scalar", "_power_scalar", "_rpower_scalar", "_maximum_scalar",
    "_minimum_scalar", "_equal_scalar", "_not_equal_scalar", "_greater_scalar", "_greater_equal_scalar",
    "_lesser_scalar", "_lesser_equal_scalar", "Activation", "BlockGrad", "MakeLoss", "make_loss", "_copy",
    "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square", "abs", "negative", "Dropout",
    "_identity_with_attr_like_rhs", "Cast", "cast", "identity",
}  # fmt: skip


# operators whose parameters must have exactly the shapes they would create (MXNet checks them)
_STRICT_PARAMS = {
    "FullyConnected", "Convolution", "Deconvolution", "BatchNorm", "Embedding", "LayerNorm", "InstanceNorm",
}  # fmt: skip


def _same_shape_backward(
    nodes: Sequence[_Node],
    out_shapes: dict[int, list[Any]],
    var_shapes: dict[Any, Shape],
    part: dict[Any, Any],
) -> bool:
    """Give unknown inputs of same-shape operators the shape of a known input or output, or the
    partial shape their partial shapes make together (``(0, 3)`` and ``(2, 0)``: ``(2, 3)``)."""
    changed = False
    for n in reversed(nodes):
        if n.is_variable or n.op not in _SAME_SHAPE:
            continue
        shapes = [out_shapes[id(n)][0], *(out_shapes[id(src)][i] for src, i in n.inputs)]
        known = next((s for s in shapes if s is not None), None)
        if known is None:
            merged = None
            for p in [_partial_of(part, (n, 0)), *(_partial_of(part, e) for e in n.inputs)]:
                merged = merged if p is None else _merge(merged, p, n.name)
            if merged is None:
                continue
            if not _known(merged):
                part.setdefault(id(n), [None] * n.num_total())[0] = merged
                for src, _ in n.inputs:
                    if src.is_variable and part.get(var_key(src)) != merged:
                        part[var_key(src)] = merged
                        changed = True
                continue
            known = merged
        if any(s is not None and tuple(s) != tuple(known) for s in shapes[1:]):
            raise MXNetError(
                f"infer_shape: operator {n.name!r} ({n.op}) needs inputs of one shape, got "
                f"{[None if s is None else tuple(s) for s in shapes[1:]]}; use the broadcast_* "
                "operators to combine different shapes"
            )
        if out_shapes[id(n)][0] is None:
            out_shapes[id(n)][0] = known
            changed = True
        for src, i in n.inputs:
            if out_shapes[id(src)][i] is None:
                hint = _partial_of(part, (src, i))
                if hint is not None:
                    _merge(hint, tuple(known), src.name if src.is_variable else n.name)  # raises on conflict
                out_shapes[id(src)][i] = known
                if src.is_variable:
                    var_shapes[var_key(src)] = known
                changed = True
    return changed


def _input_type(op: Any, attrs: Mapping[str, Any], k: int, data_type: Any) -> Any:
    """The type an untyped variable input ``k`` gets: Embedding's weight takes ``dtype``,
    BatchNorm's parameters of float16 data are float32, any other input takes the type of the
    node's first typed input (as MXNet's same-type rule)."""
    if op.name == "Embedding" and k == 1:
        return to_torch_dtype(attrs.get("dtype", "float32"))
    if op.name == "BatchNorm" and k > 0 and data_type == torch.float16:
        return torch.float32  # MXNet keeps BatchNorm's parameters and statistics in float32
    return data_type


def _merge(old: Shape | None, new: Shape, name: str) -> Shape:
    """Two partial shapes of one variable as one (MXNetError where known dimensions disagree)."""
    if old is None or len(old) != len(new):
        return new
    if any(a and b and a != b for a, b in zip(old, new, strict=True)):
        raise MXNetError(f"infer_shape: {name!r} would need both shape {old} and {new} (0: unknown)")
    return tuple(a or b for a, b in zip(old, new, strict=True))


def infer_node_shapes(
    sym: Graph,
    given: Mapping[str, Shape],
    dtypes: Mapping[str, Any] | None = None,
    partial: dict[Any, Any] | None = None,
) -> tuple[dict[str, Shape], dict[int, list[Any]], dict[int, list[Any]]]:
    """Shapes of every variable (by name) and of every node's outputs (by node id), with dtypes;
    only shapes known in full.  ``partial``, when given, receives MXNet's partial shapes (0 for an
    unknown dimension) of the variables (by name) and node outputs (by node id) not known in full.

    Shapes flow forward through every operator and backward through same-shape operators,
    repeated until nothing changes."""
    part: dict[Any, Any] = {} if partial is None else partial
    var_shapes: dict[Any, Shape] = {}
    var_types: dict[Any, Any] = {}
    out_shapes: dict[int, list[Any]] = {}
    out_types: dict[int, list[Any]] = {}
    dtypes = dtypes or {}
    nodes = sym._nodes()
    for n in nodes:
        if n.is_variable:
            s = given.get(n.name)
            if s is None and "__shape__" in n.attrs:
                s = parse_attr(n.attrs["__shape__"])
            if s is not None and _known(tuple(s)):
                var_shapes[var_key(n)] = tuple(int(d) for d in s)
            elif s is not None and len(s) > 0:
                part[var_key(n)] = tuple(max(int(d), 0) for d in s)  # MXNet's 0 (or -1): unknown
            dt = dtypes.get(n.name)
            if dt is None and "__dtype__" in n.attrs:
                dt = code_dtype(n.attrs["__dtype__"])
            if dt is not None:
                var_types[var_key(n)] = to_torch_dtype(dt)
    from ._backward import solve_backward  # it builds on this module's helpers

    done: dict[int, tuple[Any, ...]] = {}  # node id -> the input shapes its outputs were computed from
    while True:
        _forward_shapes(nodes, var_shapes, var_types, out_shapes, out_types, done, part)
        changed = _same_shape_backward(nodes, out_shapes, var_shapes, part)
        if not changed and not solve_backward(nodes, out_shapes, out_types, var_shapes, part):
            break
    # by name for the callers (variables are nodes: two of one name may differ; a known shape wins)
    named: dict[str, Shape] = {}
    for n in nodes:
        if n.is_variable:
            shape = var_shapes.get(var_key(n))
            if shape is not None:
                named.setdefault(n.name, shape)
    for n in nodes:
        if n.is_variable and n.name not in named and var_key(n) in part:
            part.setdefault(n.name, part[var_key(n)])
    return named, out_shapes, out_types


def _forward_shapes(
    nodes: Sequence[_Node],
    var_shapes: dict[Any, Shape],
    var_types: dict[Any, Any],
    out_shapes: dict[int, list[Any]],
    out_types: dict[int, list[Any]],
    done: dict[int, tuple[Any, ...]],
    part: dict[Any, Any],
) -> None:
    for n in nodes:
        if n.is_variable:
            out_shapes[id(n)] = [var_shapes.get(var_key(n))]
            out_types[id(n)] = [var_types.get(var_key(n))]
            continue
        op = n.opdef()
        attrs = n.params()
        in_shapes = [out_shapes[id(src)][i] for src, i in n.inputs]
        in_types = [out_types[id(src)][i] for src, i in n.inputs]
        data_type = next((t for t in in_types if t is not None), torch.float32)
        data_partial = _partial_of(part, n.inputs[0]) if n.inputs and in_shapes[0] is None else None
        if op.param_shapes is not None and op.inputs is not None and in_shapes and (
            in_shapes[0] is not None or data_partial is not None
        ):
            names = op.inputs(attrs)
            data_shape = tuple(in_shapes[0] if in_shapes[0] is not None else data_partial)  # type: ignore[arg-type]
            if in_shapes[0] is not None:
                wanted = op.param_shapes(attrs, data_shape)
            else:
                wanted = _partial_param_shapes(op, attrs, data_shape)
            for k, (src, _) in enumerate(n.inputs):
                if k >= len(names) or names[k] not in wanted:
                    continue
                shape = tuple(int(d) for d in wanted[names[k]])
                if in_shapes[k] is None and src.is_variable and not _known(shape):
                    part[var_key(src)] = _merge(part.get(var_key(src)), shape, src.name)
                elif in_shapes[k] is None and src.is_variable:
                    _merge(part.pop(var_key(src), None), shape, src.name)  # raises on conflict
                    var_shapes[var_key(src)] = shape
                    out_shapes[id(src)] = [shape]
                    in_shapes[k] = shape
                elif in_shapes[k] is None:  # an operator's output feeds the parameter (a Cast of it)
                    j = n.inputs[k][1]
                    if _known(shape):
                        out_shapes.setdefault(id(src), [None] * src.num_total())[j] = shape
                        in_shapes[k] = shape
                    else:
                        outs = part.setdefault(id(src), [None] * src.num_total())
                        outs[j] = _merge(outs[j], shape, src.name)
                elif op.name in _STRICT_PARAMS and in_shapes[k] is not None and tuple(in_shapes[k]) != shape:
                    raise MXNetError(
                        f"infer_shape: operator {n.name!r} ({n.op}) needs its {names[k]} of shape {shape} "
                        f"for data of shape {data_shape}, got {tuple(in_shapes[k])}"
                    )
        for k, (src, _) in enumerate(n.inputs):
            if src.is_variable and in_types[k] is None:
                var_types.setdefault(var_key(src), _input_type(op, attrs, k, data_type))
                out_types[id(src)] = [var_types[var_key(src)]]
                in_types[k] = var_types[var_key(src)]
        total = n.num_total()
        key = tuple(in_shapes)
        if done.get(id(n)) == key:
            continue
        if any(s is None for s in in_shapes):
            out_shapes.setdefault(id(n), [None] * total)
            out_types[id(n)] = [data_type] * total
            partials = [
                s if s is not None else _partial_of(part, e) for s, e in zip(in_shapes, n.inputs, strict=True)
            ]
            if all(p is not None for p in partials):
                types = [t if t is not None else torch.float32 for t in in_types]
                new = _partial_outputs(n, partials, types)  # type: ignore[arg-type]
                old = part.get(id(n)) or [None] * total
                part[id(n)] = [o if p is None else _merge(o, p, n.name)
                               for o, p in zip(old, new, strict=True)]
            continue
        part.pop(id(n), None)
        done[id(n)] = key
        res = _run_meta(n, in_shapes, [t if t is not None else torch.float32 for t in in_types])
        res = res + [None] * (total - len(res))
        out_shapes[id(n)] = [r[0] if r else None for r in res]
        out_types[id(n)] = [r[1] if r else data_type for r in res]


def infer_shape(
    sym: Graph, args: Sequence[Any], kwargs: Mapping[str, Any], partial: bool
) -> tuple[Any, Any, Any]:
    given = {k: tuple(v) for k, v in _given(sym, args, kwargs, "infer_shape").items()}
    part: dict[Any, Any] = {}
    var_shapes, out_shapes, _ = infer_node_shapes(sym, given, partial=part)
    arg_names, aux_names = sym.list_arguments(), sym.list_auxiliary_states()
    arg = [var_shapes.get(n) for n in arg_names]
    aux = [var_shapes.get(n) for n in aux_names]
    out = [out_shapes[id(node)][i] for node, i in sym._outputs]
    if partial:  # MXNet's partial shapes (0: unknown dimension) where nothing more is known
        arg = [s if s is not None else part.get(n) for n, s in zip(arg_names, arg, strict=True)]
        aux = [s if s is not None else part.get(n) for n, s in zip(aux_names, aux, strict=True)]
        out = [s if s is not None else _partial_of(part, e) for s, e in zip(out, sym._outputs, strict=True)]
    if not partial and any(s is None for s in (*arg, *aux, *out)):
        missing = [n for n, s in zip(arg_names + aux_names, arg + aux, strict=True) if s is None]
        warnings.warn(
            f"infer_shape: the given shapes do not determine the shapes of {missing[:10]}; "
            "give more (or use infer_shape_partial)",
            stacklevel=3,
        )
        return None, None, None
    if is_np_shape():  # NumPy shape semantics: -1 for an unknown dimension, None for an unknown shape
        def show(s: Any) -> Any:
            return None if s is None else tuple(d if d > 0 else -1 for d in s)
    else:
        def show(s: Any) -> Any:
            return () if s is None else tuple(s)
    return [show(s) for s in arg], [show(s) for s in out], [show(s) for s in aux]


def _np_type(t: Any) -> Any:
    return np.dtype(str(t).replace("torch.", "")).type


def infer_type(
    sym: Graph, args: Sequence[Any], kwargs: Mapping[str, Any], partial: bool = False
) -> tuple[Any, Any, Any]:
    """Types flow forward from the given types, ``__dtype__`` attributes and operators' ``dtype``
    parameters.  A type nothing determines is None with ``partial`` (MXNet's infer_type_partial);
    otherwise, as in MXNet, all three results are None (with a warning naming the unknown ones)."""
    default = None
    given = {k: to_torch_dtype(v) for k, v in _given(sym, args, kwargs, "infer_type").items()}
    types: dict[str, Any] = dict(given)
    out_types: dict[int, list[Any]] = {}
    for n in sym._nodes():
        if n.is_variable:
            t = types.get(n.name)
            if t is None and "__dtype__" in n.attrs:
                t = to_torch_dtype(code_dtype(n.attrs["__dtype__"]))
            out_types[id(n)] = [t]
            continue
        op = n.opdef()
        in_types = [out_types[id(src)][i] for src, i in n.inputs]
        data_type = next((t for t in in_types if t is not None), default)
        attrs = n.params()
        if op.infer_types is not None:  # Custom: its property's infer_type
            fallback = data_type or torch.float32
            want, outs = op.infer_types([t if t is not None else fallback for t in in_types])
            for k, (src, _) in enumerate(n.inputs):
                if src.is_variable and in_types[k] is None and k < len(want):
                    types[src.name] = want[k]
                    out_types[id(src)] = [want[k]]
            out_types[id(n)] = list(outs)
            continue
        for k, (src, _) in enumerate(n.inputs):
            if src.is_variable and in_types[k] is None and data_type is not None:
                types[src.name] = _input_type(op, attrs, k, data_type)
                out_types[id(src)] = [types[src.name]]
        out = to_torch_dtype(attrs.get("dtype", "float32")) if n.op == "Embedding" else data_type
        if "dtype" in attrs:
            out = to_torch_dtype(attrs["dtype"])
        out_types[id(n)] = [out] * n.num_total()
    for n in sym._nodes():
        if n.is_variable and n.name not in types:
            types[n.name] = out_types[id(n)][0] or default

    def np_type(t: Any) -> Any:
        return None if t is None else _np_type(t)

    arg = [np_type(types[n]) for n in sym.list_arguments()]
    aux = [np_type(types[n]) for n in sym.list_auxiliary_states()]
    out_list = [np_type(out_types[id(node)][i]) for node, i in sym._outputs]
    if not partial and any(t is None for t in (*arg, *out_list, *aux)):
        names = sym.list_arguments() + sym.list_auxiliary_states()
        unknown = [n for n, t in zip(names, arg + aux, strict=True) if t is None]
        warnings.warn(f"infer_type: the given types do not determine the types of {unknown[:10]}; give "
                      "more (or use infer_type_partial)", stacklevel=3)
        return None, None, None
    return arg, out_list, aux

