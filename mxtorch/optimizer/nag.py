"""Nesterov accelerated gradient (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import register
from .checks import _check_unit
from .fused import _MomentumOptimizer

__all__ = ["NAG"]


@register
class NAG(_MomentumOptimizer):
    """Nesterov accelerated gradient.

    With ``g = clip(rescale_grad * grad, clip_gradient) + wd * weight``::

        mom = momentum * mom - lr * g
        weight += momentum * mom - lr * g

    (MXNet writes the same rule with the opposite sign convention for ``mom``.)  With
    ``momentum == 0`` it is plain SGD: ``weight -= lr * g``.

    Args:
        learning_rate: default 0.01 (MXNet 1.9).
        momentum: in [0, 1), default 0 (MXNet 1.9; 0 keeps no state).

    With ``multi_precision`` an fp16/bf16 weight's state is ``(momentum, fp32 master weight)``.
    """

    def __init__(self, learning_rate: float | None = None, momentum: float = 0.0, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = _check_unit("momentum", momentum)

    def _momentum_step(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor], moms: list[torch.Tensor], lr: float,
        wd: float, rescale: float,
    ) -> None:
        m = self.momentum
        torch._foreach_mul_(moms, m)
        torch._foreach_add_(moms, grads, alpha=-lr * rescale)
        if wd != 0.0:
            torch._foreach_add_(moms, weights, alpha=-lr * wd)
            # weight + m * mom - lr * (rescale * grad + wd * weight)
            torch._foreach_mul_(weights, 1.0 - lr * wd)
        torch._foreach_add_(weights, moms, alpha=m)
        torch._foreach_add_(weights, grads, alpha=-lr * rescale)
