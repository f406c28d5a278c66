"""MXNet's scatter operators: element-wise math computed only where a sparse ``lhs`` stores values.

``_scatter_elemwise_div(lhs, rhs)``, ``_scatter_plus_scalar(lhs, scalar)`` and
``_scatter_minus_scalar(lhs, scalar)`` keep ``lhs``'s storage type and pattern (the rows of a
row_sparse ``lhs``, the entries of a csr one): positions ``lhs`` does not store stay unstored,
where the ordinary operators would fill them (``0 + 9``) or give NaN (``0 / 0``).  A dense
``lhs`` gives the ordinary result.  ``contrib.quadratic`` keeps a csr input csr when ``c == 0``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._sparse_storage import _mx_sparse, _quiet_csr, row_sparse_parts, stype, tostype

__all__ = ["scatter_elemwise_div", "scatter_plus_scalar", "scatter_minus_scalar", "on_stored_values"]

Tensor = torch.Tensor
# values, (row ids, column ids or None) -> new values
_ValueFn = Callable[[Tensor, Tensor, "Tensor | None"], Tensor]


def on_stored_values(lhs: Tensor, fn: _ValueFn) -> Tensor:
    """``lhs`` with ``fn`` applied to its stored values (same storage type and pattern); ``fn`` gets
    the values and their positions (row ids; column ids for csr, else None).  Dense: every value."""
    kind = stype(lhs)
    with torch._C.DisableTorchFunctionSubclass():
        if kind == "row_sparse":
            ids, rows = row_sparse_parts(lhs)
            out = torch.sparse_coo_tensor(ids.reshape(1, -1), fn(rows, ids, None), tuple(lhs.shape),
                                          is_coalesced=True, check_invariants=False)
            return _mx_sparse(out)
        if kind == "csr":
            ptr, cols, vals = lhs.crow_indices(), lhs.col_indices(), lhs.values()
            rows = torch.repeat_interleave(torch.arange(lhs.shape[0], device=ptr.device), ptr.diff())
            with _quiet_csr():
                out = torch.sparse_csr_tensor(ptr, cols, fn(vals, rows, cols), tuple(lhs.shape),
                                              check_invariants=False)
            return _mx_sparse(out)
    return fn(lhs, torch.arange(lhs.shape[0] if lhs.dim() else 0, device=lhs.device), None)


def scatter_elemwise_div(lhs: Tensor, rhs: Any) -> Tensor:
    """``lhs / rhs`` where ``lhs`` stores values (MXNet's ``_scatter_elemwise_div``)."""
    if tuple(lhs.shape) != tuple(rhs.shape):
        raise ValueError(f"_scatter_elemwise_div: shapes {tuple(lhs.shape)} and {tuple(rhs.shape)} differ")
    r = tostype(rhs, "default")
    with torch._C.DisableTorchFunctionSubclass():
        r = r.to(lhs.device)

    dense = stype(lhs) == "default"

    def divide(v: Tensor, rows: Tensor, cols: Tensor | None) -> Tensor:
        if dense:
            return v / r
        return v / (r[rows, cols] if cols is not None else r.index_select(0, rows))

    return on_stored_values(lhs, divide)


def scatter_plus_scalar(lhs: Tensor, scalar: float = 0.0) -> Tensor:
    """``lhs + scalar`` where ``lhs`` stores values (MXNet's ``_scatter_plus_scalar``)."""
    return on_stored_values(lhs, lambda v, rows, cols: v + scalar)


def scatter_minus_scalar(lhs: Tensor, scalar: float = 0.0) -> Tensor:
    """``lhs - scalar`` where ``lhs`` stores values (MXNet's ``_scatter_minus_scalar``)."""
    return on_stored_values(lhs, lambda v, rows, cols: v - scalar)
