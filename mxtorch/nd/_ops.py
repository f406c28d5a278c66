"""MXNet's tensor operators (math, shape, reduction, indexing) as functions on torch tensors.

Follows MXNet 1.x ``mx.nd`` semantics where they differ from torch's:

* a reduction over every axis (``axis=None``) returns shape ``(1,)``, never a 0-d tensor,
  and so does ``dot`` of two vectors;
* ``argmax``/``argmin``/``argsort``/``topk`` indices are float32 unless ``dtype`` says otherwise;
* comparisons (``broadcast_equal`` ...) return 1/0 in the input dtype, not bool;
* ``reshape`` understands MXNet's special codes 0, -1, -2, -3 and -4.

This module defines ``sum``, ``max``, ``min``, ``abs``, ``round`` and ``slice``; the Python
built-ins are reached through :mod:`builtins` in here.
"""

from __future__ import annotations

import builtins
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError
from ._common import as_shape, as_tensor, dtype_of, is_float, norm_axes, norm_axis, to_index

__all__ = [
    "relu",
    "sigmoid",
    "hard_sigmoid",
    "tanh",
    "softsign",
    "exp",
    "log",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "cbrt",
    "rcbrt",
    "square",
    "reciprocal",
    "negative",
    "abs",
    "sign",
    "floor",
    "ceil",
    "round",
    "rint",
    "fix",
    "trunc",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "degrees",
    "radians",
    "erf",
    "erfinv",
    "gamma",
    "gammaln",
    "logical_not",
    "identity",
    "stop_gradient",
    "BlockGrad",
    "gelu",
    "broadcast_add",
    "broadcast_sub",
    "broadcast_mul",
    "broadcast_div",
    "broadcast_mod",
    "broadcast_power",
    "broadcast_maximum",
    "broadcast_minimum",
    "broadcast_hypot",
    "broadcast_equal",
    "broadcast_not_equal",
    "broadcast_greater",
    "broadcast_greater_equal",
    "broadcast_lesser",
    "broadcast_lesser_equal",
    "broadcast_logical_and",
    "broadcast_logical_or",
    "broadcast_logical_xor",
    "add",
    "subtract",
    "multiply",
    "divide",
    "modulo",
    "power",
    "maximum",
    "minimum",
    "hypot",
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "lesser",
    "lesser_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "broadcast_plus",
    "broadcast_minus",
    "elemwise_add",
    "elemwise_sub",
    "elemwise_mul",
    "elemwise_div",
    "add_n",
    "ElementWiseSum",
    "clip",
    "where",
    "sum",
    "sum_axis",
    "mean",
    "max",
    "min",
    "max_axis",
    "min_axis",
    "prod",
    "nansum",
    "nanprod",
    "moments",
    "norm",
    "argmax",
    "argmin",
    "argmax_channel",
    "topk",
    "sort",
    "argsort",
    "infer_reshape",
    "reshape",
    "Reshape",
    "reshape_like",
    "transpose",
    "swapaxes",
    "SwapAxis",
    "expand_dims",
    "squeeze",
    "flatten",
    "Flatten",
    "concat",
    "Concat",
    "concatenate",
    "stack",
    "split",
    "SliceChannel",
    "split_v2",
    "tile",
    "repeat",
    "flip",
    "reverse",
    "broadcast_to",
    "broadcast_axis",
    "broadcast_axes",
    "broadcast_like",
    "pad",
    "Pad",
    "slice",
    "crop",
    "slice_axis",
    "slice_like",
    "take",
    "pick",
    "gather_nd",
    "scatter_nd",
    "one_hot",
    "diag",
    "depth_to_space",
    "space_to_depth",
    "reset_arrays",
    "all_finite",
    "multi_all_finite",
    "multi_sum_sq",
    "cumsum",
    "shape_array",
    "size_array",
    "dot",
    "batch_dot",
]

_bslice = builtins.slice
_bmax = builtins.max

Tensor = torch.Tensor


def _no0d(t: Tensor) -> Tensor:
    """MXNet 1.x arrays are never 0-d: a scalar result has shape (1,)."""
    return t.reshape(1) if t.dim() == 0 else t


# ----------------------------------------------------------------------------------------------
# elementwise unary
# ----------------------------------------------------------------------------------------------


def relu(data: Tensor) -> Tensor:
    """max(data, 0)."""
    return torch.relu(data)


def sigmoid(data: Tensor) -> Tensor:
    """1 / (1 + exp(-data))."""
    return torch.sigmoid(data)


def hard_sigmoid(data: Tensor, alpha: float = 0.2, beta: float = 0.5) -> Tensor:
    """clip(alpha * data + beta, 0, 1)."""
    return torch.clamp(alpha * data + beta, 0.0, 1.0)


def tanh(data: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return torch.tanh(data)


def softsign(data: Tensor) -> Tensor:
    """data / (1 + |data|)."""
    return F.softsign(data)


def exp(data: Tensor) -> Tensor:
    return torch.exp(data)


def log(data: Tensor) -> Tensor:
    return torch.log(data)


def log2(data: Tensor) -> Tensor:
    return torch.log2(data)


def log10(data: Tensor) -> Tensor:
    return torch.log10(data)


def log1p(data: Tensor) -> Tensor:
    return torch.log1p(data)


def expm1(data: Tensor) -> Tensor:
    return torch.expm1(data)


def sqrt(data: Tensor) -> Tensor:
    return torch.sqrt(data)


def rsqrt(data: Tensor) -> Tensor:
    """1 / sqrt(data)."""
    return torch.rsqrt(data)


def cbrt(data: Tensor) -> Tensor:
    """Cube root (keeps the sign)."""
    return torch.sign(data) * torch.abs(data).pow(1.0 / 3.0)


def rcbrt(data: Tensor) -> Tensor:
    """1 / cbrt(data)."""
    return 1.0 / cbrt(data)


def square(data: Tensor) -> Tensor:
    return data * data


def reciprocal(data: Tensor) -> Tensor:
    return torch.reciprocal(data)


def negative(data: Tensor) -> Tensor:
    return torch.neg(data)


def abs(data: Tensor) -> Tensor:
    return torch.abs(data)


def sign(data: Tensor) -> Tensor:
    return torch.sign(data)


def floor(data: Tensor) -> Tensor:
    return torch.floor(data) if is_float(data) else data.clone()


def ceil(data: Tensor) -> Tensor:
    return torch.ceil(data) if is_float(data) else data.clone()


def round(data: Tensor) -> Tensor:
    """Nearest integer, halves away from zero (``round(-2.5) = -3``) as MXNet does."""
    if not is_float(data):
        return data.clone()
    return torch.sign(data) * torch.floor(torch.abs(data) + 0.5)


def rint(data: Tensor) -> Tensor:
    """Nearest integer, halves rounded down (``rint(1.5) = 1``, ``rint(-2.5) = -3``) as MXNet does."""
    if not is_float(data):
        return data.clone()
    fl = torch.floor(data)
    return fl + (data - fl > 0.5).to(data.dtype)


def fix(data: Tensor) -> Tensor:
    """Round toward zero."""
    return torch.trunc(data) if is_float(data) else data.clone()


trunc = fix


def sin(data: Tensor) -> Tensor:
    return torch.sin(data)


def cos(data: Tensor) -> Tensor:
    return torch.cos(data)


def tan(data: Tensor) -> Tensor:
    return torch.tan(data)


def arcsin(data: Tensor) -> Tensor:
    return torch.asin(data)


def arccos(data: Tensor) -> Tensor:
    return torch.acos(data)


def arctan(data: Tensor) -> Tensor:
    return torch.atan(data)


def sinh(data: Tensor) -> Tensor:
    return torch.sinh(data)


def cosh(data: Tensor) -> Tensor:
    return torch.cosh(data)


def arcsinh(data: Tensor) -> Tensor:
    return torch.asinh(data)


def arccosh(data: Tensor) -> Tensor:
    return torch.acosh(data)


def arctanh(data: Tensor) -> Tensor:
    return torch.atanh(data)


def degrees(data: Tensor) -> Tensor:
    return torch.rad2deg(data)


def radians(data: Tensor) -> Tensor:
    return torch.deg2rad(data)


def erf(data: Tensor) -> Tensor:
    return torch.erf(data)


def erfinv(data: Tensor) -> Tensor:
    return torch.erfinv(data)


def gamma(data: Tensor) -> Tensor:
    """The gamma function, elementwise."""
    return torch.exp(torch.lgamma(data)) * _gamma_sign(data)


def _gamma_sign(x: Tensor) -> Tensor:
    # Gamma is negative on (-2k-1, -2k) for k >= 0.
    neg = (x < 0) & (torch.remainder(torch.floor(x), 2) != 0)
    return torch.where(neg, -torch.ones_like(x), torch.ones_like(x))


def gammaln(data: Tensor) -> Tensor:
    return torch.lgamma(data)


def logical_not(data: Tensor) -> Tensor:
    """1 where data == 0 else 0, in data's dtype."""
    return (data == 0).to(data.dtype)


def identity(data: Tensor) -> Tensor:
    """A copy of data (differentiable)."""
    return data.clone()


def stop_gradient(data: Tensor) -> Tensor:
    """data with gradient flow cut (MXNet's BlockGrad)."""
    return data.detach()


BlockGrad = stop_gradient


def gelu(data: Tensor) -> Tensor:
    """Gaussian error linear unit (the erf form)."""
    return F.gelu(data)


# ----------------------------------------------------------------------------------------------
# elementwise binary (broadcasting)
# ----------------------------------------------------------------------------------------------


def _operands(lhs: Any, rhs: Any) -> tuple[Any, Any, torch.dtype]:
    """Tensors (or a tensor and a Python scalar) plus the dtype MXNet gives the result."""
    lt, rt = isinstance(lhs, Tensor), isinstance(rhs, Tensor)
    if lt and rt:
        return lhs, rhs, torch.result_type(lhs, rhs)
    if lt:
        if not isinstance(rhs, numbers.Number):
            rhs = as_tensor(rhs, lhs).to(lhs.dtype)
        return lhs, rhs, lhs.dtype
    if rt:
        if not isinstance(lhs, numbers.Number):
            lhs = as_tensor(lhs, rhs).to(rhs.dtype)
        return lhs, rhs, rhs.dtype
    lhs_t, rhs_t = torch.as_tensor(lhs, dtype=torch.float64), torch.as_tensor(rhs, dtype=torch.float64)
    return lhs_t, rhs_t, torch.float64


def _scalar_result(lhs: Any, rhs: Any, out: Tensor) -> Any:
    if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
        return out.item()
    return out


def _tensorize(x: Any, like: Tensor) -> Tensor:
    return x if isinstance(x, Tensor) else torch.as_tensor(x, dtype=like.dtype, device=like.device)


def _other(a: Any, b: Any) -> Tensor:
    return a if isinstance(a, Tensor) else b


def broadcast_add(lhs: Any, rhs: Any) -> Any:
    """lhs + rhs with broadcasting."""
    a, b, _ = _operands(lhs, rhs)
    return _scalar_result(lhs, rhs, a + b)


def broadcast_sub(lhs: Any, rhs: Any) -> Any:
    """lhs - rhs with broadcasting."""
    a, b, _ = _operands(lhs, rhs)
    return _scalar_result(lhs, rhs, a - b)


def broadcast_mul(lhs: Any, rhs: Any) -> Any:
    """lhs * rhs with broadcasting."""
    a, b, _ = _operands(lhs, rhs)
    return _scalar_result(lhs, rhs, a * b)


def broadcast_div(lhs: Any, rhs: Any) -> Any:
    """lhs / rhs with broadcasting (integer arrays divide truncating, keeping their dtype)."""
    a, b, dt = _operands(lhs, rhs)
    if dt.is_floating_point or dt.is_complex:
        out = a / b
    else:
        a, b = _tensorize(a, _other(a, b)), _tensorize(b, _other(a, b))
        out = torch.div(a, b, rounding_mode="trunc").to(dt)
    return _scalar_result(lhs, rhs, out)


def broadcast_mod(lhs: Any, rhs: Any) -> Any:
    """lhs mod rhs, the result taking the sign of rhs (Python's rule)."""
    a, b, _ = _operands(lhs, rhs)
    a = _tensorize(a, _other(a, b)) if not isinstance(a, Tensor) else a
    return _scalar_result(lhs, rhs, torch.remainder(a, b))


def broadcast_power(lhs: Any, rhs: Any) -> Any:
    """lhs ** rhs with broadcasting."""
    a, b, _ = _operands(lhs, rhs)
    return _scalar_result(lhs, rhs, torch.pow(a, b))


def broadcast_maximum(lhs: Any, rhs: Any) -> Any:
    """Elementwise maximum with broadcasting."""
    a, b, dt = _operands(lhs, rhs)
    t = _other(a, b)
    return _scalar_result(lhs, rhs, torch.maximum(_tensorize(a, t).to(dt), _tensorize(b, t).to(dt)))


def broadcast_minimum(lhs: Any, rhs: Any) -> Any:
    """Elementwise minimum with broadcasting."""
    a, b, dt = _operands(lhs, rhs)
    t = _other(a, b)
    return _scalar_result(lhs, rhs, torch.minimum(_tensorize(a, t).to(dt), _tensorize(b, t).to(dt)))


def broadcast_hypot(lhs: Any, rhs: Any) -> Any:
    """sqrt(lhs**2 + rhs**2) with broadcasting."""
    a, b, dt = _operands(lhs, rhs)
    t = _other(a, b)
    return _scalar_result(lhs, rhs, torch.hypot(_tensorize(a, t).to(dt), _tensorize(b, t).to(dt)))


def _compare(op: Callable[[Any, Any], Tensor]) -> Callable[[Any, Any], Any]:
    def fn(lhs: Any, rhs: Any) -> Any:
        a, b, dt = _operands(lhs, rhs)
        if not isinstance(a, Tensor):
            a = _tensorize(a, b)
        return _scalar_result(lhs, rhs, op(a, b).to(dt))

    return fn


def _logical(op: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Any, Any], Any]:
    def fn(lhs: Any, rhs: Any) -> Any:
        a, b, dt = _operands(lhs, rhs)
        t = _other(a, b)
        return _scalar_result(lhs, rhs, op(_tensorize(a, t) != 0, _tensorize(b, t) != 0).to(dt))

    return fn


broadcast_equal = _compare(lambda a, b: a == b)
broadcast_not_equal = _compare(lambda a, b: a != b)
broadcast_greater = _compare(lambda a, b: a > b)
broadcast_greater_equal = _compare(lambda a, b: a >= b)
broadcast_lesser = _compare(lambda a, b: a < b)
broadcast_lesser_equal = _compare(lambda a, b: a <= b)
broadcast_logical_and = _logical(torch.logical_and)
broadcast_logical_or = _logical(torch.logical_or)
broadcast_logical_xor = _logical(torch.logical_xor)

for _name in (
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "lesser",
    "lesser_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
):
    globals()[f"broadcast_{_name}"].__name__ = f"broadcast_{_name}"
    globals()[
        f"broadcast_{_name}"
    ].__doc__ = f"Elementwise {_name.replace('_', ' ')} with broadcasting: 1 or 0 in the input dtype."

add = broadcast_add
subtract = broadcast_sub
multiply = broadcast_mul
divide = broadcast_div
modulo = broadcast_mod


def power(base: Any, exp: Any) -> Any:
    """base ** exp with broadcasting (MXNet's ``nd.power(base, exp)``)."""
    return broadcast_power(base, exp)


maximum = broadcast_maximum
minimum = broadcast_minimum
hypot = broadcast_hypot
equal = broadcast_equal
not_equal = broadcast_not_equal
greater = broadcast_greater
greater_equal = broadcast_greater_equal
lesser = broadcast_lesser
lesser_equal = broadcast_lesser_equal
logical_and = broadcast_logical_and
logical_or = broadcast_logical_or
logical_xor = broadcast_logical_xor
broadcast_plus = broadcast_add
broadcast_minus = broadcast_sub


def _same_shape(lhs: Tensor, rhs: Tensor, name: str) -> None:
    if tuple(lhs.shape) != tuple(rhs.shape):
        raise ValueError(f"{name}: shapes must match, got {tuple(lhs.shape)} and {tuple(rhs.shape)}")


def elemwise_add(lhs: Tensor, rhs: Tensor) -> Tensor:
    """lhs + rhs for arrays of the same shape."""
    _same_shape(lhs, rhs, "elemwise_add")
    return lhs + rhs


def elemwise_sub(lhs: Tensor, rhs: Tensor) -> Tensor:
    _same_shape(lhs, rhs, "elemwise_sub")
    return lhs - rhs


def elemwise_mul(lhs: Tensor, rhs: Tensor) -> Tensor:
    _same_shape(lhs, rhs, "elemwise_mul")
    return lhs * rhs


def elemwise_div(lhs: Tensor, rhs: Tensor) -> Tensor:
    _same_shape(lhs, rhs, "elemwise_div")
    return broadcast_div(lhs, rhs)  # type: ignore[no-any-return]


def add_n(*args: Tensor) -> Tensor:
    """The sum of arrays of the same shape."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    if not args:
        raise ValueError("add_n needs at least one array")
    out = args[0]
    for a in args[1:]:
        _same_shape(out, a, "add_n")
        out = out + a
    return out if len(args) > 1 else out.clone()


ElementWiseSum = add_n


def clip(data: Tensor, a_min: float, a_max: float) -> Tensor:
    """data limited to ``[a_min, a_max]``."""
    if a_min > a_max:
        raise ValueError(f"clip: a_min ({a_min}) must not exceed a_max ({a_max})")
    return torch.clamp(data, a_min, a_max)


def where(condition: Tensor, x: Any, y: Any) -> Tensor:
    """x where condition is non-zero, else y; a 1-D condition selects rows of x and y."""
    cond = as_tensor(condition)
    xt = x if isinstance(x, Tensor) else None
    yt = y if isinstance(y, Tensor) else None
    ref = xt if xt is not None else yt
    if ref is None:
        raise TypeError("where: x or y must be a tensor")
    if cond.dim() == 1 and ref.dim() > 1 and tuple(cond.shape) != tuple(ref.shape):
        if cond.shape[0] != ref.shape[0]:
            raise ValueError(
                f"where: a 1-D condition must have length {ref.shape[0]} (x's first dimension), "
                f"got {cond.shape[0]}"
            )
        cond = cond.reshape((-1,) + (1,) * (ref.dim() - 1))
    x = _tensorize(x, ref)
    y = _tensorize(y, ref)
    return torch.where(cond != 0, x, y)


# ----------------------------------------------------------------------------------------------
# reductions
# ----------------------------------------------------------------------------------------------


def _reduce(
    data: Tensor,
    axis: Any,
    keepdims: bool,
    exclude: bool,
    fn: Callable[[Tensor, tuple[int, ...], bool], Tensor],
) -> Tensor:
    axes = norm_axes(axis, data.dim(), exclude)
    if not axes:
        return data.clone()
    out = fn(data, axes, keepdims)
    return out if keepdims else _no0d(out)


def sum(data: Tensor, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> Tensor:
    """Sum over ``axis`` (int, tuple or None for all; ``exclude`` reduces the other axes)."""
    return _reduce(data, axis, keepdims, exclude, lambda t, a, k: torch.sum(t, dim=a, keepdim=k))


sum_axis = sum


def mean(data: Tensor, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> Tensor:
    """Mean over ``axis`` (integer arrays give a truncated integer mean, as MXNet)."""

    def fn(t: Tensor, a: tuple[int, ...], k: bool) -> Tensor:
        if is_float(t):
            return torch.mean(t, dim=a, keepdim=k)
        return torch.mean(t.double(), dim=a, keepdim=k).to(t.dtype)

    return _reduce(data, axis, keepdims, exclude, fn)


def max(data: Tensor, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> Tensor:
    """Maximum over ``axis``."""
    return _reduce(data, axis, keepdims, exclude, lambda t, a, k: torch.amax(t, dim=a, keepdim=k))


def min(data: Tensor, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> Tensor:
    """Minimum over ``axis``."""
    return _reduce(data, axis, keepdims, exclude, lambda t, a, k: torch.amin(t, dim=a, keepdim=k))


max_axis = max
min_axis = min


def _prod(t: Tensor, axes: tuple[int, ...], keepdims: bool) -> Tensor:
    for a in sorted(axes, reverse=True):
        t = torch.prod(t, dim=a, keepdim=keepdims)
    return t


def prod(data: Tensor, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> Tensor:
    """Product over ``axis``."""
    return _reduce(data, axis, keepdims, exclude, _prod)


def nansum(data: Tensor, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> Tensor:
    """Sum over ``axis`` treating NaN as 0."""
    return _reduce(data, axis, keepdims, exclude, lambda t, a, k: torch.nansum(t, dim=a, keepdim=k))


def nanprod(data: Tensor, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> Tensor:
    """Product over ``axis`` treating NaN as 1."""

    def fn(t: Tensor, a: tuple[int, ...], k: bool) -> Tensor:
        if is_float(t):
            t = torch.where(torch.isnan(t), torch.ones_like(t), t)
        return _prod(t, a, k)

    return _reduce(data, axis, keepdims, exclude, fn)


def moments(data: Tensor, axes: Any = None, keepdims: bool = False) -> list[Tensor]:
    """[mean, variance] over ``axes`` (the biased variance)."""
    ax = norm_axes(axes, data.dim())
    var, mu = torch.var_mean(data, dim=ax, correction=0, keepdim=keepdims)
    return [mu if keepdims else _no0d(mu), var if keepdims else _no0d(var)]


def norm(
    data: Tensor, ord: int = 2, axis: Any = None, out_dtype: Any = None, keepdims: bool = False
) -> Tensor:
    """The L1 (``ord=1``) or L2 (``ord=2``) norm over ``axis`` (all elements when None)."""
    if ord not in (1, 2):
        raise ValueError(f"norm: ord must be 1 or 2, got {ord!r}")
    axes = norm_axes(axis, data.dim())
    x = data if is_float(data) else data.float()
    out = torch.linalg.vector_norm(x, ord=ord, dim=axes, keepdim=keepdims)
    target = dtype_of(out_dtype, data.dtype if is_float(data) else torch.float32)
    out = out.to(target)
    return out if keepdims else _no0d(out)


def _arg_reduce(data: Tensor, axis: Any, keepdims: bool, largest: bool) -> Tensor:
    fn = torch.argmax if largest else torch.argmin
    if axis is None:
        idx = fn(data.reshape(-1))
        out = idx.reshape((1,) * data.dim()) if keepdims else idx.reshape(1)
    else:
        ax = norm_axis(axis, data.dim())
        out = fn(data, dim=ax, keepdim=keepdims)
    return out.to(torch.float32)


def argmax(data: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Index of the maximum along ``axis`` (flattened when None), as float32."""
    return _arg_reduce(data, axis, keepdims, True)


def argmin(data: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Index of the minimum along ``axis`` (flattened when None), as float32."""
    return _arg_reduce(data, axis, keepdims, False)


def argmax_channel(data: Tensor) -> Tensor:
    """Index of the maximum along the last axis, as float32."""
    return _arg_reduce(data, -1, False, True)


# ----------------------------------------------------------------------------------------------
# sorting
# ----------------------------------------------------------------------------------------------


def _sort_axis(data: Tensor, axis: Any) -> tuple[Tensor, int]:
    if axis is None:
        return data.reshape(-1), 0
    return data, norm_axis(axis, data.dim())


def topk(
    data: Tensor,
    axis: Any = -1,
    k: int = 1,
    ret_typ: str = "indices",
    is_ascend: bool = False,
    dtype: Any = "float32",
) -> Any:
    """The ``k`` largest (smallest if ``is_ascend``) entries along ``axis``.

    ``ret_typ``: 'indices' (in ``dtype``, float32 by default), 'value', 'both' ([value, indices])
    or 'mask' (1 at the chosen positions, 0 elsewhere, in data's dtype).  ``k < 1`` selects all.
    """
    if ret_typ not in ("indices", "value", "both", "mask"):
        raise ValueError(f"topk: ret_typ must be 'indices', 'value', 'both' or 'mask', got {ret_typ!r}")
    x, ax = _sort_axis(data, axis)
    n = x.shape[ax] if x.dim() else 1
    if k < 1:
        k = n
    if k > n:
        raise ValueError(f"topk: k={k} exceeds the {n} elements along axis {axis}")
    vals, idx = torch.topk(x, k, dim=ax, largest=not is_ascend, sorted=True)
    if ret_typ == "mask":
        mask = torch.zeros_like(x).scatter(ax, idx, 1)
        return mask.reshape(data.shape)
    idx_out = idx.to(dtype_of(dtype))
    if ret_typ == "indices":
        return idx_out
    if ret_typ == "value":
        return vals
    return [vals, idx_out]


def sort(data: Tensor, axis: Any = -1, is_ascend: bool = True) -> Tensor:
    """``data`` sorted along ``axis`` (flattened when None)."""
    x, ax = _sort_axis(data, axis)
    return torch.sort(x, dim=ax, descending=not is_ascend, stable=True).values


def argsort(data: Tensor, axis: Any = -1, is_ascend: bool = True, dtype: Any = "float32") -> Tensor:
    """Indices that sort ``data`` along ``axis`` (float32 by default)."""
    x, ax = _sort_axis(data, axis)
    return torch.sort(x, dim=ax, descending=not is_ascend, stable=True).indices.to(dtype_of(dtype))


# ----------------------------------------------------------------------------------------------
# shape manipulation
# ----------------------------------------------------------------------------------------------


def _reshape_tokens(target: tuple[int, ...]) -> list[tuple[int, ...]]:
    tokens: list[tuple[int, ...]] = []
    i = 0
    while i < len(target):
        v = target[i]
        if v == -4:
            if i + 2 >= len(target):
                raise MXNetError(f"reshape: -4 in {target} must be followed by two dimensions")
            tokens.append((-4, target[i + 1], target[i + 2]))
            i += 3
        else:
            if v < -4:
                raise MXNetError(f"reshape: invalid value {v} in shape {target}: codes are 0, -1, -2, -3, -4")
            tokens.append((v,))
            i += 1
    return tokens


def infer_reshape(src: Sequence[int], target: Sequence[int], reverse: bool = False) -> tuple[int, ...]:
    """The shape MXNet's reshape gives ``src`` for ``target`` (with codes 0, -1, -2, -3, -4)."""
    src_t, tgt = tuple(src), tuple(int(t) for t in target)
    tokens = _reshape_tokens(tgt)
    if reverse:
        tokens = tokens[::-1]
        src_t = src_t[::-1]
    out: list[int] = []
    infer_at = -1
    i = 0

    def need(n: int, code: int) -> None:
        if i + n > len(src_t):
            raise MXNetError(
                f"cannot reshape {tuple(src)} to {tgt}: code {code} needs input dimension(s) beyond the "
                f"{len(src_t)} the input has"
            )

    for tok in tokens:
        code = tok[0]
        if code == 0:
            need(1, 0)
            out.append(src_t[i])
            i += 1
        elif code == -1:
            if infer_at >= 0:
                raise MXNetError(f"cannot reshape {tuple(src)} to {tgt}: only one -1 is allowed")
            infer_at = len(out)
            out.append(-1)
            i += 1
        elif code == -2:
            out.extend(src_t[i:])
            i = len(src_t)
        elif code == -3:
            need(2, -3)
            out.append(src_t[i] * src_t[i + 1])
            i += 2
        elif code == -4:
            need(1, -4)
            d0, d1, d2 = src_t[i], tok[1], tok[2]
            if d1 == -1 and d2 == -1:
                raise MXNetError(f"cannot reshape {tuple(src)} to {tgt}: -4 split has two -1 entries")
            if d1 == -1:
                d1 = d0 // d2 if d2 else -1
            elif d2 == -1:
                d2 = d0 // d1 if d1 else -1
            if d1 * d2 != d0:
                raise MXNetError(
                    f"cannot reshape {tuple(src)} to {tgt}: -4 splits dimension {d0} "
                    f"into {tok[1]} x {tok[2]}, "
                    "which does not multiply back to it"
                )
            out.extend([d2, d1] if reverse else [d1, d2])
            i += 1
        else:
            out.append(code)
            i += 1
    total = math.prod(src_t)
    if infer_at >= 0:
        known = math.prod(d for j, d in enumerate(out) if j != infer_at)
        if known == 0 or total % known:
            raise MXNetError(f"cannot reshape {tuple(src)} (size {total}) to {tgt}: -1 cannot be inferred")
        out[infer_at] = total // known
    if reverse:
        out = out[::-1]
    if math.prod(out) != total:
        raise MXNetError(
            f"cannot reshape {tuple(src)} (size {total}) to {tgt}: the result {tuple(out)} has size "
            f"{math.prod(out)}"
        )
    return tuple(out)


def reshape(data: Tensor, shape: Any = None, reverse: bool = False, **kwargs: Any) -> Tensor:
    """``data`` with a new shape; MXNet's codes: 0 copy a dimension, -1 infer one, -2 copy the
    rest, -3 merge two, -4 split one into the next two values (one may be -1).
    ``reverse`` applies the codes from the right."""
    if shape is None:
        shape = kwargs.pop("target_shape", None)
    if shape is None:
        raise TypeError("reshape: shape is required")
    target = as_shape(shape)
    return data.reshape(infer_reshape(tuple(data.shape), target, reverse))


Reshape = reshape


def _range_of(begin: int | None, end: int | None, ndim: int, what: str) -> tuple[int, int]:
    b = 0 if begin is None else int(begin)
    e = ndim if end is None else int(end)
    b, e = (b + ndim if b < 0 else b), (e + ndim if e < 0 else e)
    if not 0 <= b <= e <= ndim:
        raise ValueError(f"reshape_like: {what}_begin={begin}, {what}_end={end} do not give a range of "
                         f"the {ndim} axes of {what}")
    return b, e


def reshape_like(
    lhs: Tensor,
    rhs: Tensor,
    lhs_begin: int | None = None,
    lhs_end: int | None = None,
    rhs_begin: int | None = None,
    rhs_end: int | None = None,
) -> Tensor:
    """lhs with rhs's shape; with the begin/end arguments, lhs's axes [lhs_begin, lhs_end) are
    replaced by rhs's axes [rhs_begin, rhs_end) (None: the start or the end; negatives count back)."""
    lb, le = _range_of(lhs_begin, lhs_end, lhs.dim(), "lhs")
    rb, re = _range_of(rhs_begin, rhs_end, rhs.dim(), "rhs")
    shape = (*lhs.shape[:lb], *rhs.shape[rb:re], *lhs.shape[le:])
    if math.prod(shape) != lhs.numel():
        raise ValueError(f"reshape_like: cannot give lhs of shape {tuple(lhs.shape)} the shape {shape} "
                         f"(from rhs of shape {tuple(rhs.shape)}): the sizes differ")
    return lhs.reshape(shape)


def transpose(data: Tensor, axes: Any = None) -> Tensor:
    """Permute the axes (reverse them when ``axes`` is None or empty)."""
    if axes is None or len(axes) == 0:
        return data.permute(*reversed(range(data.dim())))
    axes = tuple(norm_axis(a, data.dim()) for a in axes)
    if sorted(axes) != list(range(data.dim())):
        raise ValueError(f"transpose: axes {axes} are not a permutation of {data.dim()} axes")
    return data.permute(*axes)


def swapaxes(data: Tensor, dim1: int = 0, dim2: int = 0) -> Tensor:
    """Exchange two axes."""
    return data.transpose(norm_axis(dim1, data.dim()), norm_axis(dim2, data.dim()))


SwapAxis = swapaxes


def expand_dims(data: Tensor, axis: int) -> Tensor:
    """Insert a size-1 axis at ``axis`` (``-1`` appends)."""
    nd1 = data.dim() + 1
    if not -nd1 <= axis < nd1:
        raise ValueError(f"expand_dims: axis={axis} is out of range for an array with {data.dim()} dims")
    return data.unsqueeze(axis % nd1)


def squeeze(data: Tensor, axis: Any = None) -> Tensor:
    """Drop size-1 axes (those in ``axis``, or all); an all-ones shape gives shape (1,)."""
    if axis is None:
        out = data.squeeze()
    else:
        axes = norm_axes(axis, data.dim())
        for a in axes:
            if data.shape[a] != 1:
                raise ValueError(
                    f"squeeze: axis {a} of shape {tuple(data.shape)} has size {data.shape[a]}, not 1"
                )
        out = data.squeeze(axes) if axes else data
    return _no0d(out)


def flatten(data: Tensor) -> Tensor:
    """Collapse all axes but the first: (d1, d2, ..., dk) -> (d1, d2*...*dk)."""
    if data.dim() == 0:
        return data.reshape(1, 1)
    return data.reshape(data.shape[0], -1)


Flatten = flatten


def _tensor_list(data: Sequence[Any], name: str) -> list[Tensor]:
    if len(data) == 1 and isinstance(data[0], (list, tuple)):
        data = data[0]
    if not data:
        raise ValueError(f"{name} needs at least one array")
    return [as_tensor(d) for d in data]


def concat(*data: Tensor, dim: int = 1, num_args: int | None = None) -> Tensor:
    """Join arrays along axis ``dim`` (MXNet's default is 1)."""
    ts = _tensor_list(data, "concat")
    try:
        return torch.cat(ts, dim=dim)
    except (RuntimeError, IndexError) as e:
        raise ValueError(
            f"concat along dim {dim}: shapes {[tuple(t.shape) for t in ts]} do not fit: {e}"
        ) from e


Concat = concat


def concatenate(arrays: Sequence[Tensor], axis: int = 0, always_copy: bool = True) -> Tensor:
    """Join arrays along ``axis`` (default 0)."""
    return concat(*arrays, dim=axis)


def stack(*data: Tensor, axis: int = 0, num_args: int | None = None) -> Tensor:
    """Join arrays of the same shape along a new axis."""
    ts = _tensor_list(data, "stack")
    try:
        return torch.stack(ts, dim=axis)
    except (RuntimeError, IndexError) as e:
        raise ValueError(
            f"stack along axis {axis}: shapes {[tuple(t.shape) for t in ts]} do not fit: {e}"
        ) from e


def split(data: Tensor, num_outputs: int, axis: int = 1, squeeze_axis: bool = False) -> Any:
    """Split into ``num_outputs`` equal parts along ``axis``; a list, or one tensor if num_outputs==1."""
    ax = norm_axis(axis, data.dim())
    n = data.shape[ax]
    if not isinstance(num_outputs, int) or num_outputs < 1 or n % num_outputs:
        raise ValueError(f"split: cannot split axis {axis} of size {n} into {num_outputs!r} equal parts")
    if squeeze_axis and n != num_outputs:
        raise ValueError(
            f"split: squeeze_axis needs num_outputs ({num_outputs}) == size of axis {axis} ({n})"
        )
    parts = list(torch.split(data, n // num_outputs, dim=ax))
    if squeeze_axis:
        parts = [p.squeeze(ax) for p in parts]
    return parts[0] if num_outputs == 1 else parts


SliceChannel = split


def split_v2(ary: Tensor, indices_or_sections: Any, axis: int = 0, squeeze_axis: bool = False) -> Any:
    """numpy-style split: a section count, or the indices to split before."""
    ax = norm_axis(axis, ary.dim())
    if isinstance(indices_or_sections, int):
        return split(ary, indices_or_sections, axis=ax, squeeze_axis=squeeze_axis)
    idx = [int(i) for i in indices_or_sections]
    bounds = [0] + idx + [ary.shape[ax]]
    parts = [ary.narrow(ax, b, _bmax(e - b, 0)) for b, e in zip(bounds[:-1], bounds[1:])]
    if squeeze_axis:
        parts = [p.squeeze(ax) for p in parts]
    return parts[0] if len(parts) == 1 else parts


def tile(data: Tensor, reps: Any) -> Tensor:
    """Repeat the whole array ``reps`` times along each axis."""
    return torch.tile(data, as_shape(reps, "reps"))


def repeat(data: Tensor, repeats: int, axis: int | None = None) -> Tensor:
    """Repeat each element ``repeats`` times along ``axis`` (flattened when None)."""
    if not isinstance(repeats, int) or repeats < 0:
        raise ValueError(f"repeat: repeats must be a non-negative int, got {repeats!r}")
    if axis is None:
        return data.reshape(-1).repeat_interleave(repeats)
    return data.repeat_interleave(repeats, dim=norm_axis(axis, data.dim()))


def flip(data: Tensor, axis: Any) -> Tensor:
    """Reverse the order of elements along ``axis`` (int or tuple)."""
    return torch.flip(data, norm_axes(axis, data.dim()))


reverse = flip


def broadcast_to(data: Tensor, shape: Any) -> Tensor:
    """Broadcast size-1 axes to ``shape`` (a 0 in ``shape`` keeps that dimension)."""
    tgt = as_shape(shape)
    if len(tgt) != data.dim():
        raise ValueError(
            f"broadcast_to: shape {tgt} must have {data.dim()} dims like the input {tuple(data.shape)}"
        )
    tgt = tuple(s if t == 0 else t for s, t in zip(data.shape, tgt))
    for s, t in zip(data.shape, tgt):
        if s != t and s != 1:
            raise ValueError(f"broadcast_to: cannot broadcast {tuple(data.shape)} to {tgt}")
    return data.expand(tgt).contiguous()


def broadcast_axis(data: Tensor, axis: Any = (), size: Any = ()) -> Tensor:
    """Broadcast the size-1 axes ``axis`` to ``size``."""
    axes = as_shape(axis, "axis")
    sizes = as_shape(size, "size")
    if len(axes) != len(sizes):
        raise ValueError(f"broadcast_axis: axis {axes} and size {sizes} must have the same length")
    tgt = list(data.shape)
    for a, s in zip(axes, sizes):
        a = norm_axis(a, data.dim())
        if data.shape[a] != 1:
            raise ValueError(
                f"broadcast_axis: axis {a} of {tuple(data.shape)} has size {data.shape[a]}, not 1"
            )
        tgt[a] = s
    return data.expand(tgt).contiguous()


broadcast_axes = broadcast_axis


def broadcast_like(lhs: Tensor, rhs: Tensor, lhs_axes: Any = None, rhs_axes: Any = None) -> Tensor:
    """Broadcast lhs to rhs's shape (or only ``lhs_axes`` to the sizes of ``rhs_axes``)."""
    if lhs_axes is None and rhs_axes is None:
        return broadcast_to(lhs, tuple(rhs.shape))
    la, ra = as_shape(lhs_axes, "lhs_axes"), as_shape(rhs_axes, "rhs_axes")
    if len(la) != len(ra):
        raise ValueError(f"broadcast_like: lhs_axes {la} and rhs_axes {ra} must have the same length")
    tgt = list(lhs.shape)
    for a, b in zip(la, ra):
        tgt[norm_axis(a, lhs.dim())] = rhs.shape[norm_axis(b, rhs.dim())]
    return broadcast_to(lhs, tuple(tgt))


def pad(data: Tensor, mode: str = "constant", pad_width: Any = (), constant_value: float = 0.0) -> Tensor:
    """Pad with MXNet's ``pad_width`` = (before_0, after_0, before_1, after_1, ...) per axis.

    ``mode``: 'constant' (any axes), 'edge' or 'reflect' (the first two axes unpadded, as MXNet).
    """
    pw = as_shape(pad_width, "pad_width")
    if len(pw) != 2 * data.dim():
        raise ValueError(
            f"pad: pad_width must have 2 entries per axis ({2 * data.dim()} for shape {tuple(data.shape)}), "
            f"got {len(pw)}: {pw}"
        )
    if mode not in ("constant", "edge", "reflect"):
        raise ValueError(f"pad: mode must be 'constant', 'edge' or 'reflect', got {mode!r}")
    if mode == "constant":
        tpad: list[int] = []
        for ax in reversed(range(data.dim())):
            tpad += [pw[2 * ax], pw[2 * ax + 1]]
        return F.pad(data, tpad, mode="constant", value=constant_value)
    if any(pw[:4]) or data.dim() not in (3, 4, 5):
        raise ValueError(
            f"pad: mode {mode!r} pads 3-D to 5-D arrays and leaves the first two axes unpadded; "
            f"got shape {tuple(data.shape)} with pad_width {pw}"
        )
    tpad = []
    for ax in reversed(range(2, data.dim())):
        tpad += [pw[2 * ax], pw[2 * ax + 1]]
    return F.pad(data, tpad, mode="replicate" if mode == "edge" else "reflect")


Pad = pad


def _slice_axis_index(data: Tensor, ax: int, start: int, stop: int, step: int) -> Tensor:
    if step > 0:
        idx: list[Any] = [_bslice(None)] * data.dim()
        idx[ax] = _bslice(start, stop, step)
        return data[tuple(idx)]
    ind = torch.arange(start, stop, step, device=data.device)
    return data.index_select(ax, ind)


def slice(data: Tensor, begin: Any, end: Any, step: Any = ()) -> Tensor:
    """``data[begin[0]:end[0]:step[0], ...]``; entries may be None; steps may be negative."""
    begin, end = tuple(begin), tuple(end)
    step = tuple(step) if step is not None else ()
    if len(begin) != len(end) or len(begin) > data.dim() or (step and len(step) != len(begin)):
        raise ValueError(
            f"slice: begin {begin}, end {end} and step {step} must have the same length, at most "
            f"{data.dim()} (the input's ndim)"
        )
    out = data
    for ax, (b, e) in enumerate(zip(begin, end)):
        st = step[ax] if step and step[ax] is not None else 1
        if st == 0:
            raise ValueError("slice: step must not be 0")
        start, stop, stp = _bslice(b, e, st).indices(data.shape[ax])
        out = _slice_axis_index(out, ax, start, stop, stp)
    return out


crop = slice


def slice_axis(data: Tensor, axis: int, begin: int, end: int | None) -> Tensor:
    """``data`` restricted to ``begin:end`` along ``axis`` (end None: to the end)."""
    ax = norm_axis(axis, data.dim())
    n = data.shape[ax]
    b = begin + n if begin < 0 else begin
    e = n if end is None else (end + n if end < 0 else end)
    if not (0 <= b <= n and 0 <= e <= n and b <= e):
        raise ValueError(
            f"slice_axis: begin={begin}, end={end} is not a valid range of axis {axis} (size {n})"
        )
    return data.narrow(ax, b, e - b)


def slice_like(data: Tensor, shape_like: Tensor, axes: Any = ()) -> Tensor:
    """``data`` cut to ``shape_like``'s size on ``axes`` (all axes when empty)."""
    if not axes:
        if shape_like.dim() != data.dim():
            raise ValueError(
                f"slice_like: shapes {tuple(data.shape)} and {tuple(shape_like.shape)} "
                "differ in ndim; give axes"
            )
        axes = tuple(range(data.dim()))
    out = data
    for a in as_shape(axes, "axes"):
        ax = norm_axis(a, data.dim())
        size = shape_like.shape[norm_axis(a, shape_like.dim())]
        if size > data.shape[ax]:
            raise ValueError(f"slice_like: axis {a} of data has size {data.shape[ax]} < {size}")
        out = out.narrow(ax, 0, size)
    return out


# ----------------------------------------------------------------------------------------------
# indexing
# ----------------------------------------------------------------------------------------------


def _fix_indices(idx: Tensor, n: int, mode: str, name: str) -> Tensor:
    if mode == "clip":
        return idx.clamp(0, n - 1)
    if mode == "wrap":
        return torch.remainder(idx, n)
    if mode == "raise":
        if idx.numel() and (bool((idx < 0).any()) or bool((idx >= n).any())):
            bad = idx[(idx < 0) | (idx >= n)][0].item()
            raise IndexError(f"{name}: index {bad} is out of range for an axis of size {n}")
        return idx
    raise ValueError(f"{name}: mode must be 'clip', 'wrap' or 'raise', got {mode!r}")


def take(a: Tensor, indices: Any, axis: int = 0, mode: str = "clip") -> Tensor:
    """Entries of ``a`` at ``indices`` along ``axis``; result shape a[:axis] + indices + a[axis+1:]."""
    ax = norm_axis(axis, a.dim())
    idx = to_index(indices, a)
    idx = _fix_indices(idx, a.shape[ax], mode, "take")
    out = a.index_select(ax, idx.reshape(-1).to(a.device))
    return out.reshape(tuple(a.shape[:ax]) + tuple(idx.shape) + tuple(a.shape[ax + 1 :]))


def pick(data: Tensor, index: Any, axis: Any = -1, keepdims: bool = False, mode: str = "clip") -> Tensor:
    """``data[..., index[...], ...]``: one entry per position along ``axis``, chosen by ``index``."""
    idx = to_index(index, data)
    if axis is None:
        flat = data.reshape(-1)
        return flat[_fix_indices(idx, flat.numel(), mode, "pick")]
    ax = norm_axis(axis, data.dim())
    if idx.dim() == data.dim() - 1:
        idx = idx.unsqueeze(ax)
    if idx.dim() != data.dim():
        raise ValueError(
            f"pick: index shape {tuple(index.shape)} does not fit data shape {tuple(data.shape)}"
        )
    idx = _fix_indices(idx, data.shape[ax], mode, "pick")
    out = torch.gather(data, ax, idx)
    return out if keepdims else out.squeeze(ax)


def gather_nd(data: Tensor, indices: Any) -> Tensor:
    """``out[y...] = data[indices[0, y...], ..., indices[M-1, y...]]`` for indices of shape (M, ...)."""
    idx = to_index(indices, data)
    if idx.dim() < 1 or idx.shape[0] > data.dim():
        raise ValueError(
            f"gather_nd: indices of shape {tuple(idx.shape)} need a first dimension "
            f"<= data's ndim {data.dim()}"
        )
    return data[tuple(idx[i] for i in range(idx.shape[0]))]


def scatter_nd(data: Tensor, indices: Any, shape: Any) -> Tensor:
    """Zeros of ``shape`` with ``data`` written at ``indices`` (the inverse of gather_nd)."""
    idx = to_index(indices, data)
    out = torch.zeros(as_shape(shape), dtype=data.dtype, device=data.device)
    return out.index_put(tuple(idx[i] for i in range(idx.shape[0])), data)


def one_hot(
    indices: Any, depth: int, on_value: float = 1.0, off_value: float = 0.0, dtype: Any = "float32"
) -> Tensor:
    """A new last axis of size ``depth`` holding on_value at each index (out-of-range: all off)."""
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"one_hot: depth must be a positive int, got {depth!r}")
    idx = to_index(indices)
    hit = idx.unsqueeze(-1) == torch.arange(depth, device=idx.device)
    dt = dtype_of(dtype)
    on = torch.tensor(on_value, dtype=dt, device=idx.device)
    off = torch.tensor(off_value, dtype=dt, device=idx.device)
    return torch.where(hit, on, off)


def diag(data: Tensor, k: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The k-th diagonal of a matrix, or a matrix with a vector on its k-th diagonal; for more
    dimensions the diagonal of the (axis1, axis2) planes, as a new last axis (numpy's diagonal)."""
    if data.dim() == 1:
        return torch.diag(data, k)
    if data.dim() == 0:
        raise ValueError("diag needs an array with at least 1 dimension, got a 0-d array")
    a1, a2 = norm_axis(axis1, data.dim(), "axis1"), norm_axis(axis2, data.dim(), "axis2")
    if a1 == a2:
        raise ValueError(f"diag: axis1 and axis2 must differ, both are {a1}")
    return torch.diagonal(data, offset=k, dim1=a1, dim2=a2)


def _block(data: Tensor, block_size: int, op: str) -> int:
    if data.dim() != 4:
        raise ValueError(f"{op} needs a 4-D (N, C, H, W) array, got shape {tuple(data.shape)}")
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"{op}: block_size must be a positive int, got {block_size!r}")
    return block_size


def depth_to_space(data: Tensor, block_size: int) -> Tensor:
    """(N, C, H, W) -> (N, C/b^2, H*b, W*b): channel blocks become b x b spatial tiles (DCR order:
    channel ``(i*b + j)*C/b^2 + c`` lands at row offset i, column offset j of channel c)."""
    b = _block(data, block_size, "depth_to_space")
    n, c, h, w = data.shape
    if c % (b * b):
        raise ValueError(f"depth_to_space: {c} channels are not divisible by block_size^2 = {b * b}")
    x = data.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    return x.reshape(n, c // (b * b), h * b, w * b)


def space_to_depth(data: Tensor, block_size: int) -> Tensor:
    """(N, C, H, W) -> (N, C*b^2, H/b, W/b), the inverse of :func:`depth_to_space`."""
    b = _block(data, block_size, "space_to_depth")
    n, c, h, w = data.shape
    if h % b or w % b:
        raise ValueError(f"space_to_depth: height {h} and width {w} must be divisible by block_size {b}")
    x = data.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return x.reshape(n, c * b * b, h // b, w // b)


def _num_arrays(data: tuple[Tensor, ...], num_arrays: int | None, op: str) -> None:
    if num_arrays is not None and num_arrays != len(data):
        raise ValueError(f"{op}: num_arrays={num_arrays} but {len(data)} arrays were given")


def reset_arrays(*data: Tensor, num_arrays: int | None = None) -> list[Tensor]:
    """Set every array to zero in place (MXNet's ``nd.reset_arrays``); returns an empty list, as MXNet."""
    _num_arrays(data, num_arrays, "reset_arrays")
    with torch.no_grad():
        for t in data:
            t.zero_()
    return []


def all_finite(data: Tensor, init_output: bool = True) -> Tensor:
    """[1.] (float32) when every element of ``data`` is finite, else [0.]."""
    return torch.isfinite(data).all().to(torch.float32).reshape(1)


def multi_all_finite(*data: Tensor, num_arrays: int | None = None, init_output: bool = True) -> Tensor:
    """[1.] (float32) when every element of every array is finite, else [0.]."""
    _num_arrays(data, num_arrays, "multi_all_finite")
    ok = torch.stack([torch.isfinite(t).all() for t in data]).all() if data else torch.tensor(True)
    return ok.to(torch.float32).reshape(1)


def multi_sum_sq(*data: Tensor, num_arrays: int | None = None) -> Tensor:
    """The sum of squares of each array, as a float32 array of shape (len(data),)."""
    _num_arrays(data, num_arrays, "multi_sum_sq")
    if not data:
        return torch.zeros(0)
    return torch.stack([t.detach().float().square().sum() for t in data])


def cumsum(a: Tensor, axis: int | None = None, dtype: Any = None) -> Tensor:
    """Cumulative sum along ``axis`` (of the flattened array when None)."""
    dt = None if dtype is None else dtype_of(dtype)
    if axis is None:
        return torch.cumsum(a.reshape(-1), 0, dtype=dt)
    return torch.cumsum(a, norm_axis(axis, a.dim()), dtype=dt)


def shape_array(data: Tensor) -> Tensor:
    """``data``'s shape as an int64 tensor."""
    return torch.tensor(tuple(data.shape), dtype=torch.int64, device=data.device)


def size_array(data: Tensor) -> Tensor:
    """``data``'s element count as an int64 tensor of shape (1,)."""
    return torch.tensor([data.numel()], dtype=torch.int64, device=data.device)


# ----------------------------------------------------------------------------------------------
# linear algebra
# ----------------------------------------------------------------------------------------------


def dot(
    lhs: Tensor, rhs: Tensor, transpose_a: bool = False, transpose_b: bool = False, forward_stype: Any = None
) -> Tensor:
    """MXNet dot: contracts lhs's last axis (first if transpose_a) with rhs's first (last if
    transpose_b); the other axes keep their order.  Two vectors give shape (1,)."""
    if lhs.dim() == 0 or rhs.dim() == 0:
        return lhs * rhs
    la = 0 if (transpose_a and lhs.dim() > 1) else lhs.dim() - 1
    ra = rhs.dim() - 1 if (transpose_b and rhs.dim() > 1) else 0
    if lhs.shape[la] != rhs.shape[ra]:
        raise ValueError(
            f"dot: cannot contract lhs {tuple(lhs.shape)} (axis {la}, transpose_a={transpose_a}) with rhs "
            f"{tuple(rhs.shape)} (axis {ra}, transpose_b={transpose_b}): "
            f"sizes {lhs.shape[la]} != {rhs.shape[ra]}"
        )
    if lhs.dim() <= 2 and rhs.dim() <= 2:
        a = lhs.t() if la == 0 and lhs.dim() == 2 else lhs
        b = rhs.t() if ra == 1 else rhs
        return _no0d(torch.matmul(a, b))
    return _no0d(torch.tensordot(lhs, rhs, dims=([la], [ra])))


def batch_dot(
    lhs: Tensor, rhs: Tensor, transpose_a: bool = False, transpose_b: bool = False, forward_stype: Any = None
) -> Tensor:
    """Matrix product of the last two axes, batched over the leading ones ((B,M,K) x (B,K,N))."""
    if lhs.dim() < 3 or rhs.dim() < 3:
        raise ValueError(
            f"batch_dot needs arrays with >= 3 dims, got {tuple(lhs.shape)} and {tuple(rhs.shape)}"
        )
    a = lhs.transpose(-1, -2) if transpose_a else lhs
    b = rhs.transpose(-1, -2) if transpose_b else rhs
    if a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"batch_dot: shapes {tuple(lhs.shape)} and {tuple(rhs.shape)} (transpose_a={transpose_a}, "
            f"transpose_b={transpose_b}) do not fit"
        )
    return torch.matmul(a, b)
