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

from .base import Optimizer
from .rows import is_row_sparse, sparse_rows, step_rows
from .updater import Updater, _to_device

__all__ = ["is_row_sparse", "update_rows", "update_sparse"]

_MISSING = object()


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
    step_rows(opt, index, weight, row_ids, grad_rows, state)


def update_sparse(target: Updater | Optimizer, index: Any, weight: torch.Tensor, grad: torch.Tensor,
                  state: Any = _MISSING) -> None:
    """:func:`update_rows` for a row_sparse gradient tensor of the weight's shape."""
    update_rows(target, index, weight, *sparse_rows(index, weight, grad), state)
