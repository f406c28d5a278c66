"""LAMB (MXNet 2.0 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import _PairStateOptimizer, register
from .checks import _check_bool, _check_moment_rates, _check_real
from .tensors import _adam_moments, _norm, _prep_grad

__all__ = ["LAMB"]


@register
class LAMB(_PairStateOptimizer):  # state: (mean, var), zeros like the weight
    """LAMB (You et al., *Large Batch Optimization for Deep Learning*), at step ``t`` of each weight::

        g = clip(rescale_grad * grad, clip_gradient)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        if bias_correction:  m, v = m / (1 - beta1**t), v / (1 - beta2**t)   # for this step only
        u = m / (sqrt(v) + epsilon) + wd * weight
        r1 = clip(||weight||, lower_bound, upper_bound);  r2 = ||u||
        ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1
        weight -= lr * ratio * u

    Args:
        learning_rate: default 0.001.
        beta1, beta2: decay rates in [0, 1) (defaults 0.9, 0.999).
        epsilon: default 1e-6.
        lower_bound, upper_bound: optional bounds on ``||weight||`` in the trust ratio.
        bias_correction: default True.
    """

    def __init__(
        self,
        learning_rate: float | None = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-6,
        lower_bound: float | None = None,
        upper_bound: float | None = None,
        bias_correction: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = _check_moment_rates(beta1, beta2, epsilon)
        self.lower_bound = None if lower_bound is None else _check_real("lower_bound", lower_bound, lo=0.0)
        self.upper_bound = None if upper_bound is None else _check_real("upper_bound", upper_bound, lo=0.0)
        if (
            self.lower_bound is not None
            and self.upper_bound is not None
            and self.lower_bound > self.upper_bound
        ):
            raise ValueError(f"lower_bound ({lower_bound!r}) must not exceed upper_bound ({upper_bound!r})")
        self.bias_correction = _check_bool("bias_correction", bias_correction)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        mean, var = state
        b1, b2 = self.beta1, self.beta2
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        _adam_moments(mean, var, g, b1, b2)
        if self.bias_correction:
            t = self._index_update_count[index]
            m_hat = mean / (1.0 - b1**t)
            denom = (var / (1.0 - b2**t)).sqrt_().add_(self.epsilon)
        else:
            m_hat = mean.clone()
            denom = var.sqrt().add_(self.epsilon)
        upd = m_hat.div_(denom)
        if wd != 0.0:
            upd.add_(weight, alpha=wd)
        r1 = _norm(weight)
        if self.lower_bound is not None:
            r1 = r1.clamp_min(self.lower_bound)
        if self.upper_bound is not None:
            r1 = r1.clamp_max(self.upper_bound)
        r2 = _norm(upd)
        ratio = torch.where((r1 > 0) & (r2 > 0), r1 / r2, torch.ones_like(r1))
        upd.mul_(ratio.mul_(lr).to(upd.dtype))
        weight.sub_(upd)
