"""Tensor helpers shared by the optimizers' update rules: gradient preprocessing, norms, state buffers."""

from __future__ import annotations

from typing import Any

import torch

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _preprocess_grads(
    grads: list[torch.Tensor],
    weights: list[torch.Tensor],
    rescale: float,
    clip: float | None,
    wd: float,
) -> list[torch.Tensor]:
    """New tensors ``clip(rescale * grad, -clip, clip) + wd * weight`` (the inputs are untouched)."""
    gs = list(torch._foreach_mul(grads, rescale))
    if clip is not None:
        torch._foreach_clamp_min_(gs, -clip)
        torch._foreach_clamp_max_(gs, clip)
    if wd != 0.0:
        torch._foreach_add_(gs, weights, alpha=wd)
    return gs


def _norm(t: torch.Tensor) -> torch.Tensor:
    """L2 norm of ``t`` as a 0-dim tensor, accumulated in fp32 for fp16/bf16 inputs."""
    if t.dtype in _LOW_PRECISION:
        return torch.linalg.vector_norm(t, dtype=torch.float32)
    return torch.linalg.vector_norm(t)


def _is_sparse(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.layout != torch.strided


def _in_layout_of(dense: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``dense`` in the sparse layout of ``like`` (csr, or COO with ``like``'s sparse dimensions)."""
    if like.layout == torch.sparse_csr:
        return dense.to_sparse_csr()
    return dense.to_sparse(like.sparse_dim())


def _zeros_pair(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two zero buffers like ``weight`` (the two moments most optimizers keep)."""
    return (
        torch.zeros_like(weight, memory_format=torch.preserve_format),
        torch.zeros_like(weight, memory_format=torch.preserve_format),
    )


def _prep_grad(grad: torch.Tensor, rescale: float, clip: float | None) -> torch.Tensor:
    """A new tensor ``clip(rescale * grad, -clip, clip)``."""
    g = grad * rescale
    if clip is not None:
        g.clamp_(-clip, clip)
    return g


def _prep_grad_wd(
    grad: torch.Tensor, weight: torch.Tensor, rescale: float, clip: float | None, wd: float
) -> torch.Tensor:
    """A new tensor ``clip(rescale * grad + wd * weight, -clip, clip)`` (MXNet 1.9's order for Adamax,
    Nadam, FTML and RMSProp: weight decay before clipping)."""
    g = grad * rescale
    if wd != 0.0:
        g.add_(weight, alpha=wd)
    if clip is not None:
        g.clamp_(-clip, clip)
    return g


def _adam_moments(m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta1: float, beta2: float) -> None:
    """Adam's moment updates in place: ``m = beta1*m + (1-beta1)*g``, ``v = beta2*v + (1-beta2)*g*g``."""
    m.mul_(beta1).add_(g, alpha=1.0 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)


def _foreach_adam_moments(
    states: list[Any], grads: list[torch.Tensor], beta1: float, beta2: float, rescale: float, epsilon: float
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Adam's moment updates over ``(mean, var)`` states, the gradient scaled by ``rescale``; returns
    the means and the denominators ``sqrt(var) + epsilon`` (new tensors)."""
    means = [s[0] for s in states]
    vars_ = [s[1] for s in states]
    torch._foreach_mul_(means, beta1)
    torch._foreach_add_(means, grads, alpha=(1.0 - beta1) * rescale)
    torch._foreach_mul_(vars_, beta2)
    torch._foreach_addcmul_(vars_, grads, grads, value=(1.0 - beta2) * rescale * rescale)
    denom = list(torch._foreach_sqrt(vars_))
    torch._foreach_add_(denom, epsilon)
    return means, denom
