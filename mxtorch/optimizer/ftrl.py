"""FTRL-Proximal (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import _PairStateOptimizer, register
from .checks import _check_real, _check_step_lr
from .tensors import _prep_grad

__all__ = ["Ftrl"]


@register
class Ftrl(_PairStateOptimizer):  # state: (z, n), zeros like the weight
    """FTRL-Proximal (McMahan et al., *Ad Click Prediction: a View from the Trenches*)::

        g = clip(rescale_grad * grad, clip_gradient)
        z += g - (sqrt(n + g**2) - sqrt(n)) * weight / lr
        n += g**2
        weight = -sign(z) * max(|z| - lamda1, 0) / ((beta + sqrt(n)) / lr + wd)

    Args:
        learning_rate: default 0.1 (must be > 0: the rule divides by it).

    A row_sparse gradient updates only its rows (MXNet's sparse ``ftrl_update``).
        lamda1: L1 regularization strength, default 0.01.
        beta: per-coordinate learning-rate parameter, default 1.0.
    """

    _default_learning_rate = 0.1
    lazy_update = True  # a row_sparse gradient updates only its rows (z, n and weight)

    def __init__(
        self, learning_rate: float | None = None, lamda1: float = 0.01, beta: float = 1.0, **kwargs: Any
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        if self.lr == 0.0 and self.lr_scheduler is None:
            raise ValueError("Ftrl divides by the learning rate, so learning_rate must be > 0, got 0")
        self.lamda1 = _check_real("lamda1", lamda1, lo=0.0)
        self.beta = _check_real("beta", beta, lo=0.0)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        _check_step_lr("Ftrl", lr, index)
        z, n = state
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        sqrt_n_old = n.sqrt()
        n.addcmul_(g, g)
        sqrt_n = n.sqrt()
        sigma = (sqrt_n - sqrt_n_old).div_(lr)
        z.add_(g).sub_(sigma.mul_(weight))
        denom = sqrt_n.add_(self.beta).div_(lr).add_(wd)
        shrunk = z.abs().sub_(self.lamda1).clamp_min_(0.0).mul_(z.sign())
        weight.copy_(shrunk.neg_().div_(denom))
