"""``mx.sym.contrib``: MXNet's contributed symbolic functions built from other operators."""

from __future__ import annotations

import math
from typing import Any

from . import random as _random
from .symbol import Symbol, create

__all__ = ["rand_zipfian", "SparseEmbedding", "DeformableConvolution", "ModulatedDeformableConvolution"]


def rand_zipfian(true_classes: Symbol, num_sampled: int, range_max: int, **kwargs: Any) -> list[Symbol]:
    """Symbolic ``mx.nd.contrib.rand_zipfian``: ``[sampled classes (int64), expected count of each
    true class, expected count of each sampled class]``, where class ``c`` has probability
    ``log((c + 2) / (c + 1)) / log(range_max + 1)``."""
    if not isinstance(true_classes, Symbol):
        raise TypeError(f"rand_zipfian needs a Symbol of true classes, got {type(true_classes).__name__}")
    if num_sampled < 1 or range_max < 1:
        raise ValueError(
            f"rand_zipfian: num_sampled ({num_sampled}) and range_max ({range_max}) must be positive"
        )
    log_range = math.log(range_max + 1)
    u = _random.uniform(0.0, log_range, shape=(int(num_sampled),), dtype="float64")
    sampled = ((u.exp() - 1).astype("int64") % range_max).astype("int64")  # the scalar op computes in float

    def expected(classes: Symbol) -> Symbol:
        c = classes.astype("float64")
        return (((c + 2.0) / (c + 1.0)).log() / log_range * num_sampled).astype("float32")

    return [sampled, expected(true_classes), expected(sampled)]


def _node(op: str, inputs: dict[str, Symbol | None], kwargs: dict[str, Any]) -> Symbol:
    """Operator ``op`` on the given inputs (those left None become variables, as in MXNet)."""
    given: dict[str, Any] = {k: v for k, v in inputs.items() if v is not None}
    return create(op, **given, **kwargs)


def SparseEmbedding(data: Symbol | None = None, weight: Symbol | None = None, **kwargs: Any) -> Symbol:
    """Symbolic ``mx.nd.contrib.SparseEmbedding`` (MXNet's graph name ``_contrib_SparseEmbedding``):
    an Embedding whose gradient with respect to ``weight`` is row_sparse."""
    return _node("_contrib_SparseEmbedding", {"data": data, "weight": weight}, kwargs)


def DeformableConvolution(data: Symbol | None = None, offset: Symbol | None = None,
                          weight: Symbol | None = None, bias: Symbol | None = None, **kwargs: Any) -> Symbol:
    """Symbolic ``mx.nd.contrib.DeformableConvolution`` (graph name ``_contrib_DeformableConvolution``)."""
    return _node("_contrib_DeformableConvolution", {"data": data, "offset": offset, "weight": weight,
                                                    "bias": bias}, kwargs)


def ModulatedDeformableConvolution(data: Symbol | None = None, offset: Symbol | None = None,
                                   mask: Symbol | None = None, weight: Symbol | None = None,
                                   bias: Symbol | None = None, **kwargs: Any) -> Symbol:
    """Symbolic ``mx.nd.contrib.ModulatedDeformableConvolution`` (graph name
    ``_contrib_ModulatedDeformableConvolution``)."""
    return _node("_contrib_ModulatedDeformableConvolution", {"data": data, "offset": offset, "mask": mask,
                                                             "weight": weight, "bias": bias}, kwargs)


def __getattr__(name: str) -> Any:
    # every other mx.nd.contrib operator as MXNet's _contrib_<op> node (quadratic, index_copy ...)
    from ..nd import contrib as nd_contrib

    if name.startswith("__") or name not in nd_contrib.__all__:
        raise AttributeError(f"module 'mxtorch.symbol.contrib' has no operator {name!r}")

    def operator(*args: Any, **kwargs: Any) -> Symbol:
        return create(f"_contrib_{name}", *args, _hint=name.lower(), **kwargs)

    operator.__name__ = operator.__qualname__ = name
    operator.__doc__ = f"Symbolic ``mx.nd.contrib.{name}`` (graph node ``_contrib_{name}``)."
    globals()[name] = operator
    return operator
