"""AdaGrad (MXNet 2.0 semantics)."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from .base import Optimizer, _check_real, _prep_grad, register

__all__ = ["AdaGrad"]


@register
class AdaGrad(Optimizer):
    """AdaGrad (Duchi et al., 2011)::

        g = clip(rescale_grad * grad, clip_gradient) + wd * weight
        history += g**2
        weight -= lr * g / (sqrt(history) + epsilon)

    Args:
        learning_rate: default 0.01.
        epsilon: default 1e-6 (MXNet 2.0).
        eps: MXNet 1.x name of ``epsilon``; accepted with a ``DeprecationWarning``.

    A row_sparse gradient updates only its rows (weight and history), as MXNet's sparse
    AdaGrad does.
    """

    def __init__(
        self,
        learning_rate: float | None = 0.01,
        epsilon: float = 1e-6,
        eps: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        if eps is not None:
            warnings.warn("AdaGrad: 'eps' is deprecated, use 'epsilon'", DeprecationWarning, stacklevel=2)
            epsilon = eps
        self.epsilon = _check_real("epsilon", epsilon, lo=0.0)

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor:
        """The squared-gradient history (zeros like ``weight``)."""
        return torch.zeros_like(weight, memory_format=torch.preserve_format)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        if wd != 0.0:
            g.add_(weight, alpha=wd)
        state.addcmul_(g, g)
        weight.addcdiv_(g, state.sqrt().add_(self.epsilon), value=-lr)
