"""LBSGD: large-batch SGD with warmup and layer-wise scaling (MXNet 1.9 semantics)."""

from __future__ import annotations

import math
from typing import Any

import torch

from .base import Optimizer, register
from .checks import _check_int, _check_unit
from .tensors import _prep_grad

__all__ = ["LBSGD"]

_STRATEGIES = ("linear", "power2", "sqrt", "lars")


@register
class LBSGD(Optimizer):
    """Large-batch SGD: gradients of ``batch_scale`` consecutive updates of a weight are summed,
    and every ``batch_scale``-th update applies SGD with momentum to their mean with a scaled
    learning rate (the other updates leave the weight unchanged)::

        n = number of gradients accumulated for this weight (starting at begin_epoch * updates_per_epoch)
        when n % batch_scale == 0:
            grad = sum of the accumulated gradients / batch_scale
            lr' = lr * mult(n)
            g = clip(rescale_grad * grad, clip_gradient) + wd * weight
            mom = momentum * mom - lr' * g;  weight += mom          (weight -= lr' * g if momentum == 0)

    ``mult`` warms up from 1 to ``batch_scale`` over ``warmup_epochs * updates_per_epoch`` updates:
    ``linear`` ``1 + (batch_scale - 1) * n / N``, ``power2`` ``1 + (batch_scale - 1) * (n / N)**2``,
    ``sqrt`` ``1 + (batch_scale - 1) * sqrt(n / N)``, and ``batch_scale`` once ``n >= N``.
    ``lars`` uses ``sqrt(|w|^2 / (|grad|^2 + wd * |w|^2 + 1e-18))`` clipped into [0.01, 100].

    Args:
        learning_rate: default 0.01.
        momentum: in [0, 1), default 0.
        warmup_strategy: 'linear' (default), 'power2', 'sqrt' or 'lars'.
        warmup_epochs: default 5.
        batch_scale: how many gradients make one large batch, default 1.
        updates_per_epoch: default 32.
        begin_epoch: default 0.
        num_epochs: default 60 (kept for MXNet compatibility; unused).

    The accumulated gradients live in the optimizer, not in the Updater's states.
    """

    def __init__(
        self,
        momentum: float = 0.0,
        warmup_strategy: str = "linear",
        warmup_epochs: int = 5,
        batch_scale: int = 1,
        updates_per_epoch: int = 32,
        begin_epoch: int = 0,
        num_epochs: int = 60,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.momentum = _check_unit("momentum", momentum)
        if warmup_strategy not in _STRATEGIES:
            raise ValueError(f"warmup_strategy must be one of {_STRATEGIES}, got {warmup_strategy!r}")
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = _check_int("warmup_epochs", warmup_epochs)
        self.batch_scale = _check_int("batch_scale", batch_scale, lo=1)
        self.updates_per_epoch = _check_int("updates_per_epoch", updates_per_epoch)
        self.init_updates = _check_int("begin_epoch", begin_epoch) * self.updates_per_epoch
        self.num_epochs = _check_int("num_epochs", num_epochs)
        self._cum: dict[Any, tuple[torch.Tensor | None, int]] = {}  # index -> (summed grads, count)

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor | None:
        """The momentum buffer (zeros like ``weight``), or None when ``momentum == 0``."""
        if self.momentum == 0.0:
            return None
        return torch.zeros_like(weight, memory_format=torch.preserve_format)

    def _warmup_mult(self, n: int) -> float:
        warm = self.warmup_epochs * self.updates_per_epoch
        top = float(self.batch_scale)
        if n >= warm:
            return top
        if warm <= 1:
            return 1.0
        frac = n / warm
        if self.warmup_strategy == "linear":
            return 1.0 + (top - 1.0) * frac
        if self.warmup_strategy == "power2":
            return 1.0 + (top - 1.0) * frac * frac
        if self.warmup_strategy == "sqrt":
            return 1.0 + (top - 1.0) * math.sqrt(frac)
        return 1.0

    @staticmethod
    def _lars_mult(weight: torch.Tensor, grad: torch.Tensor, wd: float) -> float:
        w2 = float(weight.double().square().sum())
        g2 = float(grad.double().square().sum())
        return min(max(math.sqrt(w2 / (g2 + wd * w2 + 1e-18)), 0.01), 100.0)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        summed, count = self._cum.get(index, (None, 0))
        if count <= 0:
            summed, count = grad.clone(), self.init_updates + 1
        else:  # the count runs on across large batches (it drives the warmup)
            summed, count = (grad.clone() if summed is None else summed + grad), count + 1
        if count % self.batch_scale != 0:
            self._cum[index] = (summed, count)
            return
        self._cum[index] = (None, count)
        big = summed / self.batch_scale
        if self.warmup_strategy == "lars":
            lr *= self._lars_mult(weight, big, wd)
        else:
            lr *= self._warmup_mult(count)
        g = _prep_grad(big, float(self.rescale_grad), self.clip_gradient)
        if wd != 0.0:
            g.add_(weight, alpha=wd)
        if state is None:
            weight.sub_(g, alpha=lr)
        else:
            state.mul_(self.momentum).sub_(g, alpha=lr)
            weight.add_(state)
