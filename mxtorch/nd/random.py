"""``mx.nd.random``: sampling functions drawing from torch's global generators.

:func:`mxtorch.random.seed` therefore makes them reproducible.  Parameters may be numbers or
tensors; with tensors the result has shape ``param.shape + shape`` (MXNet's rule) and the
parameters' dtype and device.  With number parameters and no ``shape`` the result has shape (1,).
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable
from typing import Any

import torch

from ..base import MXNetError
from ..context import Context
from ._common import as_shape, device_of, dtype_of, tag
from ._failed import fail
from ._ndarray_type import new_ndarray

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
    "uniform_like",
    "normal_like",
    "exponential_like",
    "gamma_like",
    "poisson_like",
    "negative_binomial_like",
    "generalized_negative_binomial_like",
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
    return new_ndarray(tag(out, ctx) if ctx is not None else out)


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


_P = inspect.Parameter

# MXNet's checks of number parameters, run inside its operators (array parameters are not checked)
_CHECKS: dict[str, list[tuple[Callable[..., bool], str]]] = {
    "uniform": [(lambda low, high: high >= low, "low must be less or equal to high in uniform distribution")],
    "normal": [(lambda loc, scale: scale > 0, "scale parameter in gaussian has to be positive")],
    "exponential": [(lambda scale: scale > 0,
                     "lambda parameter in exponential distribution has to be positive")],
    "gamma": [(lambda alpha, beta: alpha > 0, "alpha parameter in gamma distribution has to be positive"),
              (lambda alpha, beta: beta > 0, "beta parameter in gamma distribution has to be positive")],
    "poisson": [(lambda lam: lam >= 0, "lambda parameter in poisson distribution has to be non-negative")],
    "negative_binomial": [
        (lambda k, p: k >= 0, "k parameter in negative binomial distribution has to be non-negative"),
        (lambda k, p: 0 <= p <= 1,
         "p parameter in negative binomial distribution has to be in the interval [0,1]"),
    ],
    "generalized_negative_binomial": [
        (lambda mu, alpha: mu >= 0,
         "mu parameter in generalized negative binomial distribution has to be non-negative"),
        (lambda mu, alpha: alpha >= 0,
         "alpha parameter in generalized negative binomial distribution has to be non-negative"),
    ],
}


def _scalar_problem(name: str, params: tuple[Any, ...]) -> str | None:
    """The first of ``name``'s checks that number ``params`` fail (None: they pass, or are arrays)."""
    if not all(isinstance(p, numbers.Real) for p in params):
        return None
    return next((msg for ok, msg in _CHECKS.get(name, ()) if not ok(*params)), None)


def _sampler(name: str, doc: str, draw: Callable[..., Tensor], **defaults: Any) -> Callable[..., Tensor]:
    """The sampler ``name(<parameters>, shape=None, dtype=None, ctx=None, out=None, **kwargs)``.

    ``defaults`` names the distribution's parameters in MXNet's order with their defaults.
    ``draw(*params, shape=, device=)`` gets them broadcast to the result's shape in the working
    dtype (float32, or float64) and returns the samples; they are cast to the result dtype and
    written to ``out`` where one is given.  Other keyword arguments (MXNet's ``name=``) are ignored.
    """
    names = (*defaults, "shape", "dtype", "ctx", "out")
    fallback = {**defaults, "shape": None, "dtype": None, "ctx": None, "out": None}

    def sample(*args: Any, **kwargs: Any) -> Tensor:
        if len(args) > len(names):
            raise TypeError(f"{name}() takes at most {len(names)} positional arguments ({len(args)} given)")
        arg = dict(zip(names, args))
        for key in names[len(args) :]:
            arg[key] = kwargs.pop(key, fallback[key])
        for key in kwargs:
            if key in arg:
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
        params = tuple(arg[p] for p in defaults)
        tensors, shape, dtype, device = _setup(params, arg["shape"], arg["dtype"], arg["ctx"])
        problem = _scalar_problem(name, params)
        if problem is not None:  # MXNet checks inside the operator: the error comes at the next read
            garbage = torch.full(shape, math.nan, dtype=dtype, device=device) if dtype.is_floating_point \
                else torch.zeros(shape, dtype=dtype, device=device)
            return fail(MXNetError(f"{name}: {problem}"), _finish(garbage, arg["out"], arg["ctx"]))
        return _finish(draw(*tensors, shape=shape, device=device).to(dtype), arg["out"], arg["ctx"])

    sample.__name__ = sample.__qualname__ = name
    sample.__doc__ = doc
    sample.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            *(_P(p, _P.POSITIONAL_OR_KEYWORD, default=d) for p, d in fallback.items()),
            _P("kwargs", _P.VAR_KEYWORD),
        ]
    )
    return sample


def _gamma(a: Tensor) -> Tensor:
    return torch._standard_gamma(a.contiguous())


def _generalized_negative_binomial(mu: Tensor, alpha: Tensor, **_: Any) -> Tensor:
    safe = torch.where(alpha > 0, alpha, torch.ones_like(alpha))
    lam = torch.where(alpha > 0, _gamma(1.0 / safe) * safe * mu, mu)
    return torch.poisson(lam)


uniform = _sampler(
    "uniform",
    "Samples from U[low, high).",
    lambda low, high, shape, device: low + (high - low) * torch.rand(shape, dtype=low.dtype, device=device),
    low=0.0,
    high=1.0,
)
normal = _sampler(
    "normal",
    "Samples from N(loc, scale**2).",
    lambda loc, scale, shape, device: loc + scale * torch.randn(shape, dtype=loc.dtype, device=device),
    loc=0.0,
    scale=1.0,
)
exponential = _sampler(
    "exponential",
    "Samples from the exponential distribution with mean ``scale`` (rate 1/scale).",
    lambda scale, shape, device: scale * torch.empty(shape, dtype=scale.dtype, device=device).exponential_(),
    scale=1.0,
)
gamma = _sampler(
    "gamma",
    "Samples from Gamma(shape=alpha, scale=beta).",
    lambda alpha, beta, **_: _gamma(alpha) * beta,
    alpha=1.0,
    beta=1.0,
)
poisson = _sampler(
    "poisson",
    "Samples from Poisson(lam) (as floats unless ``dtype`` says otherwise).",
    lambda lam, **_: torch.poisson(lam.contiguous()),
    lam=1.0,
)
negative_binomial = _sampler(
    "negative_binomial",
    "Failures before the k-th success with success probability p.",
    lambda k, p, **_: torch.poisson(_gamma(k) * (1.0 - p) / p),
    k=1,
    p=1.0,
)
generalized_negative_binomial = _sampler(
    "generalized_negative_binomial",
    "Negative binomial with mean ``mu`` and dispersion ``alpha`` (alpha=0 is Poisson(mu)).",
    _generalized_negative_binomial,
    mu=1.0,
    alpha=1.0,
)


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


def _like(sampler: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``<sampler>_like(data, <parameters>)``: samples of ``data``'s shape, dtype and device."""
    skip = ("shape", "dtype", "ctx", "out", "kwargs")
    params = [p for p in inspect.signature(sampler).parameters if p not in skip]
    name = f"{sampler.__name__}_like"

    def sample_like(data: Tensor | None = None, *args: Any, out: Tensor | None = None,
                    **kwargs: Any) -> Tensor:
        if not isinstance(data, Tensor):
            raise TypeError(f"{name}() needs the array whose shape to follow as data, "
                            f"got {type(data).__name__}")
        kwargs.pop("name", None)
        given = dict(zip(params, args))
        given.update({k: kwargs.pop(k) for k in list(kwargs) if k in params})
        if kwargs:
            raise TypeError(f"{name}() got unexpected keyword arguments {sorted(kwargs)}")
        return sampler(**given, shape=tuple(data.shape), dtype=data.dtype, ctx=data.device, out=out)

    sample_like.__name__ = sample_like.__qualname__ = name
    sample_like.__doc__ = f"``{sampler.__name__}`` samples with the shape, dtype and device of ``data``."
    return sample_like


uniform_like = _like(uniform)
normal_like = _like(normal)
_exponential_by_scale = _like(exponential)


def exponential_like(data: Tensor | None = None, lam: Any = 1.0, out: Tensor | None = None,
                     **kwargs: Any) -> Tensor:
    """Exponential samples with ``data``'s shape, dtype and device; ``lam`` is the rate (MXNet's
    ``_random_exponential_like`` takes the rate, while ``exponential`` takes the scale 1/rate)."""
    if isinstance(lam, Tensor):
        raise TypeError("exponential_like takes a number as lam")
    if float(lam) <= 0:
        raise ValueError(f"exponential_like: lam must be positive, got {lam!r}")
    return _exponential_by_scale(data, 1.0 / float(lam), out=out, **kwargs)
gamma_like = _like(gamma)
poisson_like = _like(poisson)
negative_binomial_like = _like(negative_binomial)
generalized_negative_binomial_like = _like(generalized_negative_binomial)
