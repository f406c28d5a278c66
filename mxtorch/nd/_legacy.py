"""MXNet 1.x's older NDArray operators that MXNet code still calls (``choose_element_0index`` ...)
and the top-level sampling names (``mx.nd.random_uniform``, ``mx.nd.sample_normal``,
``mx.nd.uniform`` ...), which are the ``mx.nd.random`` samplers under MXNet's other names."""

from __future__ import annotations

from typing import Any

import torch

from . import random as _random
from ._common import to_index

Tensor = torch.Tensor

__all__ = ["choose_element_0index", "fill_element_0index"]


def choose_element_0index(lhs: Tensor, rhs: Any) -> Tensor:
    """``lhs[i, rhs[i]]`` for each row ``i`` of the 2-D ``lhs`` (``rhs``: one column per row)."""
    idx = to_index(rhs, lhs)
    if lhs.dim() != 2 or idx.dim() != 1 or idx.shape[0] != lhs.shape[0]:
        raise ValueError(
            f"choose_element_0index: lhs must be 2-D and rhs hold one index per row, got "
            f"{tuple(lhs.shape)} and {tuple(idx.shape)}"
        )
    return lhs.gather(1, idx.clamp(0, lhs.shape[1] - 1).unsqueeze(1)).squeeze(1)


def fill_element_0index(lhs: Tensor, mhs: Any, rhs: Any) -> Tensor:
    """A copy of the 2-D ``lhs`` with ``[i, rhs[i]]`` set to ``mhs[i]`` for each row ``i``."""
    idx = to_index(rhs, lhs)
    vals = mhs if isinstance(mhs, Tensor) else torch.as_tensor(mhs, device=lhs.device)
    if lhs.dim() != 2 or idx.shape != (lhs.shape[0],) or tuple(vals.shape) != (lhs.shape[0],):
        raise ValueError(
            f"fill_element_0index: lhs must be 2-D with one value and one index per row, got "
            f"{tuple(lhs.shape)}, {tuple(vals.shape)} and {tuple(idx.shape)}"
        )
    return lhs.scatter(1, idx.clamp(0, lhs.shape[1] - 1).unsqueeze(1), vals.to(lhs.dtype).unsqueeze(1))


_DISTRIBUTIONS = (
    "uniform",
    "normal",
    "gamma",
    "exponential",
    "poisson",
    "negative_binomial",
    "generalized_negative_binomial",
)

def sample_normal(mu: Any = 0.0, sigma: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
                  out: Any = None, **kwargs: Any) -> Tensor:
    """MXNet's _sample_normal: ``mx.nd.random.normal`` with its parameters named mu and sigma."""
    return _random.normal(mu, sigma, shape, dtype, ctx, out, **kwargs)


# MXNet registers each sampler as _random_<d> (number parameters) and _sample_<d> (array
# parameters) with the aliases random_<d> and sample_<d>; mx.nd.random.<d> handles both forms
# (sample_normal with the registered operator's parameter names mu/sigma)
SAMPLER_ALIASES: dict[str, Any] = {
    **{f"random_{d}": getattr(_random, d) for d in _DISTRIBUTIONS},
    **{f"sample_{d}": getattr(_random, d) for d in _DISTRIBUTIONS},
    "sample_normal": sample_normal,
    "uniform": _random.uniform,
    "normal": _random.normal,
    "random_randint": _random.randint,
    "sample_multinomial": _random.multinomial,
    "shuffle": _random.shuffle,
    **{f"random_{d}_like": getattr(_random, f"{d}_like") for d in _DISTRIBUTIONS},
}
