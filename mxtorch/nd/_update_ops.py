"""MXNet's optimizer update operators (``mx.nd.sgd_update``, ``adam_update`` ...).

Each takes the weight, the gradient and the state arrays, updates the states in place and
returns the new weight, written into ``out`` when given (MXNet code passes ``out=weight`` to
update in place). ``g`` below is ``rescale_grad * grad``, clipped to ``[-clip_gradient,
clip_gradient]`` when ``clip_gradient >= 0``; the formulas are those of MXNet's operator
reference, including where weight decay enters before or after the clipping.
"""

from __future__ import annotations

from typing import Any

import torch

from ._common import write_out

Tensor = torch.Tensor

__all__ = [
    "sgd_update",
    "sgd_mom_update",
    "nag_mom_update",
    "signsgd_update",
    "signum_update",
    "adam_update",
    "rmsprop_update",
    "rmspropalex_update",
    "ftml_update",
    "ftrl_update",
]


def _clip(g: Tensor, clip: float) -> Tensor:
    return g.clamp(-clip, clip) if clip >= 0 else g


def _finish(new_weight: Tensor, out: Any, op: str) -> Tensor:
    return new_weight if out is None else write_out(new_weight, out, op)  # type: ignore[no-any-return]


def _check(lr: Any, op: str) -> float:
    if lr is None:
        raise TypeError(f"{op}() needs the learning rate lr")
    return float(lr)


@torch.no_grad()
def sgd_update(
    weight: Tensor,
    grad: Tensor,
    lr: float | None = None,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_gradient: float = -1.0,
    lazy_update: bool = True,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``weight = (1 - lr * wd) * weight - lr * g``."""
    lr = _check(lr, "sgd_update")
    g = _clip(grad * rescale_grad, clip_gradient)
    return _finish((1 - lr * wd) * weight - lr * g, out, "sgd_update")


@torch.no_grad()
def sgd_mom_update(
    weight: Tensor,
    grad: Tensor,
    mom: Tensor,
    lr: float | None = None,
    momentum: float = 0.0,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_gradient: float = -1.0,
    lazy_update: bool = True,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``mom = momentum * mom - lr * wd * weight - lr * g``; ``weight = weight + mom``."""
    lr = _check(lr, "sgd_mom_update")
    g = _clip(grad * rescale_grad, clip_gradient)
    mom.mul_(momentum).sub_(lr * wd * weight + lr * g)
    return _finish(weight + mom, out, "sgd_mom_update")


@torch.no_grad()
def nag_mom_update(
    weight: Tensor,
    grad: Tensor,
    mom: Tensor,
    lr: float | None = None,
    momentum: float = 0.0,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_gradient: float = -1.0,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """With ``step = lr * (g + wd * weight)``: ``mom = momentum * mom - step``;
    ``weight = weight + momentum * mom - step`` (Nesterov's look-ahead)."""
    lr = _check(lr, "nag_mom_update")
    step = lr * (_clip(grad * rescale_grad, clip_gradient) + wd * weight)
    mom.mul_(momentum).sub_(step)
    return _finish(weight + momentum * mom - step, out, "nag_mom_update")


@torch.no_grad()
def signsgd_update(
    weight: Tensor,
    grad: Tensor,
    lr: float | None = None,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_gradient: float = -1.0,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``weight = (1 - lr * wd) * weight - lr * sign(grad)`` (rescaling and clipping cannot change a sign)."""
    lr = _check(lr, "signsgd_update")
    return _finish((1 - lr * wd) * weight - lr * torch.sign(grad), out, "signsgd_update")


@torch.no_grad()
def signum_update(
    weight: Tensor,
    grad: Tensor,
    mom: Tensor,
    lr: float | None = None,
    momentum: float = 0.0,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_gradient: float = -1.0,
    wd_lh: float = 0.0,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``mom = momentum * mom - (1 - momentum) * (wd * weight + g)``;
    ``weight = (1 - lr * wd_lh) * weight + lr * sign(mom)``."""
    lr = _check(lr, "signum_update")
    g = _clip(grad * rescale_grad, clip_gradient)
    mom.mul_(momentum).sub_((1 - momentum) * (wd * weight + g))
    return _finish((1 - lr * wd_lh) * weight + lr * torch.sign(mom), out, "signum_update")


@torch.no_grad()
def adam_update(
    weight: Tensor,
    grad: Tensor,
    mean: Tensor,
    var: Tensor,
    lr: float | None = None,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-8,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_gradient: float = -1.0,
    lazy_update: bool = True,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """With ``h = clip(rescale_grad * grad + wd * weight)``: ``mean = beta1 * mean + (1 - beta1) * h``,
    ``var = beta2 * var + (1 - beta2) * h**2``, ``weight -= lr * mean / (sqrt(var) + epsilon)``
    (no bias correction: MXNet's Adam optimizer folds it into ``lr``)."""
    lr = _check(lr, "adam_update")
    h = _clip(grad * rescale_grad + wd * weight, clip_gradient)
    mean.mul_(beta1).add_(h, alpha=1 - beta1)
    var.mul_(beta2).addcmul_(h, h, value=1 - beta2)
    return _finish(weight - lr * mean / (var.sqrt() + epsilon), out, "adam_update")


@torch.no_grad()
def rmsprop_update(
    weight: Tensor,
    grad: Tensor,
    n: Tensor,
    lr: float | None = None,
    gamma1: float = 0.95,
    epsilon: float = 1e-8,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_gradient: float = -1.0,
    clip_weights: float = -1.0,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """With ``h = clip(rescale_grad * grad + wd * weight)``: ``n = (1 - gamma1) * h**2 + gamma1 * n``;
    ``weight -= lr * h / sqrt(n + epsilon)``, clipped to ``clip_weights`` when that is >= 0."""
    lr = _check(lr, "rmsprop_update")
    h = _clip(grad * rescale_grad + wd * weight, clip_gradient)
    n.mul_(gamma1).addcmul_(h, h, value=1 - gamma1)
    return _finish(_clip(weight - lr * h / (n + epsilon).sqrt(), clip_weights), out, "rmsprop_update")


@torch.no_grad()
def rmspropalex_update(
    weight: Tensor,
    grad: Tensor,
    n: Tensor,
    g: Tensor,
    delta: Tensor,
    lr: float | None = None,
    gamma1: float = 0.95,
    gamma2: float = 0.9,
    epsilon: float = 1e-8,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_gradient: float = -1.0,
    clip_weights: float = -1.0,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Centered RMSProp (Graves 2013): with ``h = clip(rescale_grad * grad + wd * weight)``,
    ``n = (1 - gamma1) * h**2 + gamma1 * n``, ``g = (1 - gamma1) * h + gamma1 * g``,
    ``delta = gamma2 * delta - lr * h / sqrt(n - g**2 + epsilon)``, ``weight += delta``."""
    lr = _check(lr, "rmspropalex_update")
    h = _clip(grad * rescale_grad + wd * weight, clip_gradient)
    n.mul_(gamma1).addcmul_(h, h, value=1 - gamma1)
    g.mul_(gamma1).add_(h, alpha=1 - gamma1)
    delta.mul_(gamma2).sub_(lr * h / (n - g * g + epsilon).sqrt())
    return _finish(_clip(weight + delta, clip_weights), out, "rmspropalex_update")


@torch.no_grad()
def ftml_update(
    weight: Tensor,
    grad: Tensor,
    d: Tensor,
    v: Tensor,
    z: Tensor,
    lr: float | None = None,
    beta1: float = 0.6,
    beta2: float = 0.999,
    epsilon: float = 1e-8,
    t: int | None = None,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_grad: float = -1.0,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """FTML at step ``t``: with ``h = clip(rescale_grad * grad + wd * weight, clip_grad)``,
    ``v = beta2 * v + (1 - beta2) * h**2``,
    ``d_t = (1 - beta1**t) / lr * (sqrt(v / (1 - beta2**t)) + epsilon)``,
    ``z = beta1 * z + (1 - beta1) * h - (d_t - beta1 * d) * weight``, ``d = d_t``, ``weight = -z / d_t``."""
    lr = _check(lr, "ftml_update")
    if t is None or int(t) < 1:
        raise ValueError(f"ftml_update needs the step number t >= 1, got {t!r}")
    h = _clip(grad * rescale_grad + wd * weight, clip_grad)
    v.mul_(beta2).addcmul_(h, h, value=1 - beta2)
    d_t = (1 - beta1 ** int(t)) / lr * ((v / (1 - beta2 ** int(t))).sqrt() + epsilon)
    z.mul_(beta1).add_(h, alpha=1 - beta1).sub_((d_t - beta1 * d) * weight)
    d.copy_(d_t)
    return _finish(-z / d_t, out, "ftml_update")


@torch.no_grad()
def ftrl_update(
    weight: Tensor,
    grad: Tensor,
    z: Tensor,
    n: Tensor,
    lr: float | None = None,
    lamda1: float = 0.01,
    beta: float = 1.0,
    wd: float = 0.0,
    rescale_grad: float = 1.0,
    clip_gradient: float = -1.0,
    out: Any = None,
    **kwargs: Any,
) -> Tensor:
    """FTRL-Proximal: ``z += g - (sqrt(n + g**2) - sqrt(n)) * weight / lr``, ``n += g**2``,
    ``weight = (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd)`` where ``|z| > lamda1``, else 0."""
    lr = _check(lr, "ftrl_update")
    g = _clip(grad * rescale_grad, clip_gradient)
    z.add_(g - ((n + g * g).sqrt() - n.sqrt()) * weight / lr)
    n.addcmul_(g, g)
    new = (torch.sign(z) * lamda1 - z) / ((beta + n.sqrt()) / lr + wd) * (z.abs() > lamda1).to(z.dtype)
    return _finish(new, out, "ftrl_update")
