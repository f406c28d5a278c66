"""``mx.np``: MXNet's NumPy-style front end, returning plain ``torch.Tensor``.

The functions take NumPy's argument names (``a``, ``axis``, ``keepdims``, ``dtype``, ``out``)
plus MXNet's ``ctx``, and follow MXNet's ``mx.np`` rules rather than torch's or NumPy's where
they differ:

* creation from Python numbers, ``zeros``/``ones``/``full``/``arange``/``eye``... give float32
  (MXNet's default dtype); a numpy array or a tensor keeps its dtype;
* reductions return 0-d arrays (NumPy's shapes, unlike ``mx.nd``'s shape (1,));
* ``sum`` keeps an integer dtype (bool gives int64), ``mean`` of integers is float32,
  ``argmax``/``argmin`` give int64.

Example::

    >>> from mxtorch import numpy as mnp
    >>> x = mnp.random.uniform(size=(4, 3))
    >>> mnp.concatenate([x, x], axis=0).shape
    torch.Size([8, 3])
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as _onp
import torch

from ..context import Context
from ..nd._common import as_shape, check_nonneg_shape, device_of, dtype_of, norm_axis, tag, write_out
from . import linalg, random

__all__ = [
    "ndarray", "random", "linalg", "float16", "float32", "float64", "int8", "int32", "int64", "uint8",
    "bool_", "pi", "e", "inf", "nan", "newaxis",
    "array", "zeros", "ones", "empty", "full", "arange", "linspace", "eye", "identity", "zeros_like",
    "ones_like", "full_like", "empty_like", "copy",
    "concatenate", "stack", "vstack", "hstack", "split", "array_split", "reshape", "transpose",
    "expand_dims", "squeeze", "swapaxes", "moveaxis", "broadcast_to", "tile", "repeat", "flip",
    "ravel",
    "dot", "matmul", "tensordot", "einsum", "sum", "mean", "max", "min", "amax", "amin", "prod",
    "std", "var", "argmax", "argmin", "cumsum", "all", "any", "clip", "where", "sort", "argsort",
    "abs", "absolute", "exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "square", "sin",
    "cos", "tan", "tanh", "sinh", "cosh", "arcsin", "arccos", "arctan", "sign", "floor", "ceil",
    "trunc", "negative", "reciprocal", "isnan", "isinf", "isfinite", "round",
    "add", "subtract", "multiply", "divide", "true_divide", "power", "maximum", "minimum", "mod",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
]

ndarray = torch.Tensor
"""MXNet's ``mx.np.ndarray``: here simply ``torch.Tensor``."""

float16, float32, float64 = _onp.float16, _onp.float32, _onp.float64
int8, int32, int64, uint8, bool_ = _onp.int8, _onp.int32, _onp.int64, _onp.uint8, _onp.bool_
pi, e, inf, nan, newaxis = math.pi, math.e, math.inf, math.nan, None

CtxLike = Context | str | torch.device | None
Tensor = torch.Tensor


def _order(order: str) -> None:
    if order != "C":
        raise NotImplementedError(f"order={order!r}: only C order ('C') is supported, as in MXNet")


def _finish(t: Tensor, out: Tensor | None, op: str) -> Tensor:
    return t if out is None else write_out(t, out, op)  # type: ignore[no-any-return]


def _axis_arg(axis: Any, ndim: int) -> Any:
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        return tuple(norm_axis(a, ndim) for a in axis)
    return norm_axis(axis, ndim)


def _tensor(a: Any) -> Tensor:
    return a if isinstance(a, Tensor) else array(a)


# ---- creation ------------------------------------------------------------------------------


def array(object: Any, dtype: Any = None, ctx: CtxLike = None) -> Tensor:  # noqa: A002
    """A new array holding a copy of ``object``; Python data gives float32 unless ``dtype`` is given,
    a numpy array or a tensor keeps its dtype.  Scalars give 0-d arrays."""
    device = device_of(ctx)
    if isinstance(object, Tensor):
        out = object.detach().to(device=device, dtype=dtype_of(dtype, object.dtype), copy=True)
    else:
        keep = isinstance(object, _onp.ndarray)
        src = _onp.array(object, order="C")  # a C-ordered copy (ascontiguousarray would make 0-d 1-d)
        if src.dtype.kind in "USOV":  # strings, objects (ragged lists), records
            raise TypeError(f"mx.np.array: cannot make a numeric array from {object!r}")
        target = dtype_of(dtype, dtype_of(src.dtype) if keep else torch.float32)
        out = torch.from_numpy(src).to(device=device, dtype=target)
    return tag(out, ctx)


def _filled(shape: Any, value: float, dtype: Any, ctx: CtxLike, default: torch.dtype) -> Tensor:
    s = check_nonneg_shape(as_shape(shape))
    return tag(torch.full(s, value, dtype=dtype_of(dtype, default), device=device_of(ctx)), ctx)


def zeros(shape: Any, dtype: Any = None, order: str = "C", ctx: CtxLike = None) -> Tensor:
    """An array of zeros (float32 unless ``dtype``)."""
    _order(order)
    return _filled(shape, 0, dtype, ctx, torch.float32)


def ones(shape: Any, dtype: Any = None, order: str = "C", ctx: CtxLike = None) -> Tensor:
    """An array of ones (float32 unless ``dtype``)."""
    _order(order)
    return _filled(shape, 1, dtype, ctx, torch.float32)


def empty(shape: Any, dtype: Any = None, order: str = "C", ctx: CtxLike = None) -> Tensor:
    """An uninitialised array (float32 unless ``dtype``)."""
    _order(order)
    s = check_nonneg_shape(as_shape(shape))
    return tag(torch.empty(s, dtype=dtype_of(dtype), device=device_of(ctx)), ctx)


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", ctx: CtxLike = None,
         out: Tensor | None = None) -> Tensor:
    """An array of ``fill_value`` (float32 unless ``dtype``; a tensor fill value keeps its dtype)."""
    _order(order)
    if isinstance(fill_value, Tensor):
        s = check_nonneg_shape(as_shape(shape))
        res = fill_value.to(device_of(ctx), dtype_of(dtype, fill_value.dtype)).expand(s).clone()
        return _finish(tag(res, ctx), out, "full")
    return _finish(_filled(shape, fill_value, dtype, ctx, torch.float32), out, "full")


def arange(start: float, stop: float | None = None, step: float = 1, dtype: Any = None,
           ctx: CtxLike = None) -> Tensor:
    """Evenly spaced values in ``[start, stop)`` (float32 unless ``dtype``)."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be 0")
    n = builtins.max(0, math.ceil((stop - start) / step))
    vals = start + torch.arange(n, dtype=torch.float64, device=device_of(ctx)) * step
    return tag(vals.to(dtype_of(dtype)), ctx)


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, ctx: CtxLike = None) -> Any:
    """``num`` evenly spaced values from start to stop (float32 unless ``dtype``); with ``retstep``
    the pair (values, step)."""
    if not isinstance(num, int) or num < 0:
        raise ValueError(f"linspace: num must be a non-negative int, got {num!r}")
    if axis != 0:
        raise NotImplementedError("linspace: only axis=0 is supported for scalar start/stop")
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else math.nan
    vals = start + torch.arange(num, dtype=torch.float64, device=device_of(ctx)) * (step if div > 0 else 0)
    if endpoint and num > 1:
        vals[-1] = stop
    out = tag(vals.to(dtype_of(dtype)), ctx)
    return (out, step) if retstep else out


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, ctx: CtxLike = None) -> Tensor:
    """An N x M matrix with ones on diagonal ``k`` (float32 unless ``dtype``)."""
    m = N if M is None else M
    rows = torch.arange(N, device=device_of(ctx)).unsqueeze(1)
    cols = torch.arange(m, device=device_of(ctx)).unsqueeze(0)
    return tag((cols - rows == k).to(dtype_of(dtype)), ctx)


def identity(n: int, dtype: Any = None, ctx: CtxLike = None) -> Tensor:
    """The n x n identity matrix."""
    return eye(n, dtype=dtype, ctx=ctx)


def _like(a: Tensor, value: Any, dtype: Any, ctx: CtxLike, out: Tensor | None, op: str) -> Tensor:
    a = _tensor(a)
    device = a.device if ctx is None else device_of(ctx)
    res = torch.full(a.shape, value, dtype=dtype_of(dtype, a.dtype), device=device)
    return _finish(tag(res, ctx) if ctx is not None else res, out, op)


def zeros_like(a: Tensor, dtype: Any = None, order: str = "C", ctx: CtxLike = None,
               out: Tensor | None = None) -> Tensor:
    """Zeros with ``a``'s shape (and dtype and device unless given)."""
    _order(order)
    return _like(a, 0, dtype, ctx, out, "zeros_like")


def ones_like(a: Tensor, dtype: Any = None, order: str = "C", ctx: CtxLike = None,
              out: Tensor | None = None) -> Tensor:
    """Ones with ``a``'s shape (and dtype and device unless given)."""
    _order(order)
    return _like(a, 1, dtype, ctx, out, "ones_like")


def full_like(a: Tensor, fill_value: Any, dtype: Any = None, order: str = "C", ctx: CtxLike = None,
              out: Tensor | None = None) -> Tensor:
    """``fill_value`` with ``a``'s shape (and dtype and device unless given)."""
    _order(order)
    return _like(a, fill_value, dtype, ctx, out, "full_like")


def empty_like(prototype: Tensor, dtype: Any = None, order: str = "C") -> Tensor:
    """An uninitialised array with ``prototype``'s shape, dtype and device."""
    _order(order)
    p = _tensor(prototype)
    return torch.empty(p.shape, dtype=dtype_of(dtype, p.dtype), device=p.device)


def copy(a: Tensor, out: Tensor | None = None) -> Tensor:
    """A copy of ``a``."""
    return _finish(_tensor(a).clone(), out, "copy")


# ---- joining, splitting, shape -------------------------------------------------------------


def _seq(arrays: Sequence[Any], op: str) -> list[Tensor]:
    if isinstance(arrays, Tensor) or not isinstance(arrays, Sequence) or len(arrays) == 0:
        raise TypeError(f"{op} needs a non-empty list or tuple of arrays, got {type(arrays).__name__}")
    return [_tensor(a) for a in arrays]


def concatenate(seq: Sequence[Tensor], axis: int | None = 0, out: Tensor | None = None) -> Tensor:
    """The arrays joined along an existing ``axis`` (None: flattened first)."""
    ts = _seq(seq, "concatenate")
    if axis is None:
        return _finish(torch.cat([t.reshape(-1) for t in ts]), out, "concatenate")
    return _finish(torch.cat(ts, dim=norm_axis(axis, ts[0].dim())), out, "concatenate")


def stack(arrays: Sequence[Tensor], axis: int = 0, out: Tensor | None = None) -> Tensor:
    """The arrays joined along a new ``axis``."""
    ts = _seq(arrays, "stack")
    return _finish(torch.stack(ts, dim=norm_axis(axis, ts[0].dim() + 1)), out, "stack")


def vstack(arrays: Sequence[Tensor], out: Tensor | None = None) -> Tensor:
    """The arrays stacked row-wise (1-D arrays become rows)."""
    return _finish(torch.vstack(_seq(arrays, "vstack")), out, "vstack")


def hstack(arrays: Sequence[Tensor]) -> Tensor:
    """The arrays stacked column-wise (along axis 1; 1-D arrays along axis 0)."""
    return torch.hstack(_seq(arrays, "hstack"))


def _split(ary: Tensor, indices_or_sections: Any, axis: int, even: bool, op: str) -> list[Tensor]:
    a = _tensor(ary)
    ax = norm_axis(axis, a.dim())
    n = a.shape[ax]
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k < 1:
            raise ValueError(f"{op}: the number of sections must be positive, got {k}")
        if even and n % k:
            raise ValueError(f"{op}: axis {ax} of size {n} does not divide into {k} equal sections; "
                             "use array_split for unequal ones")
        base, extra = divmod(n, k)
        sizes = [base + 1] * extra + [base] * (k - extra)
        return list(torch.split(a, sizes, dim=ax))
    points = [builtins.min(builtins.max(int(i) if i >= 0 else n + int(i), 0), n) for i in indices_or_sections]
    bounds = [0, *points, n]
    return [a.narrow(ax, b, builtins.max(e - b, 0)) for b, e in zip(bounds[:-1], bounds[1:])]


def split(ary: Tensor, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """``ary`` cut into equal sections (an int) or at the given indices, along ``axis``."""
    return _split(ary, indices_or_sections, axis, True, "split")


def array_split(ary: Tensor, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """As :func:`split`, but sections may differ in size by one (the first ones are larger)."""
    return _split(ary, indices_or_sections, axis, False, "array_split")


def reshape(a: Tensor, newshape: Any, order: str = "C", out: Tensor | None = None) -> Tensor:
    """``a`` with a new shape (one entry may be -1)."""
    _order(order)
    return _finish(_tensor(a).reshape(as_shape(newshape, "newshape")), out, "reshape")


def ravel(x: Tensor, order: str = "C") -> Tensor:
    """``x`` flattened to 1-D."""
    _order(order)
    return _tensor(x).reshape(-1)


def transpose(a: Tensor, axes: Any = None) -> Tensor:
    """``a`` with its axes permuted (reversed when ``axes`` is None)."""
    t = _tensor(a)
    if axes is None:
        return t.permute(*reversed(range(t.dim())))
    return t.permute(*(norm_axis(x, t.dim()) for x in axes))


def expand_dims(a: Tensor, axis: int) -> Tensor:
    """``a`` with a new size-1 axis at ``axis``."""
    t = _tensor(a)
    return t.unsqueeze(norm_axis(axis, t.dim() + 1))


def squeeze(a: Tensor, axis: Any = None, out: Tensor | None = None) -> Tensor:
    """``a`` without its size-1 axes (those in ``axis``; an error for an axis of another size)."""
    t = _tensor(a)
    if axis is None:
        return _finish(t.squeeze(), out, "squeeze")
    axes = _axis_arg(axis, t.dim())
    axes = axes if isinstance(axes, tuple) else (axes,)
    for ax in axes:
        if t.shape[ax] != 1:
            raise ValueError(f"squeeze: axis {ax} of shape {tuple(t.shape)} has size {t.shape[ax]}, not 1")
    return _finish(t.squeeze(axes), out, "squeeze")


def swapaxes(a: Tensor, axis1: int, axis2: int) -> Tensor:
    """``a`` with two axes exchanged."""
    t = _tensor(a)
    return t.transpose(norm_axis(axis1, t.dim()), norm_axis(axis2, t.dim()))


def moveaxis(a: Tensor, source: Any, destination: Any) -> Tensor:
    """``a`` with axes moved from ``source`` to ``destination``."""
    from ..nd.ndarray import moveaxis as _moveaxis

    return _moveaxis(_tensor(a), source, destination)


def broadcast_to(array: Tensor, shape: Any) -> Tensor:  # noqa: A002
    """``array`` broadcast to ``shape`` (a copy, as MXNet's)."""
    return _tensor(array).broadcast_to(as_shape(shape)).clone()


def tile(A: Tensor, reps: Any) -> Tensor:
    """``A`` repeated ``reps`` times along each axis (numpy's tile)."""
    return _tensor(A).tile(as_shape(reps, "reps"))


def repeat(a: Tensor, repeats: int, axis: int | None = None) -> Tensor:
    """Each element repeated ``repeats`` times (along ``axis``; flattened when None)."""
    t = _tensor(a)
    if axis is None:
        return t.reshape(-1).repeat_interleave(repeats)
    return t.repeat_interleave(repeats, dim=norm_axis(axis, t.dim()))


def flip(m: Tensor, axis: Any = None, out: Tensor | None = None) -> Tensor:
    """``m`` reversed along ``axis`` (all axes when None)."""
    t = _tensor(m)
    axes = tuple(range(t.dim())) if axis is None else _axis_arg(axis, t.dim())
    return _finish(t.flip(axes if isinstance(axes, tuple) else (axes,)), out, "flip")


# ---- products ------------------------------------------------------------------------------


def dot(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """NumPy's dot: scalars multiply, vectors give a 0-d inner product, matrices multiply, and for
    N-D arrays the last axis of ``a`` is contracted with the second-to-last of ``b``."""
    x, y = _tensor(a), _tensor(b)
    if x.dim() == 0 or y.dim() == 0:
        res = x * y
    elif y.dim() == 1 or x.dim() <= 2 and y.dim() <= 2:
        res = torch.matmul(x, y)
    else:
        res = torch.tensordot(x, y, dims=([x.dim() - 1], [y.dim() - 2]))
    return _finish(res, out, "dot")


def matmul(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """Matrix product with NumPy's broadcasting rules (torch.matmul)."""
    return _finish(torch.matmul(_tensor(a), _tensor(b)), out, "matmul")


def tensordot(a: Tensor, b: Tensor, axes: Any = 2) -> Tensor:
    """Sum of products over the last ``axes`` axes of ``a`` and the first of ``b`` (or the given pairs)."""
    return torch.tensordot(_tensor(a), _tensor(b), dims=axes)


def einsum(*operands: Any, **kwargs: Any) -> Tensor:
    """Einstein summation: ``einsum('ij,jk->ik', a, b)``."""
    if kwargs.get("out") is not None:
        return _finish(torch.einsum(operands[0], *map(_tensor, operands[1:])), kwargs["out"], "einsum")
    return torch.einsum(operands[0], *map(_tensor, operands[1:]))


# ---- reductions ----------------------------------------------------------------------------


def sum(a: Tensor, axis: Any = None, dtype: Any = None, keepdims: bool = False, initial: Any = None,
        out: Tensor | None = None) -> Tensor:
    """Sum over ``axis`` (all when None); integers keep their dtype, bool gives int64."""
    t = _tensor(a)
    if dtype is not None:
        dt = dtype_of(dtype)
    elif t.dtype == torch.bool:
        dt = torch.int64
    else:
        dt = t.dtype
    ax = _axis_arg(axis, t.dim())
    res = torch.sum(t, dtype=dt) if ax is None and not keepdims else torch.sum(
        t, dim=ax if ax is not None else tuple(range(t.dim())), keepdim=keepdims, dtype=dt)
    if initial is not None:
        res = res + initial
    return _finish(res, out, "sum")


def mean(a: Tensor, axis: Any = None, dtype: Any = None, out: Tensor | None = None,
         keepdims: bool = False) -> Tensor:
    """Mean over ``axis`` (all when None); integer input gives float32."""
    t = _tensor(a)
    dt = dtype_of(dtype, t.dtype if t.is_floating_point() else torch.float32)
    ax = _axis_arg(axis, t.dim())
    dims = ax if ax is not None else tuple(range(t.dim()))
    return _finish(torch.mean(t.to(dt), dim=dims, keepdim=keepdims), out, "mean")


def _minmax(fn: Callable[..., Tensor], a: Tensor, axis: Any, keepdims: bool, out: Tensor | None,
            op: str) -> Tensor:
    t = _tensor(a)
    ax = _axis_arg(axis, t.dim())
    dims = ax if ax is not None else tuple(range(t.dim()))
    return _finish(fn(t, dim=dims, keepdim=keepdims), out, op)


def max(a: Tensor, axis: Any = None, keepdims: bool = False, out: Tensor | None = None) -> Tensor:
    """Maximum over ``axis`` (all when None)."""
    return _minmax(torch.amax, a, axis, keepdims, out, "max")


def min(a: Tensor, axis: Any = None, keepdims: bool = False, out: Tensor | None = None) -> Tensor:
    """Minimum over ``axis`` (all when None)."""
    return _minmax(torch.amin, a, axis, keepdims, out, "min")


amax, amin = max, min


def prod(a: Tensor, axis: Any = None, dtype: Any = None, out: Tensor | None = None,
         keepdims: bool = False) -> Tensor:
    """Product over ``axis`` (all when None)."""
    t = _tensor(a)
    dt = dtype_of(dtype, torch.int64 if t.dtype == torch.bool else t.dtype)
    ax = _axis_arg(axis, t.dim())
    res = t.to(dt)
    for d in sorted(ax if isinstance(ax, tuple) else range(t.dim()) if ax is None else (ax,), reverse=True):
        res = torch.prod(res, dim=d, keepdim=keepdims)
    return _finish(res, out, "prod")


def _moment(a: Tensor, axis: Any, dtype: Any, ddof: int, keepdims: bool, sqrt: bool) -> Tensor:
    t = _tensor(a)
    dt = dtype_of(dtype, t.dtype if t.is_floating_point() else torch.float32)
    ax = _axis_arg(axis, t.dim())
    dims = ax if ax is not None else tuple(range(t.dim()))
    fn = torch.std if sqrt else torch.var
    return fn(t.to(dt), dim=dims, correction=ddof, keepdim=keepdims)


def std(a: Tensor, axis: Any = None, dtype: Any = None, out: Tensor | None = None, ddof: int = 0,
        keepdims: bool = False) -> Tensor:
    """Standard deviation over ``axis`` (divisor ``n - ddof``)."""
    return _finish(_moment(a, axis, dtype, ddof, keepdims, True), out, "std")


def var(a: Tensor, axis: Any = None, dtype: Any = None, out: Tensor | None = None, ddof: int = 0,
        keepdims: bool = False) -> Tensor:
    """Variance over ``axis`` (divisor ``n - ddof``)."""
    return _finish(_moment(a, axis, dtype, ddof, keepdims, False), out, "var")


def argmax(a: Tensor, axis: int | None = None, out: Tensor | None = None) -> Tensor:
    """Index (int64) of the maximum along ``axis`` (of the flattened array when None)."""
    t = _tensor(a)
    dim = None if axis is None else norm_axis(axis, t.dim())
    return _finish(torch.argmax(t, dim=dim), out, "argmax")


def argmin(a: Tensor, axis: int | None = None, out: Tensor | None = None) -> Tensor:
    """Index (int64) of the minimum along ``axis`` (of the flattened array when None)."""
    t = _tensor(a)
    dim = None if axis is None else norm_axis(axis, t.dim())
    return _finish(torch.argmin(t, dim=dim), out, "argmin")


def cumsum(a: Tensor, axis: int | None = None, dtype: Any = None, out: Tensor | None = None) -> Tensor:
    """Cumulative sum along ``axis`` (of the flattened array when None)."""
    t = _tensor(a)
    dt = None if dtype is None else dtype_of(dtype)
    res = torch.cumsum(t.reshape(-1), 0, dtype=dt) if axis is None else torch.cumsum(
        t, norm_axis(axis, t.dim()), dtype=dt)
    return _finish(res, out, "cumsum")


def all(a: Tensor, axis: Any = None, keepdims: bool = False, out: Tensor | None = None) -> Tensor:
    """True where every element along ``axis`` is non-zero."""
    t = _tensor(a).bool()
    ax = _axis_arg(axis, t.dim())
    return _finish(torch.all(t, dim=ax if ax is not None else tuple(range(t.dim())), keepdim=keepdims), out,
                   "all")


def any(a: Tensor, axis: Any = None, keepdims: bool = False, out: Tensor | None = None) -> Tensor:
    """True where some element along ``axis`` is non-zero."""
    t = _tensor(a).bool()
    ax = _axis_arg(axis, t.dim())
    return _finish(torch.any(t, dim=ax if ax is not None else tuple(range(t.dim())), keepdim=keepdims), out,
                   "any")


def clip(a: Tensor, a_min: Any, a_max: Any, out: Tensor | None = None) -> Tensor:
    """``a`` limited to ``[a_min, a_max]`` (either may be None)."""
    if a_min is None and a_max is None:
        raise ValueError("clip: a_min and a_max cannot both be None")
    return _finish(torch.clamp(_tensor(a), a_min, a_max), out, "clip")


def where(condition: Tensor, x: Any = None, y: Any = None) -> Any:
    """``x`` where ``condition`` is non-zero else ``y``; with neither, the indices of non-zeros."""
    c = _tensor(condition)
    if x is None and y is None:
        return torch.nonzero(c, as_tuple=True)
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither")
    xt = x if isinstance(x, Tensor) else torch.as_tensor(x, dtype=torch.float32, device=c.device)
    yt = y if isinstance(y, Tensor) else torch.as_tensor(y, dtype=xt.dtype, device=c.device)
    return torch.where(c.bool(), xt, yt)


def sort(a: Tensor, axis: int | None = -1, kind: Any = None, order: Any = None) -> Tensor:
    """``a`` sorted along ``axis`` (the flattened array when None)."""
    t = _tensor(a)
    if axis is None:
        return torch.sort(t.reshape(-1), stable=True).values
    return torch.sort(t, dim=norm_axis(axis, t.dim()), stable=True).values


def argsort(a: Tensor, axis: int | None = -1, kind: Any = None, order: Any = None) -> Tensor:
    """Indices (int64) that sort ``a`` along ``axis``."""
    t = _tensor(a)
    if axis is None:
        return torch.sort(t.reshape(-1), stable=True).indices
    return torch.sort(t, dim=norm_axis(axis, t.dim()), stable=True).indices


# ---- elementwise ---------------------------------------------------------------------------


def _float_in(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    # MXNet's np math functions turn integer input into float32 (NumPy would give float64).
    def run(t: Tensor) -> Tensor:
        return fn(t if t.is_floating_point() or t.is_complex() else t.to(torch.float32))

    return run


def _unary(name: str, fn: Callable[[Tensor], Tensor], doc: str) -> Callable[..., Tensor]:
    def op(x: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
        return _finish(fn(_tensor(x)), out, name)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


def _binary(name: str, fn: Callable[[Any, Any], Tensor], doc: str) -> Callable[..., Tensor]:
    def op(x1: Any, x2: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
        if not isinstance(x1, Tensor):  # a number takes part as a 0-d array (it does not widen x2)
            x1 = torch.as_tensor(x1, device=x2.device) if isinstance(x2, Tensor) else _tensor(x1)
        return _finish(fn(x1, x2), out, name)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


abs = _unary("abs", torch.abs, "Absolute value, elementwise.")
absolute = abs
exp = _unary("exp", _float_in(torch.exp), "e ** x, elementwise.")
log = _unary("log", _float_in(torch.log), "Natural logarithm, elementwise.")
log2 = _unary("log2", _float_in(torch.log2), "Base-2 logarithm, elementwise.")
log10 = _unary("log10", _float_in(torch.log10), "Base-10 logarithm, elementwise.")
log1p = _unary("log1p", _float_in(torch.log1p), "log(1 + x), elementwise.")
expm1 = _unary("expm1", _float_in(torch.expm1), "exp(x) - 1, elementwise.")
sqrt = _unary("sqrt", _float_in(torch.sqrt), "Square root, elementwise.")
square = _unary("square", torch.square, "x * x, elementwise.")
sin = _unary("sin", _float_in(torch.sin), "Sine, elementwise.")
cos = _unary("cos", _float_in(torch.cos), "Cosine, elementwise.")
tan = _unary("tan", _float_in(torch.tan), "Tangent, elementwise.")
tanh = _unary("tanh", _float_in(torch.tanh), "Hyperbolic tangent, elementwise.")
sinh = _unary("sinh", _float_in(torch.sinh), "Hyperbolic sine, elementwise.")
cosh = _unary("cosh", _float_in(torch.cosh), "Hyperbolic cosine, elementwise.")
arcsin = _unary("arcsin", _float_in(torch.arcsin), "Inverse sine, elementwise.")
arccos = _unary("arccos", _float_in(torch.arccos), "Inverse cosine, elementwise.")
arctan = _unary("arctan", _float_in(torch.arctan), "Inverse tangent, elementwise.")
sign = _unary("sign", torch.sign, "-1, 0 or 1 by the sign of x, elementwise.")
floor = _unary("floor", torch.floor, "Largest integer <= x, elementwise.")
ceil = _unary("ceil", torch.ceil, "Smallest integer >= x, elementwise.")
trunc = _unary("trunc", torch.trunc, "x rounded toward zero, elementwise.")
negative = _unary("negative", torch.neg, "-x, elementwise.")
reciprocal = _unary("reciprocal", _float_in(torch.reciprocal), "1 / x, elementwise.")
isnan = _unary("isnan", torch.isnan, "True where x is NaN.")
isinf = _unary("isinf", torch.isinf, "True where x is +-inf.")
isfinite = _unary("isfinite", torch.isfinite, "True where x is neither NaN nor +-inf.")


def round(x: Any, decimals: int = 0, out: Tensor | None = None, **kwargs: Any) -> Tensor:
    """x rounded to ``decimals`` places, halves to even (NumPy's rule)."""
    return _finish(torch.round(_tensor(x), decimals=decimals), out, "round")


def _true_div(a: Any, b: Any) -> Tensor:
    res = torch.true_divide(a, b)
    return res.to(torch.float32) if res.dtype == torch.float64 and not _has_f64(a, b) else res


def _has_f64(*xs: Any) -> bool:
    return builtins.any(isinstance(x, Tensor) and x.dtype == torch.float64 for x in xs)


add = _binary("add", torch.add, "x1 + x2 with broadcasting.")
subtract = _binary("subtract", torch.subtract, "x1 - x2 with broadcasting.")
multiply = _binary("multiply", torch.multiply, "x1 * x2 with broadcasting.")
divide = _binary("divide", _true_div, "x1 / x2 with broadcasting (integers give float32).")
true_divide = divide
power = _binary("power", torch.pow, "x1 ** x2 with broadcasting.")
maximum = _binary("maximum", lambda a, b: torch.maximum(_tensor(a), _tensor(b)), "Elementwise maximum.")
minimum = _binary("minimum", lambda a, b: torch.minimum(_tensor(a), _tensor(b)), "Elementwise minimum.")
mod = _binary("mod", torch.remainder, "Remainder with the sign of x2 (NumPy's mod).")
equal = _binary("equal", torch.eq, "x1 == x2 (bool) with broadcasting.")
not_equal = _binary("not_equal", torch.ne, "x1 != x2 (bool) with broadcasting.")
greater = _binary("greater", torch.gt, "x1 > x2 (bool) with broadcasting.")
greater_equal = _binary("greater_equal", torch.ge, "x1 >= x2 (bool) with broadcasting.")
less = _binary("less", torch.lt, "x1 < x2 (bool) with broadcasting.")
less_equal = _binary("less_equal", torch.le, "x1 <= x2 (bool) with broadcasting.")
