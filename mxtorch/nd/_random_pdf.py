"""MXNet's ``random_pdf_*`` operators: the density (or, with ``is_log``, log-density) of samples
under distributions with per-batch parameters.

``sample`` has shape ``param.shape + extra``: each parameter entry covers the trailing ``extra``
samples drawn with it (what ``mx.nd.random.<dist>(param, shape=extra)`` returns). Dirichlet's
``alpha`` has a last axis of ``k`` concentrations and ``sample`` the same last axis; its result
drops that axis. The formulas are MXNet's, written with torch ops so autograd differentiates
them (the sample and every parameter); note that MXNet's ``gamma`` density reads ``beta`` as a
rate while its sampler reads it as a scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ._common import as_tensor

Tensor = torch.Tensor

__all__ = [
    "random_pdf_uniform",
    "random_pdf_normal",
    "random_pdf_gamma",
    "random_pdf_exponential",
    "random_pdf_poisson",
    "random_pdf_negative_binomial",
    "random_pdf_generalized_negative_binomial",
    "random_pdf_dirichlet",
]


def _spread(sample: Tensor, params: list[Tensor], op: str, vector: bool = False) -> list[Tensor]:
    """Parameters reshaped to broadcast over the sample's trailing (extra) axes."""
    ref = params[0]
    for p in params[1:]:
        if tuple(p.shape) != tuple(ref.shape):
            raise ValueError(
                f"{op}: the parameters must have one shape, got {tuple(ref.shape)} and {tuple(p.shape)}"
            )
    lead = ref.dim() - (1 if vector else 0)
    if (
        sample.dim() < ref.dim()
        or tuple(sample.shape[:lead]) != tuple(ref.shape[:lead])
        or (vector and sample.shape[-1] != ref.shape[-1])
    ):
        raise ValueError(
            f"{op}: sample shape {tuple(sample.shape)} must start with the parameters' shape "
            f"{tuple(ref.shape[:lead])}" + (" and end with their last axis" if vector else "")
        )
    extra = sample.dim() - ref.dim()
    if vector:
        return [p.reshape(tuple(p.shape[:-1]) + (1,) * extra + (p.shape[-1],)) for p in params]
    return [p.reshape(tuple(p.shape) + (1,) * extra) for p in params]


def _pdf(
    name: str, names: tuple[str, ...], log_density: Callable[..., Tensor], doc: str, vector: bool = False
) -> Callable[..., Tensor]:
    op = f"random_pdf_{name}"

    def pdf(sample: Any, *args: Any, is_log: bool = False, **kwargs: Any) -> Tensor:
        kwargs.pop("name", None)
        values = list(args) + [kwargs.pop(n) for n in names[len(args) :] if n in kwargs]
        if kwargs:
            raise TypeError(f"{op}() got unexpected keyword arguments {sorted(kwargs)}")
        if len(values) != len(names):
            raise TypeError(f"{op}() needs the sample and {', '.join(names)}")
        x = as_tensor(sample)
        ps = [as_tensor(v, like=x) for v in values]
        result = torch.promote_types(x.dtype, ps[0].dtype)
        if not result.is_floating_point:
            result = torch.float32
        # half precision is computed in float32 (lgamma has no half kernels on every device)
        work = torch.float32 if result in (torch.float16, torch.bfloat16) else result
        lpdf = log_density(x.to(work), *_spread(x, [p.to(work) for p in ps], op, vector))
        return (lpdf if is_log else torch.exp(lpdf)).to(result)

    pdf.__name__ = pdf.__qualname__ = op
    pdf.__doc__ = doc + "\n\n``is_log=True`` gives the log-density."
    return pdf


def _nb_log(k: Tensor, p: Tensor, x: Tensor) -> Tensor:
    return (
        torch.lgamma(x + k) - torch.lgamma(x + 1) - torch.lgamma(k) + k * torch.log(p) + x * torch.log1p(-p)
    )


random_pdf_uniform = _pdf(
    "uniform",
    ("low", "high"),
    lambda x, low, high: -torch.log(high - low) + 0 * x,
    "Density 1/(high - low) of U[low, high) (constant: the sample only sets the shape).",
)
random_pdf_normal = _pdf(
    "normal",
    ("mu", "sigma"),
    lambda x, mu, sigma: -0.5 * ((x - mu) / sigma) ** 2 - torch.log(math.sqrt(2 * math.pi) * sigma),
    "Density of N(mu, sigma**2).",
)
random_pdf_gamma = _pdf(
    "gamma",
    ("alpha", "beta"),
    lambda x, a, b: a * torch.log(b) + (a - 1) * torch.log(x) - b * x - torch.lgamma(a),
    "Density of Gamma(shape=alpha, rate=beta).",
)
random_pdf_exponential = _pdf(
    "exponential", ("lam",), lambda x, lam: torch.log(lam) - lam * x, "Density of Exp(rate=lam)."
)
random_pdf_poisson = _pdf(
    "poisson",
    ("lam",),
    lambda x, lam: x * torch.log(lam) - torch.lgamma(x + 1) - lam,
    "Probability of the count x under Poisson(lam).",
)
random_pdf_negative_binomial = _pdf(
    "negative_binomial",
    ("k", "p"),
    lambda x, k, p: _nb_log(k, p, x),
    "Probability of x failures before the k-th success (success probability p).",
)
random_pdf_generalized_negative_binomial = _pdf(
    "generalized_negative_binomial",
    ("mu", "alpha"),
    lambda x, mu, alpha: _nb_log(1.0 / alpha, 1.0 / (mu * alpha + 1.0), x),
    "Probability of x under the negative binomial with mean mu and dispersion alpha.",
)
random_pdf_dirichlet = _pdf(
    "dirichlet",
    ("alpha",),
    lambda x, alpha: (
        ((alpha - 1) * torch.log(x)).sum(-1) + torch.lgamma(alpha.sum(-1)) - torch.lgamma(alpha).sum(-1)
    ),
    "Density of Dirichlet(alpha) at the points on the sample's last axis (that axis is dropped).",
    vector=True,
)
