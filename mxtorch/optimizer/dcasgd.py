"""DCASGD: asynchronous SGD with delay compensation (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import Optimizer, register
from .checks import _check_real, _check_unit
from .tensors import _prep_grad

__all__ = ["DCASGD"]


@register
class DCASGD(Optimizer):
    """DC-ASGD (Zheng et al., *Asynchronous Stochastic Gradient Descent with Delay Compensation*)::

        g = clip(rescale_grad * grad, clip_gradient)
        step = -lr * (g + wd * weight + lamda * g * g * (weight - previous_weight))
        mom = momentum * mom + step          (momentum > 0; else mom = step)
        previous_weight = weight
        weight += mom

    The state is ``(momentum buffer or None, previous weight)``; the previous weight starts as a
    copy of the weight.

    Args:
        learning_rate: default 0.01.
        momentum: in [0, 1), default 0.
        lamda: scale of the delay compensation, default 0.04.
    """

    def __init__(self, momentum: float = 0.0, lamda: float = 0.04, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = _check_unit("momentum", momentum)
        self.lamda = _check_real("lamda", lamda, lo=0.0)

    def create_state(self, index: Any, weight: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        """``(momentum buffer or None, copy of the weight)``."""
        previous = weight.detach().clone(memory_format=torch.preserve_format)
        if self.momentum == 0.0:
            return (None, previous)
        return (torch.zeros_like(weight, memory_format=torch.preserve_format), previous)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        mom, previous = state
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        step = (weight - previous).mul_(g).mul_(g).mul_(self.lamda).add_(g)
        if wd != 0.0:
            step.add_(weight, alpha=wd)
        step.mul_(-lr)
        if mom is not None:
            step = mom.mul_(self.momentum).add_(step)
        previous.copy_(weight)
        weight.add_(step)
