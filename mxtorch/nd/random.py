"""``mx.nd.random``: sampling functions drawing from torch's global generators.

:func:`mxtorch.random.seed` therefore makes them reproducible.  Parameters may be numbers or
tensors; with tensors the result has shape ``param.shape + shape`` (MXNet's rule) and the
parameters' dtype and device.  With number parameters and no ``shape`` the result has shape (1,).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..context import Context
from ._common import as_shape, device_of, dtype_of, tag

__all__ = [
    "uniform",
    "normal",
    "randn",
    "randint",
    "exponential",
    "gamma",
    "poisson",
    "negative_binomial",
    "generalized_negative_binomial",
    "multinomial",
    "shuffle",
]

Tensor = torch.Tensor
CtxLike = Context | str | torch.device | None


def _finish(out: Tensor, result: Tensor | None, ctx: CtxLike) -> Tensor:
    if result is not None:
        if tuple(result.shape) != tuple(out.shape):
            raise ValueError(f"out has shape {tuple(result.shape)}, expected {tuple(out.shape)}")
        with torch.no_grad():
            result.copy_(out)
        return result
    return tag(out, ctx) if ctx is not None else out


def _setup(
    params: tuple[Any, ...], shape: Any, dtype: Any, ctx: CtxLike
) -> tuple[list[Tensor], tuple[int, ...], torch.dtype, torch.device]:
    """Broadcast parameters to ``param.shape + shape``; pick the result dtype and device."""
    tensors = [p for p in params if isinstance(p, Tensor)]
    extra = as_shape(shape) if shape is not None else ()
    if tensors:
        ref = tensors[0]
        device = ref.device
        dt = dtype_of(dtype, ref.dtype if ref.is_floating_point() else torch.float32)
        work = dt if dt in (torch.float32, torch.float64) else torch.float32  # fp16: drawn in fp32, as MXNet
        pshape = torch.broadcast_shapes(*[t.shape for t in tensors])
        out_shape = tuple(pshape) + extra
        view = tuple(pshape) + (1,) * len(extra)
        ps = [
            (
                p.to(work).broadcast_to(pshape).reshape(view)
                if isinstance(p, Tensor)
                else torch.full(view, float(p), dtype=work, device=device)
            ).expand(out_shape)
            for p in params
        ]
    else:
        device = device_of(ctx)
        dt = dtype_of(dtype)
        out_shape = extra or (1,)
        work = dt if dt in (torch.float32, torch.float64) else torch.float32  # fp16: drawn in fp32, as MXNet
        ps = [torch.full(out_shape, float(p), dtype=work, device=device) for p in params]
    return ps, out_shape, dt, device


def uniform(
    low: Any = 0.0,
    high: Any = 1.0,
    shape: Any = None,
    dtype: Any = None,
    ctx: CtxLike = None,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Samples from U[low, high)."""
    (lo, hi), oshape, dt, dev = _setup((low, high), shape, dtype, ctx)
    u = torch.rand(oshape, dtype=lo.dtype, device=dev)
    return _finish((lo + (hi - lo) * u).to(dt), out, ctx)


def normal(
    loc: Any = 0.0,
    scale: Any = 1.0,
    shape: Any = None,
    dtype: Any = None,
    ctx: CtxLike = None,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Samples from N(loc, scale**2)."""
    (mu, sd), oshape, dt, dev = _setup((loc, scale), shape, dtype, ctx)
    z = torch.randn(oshape, dtype=mu.dtype, device=dev)
    return _finish((mu + sd * z).to(dt), out, ctx)


def randn(
    *shape: int,
    loc: Any = 0.0,
    scale: Any = 1.0,
    dtype: Any = None,
    ctx: CtxLike = None,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Normal samples of the given shape: ``randn(2, 3)``."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return normal(loc, scale, shape or None, dtype, ctx, out)


def randint(
    low: int,
    high: int,
    shape: Any = None,
    dtype: Any = "int32",
    ctx: CtxLike = None,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Integers drawn uniformly from [low, high)."""
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    oshape = as_shape(shape) if shape is not None else (1,)
    t = torch.randint(int(low), int(high), oshape or (1,), dtype=dtype_of(dtype), device=device_of(ctx))
    return _finish(t, out, ctx)


def exponential(
    scale: Any = 1.0,
    shape: Any = None,
    dtype: Any = None,
    ctx: CtxLike = None,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Samples from the exponential distribution with mean ``scale`` (rate 1/scale)."""
    (sc,), oshape, dt, dev = _setup((scale,), shape, dtype, ctx)
    e = torch.empty(oshape, dtype=sc.dtype, device=dev).exponential_(1.0)
    return _finish((e * sc).to(dt), out, ctx)


def gamma(
    alpha: Any = 1.0,
    beta: Any = 1.0,
    shape: Any = None,
    dtype: Any = None,
    ctx: CtxLike = None,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Samples from Gamma(shape=alpha, scale=beta)."""
    (a, b), _, dt, _ = _setup((alpha, beta), shape, dtype, ctx)
    g = torch._standard_gamma(a.contiguous())
    return _finish((g * b).to(dt), out, ctx)


def poisson(
    lam: Any = 1.0,
    shape: Any = None,
    dtype: Any = None,
    ctx: CtxLike = None,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Samples from Poisson(lam) (as floats unless ``dtype`` says otherwise)."""
    (rate,), _, dt, _ = _setup((lam,), shape, dtype, ctx)
    return _finish(torch.poisson(rate.contiguous()).to(dt), out, ctx)


def negative_binomial(
    k: Any = 1,
    p: Any = 1.0,
    shape: Any = None,
    dtype: Any = None,
    ctx: CtxLike = None,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Failures before the k-th success with success probability p."""
    (kk, pp), _, dt, _ = _setup((k, p), shape, dtype, ctx)
    lam = torch._standard_gamma(kk.contiguous()) * (1.0 - pp) / pp
    return _finish(torch.poisson(lam).to(dt), out, ctx)


def generalized_negative_binomial(
    mu: Any = 1.0,
    alpha: Any = 1.0,
    shape: Any = None,
    dtype: Any = None,
    ctx: CtxLike = None,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Negative binomial with mean ``mu`` and dispersion ``alpha`` (alpha=0 is Poisson(mu))."""
    (m, a), _, dt, _ = _setup((mu, alpha), shape, dtype, ctx)
    safe_a = torch.where(a > 0, a, torch.ones_like(a))
    lam = torch._standard_gamma((1.0 / safe_a).contiguous()) * safe_a * m
    lam = torch.where(a > 0, lam, m)
    return _finish(torch.poisson(lam).to(dt), out, ctx)


def multinomial(
    data: Tensor,
    shape: Any = None,
    get_prob: bool = False,
    out: Tensor | None = None,
    dtype: Any = "int32",
    **kwargs: Any,
) -> Any:
    """Category indices drawn from the distributions in ``data``'s last axis.

    Result shape: ``data.shape[:-1] + shape``.  ``get_prob`` also returns the log-probability
    of each draw: ``[samples, log_probs]``.
    """
    if data.dim() < 1:
        raise ValueError("multinomial: data must have a last axis of probabilities")
    extra = as_shape(shape) if shape is not None else ()
    k = data.shape[-1]
    n = math.prod(extra) if extra else 1
    flat = data.reshape(-1, k)
    draws = torch.multinomial(flat.float() if not flat.is_floating_point() else flat, n, replacement=True)
    samples = draws.reshape(tuple(data.shape[:-1]) + extra)
    res = _finish(samples.to(dtype_of(dtype)), out, None)
    if not get_prob:
        return res
    probs = torch.gather(flat, 1, draws).reshape(samples.shape)
    return [res, torch.log(probs)]


def shuffle(data: Tensor, **kwargs: Any) -> Tensor:
    """A copy of ``data`` with its first axis randomly permuted."""
    if data.dim() == 0:
        return data.clone()
    perm = torch.randperm(data.shape[0], device=data.device)
    return data.index_select(0, perm)
