"""``mx.nd.sparse``: MXNet's ``row_sparse`` and ``csr`` storage on torch sparse tensors.

There are no sparse array classes: a sparse array is a torch tensor with a sparse layout.

* ``row_sparse`` (MXNet's ``RowSparseNDArray``) is a torch sparse COO tensor with
  ``sparse_dim() == 1``: ``indices()`` has shape (1, nnz) and holds the row ids, ``values()``
  has shape (nnz, \\*row_shape) and holds those rows.  ``torch.nn.functional.embedding(...,
  sparse=True)`` produces gradients in exactly this form.
* ``csr`` (``CSRNDArray``) is a ``torch.sparse_csr_tensor``: a 2-D matrix given by ``data``
  (values), ``indices`` (column of each value) and ``indptr`` (where each row starts).
* ``default`` is an ordinary dense (strided) tensor.

Functions here return canonical arrays: row ids sorted and unique (a coalesced COO tensor),
column ids sorted within each row.  Inputs may be unsorted and may repeat a row (or a
(row, column) entry): such entries are summed, as torch's ``coalesce`` does.  Example::

    >>> from mxtorch.nd import sparse
    >>> x = sparse.row_sparse_array(([[1., 2.], [3., 4.]], [3, 0]), shape=(5, 2))
    >>> sparse.stype(x), sparse.indices(x).tolist(), sparse.data(x).tolist()
    ('row_sparse', [0, 3], [[3.0, 4.0], [1.0, 2.0]])
    >>> sparse.tostype(x, 'default').shape
    torch.Size([5, 2])

Semantics follow MXNet's ``mxnet.ndarray.sparse`` documentation (``dot(csr.T, dense)`` is
row_sparse, ``retain`` keeps the listed rows, ``add`` of two row_sparse arrays stays
row_sparse).  Autograd flows through the dense operands of ``dot``; the sparse results of
``tostype`` and the constructors are plain data.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from ..context import Context
from ._common import as_shape, device_of, dtype_of, tag

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
    "retain",
    "dot",
    "add",
    "elemwise_add",
    "subtract",
    "elemwise_sub",
    "multiply",
    "elemwise_mul",
    "add_n",
    "ElementWiseSum",
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


class _StorageTypeMeta(type):
    """``isinstance(t, CSRNDArray)`` asks for a tensor's storage type: the classes have no instances."""

    _stypes: tuple[str, ...] = ()

    def __instancecheck__(cls, obj: Any) -> bool:
        if not isinstance(obj, torch.Tensor):
            return False
        layout = obj.layout
        if layout == torch.sparse_csr:
            kind = "csr"
        elif layout == torch.sparse_coo and obj.sparse_dim() == 1:
            kind = "row_sparse"
        else:
            return False
        return kind in cls._stypes

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{cls.__name__} has no instances in mxtorch: sparse arrays are torch tensors with a sparse "
            "layout; make one with mx.nd.sparse.csr_matrix(...), row_sparse_array(...) or x.tostype(...)"
        )


class BaseSparseNDArray(metaclass=_StorageTypeMeta):
    """MXNet's sparse array base class, for ``isinstance``: true for row_sparse and csr tensors."""

    _stypes: tuple[str, ...] = ("row_sparse", "csr")


class RowSparseNDArray(BaseSparseNDArray):
    """MXNet's row_sparse array class, for ``isinstance``: a COO tensor with one sparse dimension."""

    _stypes = ("row_sparse",)


class CSRNDArray(BaseSparseNDArray):
    """MXNet's csr array class, for ``isinstance``: a ``torch.sparse_csr`` tensor."""

    _stypes = ("csr",)


def _is_sparse(x: torch.Tensor) -> bool:
    return x.layout != torch.strided


def _densified(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.layout != torch.strided:
        return value.to_dense()
    if isinstance(value, (list, tuple)):
        return type(value)(_densified(v) for v in value)
    return value


class SparseNDArray(torch.Tensor):
    """The tensor type of the sparse arrays mxtorch makes (row_sparse and csr).

    A plain torch sparse tensor refuses many elementwise operations (``rsp - 1``,
    ``rsp - dense``, ``dense + csr`` ...) that MXNet computes through a dense fallback, as its
    storage-type inference does.  An operation torch's sparse kernels refuse is retried on the
    dense values here; one they support runs as it is, and keeps a sparse result sparse.  Dense
    tensors never pass through this class, so torch code pays nothing for it.
    """

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            try:
                out = func(*args, **kwargs)
            except (RuntimeError, NotImplementedError, TypeError) as first:
                try:
                    out = func(*_densified(args), **_densified(kwargs))
                except Exception:
                    raise first from None
        if type(out) is torch.Tensor and out.layout != torch.strided:
            out = torch.Tensor._make_subclass(cls, out, out.requires_grad)
        return out


def _mx_sparse(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a :class:`SparseNDArray` when it is sparse (the same storage), else ``t``."""
    if t.layout == torch.strided or isinstance(t, SparseNDArray):
        return t
    return torch.Tensor._make_subclass(SparseNDArray, t, t.requires_grad)


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
    return c.indices()[0], c.values()


# ---- argument coercion ---------------------------------------------------------------------


def _values(obj: Any, what: str, dtype: Any, device: torch.device) -> torch.Tensor:
    """``obj`` as a tensor on ``device``: float32 unless ``dtype`` is given or a tensor has its own."""
    if isinstance(obj, torch.Tensor):
        if _is_sparse(obj):
            raise TypeError(f"{what} must be a dense array, got a sparse tensor ({obj.layout})")
        return obj.detach().to(device=device, dtype=dtype_of(dtype, obj.dtype), copy=True)
    try:
        arr = np.asarray(obj)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what} must be an array of numbers, got {type(obj).__name__}: {e}") from e
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise TypeError(f"{what} must be an array of numbers, got {obj!r}")
    return torch.from_numpy(np.ascontiguousarray(arr)).to(device=device, dtype=dtype_of(dtype))


def _ids(obj: Any, what: str, device: torch.device) -> torch.Tensor:
    """Integer ids (given as ints or integral floats, as MXNet allows) as a 1-D int64 tensor."""
    if isinstance(obj, torch.Tensor):
        if _is_sparse(obj):
            raise TypeError(f"{what} must be a dense 1-D array of integers, got a sparse tensor")
        t = obj.detach().to(device)
    else:
        try:
            arr = np.asarray(obj)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{what} must be a 1-D array of integers, got {type(obj).__name__}: {e}") from e
        if arr.dtype == object or arr.dtype.kind in "USVb":
            raise TypeError(f"{what} must be a 1-D array of integers, got {obj!r}")
        t = torch.from_numpy(np.ascontiguousarray(arr)).to(device)
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
        src = arg1.detach().to(device=device, dtype=dtype_of(dtype, arg1.dtype))
        out = tostype(src, "row_sparse")
        out = out.clone() if out is src else out
        _check_given_shape(out, shape, "row_sparse_array")
        return _finish(out, ctx)
    if _is_shape(arg1):
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
        src = arg1.detach().to(device=device, dtype=dtype_of(dtype, arg1.dtype))
        out = tostype(src, "csr")
        out = out.clone() if out is src else out
        _check_given_shape(out, shape, "csr_matrix")
        return _finish(out, ctx)
    if hasattr(arg1, "tocsr") and not isinstance(arg1, torch.Tensor):  # a scipy.sparse matrix
        m = arg1.tocsr(copy=True)
        m.sum_duplicates()
        arg1, shape = (m.data, m.indices, m.indptr), shape if shape is not None else m.shape
    if _is_shape(arg1):
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
            full = (ptr.numel() - 1, int(cols.max()) + 1 if cols.numel() else 0)
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
    idx, vals = coo.indices(), coo.values()
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
    """MXNet's ``nd.cast_storage(data, stype)``: :func:`tostype` under the operator's name."""
    return tostype(data, stype)


# ---- accessors -----------------------------------------------------------------------------


def data(x: torch.Tensor) -> torch.Tensor:
    """The stored values: rows of a row_sparse array (nnz, \\*row_shape); values of a csr matrix (nnz,)."""
    kind = stype(x)
    if kind == "row_sparse":
        return row_sparse_parts(x)[1]
    if kind == "csr":
        return x.values()
    raise ValueError("data(): a dense array has no separate data array; it is its own data")


def indices(x: torch.Tensor) -> torch.Tensor:
    """Row ids of a row_sparse array, or column ids of a csr matrix (int64, 1-D)."""
    kind = stype(x)
    if kind == "row_sparse":
        return row_sparse_parts(x)[0]
    if kind == "csr":
        return x.col_indices()
    raise ValueError("indices(): a dense array has no indices; convert it with tostype first")


def indptr(x: torch.Tensor) -> torch.Tensor:
    """Row pointers of a csr matrix (int64, num_rows + 1 entries)."""
    if stype(x) != "csr":
        raise ValueError(f"indptr(): only a csr matrix has indptr, got storage type {stype(x)!r}")
    return x.crow_indices()


# ---- operators -----------------------------------------------------------------------------


def retain(data: torch.Tensor, indices: Any) -> torch.Tensor:
    """The row_sparse array keeping only the rows of ``data`` listed in ``indices`` (any order)."""
    if stype(data) != "row_sparse":
        raise ValueError(f"retain needs a row_sparse array, got storage type {stype(data)!r}")
    ids, rows = row_sparse_parts(data)
    keep = _ids(indices, "retain: indices", ids.device)
    _check_range(keep, data.shape[0], "retain: row id", data.shape)
    mask = torch.isin(ids, keep)
    return _rsp(ids[mask], rows[mask], data.shape, True)


def _t(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(-2, -1) if x.dim() >= 2 else x


def dot(lhs: torch.Tensor, rhs: torch.Tensor, transpose_a: bool = False, transpose_b: bool = False,
        forward_stype: str | None = None) -> torch.Tensor:
    """Matrix product with sparse operands, with MXNet's result storage types:

    * ``dot(csr, dense) = dense``, ``dot(csr.T, dense) = row_sparse`` (``transpose_a=True``),
    * ``dot(csr, row_sparse) = dense``, ``dot(row_sparse, dense) = dense``,
    * ``dot(dense, csr) = dense``, ``dot(dense, dense) = dense``.

    ``forward_stype`` converts the result (e.g. 'default').  A sparse ``rhs`` cannot be
    transposed (``transpose_b``); transpose the dense operand instead.
    """
    ls, rs = stype(lhs), stype(rhs)
    if transpose_b and rs != "default":
        raise ValueError(f"dot: transpose_b is not available for a {rs} rhs; pass its transpose instead")
    r = _t(rhs) if transpose_b else rhs
    if ls == "csr" and rs == "default":
        if r.dim() != 2 or r.shape[0] != (lhs.shape[1] if not transpose_a else lhs.shape[0]):
            raise ValueError(_dot_shapes(lhs, r, transpose_a))
        out = _csr_t_dot(lhs, r) if transpose_a else torch.sparse.mm(lhs, r)
    elif ls == "csr" and rs == "row_sparse":
        if transpose_a:
            raise ValueError("dot: transpose_a with a csr lhs needs a dense rhs")
        out = _csr_dot_rsp(lhs, r)
    elif ls == "row_sparse" and rs == "default":
        if transpose_a or lhs.dim() != 2:
            raise ValueError("dot: a row_sparse lhs must be 2-D and not transposed")
        if r.dim() != 2 or r.shape[0] != lhs.shape[1]:
            raise ValueError(_dot_shapes(lhs, r, False))
        ids, rows = row_sparse_parts(lhs)
        out = torch.zeros((lhs.shape[0], r.shape[1]), dtype=torch.result_type(rows, r), device=r.device)
        out = out.index_copy(0, ids, rows @ r)
    elif ls == "default" and rs == "csr":
        a = _t(lhs) if transpose_a else lhs
        if a.dim() != 2 or a.shape[1] != r.shape[0]:
            raise ValueError(_dot_shapes(a, r, False))
        out = _t(torch.sparse.mm(r.to_sparse_coo().t(), _t(a)))
    elif ls == "default" and rs == "default":
        a = _t(lhs) if transpose_a else lhs
        out = torch.matmul(a, r)
    else:
        raise ValueError(f"dot: {ls} x {rs} is not available; convert one operand with tostype")
    return tostype(out, forward_stype) if forward_stype is not None else out


def _dot_shapes(a: torch.Tensor, b: torch.Tensor, transpose_a: bool) -> str:
    shown = f"{tuple(a.shape)}{'.T' if transpose_a else ''}"
    return f"dot: shapes {shown} and {tuple(b.shape)} do not fit a matrix product"


def _csr_t_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a.T @ b`` for csr ``a``, as row_sparse: only columns of ``a`` with entries give rows."""
    coo = a.to_sparse_coo().coalesce()
    r, c = coo.indices()
    contrib = coo.values().unsqueeze(1) * b.index_select(0, r)
    row_ids, inverse = torch.unique(c, sorted=True, return_inverse=True)
    rows = torch.zeros((row_ids.numel(), b.shape[1]), dtype=contrib.dtype, device=b.device)
    rows = rows.index_add(0, inverse, contrib)
    return _rsp(row_ids, rows, (a.shape[1], b.shape[1]), True)


def _csr_dot_rsp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for csr ``a`` and row_sparse ``b`` (2-D), without densifying ``b``."""
    if b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(_dot_shapes(a, b, False))
    ids, rows = row_sparse_parts(b)
    coo = a.to_sparse_coo().coalesce()
    dt = torch.result_type(coo.values(), rows)
    out = torch.zeros((a.shape[0], b.shape[1]), dtype=dt, device=rows.device)
    if ids.numel() == 0:
        return out
    r, c = coo.indices()
    pos = torch.searchsorted(ids, c).clamp_(max=ids.numel() - 1)
    hit = ids[pos] == c  # entries of a whose column is a row stored in b
    contrib = coo.values()[hit].unsqueeze(1) * rows.index_select(0, pos[hit])
    return out.index_add(0, r[hit], contrib.to(out.dtype))


def _same_shape(op: str, a: torch.Tensor, b: torch.Tensor) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} differ; element-wise "
                         "operations need equal shapes")


def add(lhs: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Element-wise sum: row_sparse + row_sparse = row_sparse, csr + csr = csr, otherwise dense."""
    _same_shape("add", lhs, rhs)
    ls, rs = stype(lhs), stype(rhs)
    if ls == rs == "row_sparse":
        li, lv = row_sparse_parts(lhs)
        ri, rv = row_sparse_parts(rhs)
        return _rsp(torch.cat([li, ri]), torch.cat([lv, rv.to(lv.dtype)]), lhs.shape, False)
    if ls == rs == "csr":
        return _csr_from_coo(lhs.to_sparse_coo() + rhs.to_sparse_coo())
    if ls == rs == "default":
        return lhs + rhs
    dense, sp = (lhs, rhs) if ls == "default" else (rhs, lhs)
    out = dense.clone()
    if stype(sp) == "row_sparse":
        ids, rows = row_sparse_parts(sp)
        return out.index_add(0, ids, rows.to(out.dtype))
    coo = sp.to_sparse_coo().coalesce()
    return out.index_put(tuple(coo.indices()), coo.values().to(out.dtype), accumulate=True)


elemwise_add = add


def _neg(x: torch.Tensor) -> torch.Tensor:
    if stype(x) == "row_sparse":
        ids, rows = row_sparse_parts(x)
        return _rsp(ids, -rows, x.shape, True)
    return -x


def subtract(lhs: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Element-wise difference, with the storage types of :func:`add`."""
    return add(lhs, _neg(rhs))


elemwise_sub = subtract


def multiply(lhs: torch.Tensor | float, rhs: torch.Tensor | float) -> torch.Tensor:
    """Element-wise product: sparse * scalar keeps the storage type; row_sparse * dense and
    row_sparse * row_sparse are row_sparse (only rows stored in the sparse operand(s))."""
    if not isinstance(lhs, torch.Tensor):
        lhs, rhs = rhs, lhs
    if not isinstance(lhs, torch.Tensor):
        raise TypeError("multiply needs at least one array")
    ls = stype(lhs)
    if not isinstance(rhs, torch.Tensor):
        if not isinstance(rhs, numbers.Number):
            raise TypeError(f"multiply: cannot multiply by {type(rhs).__name__}")
        if ls == "row_sparse":
            ids, rows = row_sparse_parts(lhs)
            return _rsp(ids, rows * rhs, lhs.shape, True)
        return lhs * rhs
    _same_shape("multiply", lhs, rhs)
    rs = stype(rhs)
    if ls == rs == "default":
        return lhs * rhs
    if rs == "row_sparse" and ls == "default":
        lhs, rhs, ls, rs = rhs, lhs, rs, ls
    if ls == "row_sparse" and rs == "default":
        ids, rows = row_sparse_parts(lhs)
        return _rsp(ids, rows * rhs.index_select(0, ids), lhs.shape, True)
    if ls == rs == "row_sparse":
        li, lv = row_sparse_parts(lhs)
        ri, rv = row_sparse_parts(rhs)
        common = li[torch.isin(li, ri)]
        lpos = torch.searchsorted(li, common)
        rpos = torch.searchsorted(ri, common)
        return _rsp(common, lv.index_select(0, lpos) * rv.index_select(0, rpos), lhs.shape, True)
    raise ValueError(f"multiply: {ls} * {rs} is not available; convert an operand with tostype")


elemwise_mul = multiply


def add_n(*args: torch.Tensor) -> torch.Tensor:
    """Sum of several arrays: row_sparse when all are row_sparse, else dense."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    if not args:
        raise ValueError("add_n needs at least one array")
    for a in args[1:]:
        _same_shape("add_n", args[0], a)
    if all(stype(a) == "row_sparse" for a in args):
        parts = [row_sparse_parts(a) for a in args]
        dt = parts[0][1].dtype
        return _rsp(torch.cat([p[0] for p in parts]), torch.cat([p[1].to(dt) for p in parts]), args[0].shape,
                    len(args) == 1)
    out = tostype(args[0], "default").clone()
    for a in args[1:]:
        out = add(out, a)
    return out


ElementWiseSum = add_n
