"""AdamW: Adam with decoupled weight decay (MXNet's AdamW / contrib ``adamw_update`` semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import _PairStateOptimizer, register
from .checks import _check_bool, _check_moment_rates
from .fused import _FusedOptimizer
from .tensors import _foreach_adam_moments, _preprocess_grads

__all__ = ["AdamW"]


@register
class AdamW(_PairStateOptimizer, _FusedOptimizer):  # state: (mean, var), zeros like the weight
    """Adam with decoupled weight decay (Loshchilov & Hutter), at step ``t`` of each weight::

        g = clip(rescale_grad * grad, clip_gradient)           # no weight decay in g
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        lr_t = lr * sqrt(1 - beta2**t) / (1 - beta1**t)        # lr_t = lr if not correct_bias
        weight -= lr_t * (m / (sqrt(v) + epsilon) + wd * weight)

    This is MXNet's ``AdamW`` fused path (contrib ``adamw_update`` with ``eta = lr_t``, ``lr = 1``):
    the decay term is scaled by the same (bias-corrected) step size and uses the weight before
    this step.

    Args:
        learning_rate: default 0.001.
        beta1, beta2: decay rates in [0, 1) (defaults 0.9, 0.999).
        epsilon: default 1e-6.
        correct_bias: apply the bias correction to the step size (default True).
    """

    def __init__(
        self,
        learning_rate: float | None = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-6,
        correct_bias: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = _check_moment_rates(beta1, beta2, epsilon)
        self.correct_bias = _check_bool("correct_bias", correct_bias)

    def _effective_lrs(self, indices: list[Any], lrs: list[float]) -> list[float]:
        # lr_t = lr * sqrt(1 - beta2**t) / (1 - beta1**t), t = this index's update count
        if not self.correct_bias:
            return lrs
        return self._bias_corrected(indices, lrs, self.beta1, self.beta2)

    def _fused_step(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor], states: list[Any], lr: float, wd: float
    ) -> None:
        rescale = float(self.rescale_grad)
        if self.clip_gradient is not None:
            grads = _preprocess_grads(grads, weights, rescale, self.clip_gradient, 0.0)
            rescale = 1.0
        means, denom = _foreach_adam_moments(states, grads, self.beta1, self.beta2, rescale, self.epsilon)
        if wd != 0.0:
            torch._foreach_mul_(weights, 1.0 - lr * wd)
        torch._foreach_addcdiv_(weights, means, denom, value=-lr)
