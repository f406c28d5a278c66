"""AdaDelta (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import _PairStateOptimizer, register
from .checks import _check_real, _check_unit
from .tensors import _prep_grad

__all__ = ["AdaDelta"]


@register
class AdaDelta(_PairStateOptimizer):  # state: (acc_g, acc_delta), zeros like the weight
    """AdaDelta (Zeiler, 2012), as MXNet 1.9 applies it::

        g = clip(rescale_grad * grad, clip_gradient)
        acc_g = rho * acc_g + (1 - rho) * g**2
        delta = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * g
        acc_delta = rho * acc_delta + (1 - rho) * delta**2
        weight -= delta + wd * weight

    AdaDelta adapts its own step size: as in MXNet 1.9 the learning rate (and a scheduler) is
    accepted but does not enter the update.

    Args:
        rho: decay rate in [0, 1), default 0.9.
        epsilon: default 1e-5.
    """

    def __init__(self, rho: float = 0.9, epsilon: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rho = _check_unit("rho", rho)
        self.epsilon = _check_real("epsilon", epsilon, lo=0.0)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        acc_g, acc_delta = state
        rho, eps = self.rho, self.epsilon
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        acc_g.mul_(rho).addcmul_(g, g, value=1.0 - rho)
        delta = (acc_delta + eps).sqrt_().div_((acc_g + eps).sqrt_()).mul_(g)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1.0 - rho)
        if wd != 0.0:
            delta.add_(weight, alpha=wd)
        weight.sub_(delta)
