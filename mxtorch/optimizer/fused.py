"""Multi-tensor optimizers: one ``torch._foreach_*`` update over every tensor of a group at once."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..base import MXNetError
from .base import Optimizer, _explain_failure
from .tensors import _preprocess_grads


def _homogeneous(weights: list[Any], lrs: list[float], wds: list[float]) -> bool:
    """True when all weights share dtype and device and all lrs and wds are equal (one group)."""
    n = len(weights)
    if lrs.count(lrs[0]) != n or wds.count(wds[0]) != n:
        return False
    dt0 = weights[0].dtype
    dev0 = weights[0].device
    for w in weights:
        if w.dtype is not dt0 or w.device != dev0:
            return False
    return True


class _FusedOptimizer(Optimizer):
    """Optimizers whose update runs as ``torch._foreach_*`` ops over all same-dtype tensors at once.

    Subclasses implement ``_fused_step(weights, grads, states, lr, wd)`` for one group of tensors
    sharing device, dtype, learning rate and weight decay; the single-tensor ``update`` runs the
    same code on a group of one, so both paths give identical results.
    """

    def _fused_step(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor], states: list[Any], lr: float, wd: float
    ) -> None:
        raise NotImplementedError

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Update ``weight`` in place from ``grad``; ``index`` may be an int or a list (then all are)."""
        if not self._update_listed(index, weight, grad, state):
            self.update_multi([index], [weight], [grad], [state])

    def update_multi(
        self, indices: list[Any], weights: list[Any], grads: list[Any], states: list[Any]
    ) -> None:
        """Update many weights with one ``torch._foreach_*`` pass per (device, dtype, lr, wd) group."""
        n = len(indices)
        if len(weights) != n or len(grads) != n or len(states) != n:
            raise ValueError(
                f"update_multi needs lists of equal length: {n} indices, {len(weights)} weights, "
                f"{len(grads)} grads, {len(states)} states"
            )
        indices, weights, grads, states = self._apply_sparse(indices, weights, grads, states)
        n = len(indices)
        if n == 0:
            return
        self._update_count(indices)
        lrs = self._effective_lrs(indices, self._get_lrs(indices))
        wds = self._get_wds(indices)
        groups: dict[tuple[Any, ...], tuple[list[Any], list[Any], list[Any], list[Any]]] = {}
        try:
            if _homogeneous(weights, lrs, wds):
                w0 = weights[0]
                groups[(w0.dtype, w0.device, lrs[0], wds[0])] = (indices, weights, grads, states)
            else:
                self._group(groups, indices, weights, grads, states, lrs, wds)
        except AttributeError as err:
            _explain_failure(indices, weights, grads, err)
            raise
        with torch.no_grad():
            for (_, _, lr, wd), (idx, ws, gs, ss) in groups.items():
                try:
                    self._fused_step(ws, gs, ss, lr, wd)
                except (RuntimeError, TypeError, IndexError, ValueError) as err:
                    _explain_failure(idx, ws, gs, err)
                    self._explain_states(idx, ss, err)
                    raise

    @staticmethod
    def _group(
        groups: dict[tuple[Any, ...], tuple[list[Any], list[Any], list[Any], list[Any]]],
        indices: list[Any],
        weights: list[Any],
        grads: list[Any],
        states: list[Any],
        lrs: list[float],
        wds: list[float],
    ) -> None:
        for i, w, g, s, lr, wd in zip(indices, weights, grads, states, lrs, wds):
            key = (w.dtype, w.device, lr, wd)
            group = groups.get(key)
            if group is None:
                groups[key] = ([i], [w], [g], [s])
            else:
                group[0].append(i)
                group[1].append(w)
                group[2].append(g)
                group[3].append(s)

    def _effective_lrs(self, indices: list[Any], lrs: list[float]) -> list[float]:
        """Per-index learning rates as the update uses them (Adam folds its bias correction in here)."""
        return lrs

    def _bias_corrected(
        self, indices: list[Any], lrs: list[float], beta1: float, beta2: float
    ) -> list[float]:
        counts = self._index_update_count
        cache: dict[int, float] = {}
        out = []
        for i, lr in zip(indices, lrs):
            t = counts[i]
            c = cache.get(t)
            if c is None:
                c = cache[t] = math.sqrt(1.0 - beta2**t) / (1.0 - beta1**t)
            out.append(lr * c)
        return out

    _state_layout = "tensor"  # 'tensor' or 'pair': what _fused_step expects in each state

    def _explain_states(self, indices: list[Any], states: list[Any], err: Exception) -> None:
        if self._state_layout == "tensor" and getattr(self, "momentum", 1.0) == 0.0:
            return  # no state is used
        for i, s in zip(indices, states):
            if self._state_layout == "pair":
                ok = (
                    isinstance(s, (tuple, list))
                    and len(s) == 2
                    and all(isinstance(x, torch.Tensor) for x in s)
                )
                what = "a (mean, var) tuple of tensors"
            else:
                ok = isinstance(s, torch.Tensor)
                what = "a momentum tensor"
            if not ok:
                raise MXNetError(
                    f"{type(self).__name__} needs {what} as the state of index {i!r}, got "
                    f"{type(s).__name__}; create states with create_state (and recreate them if "
                    "hyper-parameters such as momentum changed)"
                ) from err


class _MomentumOptimizer(_FusedOptimizer):
    """SGD and NAG: a momentum buffer per weight (None without momentum); MXNet's multi-precision
    state layout ``(momentum, fp32 master weight)``."""

    _master_first = False
    momentum: float

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor | None:
        """The momentum buffer (zeros like ``weight``), or None when ``momentum == 0``."""
        if self.momentum == 0.0:
            return None
        return torch.zeros_like(weight, memory_format=torch.preserve_format)

    def _clipped(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor]
    ) -> tuple[list[torch.Tensor], float]:
        """The gradients and the rescale factor still to apply to them (clipping applies it first)."""
        rescale = float(self.rescale_grad)
        if self.clip_gradient is not None:
            grads = _preprocess_grads(grads, weights, rescale, self.clip_gradient, 0.0)
            rescale = 1.0
        return grads, rescale

    def _fused_step(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor], states: list[Any], lr: float, wd: float
    ) -> None:
        grads, rescale = self._clipped(weights, grads)
        if self.momentum != 0.0:
            self._momentum_step(weights, grads, states, lr, wd, rescale)
            return
        # momentum-free: weight - lr * (rescale * grad + wd * weight)
        #              == (1 - lr * wd) * weight - lr * rescale * grad
        if wd != 0.0:
            torch._foreach_mul_(weights, 1.0 - lr * wd)
        torch._foreach_add_(weights, grads, alpha=-lr * rescale)

    def _momentum_step(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor], moms: list[torch.Tensor], lr: float,
        wd: float, rescale: float,
    ) -> None:
        """The step with momentum buffers ``moms``; the gradient is still to be scaled by ``rescale``."""
        raise NotImplementedError
