"""AdaGrad (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import Optimizer, register
from .checks import _check_real
from .tensors import _prep_grad

__all__ = ["AdaGrad"]


@register
class AdaGrad(Optimizer):
    """AdaGrad (Duchi et al., 2011), as MXNet 1.9 applies it::

        g = clip(rescale_grad * grad, clip_gradient)
        history += g**2
        weight -= lr * (g / sqrt(history + eps) + wd * weight)

    Args:
        learning_rate: default 0.01.
        eps: added to the history under the square root, default 1e-7 (kept as
            ``float_stable_eps``, MXNet's attribute).
        epsilon: MXNet 2.0's name of ``eps``.

    A row_sparse gradient updates only its rows (weight and history), as MXNet's sparse
    ``adagrad_update`` does (MXNet refuses ``wd != 0`` there; mxtorch applies the same rule to the rows).
    """

    lazy_update = True

    def __init__(self, eps: float = 1e-7, epsilon: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.float_stable_eps = _check_real("eps", eps if epsilon is None else epsilon, lo=0.0)

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor:
        """The squared-gradient history (zeros like ``weight``)."""
        return torch.zeros_like(weight, memory_format=torch.preserve_format)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        state.addcmul_(g, g)
        step = g.div_(state.add(self.float_stable_eps).sqrt_())
        if wd != 0.0:
            step.add_(weight, alpha=wd)
        weight.sub_(step, alpha=lr)
