"""LARS: SGD with layer-wise adaptive learning rates (MXNet 1.9 semantics)."""

from __future__ import annotations

from typing import Any

import torch

from .base import Optimizer, register
from .checks import _check_bool, _check_real, _check_unit
from .tensors import _norm, _prep_grad

__all__ = ["LARS"]

_NO_LARS_SUFFIXES = ("gamma", "beta", "bias")


@register
class LARS(Optimizer):
    """LARS (You et al., *Large Batch Training of Convolutional Networks*): SGD with momentum whose
    learning rate is scaled per layer::

        w_norm = ||weight||;  g_norm = ||rescale_grad * grad||
        lars = eta * w_norm / (g_norm + wd * w_norm + eps) if w_norm > 0 and g_norm > 0 else 1
        g = clip(rescale_grad * grad, clip_gradient) + wd * weight
        mom = mu * mom - lr * lars * g;  weight += mom        (weight -= lr * lars * g if momentum == 0)

    Parameters whose name (``param_idx2name`` or ``param_dict[index].name``) ends in ``gamma``,
    ``beta`` or ``bias`` use ``lars = 1``.  With ``momentum_correction``, ``mu`` is
    ``momentum * lr / previous lr`` (Goyal et al.), where "previous" is the global learning rate
    of the previous update (it differs only when a scheduler changed it); else ``mu = momentum``.
    With ``param_idx2name``, names not ending in ``weight`` get no weight decay (MXNet's LARS also
    exempts ``gamma``, unlike the other optimizers).

    Args:
        learning_rate: default 0.01.
        momentum: in [0, 1), default 0.
        lazy_update: with a row_sparse gradient, update only its rows (the norms then cover those
            rows only); default True, as MXNet's.
        eta: LARS coefficient, default 0.001.
        eps: added to the denominator of ``lars``, default 0.
        momentum_correction: default True.

    With ``multi_precision`` an fp16/bf16 weight's state is ``(momentum, fp32 master weight)``.
    """

    _master_first = False  # MXNet's LARS state layout: (momentum, master)
    _decayed_suffixes = ("weight",)

    def __init__(
        self,
        momentum: float = 0.0,
        lazy_update: bool = True,
        eta: float = 0.001,
        eps: float = 0.0,
        momentum_correction: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.momentum = _check_unit("momentum", momentum)
        self.lazy_update = _check_bool("lazy_update", lazy_update)
        self.eta = _check_real("eta", eta, lo=0.0)
        self.eps = _check_real("eps", eps, lo=0.0)
        self.momentum_correction = _check_bool("momentum_correction", momentum_correction)
        self.last_lr: float | None = None
        self.cur_lr: float | None = None

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor | None:
        """The momentum buffer (zeros like ``weight``), or None when ``momentum == 0``."""
        if self.momentum == 0.0:
            return None
        return torch.zeros_like(weight, memory_format=torch.preserve_format)

    def _base_lr(self) -> float:
        lr = super()._base_lr()
        self.last_lr = lr if self.cur_lr is None else self.cur_lr
        self.cur_lr = lr
        return lr

    def _param_name(self, index: Any) -> str:
        if index in self.idx2name:
            return str(self.idx2name[index])
        param = self.param_dict.get(index) if self.param_dict else None
        name = getattr(param, "name", None)
        return str(name) if name is not None else str(index)

    def _lars_factor(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, wd: float
    ) -> torch.Tensor | float:
        if self._param_name(index).endswith(_NO_LARS_SUFFIXES):
            return 1.0
        w_norm = _norm(weight)
        g_norm = _norm(grad) * abs(float(self.rescale_grad))
        lars = self.eta * w_norm / (g_norm + wd * w_norm + self.eps)
        return torch.where((w_norm > 0) & (g_norm > 0), lars, torch.ones_like(lars))

    def _momentum(self) -> float:
        last, cur = self.last_lr, self.cur_lr
        if self.momentum_correction and last and cur is not None:
            return self.momentum * (cur / last)
        return self.momentum

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        lars = self._lars_factor(index, weight, grad, wd)
        step = lars * lr if isinstance(lars, float) else (lars * lr).to(weight.dtype)
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        if wd != 0.0:
            g.add_(weight, alpha=wd)
        g.mul_(step)
        if state is None:
            weight.sub_(g)
        else:
            state.mul_(self._momentum()).sub_(g)
            weight.add_(state)
