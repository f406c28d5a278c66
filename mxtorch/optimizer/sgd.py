"""SGD with momentum and weight decay (MXNet 1.9 semantics), and ``ccSGD``, its deprecated alias."""

from __future__ import annotations

from typing import Any

import torch

from .base import register
from .checks import _check_bool, _check_unit
from .fused import _FusedOptimizer
from .tensors import _preprocess_grads

__all__ = ["SGD", "ccSGD"]


@register
class SGD(_FusedOptimizer):
    """Stochastic gradient descent with momentum and weight decay.

    With ``g = clip(rescale_grad * grad, clip_gradient) + wd * weight``::

        momentum == 0:  weight -= lr * g
        otherwise:      mom = momentum * mom - lr * g;  weight += mom

    Args:
        learning_rate: default 0.01 (MXNet 1.9).
        momentum: in [0, 1); 0 keeps no state.
        lazy_update: for a row_sparse gradient, update only its rows (weight and momentum; MXNet
            1.x's default, True); False gives the standard update of every row.  Dense gradients
            always get the standard update.

    With ``multi_precision`` an fp16/bf16 weight's state is ``(momentum, fp32 master weight)``.
    """

    _master_first = False  # MXNet's SGD state layout: (momentum, master)

    def __init__(
        self,
        learning_rate: float | None = None,
        momentum: float = 0.0,
        lazy_update: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = _check_unit("momentum", momentum)
        self.lazy_update = _check_bool("lazy_update", lazy_update)

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
            # weight - lr * (rescale * grad + wd * weight) == (1 - lr * wd) * weight - lr * rescale * grad
            if wd != 0.0:
                torch._foreach_mul_(weights, 1.0 - lr * wd)
            torch._foreach_add_(weights, grads, alpha=-lr * rescale)
            return
        moms = states
        torch._foreach_mul_(moms, self.momentum)
        torch._foreach_add_(moms, grads, alpha=-lr * rescale)
        if wd != 0.0:
            torch._foreach_add_(moms, weights, alpha=-lr * wd)
        torch._foreach_add_(weights, moms)


@register
class ccSGD(SGD):  # MXNet's spelling
    """MXNet's deprecated ``ccSGD`` (registered as ``'ccsgd'``): the same optimizer as :class:`SGD`."""
