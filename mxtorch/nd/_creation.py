"""Array creation: ``nd.array``, ``nd.zeros``, ``nd.arange`` ... returning NDArrays
(:mod:`mxtorch.nd._ndarray_type`).

Every function takes ``ctx`` (a Context, a string such as ``'gpu:0'`` or None for the current
context) and ``dtype`` (any name :func:`mxtorch._dtype.to_torch_dtype` reads; MXNet's default
is float32).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .. import engine
from ..context import Context
from . import sparse
from ._common import as_shape, check_nonneg_shape, device_of, dtype_of, mxnet_zero_dim, tag
from ._ndarray_type import returns_ndarray

__all__ = [
    "array",
    "from_numpy",
    "empty",
    "zeros",
    "ones",
    "full",
    "arange",
    "linspace",
    "eye",
    "zeros_like",
    "ones_like",
    "full_like",
    "cast",
    "Cast",
    "waitall",
]

CtxLike = Context | str | torch.device | None


def _check_stype(stype: Any) -> None:
    if stype not in (None, "default"):
        raise ValueError(
            f"storage type {stype!r} is not supported by mxtorch.nd creation functions: only 'default' "
            "(dense) arrays are; sparse arrays live in mxtorch.nd.sparse"
        )


def _fill_out(result: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    if out is None:
        return result
    if tuple(out.shape) != tuple(result.shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(result.shape)}")
    with torch.no_grad():
        out.copy_(result)
    return out


@returns_ndarray
def array(source_array: Any, ctx: CtxLike = None, dtype: Any = None) -> torch.Tensor:
    """A new tensor holding a copy of ``source_array`` (tensor, numpy array, list or scalar).

    As in MXNet the result is float32 unless ``dtype`` is given, except that a torch tensor
    keeps its own dtype.  A Python or numpy scalar (a 0-d source) gives shape (), as in MXNet 1.9.
    """
    if hasattr(source_array, "tocsr") and not isinstance(source_array, (torch.Tensor, np.ndarray)):
        return sparse.csr_matrix(source_array, ctx=ctx, dtype=dtype)  # scipy.sparse: csr (MXNet's array())
    device = device_of(ctx)
    if isinstance(source_array, torch.Tensor):
        target = dtype_of(dtype, source_array.dtype)
        out = source_array.detach().to(device=device, dtype=target, copy=True)
    else:
        target = dtype_of(dtype)
        try:
            src = np.array(source_array)
        except (ValueError, TypeError) as e:
            raise TypeError(
                f"cannot make an array from {type(source_array).__name__} {source_array!r}: {e}"
            ) from e
        if src.dtype == object:
            raise TypeError(
                f"cannot make an array from {source_array!r}: expected numbers or a rectangular nested list"
            )
        if src.dtype.kind in "US":
            raise TypeError(f"cannot make a numeric array from strings: {source_array!r}")
        # (ascontiguousarray makes a 0-d array 1-d: the reshape keeps the source's shape)
        out = torch.from_numpy(np.ascontiguousarray(src).reshape(src.shape)).to(device=device, dtype=target)
        mxnet_zero_dim(out)  # MXNet keeps a scalar's shape () here
    return tag(out, ctx)


@returns_ndarray
def from_numpy(ndarray: np.ndarray, zero_copy: bool = True) -> torch.Tensor:
    """A CPU tensor sharing memory with ``ndarray`` (keeps its dtype); a copy if not zero_copy.

    As in MXNet, zero_copy hands the memory to the array: the numpy array becomes read-only
    (write through the tensor), and it must be C-contiguous."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(ndarray).__name__}")
    if not zero_copy:
        return torch.from_numpy(np.ascontiguousarray(ndarray)).clone()
    if not ndarray.flags["C_CONTIGUOUS"]:
        raise ValueError("from_numpy with zero_copy=True needs a C-contiguous array: pass "
                         "np.ascontiguousarray(a), or zero_copy=False for a copy")
    t = torch.from_numpy(ndarray)
    ndarray.flags.writeable = False
    return t


@returns_ndarray
def empty(shape: Any, ctx: CtxLike = None, dtype: Any = None, stype: Any = None) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` (``stype`` 'row_sparse'/'csr': an empty sparse array)."""
    if stype not in (None, "default"):
        return sparse.empty(stype, shape, ctx=ctx, dtype=dtype)
    s = check_nonneg_shape(as_shape(shape))
    return tag(torch.empty(s, dtype=dtype_of(dtype), device=device_of(ctx)), ctx)


@returns_ndarray
def zeros(
    shape: Any, ctx: CtxLike = None, dtype: Any = None, stype: Any = None, **kwargs: Any
) -> torch.Tensor:
    """A tensor of zeros; ``shape`` is an int or a tuple (``stype`` 'row_sparse'/'csr': a sparse
    array with no stored values, as MXNet's ``nd.zeros(..., stype=...)``)."""
    if stype not in (None, "default"):
        if kwargs.get("out") is not None:
            raise ValueError("zeros: out= is for dense arrays; a sparse result is always a new array")
        return sparse.zeros(stype, shape, ctx=ctx, dtype=dtype)
    s = check_nonneg_shape(as_shape(shape))
    return _fill_out(
        tag(torch.zeros(s, dtype=dtype_of(dtype), device=device_of(ctx)), ctx), kwargs.get("out")
    )


@returns_ndarray
def ones(
    shape: Any, ctx: CtxLike = None, dtype: Any = None, stype: Any = None, **kwargs: Any
) -> torch.Tensor:
    """A tensor of ones; ``shape`` is an int or a tuple."""
    _check_stype(stype)
    s = check_nonneg_shape(as_shape(shape))
    return _fill_out(tag(torch.ones(s, dtype=dtype_of(dtype), device=device_of(ctx)), ctx), kwargs.get("out"))


@returns_ndarray
def full(
    shape: Any, val: float, ctx: CtxLike = None, dtype: Any = None, out: torch.Tensor | None = None
) -> torch.Tensor:
    """A tensor of ``shape`` filled with ``val``."""
    s = check_nonneg_shape(as_shape(shape))
    return _fill_out(tag(torch.full(s, val, dtype=dtype_of(dtype), device=device_of(ctx)), ctx), out)


@returns_ndarray
def arange(
    start: float,
    stop: float | None = None,
    step: float = 1.0,
    repeat: int = 1,
    infer_range: Any = None,
    ctx: CtxLike = None,
    dtype: Any = None,
) -> torch.Tensor:
    """Evenly spaced values in ``[start, stop)``, each repeated ``repeat`` times (float32 default)."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be 0")
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"arange: repeat must be a positive int, got {repeat!r}")
    n = max(0, math.ceil((stop - start) / step))
    device = device_of(ctx)
    vals = start + torch.arange(n, dtype=torch.float64, device=device) * step
    out = vals.to(dtype_of(dtype))
    if repeat > 1:
        out = out.repeat_interleave(repeat)
    return tag(out, ctx)


@returns_ndarray
def linspace(
    start: float, stop: float, num: int, endpoint: bool = True, ctx: CtxLike = None, dtype: Any = None
) -> torch.Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (``stop`` left out if not endpoint)."""
    if not isinstance(num, int) or num < 0:
        raise ValueError(f"linspace: num must be a non-negative int, got {num!r}")
    device = device_of(ctx)
    if endpoint:
        vals = torch.linspace(start, stop, num, dtype=torch.float64, device=device)
    else:
        vals = start + torch.arange(num, dtype=torch.float64, device=device) * ((stop - start) / max(num, 1))
    return tag(vals.to(dtype_of(dtype)), ctx)


@returns_ndarray
def eye(N: int, M: int = 0, k: int = 0, ctx: CtxLike = None, dtype: Any = None) -> torch.Tensor:
    """An ``N x M`` matrix (M=0 means N) with ones on diagonal ``k``."""
    if N < 0 or M < 0:
        raise ValueError(f"eye: N and M must be non-negative, got N={N!r}, M={M!r}")
    M = M or N
    device = device_of(ctx)
    rows = torch.arange(N, device=device).unsqueeze(1)
    cols = torch.arange(M, device=device).unsqueeze(0)
    return tag((cols - rows == k).to(dtype_of(dtype)), ctx)


def zeros_like(data: torch.Tensor, ctx: CtxLike = None, dtype: Any = None) -> torch.Tensor:
    """Zeros with ``data``'s shape (and its dtype and device unless given)."""
    return _like(data, 0, ctx, dtype)


def ones_like(data: torch.Tensor, ctx: CtxLike = None, dtype: Any = None) -> torch.Tensor:
    """Ones with ``data``'s shape (and its dtype and device unless given)."""
    return _like(data, 1, ctx, dtype)


def full_like(data: torch.Tensor, fill_value: float, ctx: CtxLike = None, dtype: Any = None) -> torch.Tensor:
    """``fill_value`` with ``data``'s shape (and its dtype and device unless given)."""
    return _like(data, fill_value, ctx, dtype)


def _like(data: torch.Tensor, val: float, ctx: CtxLike, dtype: Any) -> torch.Tensor:
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(data).__name__}")
    device = data.device if ctx is None else device_of(ctx)
    out = torch.full(data.shape, val, dtype=dtype_of(dtype, data.dtype), device=device)
    if ctx is not None:
        tag(out, ctx)
    elif getattr(data, "_mx_ctx", None) is not None:
        out._mx_ctx = data._mx_ctx  # type: ignore[attr-defined]
    return out


def cast(data: torch.Tensor, dtype: Any) -> torch.Tensor:
    """``data`` converted to ``dtype`` (differentiable for float targets)."""
    return data.to(dtype_of(dtype, None))


Cast = cast


def waitall() -> None:
    """Wait for all pending device work (CUDA synchronise), then raise the oldest operator failure
    not yet raised (:mod:`mxtorch.nd._failed`), clearing them all, as MXNet's ``waitall``."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    engine.wait_for_all()
