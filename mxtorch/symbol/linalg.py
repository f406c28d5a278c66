"""``mx.sym.linalg``: MXNet's batched linear-algebra operators as graph nodes (``_linalg_gemm``
...), running ``mx.nd.linalg``'s functions; ``gelqf``, ``syevd`` and ``slogdet`` have two outputs."""

from __future__ import annotations

from typing import Any

from ..nd import linalg as _nd_linalg
from .symbol import Symbol, create

__all__ = list(_nd_linalg.__all__)


def _node(name: str) -> Any:
    def operator(*args: Any, **kwargs: Any) -> Symbol:
        return create(f"_linalg_{name}", *args, _hint=name, **kwargs)

    operator.__name__ = operator.__qualname__ = name
    operator.__doc__ = f"Symbolic ``mx.nd.linalg.{name}``: {_nd_linalg.__dict__[name].__doc__}"
    return operator


globals().update({name: _node(name) for name in __all__})
