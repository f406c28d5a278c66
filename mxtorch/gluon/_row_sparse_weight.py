"""A row_sparse weight's local copy, and the rows ``Parameter.row_sparse_data`` hands out.

A weight declared ``stype='row_sparse'`` keeps its local copy dense (the Trainer's store fills
it by rows, the optimizers update rows of it in place), but MXNet code that reads the copy
(``param._data[0]``) sees MXNet's storage type. ``row_sparse_data(ids)`` gives MXNet's result: a
row_sparse array holding only the rows ``ids``, in the autograd graph of the local copy, so a
loss computed from it fills the parameter's (row-sparse) gradient.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..context import context_of
from ..nd import sparse
from ..nd._common import tag
from ..nd._sparse_ndarray import as_sparse_ndarray

__all__ = ["RowSparseWeight", "rows_of", "row_ids"]


class RowSparseWeight(torch.nn.Parameter):
    """The local copy of a ``stype='row_sparse'`` weight: dense rows, MXNet's storage type.

    ``stype`` is 'row_sparse', and ``copy()`` / ``tostype('row_sparse')`` give a row_sparse array
    of every row (MXNet's copy after initialization); torch ops on it see a plain dense
    parameter (``torch.nn.Parameter`` turns off subclass dispatch), so updates pay nothing.
    """

    @property
    def stype(self) -> str:  # type: ignore[override]
        return "row_sparse"

    def copy(self) -> torch.Tensor:
        """A row_sparse array with this copy's rows, on its context (not recorded)."""
        with torch.no_grad():
            out = sparse.tostype(self.detach().clone(), "row_sparse")
        return tag(out, context_of(self))


def row_ids(row_id: Any, rows: int, device: torch.device, name: str) -> torch.Tensor:
    """``row_id`` (any order, repeats, float ids allowed) as sorted unique int64 ids on ``device``;
    an error naming parameter ``name`` for an id outside ``[0, rows)``."""
    from ..base import MXNetError

    ids = torch.as_tensor(row_id, device=device).detach().reshape(-1)
    if ids.is_floating_point():
        ids = ids.trunc()
    ids = torch.unique(ids.to(torch.int64), sorted=True)
    if ids.numel() and (int(ids[0]) < 0 or int(ids[-1]) >= rows):
        bad = int(ids[0]) if int(ids[0]) < 0 else int(ids[-1])
        raise MXNetError(f"Parameter {name!r}: row id {bad} is out of range for {rows} rows")
    return ids


def rows_of(copy: torch.Tensor, ids: torch.Tensor, sparse_grad: bool) -> torch.Tensor:
    """Rows ``ids`` (sorted, unique) of ``copy`` as a row_sparse tensor on ``copy``'s context.

    The rows are read with an embedding lookup, so the gradient that reaches ``copy`` is
    row-sparse when ``sparse_grad`` (grad_stype 'row_sparse') and touches only those rows.
    """
    values = F.embedding(ids, copy, sparse=sparse_grad)
    out = torch.sparse_coo_tensor(ids.unsqueeze(0), values, tuple(copy.shape), is_coalesced=True,
                                  check_invariants=False)
    return tag(as_sparse_ndarray(out), context_of(copy))
