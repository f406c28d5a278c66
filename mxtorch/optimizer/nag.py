"""Nesterov accelerated gradient (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import register
from .checks import _check_unit
from .fused import _FusedOptimizer
from .tensors import _preprocess_grads

__all__ = ["NAG"]


@register
class NAG(_FusedOptimizer):
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

    _master_first = False  # MXNet's NAG state layout: (momentum, master)

    def __init__(self, learning_rate: float | None = None, momentum: float = 0.0, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = _check_unit("momentum", momentum)

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor | None:
        """The momentum buffer (zeros like ``weight``), or None when ``momentum == 0``."""
        if self.momentum == 0.0:
            return None
        return torch.zeros_like(weight, memory_format=torch.preserve_format)

    def _fused_step(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor], states: list[Any], lr: float, wd: float
    ) -> None:
        rescale = float(self.rescale_grad)
        if self.clip_gradient is not None:
            grads = _preprocess_grads(grads, weights, rescale, self.clip_gradient, 0.0)
            rescale = 1.0
        if self.momentum == 0.0:
            if wd != 0.0:
                torch._foreach_mul_(weights, 1.0 - lr * wd)
            torch._foreach_add_(weights, grads, alpha=-lr * rescale)
            return
        moms = states
        m = self.momentum
        torch._foreach_mul_(moms, m)
        torch._foreach_add_(moms, grads, alpha=-lr * rescale)
        if wd != 0.0:
            torch._foreach_add_(moms, weights, alpha=-lr * wd)
            # weight + m * mom - lr * (rescale * grad + wd * weight)
            torch._foreach_mul_(weights, 1.0 - lr * wd)
        torch._foreach_add_(weights, moms, alpha=m)
        torch._foreach_add_(weights, grads, alpha=-lr * rescale)
