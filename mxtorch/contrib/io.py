"""MXNet's ``mx.contrib.io``: a Gluon DataLoader as a symbolic-API DataIter (for ``Module.fit``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

from .._dtype import to_torch_dtype
from ..io.base import DataDesc, DataIter

__all__ = ["DataLoaderIter"]


class DataLoaderIter(DataIter):
    """Batches of a Gluon ``DataLoader`` (``(data, label)`` pairs) as DataBatches.

    ``provide_data``/``provide_label`` come from the first batch (its size is the batch size);
    data and label are cast to ``dtype``.  A shorter last batch (``last_batch='keep'``) is
    filled up to the batch size with zeros and reports the filler count as ``pad``.
    """

    def __init__(self, loader: Iterable[Any], data_name: str = "data", label_name: str = "softmax_label",
                 dtype: str = "float32") -> None:
        self._loader = loader
        self._iter: Iterator[Any] = iter(loader)
        try:
            data, label = next(self._iter)
        except StopIteration:
            raise ValueError("DataLoaderIter: the loader yields no batch: the shapes are unknown") from None
        super().__init__(int(data.shape[0]))
        self.dtype = dtype
        self._torch_dtype = to_torch_dtype(dtype, torch.float32)
        self.provide_data = [DataDesc(data_name, tuple(data.shape), dtype)]
        self.provide_label = [DataDesc(label_name, tuple(label.shape), dtype)]
        self._current: tuple[Any, Any] | None = None
        self.reset()

    def reset(self) -> None:
        self._iter = iter(self._loader)

    def iter_next(self) -> bool:
        batch = next(self._iter, None)
        self._current = None if batch is None else (batch[0], batch[1])
        return self._current is not None

    def _batch(self) -> tuple[Any, Any]:
        if self._current is None:
            raise RuntimeError("DataLoaderIter: no current batch; call iter_next() (or next()) first")
        return self._current

    def _filled(self, t: Any) -> Any:
        t = torch.as_tensor(t).to(self._torch_dtype)
        pad = self.batch_size - t.shape[0]
        if pad <= 0:
            return t
        return torch.cat([t, t.new_zeros((pad, *t.shape[1:]))])

    def getdata(self) -> list[Any]:
        return [self._filled(self._batch()[0])]

    def getlabel(self) -> list[Any]:
        return [self._filled(self._batch()[1])]

    def getpad(self) -> int:
        return max(self.batch_size - int(self._batch()[0].shape[0]), 0)
