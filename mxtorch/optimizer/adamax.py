"""AdaMax: Adam with the infinity norm (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import _PairStateOptimizer, register
from .checks import _check_unit
from .tensors import _prep_grad_wd

__all__ = ["Adamax"]


@register
class Adamax(_PairStateOptimizer):  # state: (m, u), zeros like the weight
    """AdaMax (Kingma & Ba, *Adam*, section 7), at step ``t`` of each weight::

        g = clip(rescale_grad * grad + wd * weight, clip_gradient)
        m = beta1 * m + (1 - beta1) * g
        u = maximum(beta2 * u, |g|)
        weight -= lr / (1 - beta1**t) * m / u

    The state is ``(m, u)``.

    Args:
        learning_rate: default 0.002.
        beta1, beta2: decay rates in [0, 1) (defaults 0.9, 0.999).
    """

    def __init__(
        self, learning_rate: float | None = 0.002, beta1: float = 0.9, beta2: float = 0.999, **kwargs: Any
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = _check_unit("beta1", beta1)
        self.beta2 = _check_unit("beta2", beta2)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        m, u = state
        t = self._index_update_count[index]
        g = _prep_grad_wd(grad, weight, float(self.rescale_grad), self.clip_gradient, wd)
        m.mul_(self.beta1).add_(g, alpha=1.0 - self.beta1)
        torch.maximum(u.mul_(self.beta2), g.abs_(), out=u)
        weight.addcdiv_(m, u, value=-lr / (1.0 - self.beta1**t))
