"""RMSProp, plain (Tieleman & Hinton) and centered (Graves), MXNet 2.0 semantics."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from .base import (
    Optimizer,
    _check_bool,
    _check_optional_positive,
    _check_real,
    _check_unit,
    _prep_grad,
    register,
)

__all__ = ["RMSProp"]


@register
class RMSProp(Optimizer):
    """RMSProp.  With ``g = clip(rescale_grad * grad, clip_gradient) + wd * weight``:

    ``centered=False`` (Tieleman & Hinton, 2012)::

        var = rho * var + (1 - rho) * g**2
        weight -= lr * g / (sqrt(var) + epsilon)

    ``centered=True`` (Graves, 2013, eqs. 38-45)::

        mean = rho * mean + (1 - rho) * g
        var = rho * var + (1 - rho) * g**2
        mom = momentum * mom - lr * g / sqrt(var - mean**2 + epsilon)
        weight += mom

    Afterwards, if ``clip_weights`` is set, ``weight`` is clipped into ``[-clip_weights, clip_weights]``.

    Args:
        learning_rate: default 0.001.
        rho: decay rate in [0, 1), default 0.9 (MXNet 1.x: ``gamma1``).
        momentum: in [0, 1), default 0.9, used only when centered (MXNet 1.x: ``gamma2``).
        epsilon: default 1e-8.
        centered: use Graves' centered variant.
        clip_weights: optional positive bound for the weights.
    """

    def __init__(
        self,
        learning_rate: float | None = 0.001,
        rho: float = 0.9,
        momentum: float = 0.9,
        epsilon: float = 1e-8,
        centered: bool = False,
        clip_weights: float | None = None,
        gamma1: float | None = None,
        gamma2: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        if gamma1 is not None:
            warnings.warn("RMSProp: 'gamma1' is deprecated, use 'rho'", DeprecationWarning, stacklevel=2)
            rho = gamma1
        if gamma2 is not None:
            warnings.warn("RMSProp: 'gamma2' is deprecated, use 'momentum'", DeprecationWarning, stacklevel=2)
            momentum = gamma2
        self.rho = _check_unit("rho", rho)
        self.momentum = _check_unit("momentum", momentum)
        self.epsilon = _check_real("epsilon", epsilon, lo=0.0)
        self.centered = _check_bool("centered", centered)
        self.clip_weights = _check_optional_positive("clip_weights", clip_weights)

    def create_state(self, index: Any, weight: torch.Tensor) -> Any:
        """``var`` (plain) or ``(mean, var, mom)`` (centered), zeros like ``weight``."""
        if self.centered:
            return tuple(torch.zeros_like(weight, memory_format=torch.preserve_format) for _ in range(3))
        return torch.zeros_like(weight, memory_format=torch.preserve_format)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        rho, eps = self.rho, self.epsilon
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        if wd != 0.0:
            g.add_(weight, alpha=wd)
        if not self.centered:
            if not isinstance(state, torch.Tensor):
                raise TypeError(f"RMSProp(centered=False) needs a tensor state, got {type(state).__name__}")
            state.mul_(rho).addcmul_(g, g, value=1.0 - rho)
            weight.addcdiv_(g, state.sqrt().add_(eps), value=-lr)
        else:
            if not (isinstance(state, (tuple, list)) and len(state) == 3):
                raise TypeError(
                    f"RMSProp(centered=True) needs a (mean, var, mom) state, got {type(state).__name__}"
                )
            mean, var, mom = state
            mean.mul_(rho).add_(g, alpha=1.0 - rho)
            var.mul_(rho).addcmul_(g, g, value=1.0 - rho)
            denom = var.addcmul(mean, mean, value=-1.0).add_(eps).sqrt_()
            mom.mul_(self.momentum).addcdiv_(g, denom, value=-lr)
            weight.add_(mom)
        if self.clip_weights is not None:
            weight.clamp_(-self.clip_weights, self.clip_weights)
