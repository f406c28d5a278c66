"""Row-sparse values on the parameter server: which rows a key slice holds and where they sit.

A row_sparse tensor (a torch COO tensor with one sparse dimension, :mod:`mxtorch.nd.sparse`)
travels as two tensors: sorted, unique int64 row ids of the whole key and the rows, shape
``(k, *row_shape)``.  A row has ``R = numel / shape[0]`` elements.

A key slice (a server's shard) is the flat range ``[offset, offset + numel)`` of the key.  A key
initialized with a row_sparse value is cut at row boundaries (every row lives on one server);
a dense key's flat slices may cut a row in two, and such a row is then sent to both servers,
each keeping the part inside its slice.  Both sides compute the same geometry:
:func:`rows_in_slice` selects the ids that touch a slice, :func:`element_positions` says where
their elements lie in it.  What a server sends back for rows is :func:`gather_rows`'s flat
tensor (only the elements inside its slice); :func:`scatter_rows` puts them back into rows.

>>> ids = torch.tensor([0, 2, 3])
>>> rows_in_slice(ids, row=4, offset=6, numel=6)     # elements 6..11: rows 1 and 2
(1, 2)
>>> pos, inside = element_positions(ids[1:2], row=4, offset=6, numel=6)
>>> pos.tolist(), inside.tolist()
([[2, 3, 4, 5]], [[True, True, True, True]])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Rows", "row_size", "rows_in_slice", "aligned", "element_positions", "gather_rows",
           "scatter_rows", "stored_rows", "merge_rows"]


@dataclass
class Rows:
    """Pushed rows of a key: ``ids`` (int64, sorted, unique, whole-key row ids) and ``values`` (k, R)."""

    ids: torch.Tensor
    values: torch.Tensor


def row_size(shape: tuple[int, ...] | torch.Size) -> int:
    """Elements per row of a value of ``shape`` (1 for a vector)."""
    n = 1
    for s in tuple(shape)[1:]:
        n *= int(s)
    return n


def rows_in_slice(ids: torch.Tensor, row: int, offset: int, numel: int) -> tuple[int, int]:
    """``(lo, hi)``: the sorted ``ids[lo:hi]`` are the rows with elements in the slice."""
    if numel <= 0 or row <= 0 or ids.numel() == 0:
        return 0, 0
    first = offset // row
    last = (offset + numel - 1) // row
    lo = int(torch.searchsorted(ids, torch.tensor(first, dtype=ids.dtype)))
    hi = int(torch.searchsorted(ids, torch.tensor(last, dtype=ids.dtype), right=True))
    return lo, hi


def aligned(row: int, offset: int, numel: int) -> bool:
    """Whether the slice starts and ends at row boundaries (a whole key always does)."""
    return row > 0 and offset % row == 0 and numel % row == 0


def element_positions(ids: torch.Tensor, row: int, offset: int,
                      numel: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions in the slice of the elements of rows ``ids`` (k, R), and which lie inside it."""
    pos = ids.unsqueeze(1) * row + torch.arange(row, dtype=torch.int64) - offset
    return pos, (pos >= 0) & (pos < numel)


def gather_rows(value: torch.Tensor, ids: torch.Tensor, row: int, offset: int, numel: int) -> torch.Tensor:
    """The elements of rows ``ids`` that the slice ``value`` holds, row by row, as a flat tensor."""
    flat = value.reshape(-1)
    if aligned(row, offset, numel):
        return flat.view(numel // row, row).index_select(0, ids - offset // row).reshape(-1)
    pos, inside = element_positions(ids, row, offset, numel)
    return flat.index_select(0, pos[inside])


def scatter_rows(out: torch.Tensor, data: torch.Tensor, ids: torch.Tensor, row: int, offset: int,
                 numel: int) -> None:
    """Write what :func:`gather_rows` returned into ``out`` (k, R): the parts of rows ``ids`` in the slice."""
    if aligned(row, offset, numel):
        out.copy_(data.view(out.shape))
        return
    _, inside = element_positions(ids, row, offset, numel)
    out.view(-1)[inside.view(-1)] = data.to(out.dtype)


def stored_rows(value: torch.Tensor, row: int, offset: int, numel: int) -> torch.Tensor:
    """Whole-key ids of the rows with a non-zero element in the slice ``value``."""
    flat = value.reshape(-1)
    if aligned(row, offset, numel):
        nz = flat.view(numel // row, row).ne(0).any(dim=1).nonzero().reshape(-1)
        return nz + offset // row
    pos = flat.ne(0).nonzero().reshape(-1)
    return torch.unique_consecutive((pos + offset) // row)


def merge_rows(parts: list[Rows], dtype: torch.dtype) -> Rows:
    """The sum of several pushes' rows, as sorted unique ids and their summed rows in ``dtype``."""
    if len(parts) == 1:
        p = parts[0]
        return p if p.values.dtype == dtype else Rows(p.ids, p.values.to(dtype))
    ids = torch.cat([p.ids for p in parts])
    values = torch.cat([p.values.to(dtype) for p in parts])
    uniq, inverse = torch.unique(ids, sorted=True, return_inverse=True)
    summed = torch.zeros((uniq.numel(), values.shape[1]), dtype=dtype).index_add_(0, inverse, values)
    return Rows(uniq, summed)
