"""Nadam: Adam with Nesterov momentum (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import _PairStateOptimizer, register
from .checks import _check_moment_rates, _check_real
from .tensors import _adam_moments, _prep_grad_wd

__all__ = ["Nadam"]


@register
class Nadam(_PairStateOptimizer):  # state: (m, v), zeros like the weight
    """Nadam (Dozat, *Incorporating Nesterov Momentum into Adam*), at step ``t`` of each weight::

        g = clip(rescale_grad * grad + wd * weight, clip_gradient)
        mu_t = beta1 * (1 - 0.5 * 0.96**(t * schedule_decay))          # warming momentum schedule
        m_schedule_t = mu_1 * ... * mu_t
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m_bar = (1 - mu_t) * g / (1 - m_schedule_t) + mu_(t+1) * m / (1 - m_schedule_t * mu_(t+1))
        weight -= lr * m_bar / (sqrt(v / (1 - beta2**t)) + epsilon)

    The state is ``(m, v)``.  ``m_schedule_t`` is the product over this weight's own steps
    (MXNet 1.9 keeps one product per optimizer, multiplied at every weight's update; the two
    agree for a single weight).

    Args:
        learning_rate: default 0.001.
        beta1, beta2: decay rates in [0, 1) (defaults 0.9, 0.999).
        epsilon: default 1e-8.
        schedule_decay: decay of the momentum schedule, default 0.004.
    """

    def __init__(
        self,
        learning_rate: float | None = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        schedule_decay: float = 0.004,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = _check_moment_rates(beta1, beta2, epsilon)
        self.schedule_decay = _check_real("schedule_decay", schedule_decay, lo=0.0)
        self._m_schedules: list[float] = [1.0]  # m_schedule_t for t = 0, 1, ... (memoized)

    def _mu(self, t: int) -> float:
        return self.beta1 * (1.0 - 0.5 * 0.96 ** (t * self.schedule_decay))

    def _m_schedule(self, t: int) -> float:
        prods = self._m_schedules
        while len(prods) <= t:
            prods.append(prods[-1] * self._mu(len(prods)))
        return prods[t]

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        m, v = state
        b1, b2 = self.beta1, self.beta2
        t = self._index_update_count[index]
        g = _prep_grad_wd(grad, weight, float(self.rescale_grad), self.clip_gradient, wd)
        mu_t, mu_next = self._mu(t), self._mu(t + 1)
        sched = self._m_schedule(t)
        sched_next = sched * mu_next
        _adam_moments(m, v, g, b1, b2)
        m_bar = g.mul_((1.0 - mu_t) / (1.0 - sched)).add_(m, alpha=mu_next / (1.0 - sched_next))
        denom = (v / (1.0 - b2**t)).sqrt_().add_(self.epsilon)
        weight.addcdiv_(m_bar, denom, value=-lr)
