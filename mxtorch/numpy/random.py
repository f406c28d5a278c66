"""``mx.np.random``: NumPy-style sampling (``size=``, 0-d results without it) from torch's generators.

:func:`mxtorch.random.seed` makes these reproducible, as it does for ``mx.nd.random``.
Results are float32 unless ``dtype`` is given; ``randint`` gives int64.
"""

from __future__ import annotations

from typing import Any

import torch

from ..context import Context
from ..nd._common import as_shape, device_of, dtype_of, tag, write_out

__all__ = ["uniform", "normal", "randint", "rand", "randn", "choice", "shuffle"]

CtxLike = Context | str | torch.device | None
Tensor = torch.Tensor


def _size(size: Any) -> tuple[int, ...]:
    return () if size is None else as_shape(size, "size")


def _done(t: Tensor, ctx: CtxLike, out: Tensor | None, op: str) -> Tensor:
    return tag(t, ctx) if out is None else write_out(t, out, op)  # type: ignore[no-any-return]


def _param(p: Any, device: torch.device) -> Tensor:
    return p.to(device=device, dtype=torch.float64) if isinstance(p, Tensor) else torch.tensor(
        float(p), dtype=torch.float64, device=device)


def _shape_of(size: Any, *params: Tensor) -> tuple[int, ...]:
    if size is not None:
        return _size(size)
    return tuple(torch.broadcast_shapes(*(p.shape for p in params)))


def uniform(low: Any = 0.0, high: Any = 1.0, size: Any = None, dtype: Any = None, ctx: CtxLike = None,
            out: Tensor | None = None) -> Tensor:
    """Samples from [low, high) (``size`` None: one 0-d sample, or the parameters' broadcast shape)."""
    device = device_of(ctx)
    lo, hi = _param(low, device), _param(high, device)
    shape = _shape_of(size, lo, hi)
    u = torch.rand(shape, dtype=torch.float64, device=device)
    return _done((lo + (hi - lo) * u).to(dtype_of(dtype)), ctx, out, "uniform")


def normal(loc: Any = 0.0, scale: Any = 1.0, size: Any = None, dtype: Any = None, ctx: CtxLike = None,
           out: Tensor | None = None) -> Tensor:
    """Samples from N(loc, scale^2)."""
    device = device_of(ctx)
    mu, sigma = _param(loc, device), _param(scale, device)
    if bool((sigma < 0).any()):
        raise ValueError("normal: scale must be non-negative")
    shape = _shape_of(size, mu, sigma)
    z = torch.randn(shape, dtype=torch.float64, device=device)
    return _done((mu + sigma * z).to(dtype_of(dtype)), ctx, out, "normal")


def randint(low: int, high: int | None = None, size: Any = None, dtype: Any = None, ctx: CtxLike = None,
            out: Tensor | None = None) -> Tensor:
    """Integers from [low, high) ([0, low) when high is None); int64 unless ``dtype``."""
    if high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    t = torch.randint(int(low), int(high), _size(size), device=device_of(ctx), dtype=torch.int64)
    return _done(t.to(dtype_of(dtype, torch.int64)), ctx, out, "randint")


def rand(*size: int, **kwargs: Any) -> Tensor:
    """Uniform [0, 1) samples of shape ``size``."""
    return uniform(size=size or None, **kwargs)


def randn(*size: int, **kwargs: Any) -> Tensor:
    """Standard normal samples of shape ``size``."""
    return normal(size=size or None, **kwargs)


def choice(a: Any, size: Any = None, replace: bool = True, p: Any = None, ctx: CtxLike = None,
           out: Tensor | None = None) -> Tensor:
    """Samples from ``range(a)`` (an int) or from the 1-D array ``a``, with probabilities ``p``."""
    device = device_of(ctx)
    pool = a.to(device) if isinstance(a, Tensor) else None
    n = int(a) if pool is None else pool.numel()
    if n < 1:
        raise ValueError("choice: a must be a positive int or a non-empty array")
    shape = _size(size)
    count = 1
    for s in shape:
        count *= s
    if not replace and count > n:
        raise ValueError(f"choice: cannot take {count} samples from {n} without replacement")
    weights = torch.ones(n, device=device) if p is None else _param(p, device).reshape(-1).float()
    if weights.numel() != n:
        raise ValueError(f"choice: p has {weights.numel()} entries for {n} choices")
    idx = torch.multinomial(weights, count, replacement=replace).reshape(shape)
    res = idx if pool is None else pool.reshape(-1)[idx]
    return _done(res, ctx, out, "choice")


def shuffle(x: Tensor) -> None:
    """Shuffle ``x`` in place along its first axis."""
    if not isinstance(x, Tensor) or x.dim() == 0:
        raise TypeError("shuffle needs an array with at least one dimension")
    perm = torch.randperm(x.shape[0], device=x.device)
    with torch.no_grad():
        x.copy_(x[perm])
