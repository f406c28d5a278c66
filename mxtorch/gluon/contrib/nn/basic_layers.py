"""Concurrent / HybridConcurrent (every branch sees the same input, outputs concatenated) and
SparseEmbedding (an embedding read by rows, with row-sparse gradients)."""

from __future__ import annotations

from typing import Any

import torch

from ....nd import sparse
from ...block import Block
from ...nn.basic_layers import HybridSequential, Sequential

__all__ = ["Concurrent", "HybridConcurrent", "SparseEmbedding"]


def _concat(outs: list[Any], axis: int) -> Any:
    if outs and not isinstance(outs[0], torch.Tensor):  # symbols: MXNet's Concat node
        from ....symbol import Concat

        return Concat(*outs, dim=axis)
    return torch.cat(outs, dim=axis)


class Concurrent(Sequential):
    """Runs every child on the same input and concatenates the outputs along ``axis``
    (default: the last).  Children are added with ``add`` as in a Sequential."""

    def __init__(self, axis: int = -1, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        self.axis = axis

    def forward(self, x: Any) -> Any:  # type: ignore[override]
        return _concat([b(x) for b in self._modules.values() if b is not None], self.axis)


class HybridConcurrent(HybridSequential):
    """:class:`Concurrent` that can be hybridized (Inception, SqueezeNet and DenseNet blocks)."""

    def __init__(self, axis: int = -1, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        self.axis = axis

    def forward(self, x: Any) -> Any:  # type: ignore[override]
        return _concat([b(x) for b in self._modules.values() if b is not None], self.axis)


class SparseEmbedding(Block):
    """Embedding whose weight is read by rows (``weight.row_sparse_data(x)``) and whose gradient
    is row-sparse: with a Trainer on a KVStore that holds the weights, only the rows of a batch
    are pulled and pushed.  ``input_dim`` rows of ``output_dim`` values."""

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32",
                 weight_initializer: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._input_dim, self._output_dim = int(input_dim), int(output_dim)
        self.weight = self.params.get("weight", shape=(self._input_dim, self._output_dim),
                                      init=weight_initializer, dtype=dtype,
                                      grad_stype="row_sparse", stype="row_sparse")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight.row_sparse_data(x)  # the batch's rows, in the graph of the local copy
        return sparse.embedding_rows(x.long(), weight)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._input_dim} -> {self._output_dim}, {self.weight.dtype})"
