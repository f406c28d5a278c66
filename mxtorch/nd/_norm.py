"""MXNet's normalisation operators (``BatchNorm`` with its running statistics, ``LayerNorm``,
``GroupNorm``, ``InstanceNorm``) on torch tensors; re-exported by :mod:`mxtorch.nd._nn`."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ._common import norm_axis, training_flag

__all__ = [
    "BatchNorm",
    "LayerNorm",
    "GroupNorm",
    "InstanceNorm",
]

Tensor = torch.Tensor



def BatchNorm(
    data: Tensor,
    gamma: Tensor | None = None,
    beta: Tensor | None = None,
    moving_mean: Tensor | None = None,
    moving_var: Tensor | None = None,
    eps: float = 1e-3,
    momentum: float = 0.9,
    fix_gamma: bool = True,
    use_global_stats: bool = False,
    output_mean_var: bool = False,
    axis: int = 1,
    cudnn_off: bool = False,
    training: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Batch normalisation over ``axis`` (the channel axis).

    In training (and not ``use_global_stats``) it normalises with the batch statistics and
    updates the moving ones in place, MXNet's way: ``moving = momentum*moving + (1-momentum)*batch``
    (batch variance is the biased one).  Otherwise it uses the moving statistics.
    ``fix_gamma`` treats gamma as ones.  ``output_mean_var`` returns [out, mean, var].
    """
    ax = norm_axis(axis, data.dim())
    x = data if ax == 1 else data.movedim(ax, 1)
    c = x.shape[1]
    g = None if (fix_gamma or gamma is None) else gamma
    use_batch = training_flag(training) and not use_global_stats
    red = [0] + list(range(2, x.dim()))
    if use_batch:
        count = x.numel() // c if c else 0
        if count > 1:
            out = F.batch_norm(x, None, None, g, beta, training=True, momentum=0.0, eps=eps)
            with torch.no_grad():
                var, mean = torch.var_mean(x.detach(), dim=red, correction=0)
        else:
            var, mean = torch.var_mean(x, dim=red, correction=0)
            shape = (1, c) + (1,) * (x.dim() - 2)
            out = (x - mean.reshape(shape)) * torch.rsqrt(var.reshape(shape) + eps)
            if g is not None:
                out = out * g.reshape(shape)
            if beta is not None:
                out = out + beta.reshape(shape)
            mean, var = mean.detach(), var.detach()
        with torch.no_grad():
            if moving_mean is not None:
                moving_mean.mul_(momentum).add_(mean.to(moving_mean.dtype), alpha=1.0 - momentum)
            if moving_var is not None:
                moving_var.mul_(momentum).add_(var.to(moving_var.dtype), alpha=1.0 - momentum)
    else:
        if moving_mean is None or moving_var is None:
            raise ValueError("BatchNorm: moving_mean and moving_var are needed outside training")
        out = F.batch_norm(x, moving_mean, moving_var, g, beta, training=False, eps=eps)
        mean, var = moving_mean, moving_var
    if ax != 1:
        out = out.movedim(1, ax)
    if output_mean_var:
        return [out, mean, var]
    return out


def _check_affine(p: Tensor | None, size: int, name: str, op: str) -> None:
    if p is not None and p.numel() != size:
        raise ValueError(f"{op}: {name} has {p.numel()} elements, expected {size}")


def LayerNorm(
    data: Tensor,
    gamma: Tensor | None = None,
    beta: Tensor | None = None,
    axis: int = -1,
    eps: float = 1e-5,
    output_mean_var: bool = False,
) -> Any:
    """Normalise over the single axis ``axis``, then scale by gamma and shift by beta.
    ``output_mean_var`` returns [out, mean, std] (keeping the reduced axis)."""
    ax = norm_axis(axis, data.dim())
    x = data if ax == data.dim() - 1 else data.movedim(ax, -1)
    c = x.shape[-1]
    _check_affine(gamma, c, "gamma", "LayerNorm")
    _check_affine(beta, c, "beta", "LayerNorm")
    out = F.layer_norm(x, (c,), gamma, beta, eps)
    if ax != data.dim() - 1:
        out = out.movedim(-1, ax)
    if output_mean_var:
        var, mean = torch.var_mean(data, dim=ax, correction=0, keepdim=True)
        return [out, mean, torch.sqrt(var + eps)]
    return out


def GroupNorm(
    data: Tensor,
    gamma: Tensor | None = None,
    beta: Tensor | None = None,
    num_groups: int = 1,
    eps: float = 1e-5,
    output_mean_var: bool = False,
) -> Any:
    """Normalise each group of ``C/num_groups`` channels; gamma/beta are per channel (C,)
    or, as in MXNet 1.x, per group (num_groups,)."""
    c = data.shape[1]
    if c % num_groups:
        raise ValueError(f"GroupNorm: {c} channels cannot be split into num_groups={num_groups}")
    per_group = gamma is not None and gamma.numel() == num_groups and num_groups != c
    if per_group:
        out = F.group_norm(data, num_groups, None, None, eps)
        shape = (data.shape[0], num_groups, c // num_groups) + tuple(data.shape[2:])
        pshape = (1, num_groups) + (1,) * (len(shape) - 2)
        out = out.reshape(shape)
        if gamma is not None:
            out = out * gamma.reshape(pshape)
        if beta is not None:
            out = out + beta.reshape(pshape)
        out = out.reshape(data.shape)
    else:
        _check_affine(gamma, c, "gamma", "GroupNorm")
        _check_affine(beta, c, "beta", "GroupNorm")
        out = F.group_norm(data, num_groups, gamma, beta, eps)
    if output_mean_var:
        g = data.reshape(data.shape[0], num_groups, -1)
        var, mean = torch.var_mean(g, dim=-1, correction=0)
        return [out, mean, torch.sqrt(var + eps)]
    return out


def InstanceNorm(
    data: Tensor, gamma: Tensor | None = None, beta: Tensor | None = None, eps: float = 1e-3
) -> Tensor:
    """Normalise each (sample, channel) over its spatial axes; gamma/beta are per channel."""
    if data.dim() < 3:
        raise ValueError(f"InstanceNorm: expected >= 3-D data (N, C, spatial...), got {tuple(data.shape)}")
    return F.instance_norm(data, weight=gamma, bias=beta, eps=eps)

