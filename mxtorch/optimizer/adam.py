"""Adam (MXNet 1.9 semantics: bias correction folded into the learning rate)."""

from __future__ import annotations

from typing import Any

import torch

from .base import _PairStateOptimizer, register
from .checks import _check_bool, _check_moment_rates
from .fused import _FusedOptimizer
from .tensors import _foreach_adam_moments, _preprocess_grads

__all__ = ["Adam"]


@register
class Adam(_PairStateOptimizer, _FusedOptimizer):  # state: (mean, var), zeros like the weight
    """The Adam optimizer (Kingma & Ba, 2014) as MXNet applies it, at step ``t`` of each weight::

        g = clip(rescale_grad * grad + wd * weight, clip_gradient)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        lr_t = lr * sqrt(1 - beta2**t) / (1 - beta1**t)
        weight -= lr_t * m / (sqrt(v) + epsilon)

    Args:
        learning_rate: default 0.001.
        beta1, beta2: decay rates in [0, 1) (defaults 0.9, 0.999).
        epsilon: default 1e-8.
        lazy_update: for a row_sparse gradient, update only its rows (weight, mean and var; MXNet
            1.x's default, True); False gives the standard update of every row.  Dense gradients
            always get the standard update.
    """

    def __init__(
        self,
        learning_rate: float | None = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        lazy_update: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = _check_moment_rates(beta1, beta2, epsilon)
        self.lazy_update = _check_bool("lazy_update", lazy_update)

    def _effective_lrs(self, indices: list[Any], lrs: list[float]) -> list[float]:
        # lr_t = lr * sqrt(1 - beta2**t) / (1 - beta1**t), t = this index's update count
        return self._bias_corrected(indices, lrs, self.beta1, self.beta2)

    def _fused_step(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor], states: list[Any], lr: float, wd: float
    ) -> None:
        rescale = float(self.rescale_grad)
        if self.clip_gradient is not None or wd != 0.0:
            grads = _preprocess_grads(grads, weights, rescale, None, wd)
            if self.clip_gradient is not None:  # MXNet 1.9 clips after adding the weight decay
                torch._foreach_clamp_min_(grads, -self.clip_gradient)
                torch._foreach_clamp_max_(grads, self.clip_gradient)
            rescale = 1.0
        means, denom = _foreach_adam_moments(states, grads, self.beta1, self.beta2, rescale, self.epsilon)
        torch._foreach_addcdiv_(weights, means, denom, value=-lr)
