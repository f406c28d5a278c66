"""``mx.sym.contrib``: MXNet's contributed symbolic functions built from other operators."""

from __future__ import annotations

import math
from typing import Any

from . import random as _random
from .symbol import Symbol, create

__all__ = ["rand_zipfian", "SparseEmbedding"]


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


def SparseEmbedding(data: Symbol | None = None, weight: Symbol | None = None, **kwargs: Any) -> Symbol:
    """Symbolic ``mx.nd.contrib.SparseEmbedding`` (MXNet's graph name ``_contrib_SparseEmbedding``):
    an Embedding whose gradient with respect to ``weight`` is row_sparse."""
    inputs: dict[str, Any] = {k: v for k, v in (("data", data), ("weight", weight)) if v is not None}
    return create("_contrib_SparseEmbedding", **inputs, **kwargs)
