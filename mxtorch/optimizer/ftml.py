"""FTML: Follow the Moving Leader (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import Optimizer, register
from .checks import _check_moment_rates, _check_step_lr
from .tensors import _prep_grad_wd

__all__ = ["FTML"]


@register
class FTML(Optimizer):
    """FTML (Zheng & Kwok, *Follow the Moving Leader in Deep Learning*, ICML 2017), at step ``t``
    of each weight::

        g = clip(rescale_grad * grad + wd * weight, clip_gradient)
        v = beta2 * v + (1 - beta2) * g**2
        d_t = (1 - beta1**t) / lr * (sqrt(v / (1 - beta2**t)) + epsilon)
        z = beta1 * z + (1 - beta1) * g - (d_t - beta1 * d) * weight
        d = d_t
        weight = -z / d_t

    The state is ``(d, v, z)``.

    Args:
        learning_rate: default 0.01 (must be > 0: the rule divides by it).
        beta1: in [0, 1), default 0.6.
        beta2: in [0, 1), default 0.999.
        epsilon: default 1e-8.
    """

    def __init__(
        self, beta1: float = 0.6, beta2: float = 0.999, epsilon: float = 1e-8, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.beta1, self.beta2, self.epsilon = _check_moment_rates(beta1, beta2, epsilon)

    def create_state(self, index: Any, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(d, v, z)``, zeros like ``weight``."""
        return tuple(torch.zeros_like(weight, memory_format=torch.preserve_format) for _ in range(3))

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        _check_step_lr("FTML", lr, index)
        d, v, z = state
        b1, b2 = self.beta1, self.beta2
        t = self._index_update_count[index]
        g = _prep_grad_wd(grad, weight, float(self.rescale_grad), self.clip_gradient, wd)
        v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
        d_t = (v / (1.0 - b2**t)).sqrt_().add_(self.epsilon).mul_((1.0 - b1**t) / lr)
        sigma = d_t - d * b1
        z.mul_(b1).add_(g, alpha=1.0 - b1).sub_(sigma.mul_(weight))
        d.copy_(d_t)
        torch.div(z, d_t, out=weight).neg_()
