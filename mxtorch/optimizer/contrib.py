"""MXNet's ``mx.optimizer.contrib``: GroupAdaGrad, AdaGrad with one learning rate per row."""

from __future__ import annotations

from typing import Any

import torch

from ..base import MXNetError
from .base import Optimizer, register
from .checks import _check_real
from .tensors import _prep_grad

__all__ = ["GroupAdaGrad"]


@register
class GroupAdaGrad(Optimizer):
    """AdaGrad (Duchi et al., 2011) with a single history entry per row of a 2-D weight::

        g = clip(rescale_grad * grad, clip_gradient)
        history += mean(g**2, axis=1, keepdims=True)       # shape (rows, 1)
        weight -= lr * g / sqrt(history + eps)

    A row_sparse gradient updates only its rows (weight and history), as MXNet's
    ``group_adagrad_update``.  Weight decay is not supported (MXNet refuses it too).

    Args:
        eps: added to the history under the square root, default 1e-5 (kept as
            ``float_stable_eps``, MXNet's attribute).
    """

    lazy_update = True

    def __init__(self, eps: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.float_stable_eps = _check_real("eps", eps, lo=0.0)

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor:
        """The per-row history: zeros of shape (rows, 1)."""
        if weight.dim() != 2:
            raise MXNetError(f"GroupAdaGrad updates 2-D weights (one learning rate per row), index {index!r} "
                             f"has shape {tuple(weight.shape)}")
        return torch.zeros((weight.shape[0], 1), dtype=weight.dtype, device=weight.device)

    def _step(
        self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float, wd: float
    ) -> None:
        if wd != 0.0:
            raise MXNetError(f"GroupAdaGrad does not support weight decay (index {index!r} has wd={wd}): "
                             "set wd=0")
        g = _prep_grad(grad, float(self.rescale_grad), self.clip_gradient)
        state.add_(g.square().mean(dim=1, keepdim=True))
        weight.sub_(g.div_(state.add(self.float_stable_eps).sqrt_()), alpha=lr)
