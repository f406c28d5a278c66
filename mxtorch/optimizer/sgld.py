"""SGLD: stochastic gradient Langevin dynamics (MXNet 1.9 semantics)."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..nd.random import normal
from .base import Optimizer, register
from .tensors import _prep_grad

__all__ = ["SGLD"]


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics (Welling & Teh, 2011; MXNet cites Patterson & Teh,
    *Stochastic Gradient Riemannian Langevin Dynamics on the Probability Simplex*)::

        g = clip(rescale_grad * grad, clip_gradient)
        weight += -lr / 2 * (g + wd * weight) + N(0, sqrt(lr))

    The noise is drawn with ``mx.random.normal`` (torch's generator of the weight's device), so
    ``mx.random.seed`` makes it reproducible.  No state.

    Args:
        learning_rate: default 0.01.
    """

    def create_state(self, index: Any, weight: torch.Tensor) -> None:
        """SGLD keeps no state."""
        return None

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        if wd != 0.0:
            g.add_(weight, alpha=wd)
        weight.sub_(g, alpha=lr / 2.0)
        noise = normal(0.0, math.sqrt(lr), shape=tuple(weight.shape), dtype=weight.dtype, ctx=weight.device)
        weight.add_(noise)
