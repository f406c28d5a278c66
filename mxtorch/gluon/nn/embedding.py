"""Embedding: integer indices (given as ints or floats, as MXNet allows) -> dense vectors."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

from ..._dtype import dtype_name, to_torch_dtype
from ...base import MXNetError
from ..block import HybridBlock
from ..symbolic import symbol_translation
from .conv_layers import _is_int

__all__ = ["Embedding"]


class Embedding(HybridBlock):
    """Looks up rows of ``weight`` (shape (input_dim, output_dim)) for each index of the input.

    Input of shape (d1, ..., dk) gives output (d1, ..., dk, output_dim).  Float indices are
    truncated to integers, as MXNet does.  Indices outside [0, input_dim) raise an error on CPU
    in eager mode; on GPU or when compiled, torch's own index check applies (checking here
    would force a synchronization or a graph break).

    ``sparse_grad=True`` gives row-sparse gradients (``grad_stype='row_sparse'``: a torch
    sparse COO tensor holding only the looked-up rows, from ``F.embedding(..., sparse=True)``);
    the optimizer then updates only those rows (lazy update) and the KVStores move only
    those rows.  A weight declared ``stype='row_sparse'`` (``emb.weight.stype = 'row_sparse'``,
    as MXNet's SparseEmbedding declares its weight) is read the way
    :meth:`Parameter.row_sparse_data` reads: the looked-up rows are first pulled from the
    Trainer's KVStore when that store holds the weights.
    """

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32",
                 weight_initializer: Any = None, sparse_grad: bool = False, prefix: str | None = None,
                 params: Any = None) -> None:
        super().__init__(prefix, params)
        for what, v in (("input_dim", input_dim), ("output_dim", output_dim)):
            if not _is_int(v) or v <= 0:
                raise ValueError(f"Embedding: {what} must be a positive int, got {v!r}")
        self._input_dim, self._output_dim = int(input_dim), int(output_dim)
        self._dtype = to_torch_dtype(dtype)
        self._sparse_grad = bool(sparse_grad)
        self.weight = self.params.get("weight", shape=(self._input_dim, self._output_dim), dtype=self._dtype,
                                      init=weight_initializer, allow_deferred_init=True,
                                      grad_stype="row_sparse" if self._sparse_grad else "default")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            x = torch.as_tensor(x)
        if x.dtype.is_complex or x.dtype == torch.bool:
            raise TypeError(f"Embedding: indices must be integers or floats, got dtype {x.dtype}")
        idx = x if x.dtype == torch.int64 else x.long()
        if idx.device.type == "cpu" and idx.numel() and not torch.compiler.is_compiling():
            lo, hi = int(idx.min()), int(idx.max())
            if lo < 0 or hi >= self._input_dim:
                bad = lo if lo < 0 else hi
                raise MXNetError(f"Embedding: index {bad} is out of range for input_dim={self._input_dim} "
                                 f"(expected 0 <= index < {self._input_dim})")
        if self.weight.stype == "row_sparse":  # read by rows: the looked-up ones are pulled first
            weight = self.weight._copy_on(None)
            self.weight._fresh_rows(torch.unique(idx.reshape(-1)), [self.weight._index(None)])
        else:
            weight = self.weight.data()
        return F.embedding(idx, weight, sparse=self._sparse_grad)

    def __repr__(self) -> str:
        return f"Embedding({self._input_dim} -> {self._output_dim}, {dtype_name(self._dtype)})"


@symbol_translation(Embedding)
def _embedding_graph(F: ModuleType, b: Embedding, x: Any) -> Any:
    return F.Embedding(
        x,
        weight=b.weight.var(),
        name="fwd",
        input_dim=b._input_dim,
        output_dim=b._output_dim,
        dtype=str(b._dtype).replace("torch.", ""),
        sparse_grad=b._sparse_grad,
    )
