"""``mx.sym.linalg``: MXNet's batched linear-algebra operators as graph nodes (``_linalg_gemm``
...), running ``mx.nd.linalg``'s functions; ``gelqf``, ``syevd`` and ``slogdet`` have two outputs."""

from __future__ import annotations

from ..nd import linalg as _nd_linalg
from .symbol import namespace_operators

__all__ = list(_nd_linalg.__all__)

globals().update(namespace_operators("_linalg_", _nd_linalg, __all__))
