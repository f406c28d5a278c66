"""Storage types, constructors, conversion and accessors of ``mx.nd.sparse`` (see :mod:`mxtorch.nd.sparse`
for the representation); the operators live in :mod:`mxtorch.nd.sparse`, which re-exports all of this."""

from __future__ import annotations

import numbers
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from ..context import Context
from . import _sparse_ndarray
from ._common import as_shape, device_of, dtype_of, tag
from ._sparse_ndarray import BaseSparseNDArray, CSRNDArray, RowSparseNDArray, SparseNDArray

__all__ = [
    "BaseSparseNDArray",
    "SparseNDArray",
    "RowSparseNDArray",
    "CSRNDArray",
    "STYPES",
    "stype",
    "row_sparse_array",
    "csr_matrix",
    "zeros",
    "empty",
    "array",
    "tostype",
    "cast_storage",
    "data",
    "indices",
    "indptr",
    "row_sparse_parts",
    "from_row_parts",
]

STYPES = ("default", "row_sparse", "csr")
"""MXNet's storage types."""

CtxLike = Context | str | torch.device | None


# ---- storage types -------------------------------------------------------------------------


def stype(x: torch.Tensor) -> str:
    """MXNet's storage type of ``x``: ``'default'`` (dense), ``'row_sparse'`` or ``'csr'``.

    A COO tensor with more than one sparse dimension (``t.to_sparse()`` of a matrix) is none of
    MXNet's types: convert it with :func:`tostype` first.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"stype expects a torch.Tensor, got {type(x).__name__}")
    layout = x.layout
    if layout == torch.strided:
        return "default"
    if layout == torch.sparse_coo:
        if x.sparse_dim() == 1:
            return "row_sparse"
        raise ValueError(
            f"a sparse COO tensor with sparse_dim()={x.sparse_dim()} (shape {tuple(x.shape)}) is not one of "
            f"MXNet's storage types {STYPES}: convert it with mx.nd.sparse.tostype(x, 'row_sparse') or "
            "tostype(x, 'csr')"
        )
    if layout == torch.sparse_csr:
        return "csr"
    raise ValueError(f"layout {layout} is not one of MXNet's storage types {STYPES}; convert it with "
                     "x.to_dense() or x.to_sparse_csr()")


def _is_sparse(x: torch.Tensor) -> bool:
    return x.layout != torch.strided


def _mx_sparse(t: torch.Tensor) -> torch.Tensor:
    """``t`` in its MXNet sparse class (:mod:`mxtorch.nd._sparse_ndarray`) when it is sparse, else ``t``."""
    return _sparse_ndarray.as_sparse_ndarray(t)


def _check_stype_name(name: Any, op: str) -> str:
    if name not in STYPES:
        raise ValueError(f"{op}: storage type must be one of {STYPES}, got {name!r}")
    return str(name)


@contextmanager
def _quiet_csr() -> Iterator[None]:
    # torch warns once per process that CSR support is in beta; that is not the user's concern.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        yield


# ---- trusted builders (inputs already validated) -----------------------------------------


def _rsp(row_ids: torch.Tensor, rows: torch.Tensor, shape: Sequence[int], canonical: bool) -> torch.Tensor:
    """A row_sparse tensor from int64 ``row_ids`` and ``rows``; ``canonical``: ids sorted and unique."""
    out = torch.sparse_coo_tensor(row_ids.reshape(1, -1), rows, tuple(shape), check_invariants=False,
                                  is_coalesced=canonical)
    return _mx_sparse(out if canonical else out.coalesce())


def from_row_parts(row_ids: torch.Tensor, rows: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """A row_sparse tensor from sorted, unique int64 ``row_ids`` and their ``rows``, sharing their memory.

    Nothing is checked: this is for code that produced the parts itself (KVStores, optimizers);
    use :func:`row_sparse_array` for anything else.
    """
    return _rsp(row_ids, rows, shape, True)


def _empty_rsp(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    shape = tuple(shape)
    return _rsp(torch.empty(0, dtype=torch.int64, device=device),
                torch.empty((0, *shape[1:]), dtype=dtype, device=device), shape, True)


def _csr_from_coo(coo: torch.Tensor) -> torch.Tensor:
    with _quiet_csr():
        return coo.coalesce().to_sparse_csr()


def row_sparse_parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(row_ids, rows)`` of a row_sparse tensor: sorted unique int64 ids and their rows.

    Repeated row ids of an uncoalesced tensor (a gradient summed by autograd) are added.
    """
    if stype(x) != "row_sparse":
        raise ValueError(f"row_sparse_parts needs a row_sparse tensor, got storage type {stype(x)!r}")
    c = x if x.is_coalesced() else x.coalesce()
    return torch.Tensor.indices(c)[0], torch.Tensor.values(c)


# ---- argument coercion ---------------------------------------------------------------------


def _numpy_numbers(obj: Any, must: str, bad_kinds: str) -> np.ndarray:
    """``obj`` as a contiguous numpy array; TypeError ``must`` when it is not numbers (object dtype
    or a dtype kind in ``bad_kinds``)."""
    try:
        arr = np.asarray(obj)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{must}, got {type(obj).__name__}: {e}") from e
    if arr.dtype == object or arr.dtype.kind in bad_kinds:
        raise TypeError(f"{must}, got {obj!r}")
    return np.ascontiguousarray(arr)


def _values(obj: Any, what: str, dtype: Any, device: torch.device) -> torch.Tensor:
    """``obj`` as a tensor on ``device``: ``dtype`` if given, else an array's own (a tensor's, a numpy
    array's: MXNet's rule), else float32 (lists, numbers)."""
    if isinstance(obj, torch.Tensor):
        if _is_sparse(obj):
            raise TypeError(f"{what} must be a dense array, got a sparse tensor ({obj.layout})")
        return obj.detach().to(device=device, dtype=dtype_of(dtype, obj.dtype), copy=True)
    arr = _numpy_numbers(obj, f"{what} must be an array of numbers", "USV")
    t = torch.from_numpy(arr)
    own = t.dtype if isinstance(obj, np.ndarray) and t.dtype != torch.bool else torch.float32
    # a copy: the array never shares the caller's memory
    return t.to(device=device, dtype=dtype_of(dtype, own), copy=True)


def _ids(obj: Any, what: str, device: torch.device) -> torch.Tensor:
    """Integer ids (given as ints or integral floats, as MXNet allows) as a 1-D int64 tensor."""
    if isinstance(obj, torch.Tensor):
        if _is_sparse(obj):
            raise TypeError(f"{what} must be a dense 1-D array of integers, got a sparse tensor")
        t = obj.detach().to(device)
    else:
        arr = _numpy_numbers(obj, f"{what} must be a 1-D array of integers", "USVb")
        t = torch.from_numpy(arr).to(device, copy=True)
    if t.dim() == 0:
        t = t.reshape(1)
    if t.dim() != 1:
        raise ValueError(f"{what} must be 1-D, got shape {tuple(t.shape)}")
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{what} must hold integers, got dtype {t.dtype}")
    if t.is_floating_point():
        if t.numel() and not bool(torch.equal(t, t.trunc())):
            raise ValueError(f"{what} must hold whole numbers, got {t.tolist()[:8]}")
    return t.to(torch.int64)


def _check_range(ids: torch.Tensor, bound: int, what: str, shape: Sequence[int]) -> None:
    if ids.numel() == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= bound:
        bad = lo if lo < 0 else hi
        raise ValueError(f"{what} {bad} is out of range for shape {tuple(shape)}: it must be in [0, {bound})")


def _is_shape(obj: Any) -> bool:
    return isinstance(obj, (tuple, list, torch.Size)) and len(obj) > 0 and all(
        isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in obj)


def _finish(t: torch.Tensor, ctx: CtxLike) -> torch.Tensor:
    t = _mx_sparse(t)
    return tag(t, ctx) if ctx is not None else t


# ---- creation ------------------------------------------------------------------------------


def row_sparse_array(arg1: Any, shape: Any = None, ctx: CtxLike = None, dtype: Any = None) -> torch.Tensor:
    """A row_sparse array (MXNet's ``RowSparseNDArray``) as a torch COO tensor.

    ``arg1`` is one of:

    * ``(data, indices)``: ``data[i]`` is row ``indices[i]``; ``shape`` defaults to
      ``(max(indices) + 1, *data.shape[1:])``.  Unsorted ids are sorted; repeated ids summed.
    * a shape ``(D0, D1, ...)``: an all-zero array (no stored rows).
    * a dense array (tensor, numpy, nested list): its non-zero rows are kept.
    * a sparse tensor: converted (a copy).

    ``dtype`` defaults to float32 (a tensor's own dtype for tensors); ``ctx`` to the current
    context.
    """
    device = device_of(ctx)
    if isinstance(arg1, torch.Tensor) and _is_sparse(arg1):
        return _finish(_convert_sparse(arg1, "row_sparse", shape, dtype, device, "row_sparse_array"), ctx)
    if _is_shape(arg1):
        _check_shape_twice(arg1, shape, "row_sparse_array")
        return _finish(_empty_rsp(as_shape(arg1), dtype_of(dtype), device), ctx)
    if isinstance(arg1, tuple) and len(arg1) == 2:
        vals = _values(arg1[0], "row_sparse_array: data", dtype, device)
        ids = _ids(arg1[1], "row_sparse_array: indices", device)
        if vals.dim() == 0:
            raise ValueError("row_sparse_array: data must have at least one dimension (one entry per row id)")
        if vals.shape[0] != ids.numel():
            raise ValueError(f"row_sparse_array: data has {vals.shape[0]} rows but indices has {ids.numel()} "
                             "entries: give one row id per row of data")
        if shape is None:
            rows = int(ids.max()) + 1 if ids.numel() else 0
            full = (rows, *vals.shape[1:])
        else:
            full = as_shape(shape, "row_sparse_array: shape")
            if len(full) != vals.dim() or full[1:] != tuple(vals.shape[1:]):
                raise ValueError(f"row_sparse_array: shape {full} does not fit data rows of shape "
                                 f"{tuple(vals.shape[1:])}: expected (num_rows, *{tuple(vals.shape[1:])})")
        _check_range(ids, full[0], "row_sparse_array: row id", full)
        canonical = ids.numel() < 2 or bool((ids[1:] > ids[:-1]).all())
        return _finish(_rsp(ids, vals, full, canonical), ctx)
    if isinstance(arg1, tuple) and len(arg1) != 2:
        raise ValueError(f"row_sparse_array: a tuple argument must be (data, indices) or a shape, got a "
                         f"tuple of {len(arg1)} items")
    dense = _values(arg1, "row_sparse_array: source", dtype, device)
    if dense.dim() == 0:
        raise ValueError("row_sparse_array: a dense source must have at least one dimension")
    _check_given_shape(dense, shape, "row_sparse_array")
    return _finish(tostype(dense, "row_sparse"), ctx)


def _check_shape_twice(arg1: Any, shape: Any, op: str) -> None:
    if shape is not None and as_shape(shape, f"{op}: shape") != as_shape(arg1):
        raise ValueError(f"{op}: the shape {tuple(as_shape(arg1))} and shape={tuple(as_shape(shape))} "
                         "differ; give the shape once")


def _convert_sparse(
    src: torch.Tensor, stype: str, shape: Any, dtype: Any, device: torch.device, op: str
) -> torch.Tensor:
    """A sparse tensor as a new ``stype`` array on ``device`` (always a copy)."""
    src = src.detach().to(device=device, dtype=dtype_of(dtype, src.dtype))
    out = tostype(src, stype)
    out = out.clone() if out is src else out
    _check_given_shape(out, shape, op)
    return out


def _check_given_shape(t: torch.Tensor, shape: Any, op: str) -> None:
    if shape is not None and tuple(t.shape) != as_shape(shape, f"{op}: shape"):
        raise ValueError(f"{op}: the source has shape {tuple(t.shape)} but shape={tuple(as_shape(shape))} "
                         "was given")


def csr_matrix(arg1: Any, shape: Any = None, ctx: CtxLike = None, dtype: Any = None) -> torch.Tensor:
    """A 2-D csr matrix (MXNet's ``CSRNDArray``) as a ``torch.sparse_csr_tensor``.

    ``arg1`` is one of:

    * ``(data, indices, indptr)``: row ``i`` holds ``data[indptr[i]:indptr[i+1]]`` at columns
      ``indices[indptr[i]:indptr[i+1]]``; ``shape`` defaults to
      ``(len(indptr) - 1, max(indices) + 1)``.
    * ``(data, (row, col))``: COO triplets; repeated (row, col) entries are summed.
    * a shape ``(M, N)``: an all-zero matrix.
    * a dense 2-D array, a sparse tensor, or a scipy.sparse matrix (converted, a copy).
    """
    device = device_of(ctx)
    if isinstance(arg1, torch.Tensor) and _is_sparse(arg1):
        return _finish(_convert_sparse(arg1, "csr", shape, dtype, device, "csr_matrix"), ctx)
    if hasattr(arg1, "tocsr") and not isinstance(arg1, torch.Tensor):  # a scipy.sparse matrix
        m = arg1.tocsr(copy=True)
        m.sum_duplicates()
        arg1, shape = (m.data, m.indices, m.indptr), shape if shape is not None else m.shape
    if _is_shape(arg1):
        _check_shape_twice(arg1, shape, "csr_matrix")
        full = as_shape(arg1)
        if len(full) != 2:
            raise ValueError(f"csr_matrix: a csr matrix is 2-D, got shape {full}")
        vals = torch.empty(0, dtype=dtype_of(dtype), device=device)
        return _finish(_csr_checked(vals, torch.empty(0, dtype=torch.int64, device=device),
                                    torch.zeros(full[0] + 1, dtype=torch.int64, device=device), full), ctx)
    coo_form = isinstance(arg1, tuple) and len(arg1) == 2 and isinstance(arg1[1], (tuple, list))
    if coo_form and len(arg1[1]) == 2:
        vals = _values(arg1[0], "csr_matrix: data", dtype, device)
        r = _ids(arg1[1][0], "csr_matrix: row", device)
        c = _ids(arg1[1][1], "csr_matrix: col", device)
        if vals.dim() != 1 or not (vals.numel() == r.numel() == c.numel()):
            raise ValueError(f"csr_matrix: (data, (row, col)) need three 1-D arrays of one length, got "
                             f"{tuple(vals.shape)}, {tuple(r.shape)}, {tuple(c.shape)}")
        if shape is None:
            full = (int(r.max()) + 1 if r.numel() else 0, int(c.max()) + 1 if c.numel() else 0)
        else:
            full = _shape2(shape)
        _check_range(r, full[0], "csr_matrix: row", full)
        _check_range(c, full[1], "csr_matrix: column", full)
        coo = torch.sparse_coo_tensor(torch.stack([r, c]), vals, full, check_invariants=False)
        return _finish(_csr_from_coo(coo), ctx)
    if isinstance(arg1, tuple) and len(arg1) == 3:
        vals = _values(arg1[0], "csr_matrix: data", dtype, device)
        cols = _ids(arg1[1], "csr_matrix: indices", device)
        ptr = _ids(arg1[2], "csr_matrix: indptr", device)
        if vals.dim() != 1 or vals.numel() != cols.numel():
            raise ValueError(f"csr_matrix: data and indices must be 1-D of one length, got shapes "
                             f"{tuple(vals.shape)} and {tuple(cols.shape)}")
        if ptr.numel() < 1:
            raise ValueError("csr_matrix: indptr needs at least one entry (num_rows + 1 entries)")
        if shape is None:
            if not cols.numel():
                raise ValueError("csr_matrix: cannot infer the number of columns of a matrix with no stored "
                                 "entries: give shape=(num_rows, num_cols)")
            full = (ptr.numel() - 1, int(cols.max()) + 1)
        else:
            full = _shape2(shape)
            if ptr.numel() != full[0] + 1:
                raise ValueError(f"csr_matrix: indptr has {ptr.numel()} entries but shape {full} has "
                                 f"{full[0]} rows: indptr needs num_rows + 1 = {full[0] + 1}")
        return _finish(_csr_checked(vals, cols, ptr, full), ctx)
    if isinstance(arg1, tuple):
        raise ValueError("csr_matrix: a tuple argument must be (data, indices, indptr), (data, (row, col)) "
                         f"or a shape (M, N); got a tuple of {len(arg1)} items")
    dense = _values(arg1, "csr_matrix: source", dtype, device)
    if dense.dim() != 2:
        raise ValueError(f"csr_matrix: a dense source must be 2-D, got shape {tuple(dense.shape)}")
    _check_given_shape(dense, shape, "csr_matrix")
    return _finish(tostype(dense, "csr"), ctx)


def _shape2(shape: Any) -> tuple[int, int]:
    full = as_shape(shape, "csr_matrix: shape")
    if len(full) != 2 or min(full) < 0:
        raise ValueError(f"csr_matrix: shape must be (num_rows, num_cols), got {full}")
    return full[0], full[1]


def _csr_checked(vals: torch.Tensor, cols: torch.Tensor, ptr: torch.Tensor,
                 full: tuple[int, ...]) -> torch.Tensor:
    nnz = vals.numel()
    if int(ptr[0]) != 0 or int(ptr[-1]) != nnz:
        raise ValueError(f"csr_matrix: indptr must start at 0 and end at nnz={nnz}, got "
                         f"{int(ptr[0])} ... {int(ptr[-1])}")
    steps = ptr[1:] - ptr[:-1]
    if steps.numel() and int(steps.min()) < 0:
        raise ValueError(f"csr_matrix: indptr must not decrease, got {ptr.tolist()[:16]}")
    _check_range(cols, full[1], "csr_matrix: column index", full)
    rows = torch.repeat_interleave(torch.arange(full[0], device=ptr.device), steps)
    # sorted within each row, no repeats: (row, col) pairs strictly increasing in row-major order
    key = rows * max(full[1], 1) + cols
    if key.numel() > 1 and not bool((key[1:] > key[:-1]).all()):
        coo = torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, full, check_invariants=False)
        return _csr_from_coo(coo)
    with _quiet_csr():
        return torch.sparse_csr_tensor(ptr, cols, vals, full, check_invariants=False)


def zeros(stype: str, shape: Any, ctx: CtxLike = None, dtype: Any = None, **kwargs: Any) -> torch.Tensor:
    """An all-zero array of storage type ``stype`` ('row_sparse', 'csr' or 'default')."""
    if kwargs:
        raise TypeError(f"zeros: unexpected argument(s) {sorted(kwargs)}")
    name = _check_stype_name(stype, "zeros")
    full = as_shape(shape, "zeros: shape")
    device, dt = device_of(ctx), dtype_of(dtype)
    if name == "default":
        return _finish(torch.zeros(full, dtype=dt, device=device), ctx)
    if name == "row_sparse":
        if not full:
            raise ValueError("zeros: a row_sparse array needs at least one dimension")
        return _finish(_empty_rsp(full, dt, device), ctx)
    return csr_matrix(full, ctx=ctx, dtype=dt)


def empty(stype: str, shape: Any, ctx: CtxLike = None, dtype: Any = None) -> torch.Tensor:
    """Like :func:`zeros` (a sparse array with no stored entries is all zeros)."""
    return zeros(stype, shape, ctx, dtype)


def array(source_array: Any, ctx: CtxLike = None, dtype: Any = None) -> torch.Tensor:
    """A copy of a sparse array (same storage type), or a csr matrix from a scipy.sparse matrix.

    Dense sources are refused, as in MXNet: use :func:`row_sparse_array`, :func:`csr_matrix` or
    :func:`tostype` to choose the storage type.
    """
    if isinstance(source_array, torch.Tensor) and _is_sparse(source_array):
        kind = stype(source_array)
        maker = row_sparse_array if kind == "row_sparse" else csr_matrix
        return maker(source_array, ctx=ctx, dtype=dtype)
    if hasattr(source_array, "tocsr"):
        return csr_matrix(source_array, ctx=ctx, dtype=dtype)
    raise TypeError(f"mx.nd.sparse.array needs a sparse tensor or a scipy.sparse matrix, got "
                    f"{type(source_array).__name__}; for a dense source use row_sparse_array(x), "
                    "csr_matrix(x) or mx.nd.array(x)")


# ---- conversion ----------------------------------------------------------------------------


def _coo_to_rsp(coo: torch.Tensor) -> torch.Tensor:
    """Any COO tensor (sparse_dim >= 1) as row_sparse: group its entries by row."""
    coo = coo.coalesce()
    if coo.sparse_dim() == 1:
        return coo
    idx, vals = torch.Tensor.indices(coo), torch.Tensor.values(coo)
    row_ids, inverse = torch.unique_consecutive(idx[0], return_inverse=True)  # coalesced: rows sorted
    rows = torch.zeros((row_ids.numel(), *coo.shape[1:]), dtype=vals.dtype, device=vals.device)
    rows[(inverse, *idx[1:])] = vals
    return _rsp(row_ids, rows, coo.shape, True)


def _rsp_to_coo2(x: torch.Tensor) -> torch.Tensor:
    """A 2-D row_sparse tensor as a 2-D COO tensor of its non-zero entries."""
    row_ids, rows = row_sparse_parts(x)
    i, j = (rows != 0).nonzero(as_tuple=True)
    return torch.sparse_coo_tensor(torch.stack([row_ids[i], j]), rows[i, j], x.shape, check_invariants=False,
                                   is_coalesced=True)


def tostype(x: torch.Tensor, stype: str) -> torch.Tensor:
    """``x`` converted to storage type ``stype`` ('default', 'row_sparse' or 'csr').

    Sparse results are :class:`SparseNDArray` tensors (elementwise math falls back to dense
    where torch's sparse kernels refuse it, as in MXNet).
    """
    out = _tostype(x, stype)
    return out if out is x else _mx_sparse(out)


def _tostype(x: torch.Tensor, stype: str) -> torch.Tensor:
    """:func:`tostype` before the result is made a :class:`SparseNDArray`.

    From dense the result is compact: all-zero rows (row_sparse) or zero entries (csr) are not
    stored.  ``x`` itself is returned when it already has that storage type (row_sparse: once
    coalesced).  csr needs a 2-D array.
    """
    target = _check_stype_name(stype, "tostype")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"tostype expects a torch.Tensor, got {type(x).__name__}")
    layout = x.layout
    if target == "default":
        return x if layout == torch.strided else x.to_dense()
    if layout not in (torch.strided, torch.sparse_coo, torch.sparse_csr):
        x = x.to_dense()
        layout = torch.strided
    if target == "row_sparse":
        if layout == torch.sparse_coo:
            return _coo_to_rsp(x)
        if layout == torch.sparse_csr:
            return _coo_to_rsp(x.to_sparse_coo())
        if x.dim() == 0:
            raise ValueError("tostype: a row_sparse array needs at least one dimension, got a 0-d tensor")
        with torch.no_grad():
            flat = x.reshape(x.shape[0], -1) if x.shape[0] else x.reshape(0, 1)
            row_ids = (flat != 0).any(dim=1).nonzero(as_tuple=True)[0]
            return _rsp(row_ids, x.detach().index_select(0, row_ids), x.shape, True)
    if x.dim() != 2:
        raise ValueError(f"tostype: a csr array is 2-D, got shape {tuple(x.shape)}; reshape it to a matrix "
                         "first")
    if layout == torch.sparse_csr:
        return x
    if layout == torch.sparse_coo:
        coo = _rsp_to_coo2(x) if x.sparse_dim() == 1 else x
        return _csr_from_coo(coo)
    with _quiet_csr(), torch.no_grad():
        return x.detach().to_sparse_csr()


def cast_storage(data: torch.Tensor, stype: str) -> torch.Tensor:
    """MXNet's ``nd.cast_storage(data, stype)``: :func:`tostype` under the operator's name.

    Recorded, it passes the gradient through unchanged (as dense values), as MXNet's operator does."""
    if data.requires_grad and torch.is_grad_enabled():
        return _CastStorage.apply(data, stype)  # type: ignore[no-any-return]
    return tostype(data, stype)


class _CastStorage(torch.autograd.Function):
    """tostype in the autograd graph: the identity on values, whatever the storage types."""

    @staticmethod
    def forward(ctx: Any, data: torch.Tensor, stype: str) -> torch.Tensor:  # type: ignore[override]
        ctx.dense = data.layout == torch.strided
        out = _tostype(data.detach(), stype)
        return out.clone() if out is data or out.layout == torch.strided and out._base is not None else out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return (grad.to_dense() if ctx.dense and grad.layout != torch.strided else grad), None


# ---- accessors -----------------------------------------------------------------------------


def _part(x: torch.Tensor, rsp_part: int, csr_part: str, dense_error: str) -> torch.Tensor:
    """Part ``rsp_part`` of :func:`row_sparse_parts` or the csr tensor's ``csr_part()``; dense raises."""
    kind = stype(x)
    if kind == "row_sparse":
        return row_sparse_parts(x)[rsp_part]
    if kind == "csr":
        return getattr(x, csr_part)()
    raise ValueError(dense_error)


def data(x: torch.Tensor) -> torch.Tensor:
    """The stored values: rows of a row_sparse array (nnz, \\*row_shape); values of a csr matrix (nnz,)."""
    return _part(x, 1, "values", "data(): a dense array has no separate data array; it is its own data")


def indices(x: torch.Tensor) -> torch.Tensor:
    """Row ids of a row_sparse array, or column ids of a csr matrix (int64, 1-D)."""
    msg = "indices(): a dense array has no indices; convert it with tostype first"
    return _part(x, 0, "col_indices", msg)


def indptr(x: torch.Tensor) -> torch.Tensor:
    """Row pointers of a csr matrix (int64, num_rows + 1 entries)."""
    if stype(x) != "csr":
        raise ValueError(f"indptr(): only a csr matrix has indptr, got storage type {stype(x)!r}")
    return x.crow_indices()


_sparse_ndarray.use_storage(sys.modules[__name__])
