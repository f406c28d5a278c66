"""The row-wise optimizer step behind row_sparse gradients (MXNet's lazy update).

:func:`step_rows` runs an optimizer's ordinary step on the rows ``R`` of a weight and of every
state tensor with the weight's row count, and scatters the results back (rows outside ``R`` keep
weight and state); with ``lazy_update`` false it runs the dense step with zeros for the other
rows.  The optimizer base class calls it for a row_sparse gradient, and
:mod:`mxtorch.optimizer.sparse` for the rows an Updater (or the parameter server) holds; this
module depends on neither.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from ..base import MXNetError

__all__ = ["is_row_sparse", "sparse_rows", "step_rows", "RowStepOptimizer"]


class RowStepOptimizer(Protocol):
    """What :func:`step_rows` needs of an optimizer (MXNet's ``Optimizer`` interface, which
    :class:`mxtorch.optimizer.Optimizer` and MXNet-style custom optimizers offer)."""

    lazy_update: bool

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None: ...

    def _update_count(self, index: Any) -> None: ...


def is_row_sparse(t: Any) -> bool:
    """Whether ``t`` is a row_sparse tensor (sparse COO with exactly one sparse dimension)."""
    return isinstance(t, torch.Tensor) and t.layout == torch.sparse_coo and t.sparse_dim() == 1


def _canonical(index: Any, weight: torch.Tensor, row_ids: Any,
               grad_rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated ids (int64, sorted, unique, on the weight's device) and their summed rows."""
    if not isinstance(weight, torch.Tensor) or weight.dim() == 0:
        raise TypeError(f"update_rows: the weight of index {index!r} must be a tensor with at least one "
                        f"dimension, got {type(weight).__name__}")
    ids = torch.as_tensor(row_ids, device=weight.device)
    if ids.dim() != 1 or ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise ValueError(f"update_rows: row ids of index {index!r} must be a 1-D integer tensor, got shape "
                         f"{tuple(ids.shape)} dtype {ids.dtype}")
    ids = ids.to(torch.int64)
    if not isinstance(grad_rows, torch.Tensor) or grad_rows.layout != torch.strided:
        raise TypeError(f"update_rows: grad rows of index {index!r} must be a dense tensor")
    expected = (ids.numel(), *weight.shape[1:])
    if tuple(grad_rows.shape) != expected:
        raise ValueError(f"update_rows: grad rows of index {index!r} have shape {tuple(grad_rows.shape)}, "
                         f"expected {expected} (one row of the weight {tuple(weight.shape)} per row id)")
    rows = grad_rows.detach().to(weight.device)
    if ids.numel():
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= weight.shape[0]:
            bad = lo if lo < 0 else hi
            raise ValueError(f"update_rows: row id {bad} of index {index!r} is out of range for a weight "
                             f"with {weight.shape[0]} rows")
        if ids.numel() > 1 and not bool((ids[1:] > ids[:-1]).all()):
            ids, inverse = torch.unique(ids, sorted=True, return_inverse=True)
            summed = torch.zeros((ids.numel(), *rows.shape[1:]), dtype=rows.dtype, device=rows.device)
            rows = summed.index_add_(0, inverse, rows)
    return ids, rows


def _gather(state: Any, ids: torch.Tensor, n_rows: int,
            moved: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """``state`` with every tensor of ``n_rows`` rows replaced by its rows ``ids`` (recorded in ``moved``)."""
    if isinstance(state, torch.Tensor):
        if state.dim() >= 1 and state.shape[0] == n_rows and state.layout == torch.strided:
            part = state.index_select(0, ids)
            moved.append((state, part))
            return part
        return state
    if isinstance(state, tuple):
        return tuple(_gather(s, ids, n_rows, moved) for s in state)
    if isinstance(state, list):
        return [_gather(s, ids, n_rows, moved) for s in state]
    return state


def step_rows(opt: RowStepOptimizer, index: Any, weight: torch.Tensor, row_ids: Any, grad_rows: torch.Tensor,
              state: Any) -> None:
    """One step of ``opt`` for ``weight`` (in place) and its ``state`` from the gradient rows ``grad_rows``.

    ``row_ids`` may be unsorted and repeat rows (repeated rows are summed); it may be empty.  Lazy
    update unless ``opt.lazy_update`` is false (then a dense update with zeros for the other rows).
    """
    ids, rows = _canonical(index, weight, row_ids, grad_rows)
    with torch.no_grad():
        w = weight.detach()
        if not opt.lazy_update:
            dense = torch.zeros(w.shape, dtype=rows.dtype, device=w.device).index_add_(0, ids, rows)
            opt.update_multi_precision([index], [weight], [dense], [state])
            return
        if ids.numel() == 0:
            opt._update_count(index)  # nothing to change, but this still counts as the index's step
            return
        moved: list[tuple[torch.Tensor, torch.Tensor]] = []
        w_rows = w.index_select(0, ids)
        s_rows = _gather(state, ids, w.shape[0], moved)
        opt.update_multi_precision([index], [w_rows], [rows], [s_rows])
        w.index_copy_(0, ids, w_rows)
        for full, part in moved:
            full.index_copy_(0, ids, part)


def sparse_rows(index: Any, weight: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The row ids and rows of ``grad``, a row_sparse gradient of the weight's shape (checked)."""
    if not is_row_sparse(grad):
        raise MXNetError(f"index {index!r}: a sparse gradient must be row_sparse (a COO tensor with one "
                         f"sparse dimension), got layout {grad.layout}; convert it with mx.nd.sparse.tostype")
    if tuple(grad.shape) != tuple(weight.shape):
        raise ValueError(f"grad of index {index!r} has shape {tuple(grad.shape)}, expected the weight's "
                         f"shape {tuple(weight.shape)}")
    g = grad if grad.is_coalesced() else grad.coalesce()
    return torch.Tensor.indices(g)[0], torch.Tensor.values(g)
