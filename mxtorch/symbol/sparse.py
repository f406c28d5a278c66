"""``mx.sym.sparse``: MXNet's operators with sparse-storage support as symbols (``sparse.dot``,
``sparse.elemwise_add``, ...).  A graph node is the same operator whatever the storage type;
the arrays bound at run time (dense, row_sparse or csr) decide how it computes."""

from __future__ import annotations

from typing import Any

from . import _ops
from .symbol import Symbol, create


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(f"module 'mxtorch.symbol.sparse' has no operator {name!r}")
    # sparse-only operators (retain) have MXNet's graph name _sparse_<name>
    op_name = name if _ops.has_op(name) else f"_sparse_{name}"
    if not _ops.has_op(op_name):
        raise AttributeError(f"module 'mxtorch.symbol.sparse' has no operator {name!r}")

    def operator(*args: Any, **kwargs: Any) -> Symbol:
        return create(op_name, *args, **kwargs)

    operator.__name__ = name
    operator.__doc__ = f"Symbolic ``{name}`` (sparse storage supported where ``mx.nd.sparse.{name}`` is)."
    globals()[name] = operator
    return operator
