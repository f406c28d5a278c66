"""Row-sparse gradients: optimizer steps that touch only the rows a gradient holds.

A row_sparse gradient (a torch COO tensor with one sparse dimension, as
``F.embedding(..., sparse=True)`` produces; see :mod:`mxtorch.nd.sparse`) with row ids ``R``
gets MXNet's **lazy update** from the optimizers whose ``lazy_update`` is true (SGD, Adam,
LARS by default, AdaGrad and Ftrl always, as MXNet's sparse kernels)::

    for r in R:
        weight[r], state[r] = step(weight[r], grad[r], state[r])

Rows outside ``R`` keep their weight *and* their state: momentum does not decay there, Adam's
moments stay, weight decay is not applied.  Every such optimizer gets this through one
mechanism: the rows ``R`` of the weight and of every state tensor with the weight's row count
are gathered, the optimizer's ordinary step runs on them, and the results are scattered back.
An optimizer with ``lazy_update`` false (``lazy_update=False`` given to SGD, Adam or LARS, and
every other optimizer, whose MXNet kernels have no sparse form) gets the standard update
instead: the gradient is scattered into a dense zero tensor and every row is updated, as MXNet's
dense fallback does.

The index's update count (Adam's bias-correction step ``t``) advances once per call, whether
or not rows were given.  :func:`update_rows` is the entry point for code that holds rows
rather than a sparse tensor (the parameter server applies the rows it received with it).
"""

from __future__ import annotations

from typing import Any

import torch

from ..base import MXNetError
from .base import Optimizer, Updater, _to_device

__all__ = ["is_row_sparse", "update_rows", "update_sparse"]

_MISSING = object()


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


def _resolve(target: Any, index: Any, weight: torch.Tensor, state: Any) -> tuple[Optimizer, Any]:
    if isinstance(target, Updater):
        opt = target.optimizer
        if state is _MISSING:
            st = target.states.get(index, _MISSING)
            if st is _MISSING:
                st = opt.create_state_multi_precision(index, weight)
                target.states[index] = st
            elif not target.states_synced.get(index, True):
                st = _to_device(st, weight.device)
                target.states[index] = st
            target.states_synced[index] = True
            state = st
        return opt, state
    if isinstance(target, Optimizer):
        if state is _MISSING:
            raise TypeError("update_rows(optimizer, ...) needs the index's state (create it with "
                            "optimizer.create_state_multi_precision(index, weight)); an Updater keeps "
                            "states itself")
        return target, state
    raise TypeError(f"update_rows needs an mxtorch Updater or Optimizer, got {type(target).__name__}")


def update_rows(target: Updater | Optimizer, index: Any, weight: torch.Tensor, row_ids: Any,
                grad_rows: torch.Tensor, state: Any = _MISSING) -> None:
    """One optimizer step for ``weight`` (in place) from the gradient rows ``grad_rows`` of rows ``row_ids``.

    ``target`` is an :class:`~mxtorch.optimizer.Updater` (its state for ``index`` is used, and
    created on first use) or an :class:`~mxtorch.optimizer.Optimizer` together with ``state``.
    ``row_ids`` may be unsorted and repeat rows (repeated rows are summed); it may be empty.
    ``grad_rows`` has shape ``(len(row_ids), *weight.shape[1:])``.  Lazy update unless the
    optimizer has ``lazy_update=False`` (then a dense update with zeros for the other rows).
    """
    opt, state = _resolve(target, index, weight, state)
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


def update_sparse(target: Updater | Optimizer, index: Any, weight: torch.Tensor, grad: torch.Tensor,
                  state: Any = _MISSING) -> None:
    """:func:`update_rows` for a row_sparse gradient tensor of the weight's shape."""
    if not is_row_sparse(grad):
        raise MXNetError(f"index {index!r}: a sparse gradient must be row_sparse (a COO tensor with one "
                         f"sparse dimension), got layout {grad.layout}; convert it with mx.nd.sparse.tostype")
    if tuple(grad.shape) != tuple(weight.shape):
        raise ValueError(f"grad of index {index!r} has shape {tuple(grad.shape)}, expected the weight's "
                         f"shape {tuple(weight.shape)}")
    g = grad if grad.is_coalesced() else grad.coalesce()
    update_rows(target, index, weight, g.indices()[0], g.values(), state)
