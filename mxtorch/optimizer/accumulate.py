"""``'test'``: MXNet's testing optimizer, which adds the rescaled gradient to the weight."""

from __future__ import annotations

from typing import Any

import torch

from .base import Optimizer, register

__all__ = ["Test"]


@register
class Test(Optimizer):
    """``weight += rescale_grad * grad`` (no learning rate, weight decay or clipping), and the state
    keeps a copy of the new weight.

    MXNet ships it under the name ``'test'`` for checking stores: with it a KVStore's stored value
    is the running sum of everything pushed (times ``rescale_grad``), which tests can compute by
    hand.
    """

    __test__ = False  # not a pytest test class

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor:
        """A buffer like ``weight`` that holds the weight after each update."""
        return torch.zeros_like(weight, memory_format=torch.preserve_format)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        weight.add_(grad.to(weight.dtype), alpha=float(self.rescale_grad))
        if isinstance(state, torch.Tensor):
            state.copy_(weight)
