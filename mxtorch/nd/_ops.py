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
from collections.abc import Callable
from typing import Any

import torch

from . import _elemwise, _shape
from ._common import as_shape, dtype_of, is_float, norm_axes, norm_axis, to_index
from ._elemwise import *  # noqa: F403
from ._elemwise import _no0d
from ._shape import *  # noqa: F403

__all__ = [
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
    "batch_take",
    "norm",
    "argmax",
    "argmin",
    "argmax_channel",
    "topk",
    "sort",
    "argsort",
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
__all__ += _elemwise.__all__
__all__ += _shape.__all__

_bslice = builtins.slice
_bmax = builtins.max

Tensor = torch.Tensor


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
    keepdims = bool(keepdims)  # MXNet code passes 0/1
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
    var, mu = torch.var_mean(data, dim=ax, correction=0, keepdim=bool(keepdims))
    return [mu if keepdims else _no0d(mu), var if keepdims else _no0d(var)]


def norm(
    data: Tensor, ord: int = 2, axis: Any = None, out_dtype: Any = None, keepdims: bool = False
) -> Tensor:
    """The L1 (``ord=1``) or L2 (``ord=2``) norm over ``axis`` (all elements when None)."""
    if ord not in (1, 2):
        raise ValueError(f"norm: ord must be 1 or 2, got {ord!r}")
    axes = norm_axes(axis, data.dim())
    x = data if is_float(data) else data.float()
    out = torch.linalg.vector_norm(x, ord=ord, dim=axes, keepdim=bool(keepdims))
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
        out = fn(data, dim=ax, keepdim=bool(keepdims))
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
    take_rows = getattr(a, "_take_rows", None)  # a CSRNDArray's rows are a csr array (MXNet's)
    if take_rows is not None and ax == 0 and idx.dim() == 1:
        return take_rows(idx.to(device=a.device, dtype=torch.int64))  # type: ignore[no-any-return]
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


def batch_take(a: Tensor, indices: Any) -> Tensor:
    """``out[i] = a[i, indices[i]]`` for ``a`` of shape (n, m) (MXNet's deprecated form of pick;
    indices are clipped to [0, m))."""
    if a.dim() != 2:
        raise ValueError(f"batch_take: a must be 2-d (n, m), got shape {tuple(a.shape)}")
    return pick(a, indices, axis=1)


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
    if not isinstance(depth, int) or depth < 0:
        raise ValueError(f"one_hot: depth must be a non-negative int, got {depth!r}")
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
    rows, cols = int(data.shape[a1]), int(data.shape[a2])
    if not -rows <= k <= cols:  # MXNet's range (the two ends give an empty diagonal)
        raise ValueError(f"diag: k={k} is outside [-{rows}, {cols}] for planes of shape ({rows}, {cols})")
    return torch.diagonal(data, offset=k, dim1=a1, dim2=a2)


def _block(data: Tensor, block_size: int, op: str) -> int:
    if data.dim() != 4:
        raise ValueError(f"{op} needs a 4-D (N, C, H, W) array, got shape {tuple(data.shape)}")
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"{op}: block_size must be a positive int, got {block_size!r}")
    if 0 in data.shape:  # MXNet refuses an empty dimension here
        raise ValueError(f"{op}: every dimension must be non-empty, got shape {tuple(data.shape)}")
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
