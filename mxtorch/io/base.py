"""The data-iterator protocol of MXNet 1.x: ``DataDesc``, ``DataBatch`` and the ``DataIter`` base.

A ``DataIter`` yields ``DataBatch`` objects whose ``data`` and ``label`` are lists of tensors
(one per input / output), ``pad`` the number of filler examples at the end of the batch and
``index`` the examples' indices where known.  ``provide_data``/``provide_label`` describe the
batches as lists of ``DataDesc`` (name, shape, dtype, layout), as ``mx.mod.Module`` expects.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["DataDesc", "DataBatch", "DataIter", "NativeBatchIter", "numpy_dtype"]


def numpy_dtype(dtype: Any) -> Any:
    """The numpy scalar type (``np.float32``...) for a torch dtype, numpy dtype or name, as MXNet
    puts in ``DataDesc.dtype``."""
    if isinstance(dtype, torch.dtype):
        if dtype == torch.bfloat16:
            raise TypeError("bfloat16 has no numpy dtype: a DataDesc cannot describe it")
        return torch.empty((), dtype=dtype).numpy().dtype.type
    return np.dtype(dtype).type


def check_kwargs(owner: str, kwargs: dict[str, Any], ignored: Iterable[str]) -> None:
    """Raise TypeError for keyword arguments of ``owner`` other than the ``ignored`` ones
    (MXNet options that have no effect here)."""
    unknown = sorted(set(kwargs) - set(ignored))
    if unknown:
        raise TypeError(f"{owner} got unexpected argument(s) {unknown}")


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """``(name, shape)`` of one input or output, with ``dtype`` (default ``np.float32``) and
    ``layout`` (default ``'NCHW'``; the position of ``N`` is the batch axis) as attributes.

    It compares equal to the plain tuple ``(name, shape)``, as in MXNet.
    """

    dtype: Any
    layout: str

    def __new__(
        cls, name: str, shape: Sequence[int], dtype: Any = np.float32, layout: str = "NCHW"
    ) -> DataDesc:
        ret = super().__new__(cls, name, tuple(int(s) for s in shape))
        ret.dtype = dtype
        ret.layout = layout
        return ret

    def __getnewargs__(self) -> tuple[Any, ...]:
        return (self.name, self.shape, self.dtype, self.layout)

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        """The axis of the batch (``layout.find('N')``); 0 when ``layout`` is None, -1 when the
        layout has no ``N`` (the array is not split across devices)."""
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes: Iterable[tuple[str, Sequence[int]]],
                 types: Iterable[tuple[str, Any]] | None) -> list[DataDesc]:
        """DataDesc list from ``[(name, shape), ...]`` and optionally ``[(name, dtype), ...]``."""
        if types is None:
            return [DataDesc(name, shape) for name, shape in shapes]
        type_of = dict(types)
        missing = [name for name, _ in shapes if name not in type_of]
        if missing:
            raise ValueError(f"get_list: no dtype given for {missing}; types has {sorted(type_of)}")
        return [DataDesc(name, shape, type_of[name]) for name, shape in shapes]


class DataBatch:
    """One batch: ``data`` and ``label`` (lists of tensors), ``pad`` (filler examples at the end),
    ``index`` (example indices, or None), ``bucket_key`` and optional ``provide_data`` /
    ``provide_label`` (lists of DataDesc) for iterators whose shapes change between batches."""

    def __init__(
        self,
        data: list[Any] | tuple[Any, ...] | None,
        label: list[Any] | tuple[Any, ...] | None = None,
        pad: int | None = None,
        index: Any = None,
        bucket_key: Any = None,
        provide_data: list[DataDesc] | None = None,
        provide_label: list[DataDesc] | None = None,
    ) -> None:
        if data is not None and not isinstance(data, (list, tuple)):
            raise TypeError(f"DataBatch: data must be a list of arrays, got {type(data).__name__}; "
                            "wrap a single array as [array]")
        if label is not None and not isinstance(label, (list, tuple)):
            raise TypeError(f"DataBatch: label must be a list of arrays, got {type(label).__name__}; "
                            "wrap a single array as [array]")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self) -> str:
        data_shapes = [tuple(d.shape) for d in self.data] if self.data is not None else None
        label_shapes = [tuple(x.shape) for x in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data_shapes} label shapes: {label_shapes}"

    __repr__ = __str__


class DataIter:
    """Base of all data iterators.

    Subclasses implement ``iter_next`` (advance; False at the end), ``getdata``, ``getlabel``,
    ``getpad`` and optionally ``getindex`` and ``reset``; ``next()`` then builds the DataBatch.
    Iterating past the end raises ``StopIteration`` until ``reset()`` is called.
    """

    provide_data: list[DataDesc]
    provide_label: list[DataDesc]

    def __init__(self, batch_size: int = 0) -> None:
        self.batch_size = batch_size

    def __iter__(self) -> DataIter:
        return self

    def reset(self) -> None:
        """Go back to the beginning of the data."""

    def next(self) -> DataBatch:
        """The next batch; raises StopIteration at the end of the data."""
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self) -> DataBatch:
        return self.next()

    def iter_next(self) -> bool:
        """Move to the next batch; False when there is none."""
        raise NotImplementedError(f"{type(self).__name__} does not implement iter_next")

    def getdata(self) -> list[Any]:
        """The data arrays of the current batch."""
        raise NotImplementedError(f"{type(self).__name__} does not implement getdata")

    def getlabel(self) -> list[Any]:
        """The label arrays of the current batch."""
        raise NotImplementedError(f"{type(self).__name__} does not implement getlabel")

    def getindex(self) -> Any:
        """The example indices of the current batch (None when unknown)."""
        return None

    def getpad(self) -> int:
        """The number of filler examples at the end of the current batch."""
        return 0


class BatchIter(DataIter):
    """A DataIter whose ``iter_next`` builds the whole DataBatch and keeps it in ``current_batch``;
    ``next`` and the ``get*`` accessors read that batch."""

    current_batch: DataBatch | None = None

    def _current(self) -> DataBatch:
        if self.current_batch is None:
            raise RuntimeError(
                f"{type(self).__name__}: there is no current batch; call iter_next() (or next()) first"
            )
        return self.current_batch

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        return self._current()

    def getdata(self) -> list[Any]:
        return list(self._current().data or [])

    def getlabel(self) -> list[Any]:
        return list(self._current().label or [])

    def getindex(self) -> Any:
        return self._current().index

    def getpad(self) -> int:
        return int(self._current().pad or 0)


class NativeBatchIter(BatchIter):
    """A BatchIter in the role of MXNet's iterators written in C++ (``MXDataIter``: CSVIter,
    MNISTIter ...), whose ``getdata`` / ``getlabel`` give the batch's one data / label array itself
    rather than a list (the DataBatch still holds lists)."""

    def getdata(self) -> Any:  # type: ignore[override]
        data = self._current().data or []
        return data[0] if data else None

    def getlabel(self) -> Any:  # type: ignore[override]
        label = self._current().label or []
        return label[0] if label else None

