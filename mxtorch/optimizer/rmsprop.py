"""RMSProp, plain (Tieleman & Hinton) and centered (Graves), MXNet 1.9 semantics."""

from __future__ import annotations

from typing import Any

import torch

from .base import Optimizer, register
from .checks import _check_bool, _check_optional_positive, _check_real, _check_unit
from .tensors import _prep_grad_wd

__all__ = ["RMSProp"]


def _alias(name: str, value: float, alias: str, alias_value: float | None, default: float) -> float:
    """``value`` (MXNet 1.9's name) or ``alias_value`` (MXNet 2.0's name); both only if equal."""
    if alias_value is None:
        return value
    if value != default and value != alias_value:
        raise ValueError(f"RMSProp got {name}={value!r} and {alias}={alias_value!r}; they name the same "
                         f"hyper-parameter ({alias} is MXNet 2.0's name of {name}): pass one")
    return alias_value


@register
class RMSProp(Optimizer):
    """RMSProp.  With ``g = clip(rescale_grad * grad + wd * weight, clip_gradient)``:

    ``centered=False`` (Tieleman & Hinton, 2012)::

        n = gamma1 * n + (1 - gamma1) * g**2
        weight -= lr * g / sqrt(n + epsilon)

    ``centered=True`` (Graves, 2013, eqs. 38-45)::

        n = gamma1 * n + (1 - gamma1) * g**2
        m = gamma1 * m + (1 - gamma1) * g
        delta = gamma2 * delta - lr * g / sqrt(n - m**2 + epsilon)
        weight += delta

    Afterwards, if ``clip_weights`` is set, ``weight`` is clipped into ``[-clip_weights, clip_weights]``.
    The state is ``(n,)`` or ``(n, m, delta)``, as in MXNet 1.9.

    Args:
        learning_rate: default 0.001.
        gamma1: decay rate in [0, 1), default 0.9 (MXNet 2.0: ``rho``, accepted too).
        gamma2: momentum in [0, 1), default 0.9, used only when centered (MXNet 2.0: ``momentum``).
        epsilon: default 1e-8.
        centered: use Graves' centered variant.
        clip_weights: optional positive bound for the weights.
    """

    def __init__(
        self,
        learning_rate: float | None = 0.001,
        gamma1: float = 0.9,
        gamma2: float = 0.9,
        epsilon: float = 1e-8,
        centered: bool = False,
        clip_weights: float | None = None,
        rho: float | None = None,
        momentum: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = _check_unit("gamma1", _alias("gamma1", gamma1, "rho", rho, 0.9))
        self.gamma2 = _check_unit("gamma2", _alias("gamma2", gamma2, "momentum", momentum, 0.9))
        self.epsilon = _check_real("epsilon", epsilon, lo=0.0)
        self.centered = _check_bool("centered", centered)
        self.clip_weights = _check_optional_positive("clip_weights", clip_weights)

    def create_state(self, index: Any, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(n,)`` (plain) or ``(n, m, delta)`` (centered), zeros like ``weight``."""
        count = 3 if self.centered else 1
        return tuple(torch.zeros_like(weight, memory_format=torch.preserve_format) for _ in range(count))

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        size = 3 if self.centered else 1
        if not (isinstance(state, (tuple, list)) and len(state) == size):
            what = "an (n, m, delta)" if self.centered else "an (n,)"
            raise TypeError(
                f"RMSProp(centered={self.centered}) needs {what} state for index {index!r}, got "
                f"{type(state).__name__}; create states with create_state"
            )
        g1, eps = self.gamma1, self.epsilon
        g = _prep_grad_wd(grad, weight, float(self.rescale_grad), self.clip_gradient, wd)
        n = state[0]
        n.mul_(g1).addcmul_(g, g, value=1.0 - g1)
        if not self.centered:
            weight.addcdiv_(g, n.add(eps).sqrt_(), value=-lr)
        else:
            _, m, delta = state
            m.mul_(g1).add_(g, alpha=1.0 - g1)
            denom = n.addcmul(m, m, value=-1.0).add_(eps).sqrt_()
            delta.mul_(self.gamma2).addcdiv_(g, denom, value=-lr)
            weight.add_(delta)
        if self.clip_weights is not None:
            weight.clamp_(-self.clip_weights, self.clip_weights)
