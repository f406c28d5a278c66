"""MXNet's fused AdamW operators (``mx.nd.contrib.adamw_update`` and its multi-precision and
multi-tensor forms).

With ``g = clip(rescale_grad * grad, clip_gradient)`` (no clipping for a negative clip)::

    mean = beta1 * mean + (1 - beta1) * g
    var = beta2 * var + (1 - beta2) * g**2
    weight -= eta * (lr * mean / (sqrt(var) + epsilon) + wd * weight)

``rescale_grad`` is an array (or a number): where it is 0, NaN or infinite the update is skipped
and nothing changes, as MXNet's loss-scaling callers rely on.  The ``mp_`` forms update a float32
master weight from a low-precision gradient and write the weight cast back to its own dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ._common import write_out

Tensor = torch.Tensor

__all__ = ["adamw_update", "mp_adamw_update", "multi_adamw_update", "multi_mp_adamw_update"]


def _scale(rescale_grad: Any) -> float | None:
    """The rescale factor, or None where MXNet skips the update (0, NaN, inf)."""
    scale = float(rescale_grad.reshape(-1)[0]) if isinstance(rescale_grad, Tensor) else float(rescale_grad)
    return None if scale == 0.0 or not math.isfinite(scale) else scale


def _step(weight32: Tensor, grad: Tensor, mean: Tensor, var: Tensor, scale: float, lr: float, eta: float,
          beta1: float, beta2: float, epsilon: float, wd: float, clip_gradient: float) -> None:
    g = grad.to(weight32.dtype) * scale
    if clip_gradient >= 0:
        g.clamp_(-clip_gradient, clip_gradient)
    mean.mul_(beta1).add_(g, alpha=1 - beta1)
    var.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    weight32.sub_((lr * mean / (var.sqrt() + epsilon) + wd * weight32) * eta)


def _need(value: Any, name: str, op: str) -> float:
    if value is None:
        raise TypeError(f"{op}() needs {name}")
    return float(value)


@torch.no_grad()
def adamw_update(weight: Tensor, grad: Tensor, mean: Tensor, var: Tensor, rescale_grad: Any,
                 lr: float | None = None, eta: float | None = None, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, wd: float = 0.0, clip_gradient: float = -1.0, out: Any = None,
                 **kwargs: Any) -> Tensor:
    """One AdamW step on ``weight`` (``mean``/``var`` updated in place); skipped for a 0/NaN/inf
    ``rescale_grad``."""
    lr, eta = _need(lr, "lr", "adamw_update"), _need(eta, "eta", "adamw_update")
    new = weight if out is weight else weight.clone()
    scale = _scale(rescale_grad)
    if scale is not None:
        _step(new, grad, mean, var, scale, lr, eta, beta1, beta2, epsilon, wd, clip_gradient)
    return new if out is None or out is new else write_out(new, out, "adamw_update")  # type: ignore[no-any-return]


@torch.no_grad()
def mp_adamw_update(weight: Tensor, grad: Tensor, mean: Tensor, var: Tensor, weight32: Tensor,
                    rescale_grad: Any, lr: float | None = None, eta: float | None = None, beta1: float = 0.9,
                    beta2: float = 0.999, epsilon: float = 1e-8, wd: float = 0.0, clip_gradient: float = -1.0,
                    out: Any = None, **kwargs: Any) -> Tensor:
    """:func:`adamw_update` on the float32 master ``weight32`` (updated in place); the result is
    ``weight32`` cast to ``weight``'s dtype."""
    lr, eta = _need(lr, "lr", "mp_adamw_update"), _need(eta, "eta", "mp_adamw_update")
    scale = _scale(rescale_grad)
    if scale is None:
        new = weight if out is weight else weight.clone()
    else:
        _step(weight32, grad, mean, var, scale, lr, eta, beta1, beta2, epsilon, wd, clip_gradient)
        new = weight32.to(weight.dtype)
    return new if out is None or out is new else write_out(new, out, "mp_adamw_update")  # type: ignore[no-any-return]


def _per_tensor(values: Any, n: int, name: str, op: str) -> list[float]:
    vals = list(values) if isinstance(values, (list, tuple)) else [values] * n
    if len(vals) != n:
        raise ValueError(f"{op}: {n} weights but {len(vals)} {name}")
    return [_need(v, name, op) for v in vals]


def _multi(op: str, weights: Sequence[Tensor], grads: Sequence[Tensor], mean: Sequence[Tensor],
           var: Sequence[Tensor], weights32: Sequence[Tensor] | None, rescale_grad: Any, lrs: Any, etas: Any,
           wds: Any, kw: dict[str, Any], out: Any) -> list[Tensor]:
    n = len(weights)
    if not (len(grads) == len(mean) == len(var) == n) or (weights32 is not None and len(weights32) != n):
        raise ValueError(f"{op}: weights, grads, mean and var (and weights32) must have one entry per weight")
    lr_l, eta_l = _per_tensor(lrs, n, "lrs", op), _per_tensor(etas, n, "etas", op)
    wd_l = _per_tensor(0.0 if wds is None else wds, n, "wds", op)
    outs = list(out) if isinstance(out, (list, tuple)) else [None] * n
    if len(outs) != n:
        raise ValueError(f"{op}: {n} weights but {len(outs)} outputs")
    res = []
    for i in range(n):
        args = dict(kw, lr=lr_l[i], eta=eta_l[i], wd=wd_l[i], out=outs[i])
        if weights32 is None:
            res.append(adamw_update(weights[i], grads[i], mean[i], var[i], rescale_grad, **args))
        else:
            res.append(mp_adamw_update(weights[i], grads[i], mean[i], var[i], weights32[i], rescale_grad,
                                       **args))
    return res


def multi_adamw_update(weights: Sequence[Tensor], grads: Sequence[Tensor], mean: Sequence[Tensor],
                       var: Sequence[Tensor], rescale_grad: Any, lrs: Any = None, etas: Any = None,
                       wds: Any = None, out: Any = None, **kwargs: Any) -> list[Tensor]:
    """:func:`adamw_update` for each weight, with per-weight ``lrs``/``etas``/``wds``."""
    return _multi("multi_adamw_update", weights, grads, mean, var, None, rescale_grad, lrs, etas, wds, kwargs,
                  out)


def multi_mp_adamw_update(weights: Sequence[Tensor], grads: Sequence[Tensor], mean: Sequence[Tensor],
                          var: Sequence[Tensor], weights32: Sequence[Tensor], rescale_grad: Any,
                          lrs: Any = None, etas: Any = None, wds: Any = None, out: Any = None,
                          **kwargs: Any) -> list[Tensor]:
    """:func:`mp_adamw_update` for each weight, with per-weight ``lrs``/``etas``/``wds``."""
    return _multi("multi_mp_adamw_update", weights, grads, mean, var, weights32, rescale_grad, lrs, etas, wds,
                  kwargs, out)
