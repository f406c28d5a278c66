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
import sys
from typing import Any

import torch

from ..base import MXNetError
from . import _sparse_storage
from ._sparse_storage import *  # noqa: F403
from ._sparse_storage import (
    _check_range,
    _csr_from_coo,
    _ids,
    _rsp,
    row_sparse_parts,
    stype,
    tostype,
)

# gluon.utils uses sparse._mx_sparse and sparse._quiet_csr
from ._sparse_storage import _mx_sparse as _mx_sparse
from ._sparse_storage import _quiet_csr as _quiet_csr

__all__ = [
    "SparseOperatorError",
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
    "embedding_rows",
    "square_sum",
]
__all__ += _sparse_storage.__all__

# ---- operators -----------------------------------------------------------------------------


class SparseOperatorError(MXNetError, ValueError):
    """Bad arguments to an ``mx.nd.sparse`` operator: MXNet raises MXNetError, Python code expects
    ValueError; this is both."""


def _retained_ids(indices: Any, device: torch.device) -> torch.Tensor:
    # the operator reads float indices as integers, truncated (MXNet casts them)
    if isinstance(indices, torch.Tensor) and indices.is_floating_point():
        indices = indices.detach().trunc()
    return _ids(indices, "retain: indices", device)


def retain(data: torch.Tensor, indices: Any = None, **kwargs: Any) -> torch.Tensor:
    """The row_sparse array keeping only the rows of ``data`` listed in ``indices`` (any order).
    ``data`` is row_sparse, or (a sparse argument's values in a recorded executor run) a dense
    array in the autograd graph."""
    if kwargs:
        raise SparseOperatorError(f"retain takes data and indices, got unexpected argument(s) "
                                  f"{sorted(kwargs)}")
    if indices is None:
        raise SparseOperatorError("retain needs indices: the row ids to keep")
    if stype(data) == "default" and data.dim() >= 1 and data.requires_grad and torch.is_grad_enabled():
        # a dense array (a sparse argument's values in a recorded executor run): those rows, in the
        # autograd graph (the gradient reaches the kept rows only)
        keep = torch.unique(_retained_ids(indices, data.device))
        _check_range(keep, data.shape[0], "retain: row id", data.shape)
        return torch.sparse_coo_tensor(keep.unsqueeze(0), data.index_select(0, keep), tuple(data.shape),
                                       is_coalesced=True, check_invariants=False)
    if stype(data) != "row_sparse":
        raise SparseOperatorError(f"retain needs a row_sparse array, got storage type {stype(data)!r}")
    ids, rows = row_sparse_parts(data)
    keep = _retained_ids(indices, ids.device)
    _check_range(keep, data.shape[0], "retain: row id", data.shape)
    mask = torch.isin(ids, keep)
    return _rsp(ids[mask], rows[mask], data.shape, True)


def square_sum(data: torch.Tensor, axis: Any = None, keepdims: bool = False,
               exclude: bool = False) -> torch.Tensor:
    """MXNet's ``_square_sum``: ``sum(data * data, axis, keepdims)``.  A 2-D row_sparse ``data``
    summed over axis 1 with ``keepdims`` gives a row_sparse (rows, 1) array of its stored rows."""
    if stype(data) == "row_sparse" and data.dim() == 2 and axis in (1, -1, (1,), (-1,)) and keepdims \
            and not exclude:
        ids, rows = row_sparse_parts(data)
        return _rsp(ids, (rows * rows).sum(1, keepdim=True), (data.shape[0], 1), True)
    d = tostype(data, "default")
    if axis is None:
        axes = list(range(d.dim()))
    else:
        given = [int(a) % max(d.dim(), 1) for a in (axis if isinstance(axis, (list, tuple)) else [axis])]
        axes = [a for a in range(d.dim()) if a not in given] if exclude else given
    return (d * d).sum(dim=axes, keepdim=bool(keepdims))


def _t(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(-2, -1) if x.dim() >= 2 else x


def dot(lhs: torch.Tensor, rhs: torch.Tensor, transpose_a: bool = False, transpose_b: bool = False,
        forward_stype: str | None = None) -> torch.Tensor:
    """Matrix product with sparse operands, with MXNet's result storage types:

    * ``dot(csr, dense) = dense``, ``dot(csr.T, dense) = row_sparse`` (``transpose_a=True``),
    * ``dot(csr, row_sparse) = dense``, ``dot(csr.T, row_sparse) = row_sparse``,
      ``dot(row_sparse, dense) = dense``,
    * ``dot(dense, csr) = dense``, ``dot(dense, dense) = dense``.

    ``forward_stype`` converts the result (e.g. 'default').  A sparse ``rhs`` cannot be
    transposed (``transpose_b``); transpose the dense operand instead.
    """
    ls, rs = stype(lhs), stype(rhs)
    if transpose_b and rs == "csr" and ls == "default" and lhs.dim() == 2:
        a = _t(lhs) if transpose_a else lhs
        if a.shape[1] != rhs.shape[1]:
            raise ValueError(_dot_shapes(a, rhs, False) + " (rhs transposed)")
        out = _t(torch.sparse.mm(rhs, _t(a)))  # a @ csr.T = (csr @ a.T).T
        return tostype(out, forward_stype) if forward_stype is not None else out
    if transpose_b and rs != "default":
        raise ValueError(f"dot: transpose_b is not available for a {rs} rhs; pass its transpose instead")
    r = _t(rhs) if transpose_b else rhs
    if ls == "csr" and rs == "default":
        if r.dim() != 2 or r.shape[0] != (lhs.shape[1] if not transpose_a else lhs.shape[0]):
            raise ValueError(_dot_shapes(lhs, r, transpose_a))
        out = _csr_t_dot(lhs, r) if transpose_a else torch.sparse.mm(lhs, r)
    elif ls == "csr" and rs == "row_sparse":
        if transpose_a:  # csr.T @ rsp = row_sparse (MXNet's result); the rhs rows are few
            if r.dim() != 2 or r.shape[0] != lhs.shape[0]:
                raise ValueError(_dot_shapes(lhs, r, transpose_a))
            out = _csr_t_dot(lhs, tostype(r, "default"))
        else:
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
    r, c = torch.Tensor.indices(coo)
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
    r, c = torch.Tensor.indices(coo)
    pos = torch.searchsorted(ids, c).clamp_(max=ids.numel() - 1)
    hit = ids[pos] == c  # entries of a whose column is a row stored in b
    contrib = coo.values()[hit].unsqueeze(1) * rows.index_select(0, pos[hit])
    return out.index_add(0, r[hit], contrib.to(out.dtype))


def _same_shape(op: str, a: torch.Tensor, b: torch.Tensor) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} differ; element-wise "
                         "operations need equal shapes")


def _broadcast(op: str, fn: Any, lhs: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor | None:
    """``fn`` of the dense values when the shapes differ but broadcast (``csr + row vector``, as
    MXNet's broadcasting sparse operators give: dense); None when the shapes are equal."""
    if tuple(lhs.shape) == tuple(rhs.shape):
        return None
    try:
        torch.broadcast_shapes(lhs.shape, rhs.shape)
    except RuntimeError:
        raise ValueError(f"{op}: shapes {tuple(lhs.shape)} and {tuple(rhs.shape)} neither match nor "
                         "broadcast") from None
    out: torch.Tensor = fn(tostype(lhs, "default"), tostype(rhs, "default"))
    return out


def add(lhs: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Element-wise sum: row_sparse + row_sparse = row_sparse, csr + csr = csr, otherwise dense
    (operands of different shapes broadcast, dense)."""
    spread = _broadcast("add", torch.add, lhs, rhs)
    if spread is not None:
        return spread
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
    where, vals = tuple(torch.Tensor.indices(coo)), torch.Tensor.values(coo)
    return out.index_put(where, vals.to(out.dtype), accumulate=True)


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
    spread = _broadcast("multiply", torch.mul, lhs, rhs)
    if spread is not None:  # a sparse operand of the result's shape keeps its storage type (MXNet's)
        keep = [stype(a) for a in (lhs, rhs) if a.layout != torch.strided and a.shape == spread.shape]
        return tostype(spread, keep[0]) if keep else spread
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


def embedding_rows(idx: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Rows of a row_sparse ``weight`` picked by integer ids ``idx`` (MXNet's Embedding and
    SparseEmbedding on a row_sparse weight): a row the weight does not store reads as zeros.
    Differentiable in the stored rows, so a ``row_sparse_data`` result passes its gradient on."""
    w = weight if weight.is_coalesced() else weight.coalesce()
    with torch._C.DisableTorchFunctionSubclass():
        ids, rows = torch.Tensor.indices(w)[0], torch.Tensor.values(w)
        pos = torch.searchsorted(ids, idx).clamp_(max=max(ids.numel() - 1, 0))
        if ids.numel() == 0:
            return rows.new_zeros((*idx.shape, *rows.shape[1:]))
        out = torch.nn.functional.embedding(pos, rows)
        found = ids[pos] == idx
        return out * found.unsqueeze(-1).to(out.dtype)


def __getattr__(name: str) -> Any:
    # mx.nd.sparse.<operator> is MXNet's operator of that name (FullyConnected, sum, ...): mx.nd's,
    # where a sparse input torch's kernels refuse falls back to its dense values
    nd = sys.modules.get(__package__ or "")  # mx.nd, loaded before its sparse namespace is reached
    if not name.startswith("_") and nd is not None and hasattr(nd, name):
        return getattr(nd, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
