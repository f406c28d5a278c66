"""``mx.sym._internal``: MXNet's internal operators by their graph names (``_plus``,
``_identity_with_attr_like_rhs``, ``_mul_scalar`` ...), which MXNet code calls directly."""

from __future__ import annotations

from typing import Any

from . import _ops
from .symbol import Symbol, create


def __getattr__(name: str) -> Any:
    if name.startswith("__") or not _ops.has_op(name):
        raise AttributeError(f"module 'mxtorch.symbol._internal' has no operator {name!r}")

    def operator(*args: Any, **kwargs: Any) -> Symbol:
        return create(name, *args, **kwargs)

    operator.__name__ = name
    globals()[name] = operator
    return operator
