"""``mx.sym.random``: MXNet's symbolic samplers, graph nodes running ``mx.nd.random``'s samplers.

Parameters may be numbers (node attributes) or symbols (inputs: one distribution per entry,
the result of shape ``param.shape + shape``), as with ``mx.nd.random``. ``randn(data=sym)``
samples with ``data``'s shape (MXNet infers it from the graph).
"""

from __future__ import annotations

from typing import Any

from .symbol import Symbol, create

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


def _sampler(dist: str, names: tuple[str, ...], defaults: tuple[Any, ...]) -> Any:
    op = f"random_{dist}"

    def sample(*args: Any, **kwargs: Any) -> Symbol:
        values = dict(zip(names, defaults))
        values.update(zip(names, args))
        for n in names:
            if n in kwargs:
                values[n] = kwargs.pop(n)
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        if any(isinstance(v, Symbol) for v in values.values()):
            if not all(isinstance(v, Symbol) for v in values.values()):
                raise TypeError(f"{dist}: give every parameter ({', '.join(names)}) as a symbol, or none")
            return create(op, *values.values(), **kwargs)
        return create(op, **values, **kwargs)

    sample.__name__ = sample.__qualname__ = dist
    sample.__doc__ = f"Symbolic ``mx.nd.random.{dist}``: parameters {', '.join(names)} (numbers or symbols)."
    return sample


def _like(dist: str, names: tuple[str, ...]) -> Any:
    op = f"random_{dist}_like"

    def sample_like(data: Symbol | None = None, *args: Any, **kwargs: Any) -> Symbol:
        if not isinstance(data, Symbol):
            raise TypeError(
                f"{dist}_like needs the symbol whose shape to follow as data, got {type(data).__name__}"
            )
        params = dict(zip(names, args))
        params.update({k: kwargs.pop(k) for k in list(kwargs) if k in names})
        return create(op, data, **params, **kwargs)

    sample_like.__name__ = sample_like.__qualname__ = f"{dist}_like"
    sample_like.__doc__ = f"Symbolic ``mx.nd.random.{dist}_like``: samples with ``data``'s shape and dtype."
    return sample_like


_DISTS: dict[str, tuple[tuple[str, ...], tuple[Any, ...]]] = {
    "uniform": (("low", "high"), (0.0, 1.0)),
    "normal": (("loc", "scale"), (0.0, 1.0)),
    "exponential": (("scale",), (1.0,)),
    "gamma": (("alpha", "beta"), (1.0, 1.0)),
    "poisson": (("lam",), (1.0,)),
    "negative_binomial": (("k", "p"), (1, 1.0)),
    "generalized_negative_binomial": (("mu", "alpha"), (1.0, 1.0)),
}

uniform = _sampler("uniform", *_DISTS["uniform"])
normal = _sampler("normal", *_DISTS["normal"])
exponential = _sampler("exponential", *_DISTS["exponential"])
gamma = _sampler("gamma", *_DISTS["gamma"])
poisson = _sampler("poisson", *_DISTS["poisson"])
negative_binomial = _sampler("negative_binomial", *_DISTS["negative_binomial"])
generalized_negative_binomial = _sampler(
    "generalized_negative_binomial", *_DISTS["generalized_negative_binomial"]
)
uniform_like = _like("uniform", _DISTS["uniform"][0])
normal_like = _like("normal", _DISTS["normal"][0])
exponential_like = _like("exponential", ("lam",))  # the rate, as MXNet's _random_exponential_like
gamma_like = _like("gamma", _DISTS["gamma"][0])
poisson_like = _like("poisson", _DISTS["poisson"][0])
negative_binomial_like = _like("negative_binomial", _DISTS["negative_binomial"][0])
generalized_negative_binomial_like = _like(
    "generalized_negative_binomial", _DISTS["generalized_negative_binomial"][0]
)


def randn(
    *shape: Any,
    loc: Any = 0.0,
    scale: Any = 1.0,
    dtype: Any = None,
    data: Symbol | None = None,
    **kwargs: Any,
) -> Symbol:
    """Normal samples of ``shape`` (or of ``data``'s shape)."""
    if data is not None:
        out = normal_like(data, loc, scale, **kwargs)
        return out.astype(dtype) if dtype is not None else out
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return normal(loc, scale, shape=shape or None, dtype=dtype, **kwargs)


def randint(low: int, high: int, shape: Any = None, dtype: Any = None, **kwargs: Any) -> Symbol:
    """Integers drawn uniformly from [low, high)."""
    return create("random_randint", low=low, high=high, shape=shape, dtype=dtype, **kwargs)


def multinomial(
    data: Symbol, shape: Any = None, get_prob: bool = False, dtype: Any = "int32", **kwargs: Any
) -> Symbol:
    """Category indices drawn from the distributions in ``data``'s last axis."""
    return create("sample_multinomial", data, shape=shape, get_prob=get_prob, dtype=dtype, **kwargs)


def shuffle(data: Symbol, **kwargs: Any) -> Symbol:
    """``data`` with its first axis randomly permuted."""
    return create("shuffle", data, **kwargs)
