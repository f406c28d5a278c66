"""Signum / signSGD (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import Optimizer, register
from .checks import _check_real, _check_unit
from .tensors import _prep_grad

__all__ = ["Signum"]


@register
class Signum(Optimizer):
    """Signum (Bernstein et al., *signSGD*): steps along the sign of the momentum.

    With ``momentum > 0`` and ``g = clip(rescale_grad * grad, clip_gradient) + wd * weight``::

        mom = momentum * mom - (1 - momentum) * g
        weight = (1 - lr * wd_lh) * weight + lr * sign(mom)

    (the state holds the negated moving average, as MXNet's ``signum_update`` keeps it).

    With ``momentum == 0`` (signSGD)::

        weight = (1 - lr * (wd + wd_lh)) * weight - lr * sign(clip(rescale_grad * grad, clip_gradient))

    Args:
        learning_rate: default 0.01.
        momentum: in [0, 1), default 0.9.
        wd_lh: decoupled weight decay (Loshchilov & Hutter), default 0.
    """

    def __init__(
        self, learning_rate: float | None = 0.01, momentum: float = 0.9, wd_lh: float = 0.0, **kwargs: Any
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = _check_unit("momentum", momentum)
        self.wd_lh = _check_real("wd_lh", wd_lh, lo=0.0)

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor | None:
        """The momentum buffer (zeros like ``weight``), or None when ``momentum == 0``."""
        if self.momentum == 0.0:
            return None
        return torch.zeros_like(weight, memory_format=torch.preserve_format)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        if state is None:
            weight.mul_(1.0 - lr * (wd + self.wd_lh))
            weight.sub_(g.sign_(), alpha=lr)
            return
        if wd != 0.0:
            g.add_(weight, alpha=wd)
        state.mul_(self.momentum).sub_(g, alpha=1.0 - self.momentum)
        if self.wd_lh != 0.0:
            weight.mul_(1.0 - lr * self.wd_lh)
        weight.add_(state.sign(), alpha=lr)
