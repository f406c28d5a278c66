"""SGD with momentum and weight decay (MXNet 1.9 semantics), and ``ccSGD``, its deprecated alias."""

from __future__ import annotations

from typing import Any

import torch

from .base import register
from .checks import _check_bool, _check_unit
from .fused import _MomentumOptimizer

__all__ = ["SGD", "ccSGD"]


@register
class SGD(_MomentumOptimizer):
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

    def _momentum_step(
        self, weights: list[torch.Tensor], grads: list[torch.Tensor], moms: list[torch.Tensor], lr: float,
        wd: float, rescale: float,
    ) -> None:
        torch._foreach_mul_(moms, self.momentum)
        torch._foreach_add_(moms, grads, alpha=-lr * rescale)
        if wd != 0.0:
            torch._foreach_add_(moms, weights, alpha=-lr * wd)
        torch._foreach_add_(weights, moms)


@register
class ccSGD(SGD):  # MXNet's spelling
    """MXNet's deprecated ``ccSGD`` (registered as ``'ccsgd'``): the same optimizer as :class:`SGD`."""
