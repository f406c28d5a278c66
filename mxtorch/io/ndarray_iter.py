"""``NDArrayIter``: batches from in-memory arrays (numpy arrays, torch tensors / mx.nd arrays).

Semantics of MXNet 1.x's ``mx.io.NDArrayIter``:

* inputs are named ``data_name`` / ``label_name`` for a single array, ``_0_<name>``,
  ``_1_<name>``... for a list, the keys for a dict; they are sorted by name;
* numpy arrays and other array-likes become float32 (as ``mx.nd.array`` does), tensors keep
  their dtype;
* ``shuffle`` permutes the examples with numpy's global RNG (``np.random.shuffle``) at every
  ``reset()`` (and once at construction); as in MXNet the permutation index is shuffled in place
  and applied to the already shuffled arrays, so ``np.random.seed`` reproduces MXNet's order;
* ``last_batch_handle``: ``'pad'`` fills the last batch with examples from the start of the
  (current) order and reports their number in ``pad``; ``'discard'`` drops an incomplete last
  batch; ``'roll_over'`` keeps the incomplete last batch and, after ``reset()``, returns it
  completed with the first examples of the next epoch (``pad`` of that batch is the number of
  carried-over examples, as MXNet reports it).  ``hard_reset()`` forgets carried-over examples.

CSR inputs (``mx.nd.sparse.csr_matrix``, ``.tostype('csr')``) are supported as in MXNet: only
with ``last_batch_handle='discard'`` and the batch on axis 0; their batches are CSR arrays.

Deviation: MXNet turns a non-float32 NDArray into float32 when shuffling; here a tensor keeps
its dtype whether or not it is shuffled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..nd import array as nd_array
from ..nd.sparse import csr_matrix
from .base import DataBatch, DataDesc, DataIter, numpy_dtype

__all__ = ["NDArrayIter"]

_LAST_BATCH_HANDLES = ("pad", "discard", "roll_over")


def _as_tensor(value: Any, name: str) -> torch.Tensor:
    if isinstance(value, (np.ndarray, np.generic, torch.Tensor, int, float)) and np.ndim(value) == 0:
        raise ValueError(f"NDArrayIter: input {name!r} is a scalar; it needs a batch axis of examples")
    if isinstance(value, torch.Tensor):
        if value.layout not in (torch.strided, torch.sparse_csr):
            raise TypeError(f"NDArrayIter: input {name!r} is a {value.layout} tensor; give a dense or a CSR "
                            "array (e.g. .to_dense() or .tostype('csr'))")
        return value.detach()
    if type(value).__module__.startswith("scipy.sparse") and hasattr(value, "tocsr"):
        # a scipy sparse matrix (MXNet takes scipy.sparse.csr_matrix): kept sparse as CSR
        m = value.tocsr()
        return csr_matrix((m.data, m.indices, m.indptr), shape=m.shape, dtype=m.dtype)
    try:
        out = nd_array(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"NDArrayIter: invalid input {name!r} of type {type(value).__name__}: expected "
                        "a numpy array, a torch tensor / mx.nd array or a nested list of numbers "
                        f"({err})") from err
    return out


def init_data(data: Any, allow_empty: bool, default_name: str) -> list[tuple[str, torch.Tensor]]:
    """Inputs as a name-sorted list of ``(name, tensor)``; a single array is named ``default_name``,
    the arrays of a list ``_<i>_<default_name>``, a dict keeps its keys."""
    if data is None:
        if not allow_empty:
            raise ValueError("NDArrayIter: data must be given (an array, a list of arrays or a dict of them)")
        data = []
    if isinstance(data, (np.ndarray, torch.Tensor)):
        data = [data]
    if isinstance(data, tuple):
        data = list(data)
    if isinstance(data, list):
        if not data and not allow_empty:
            raise ValueError("NDArrayIter: data is an empty list; give at least one array")
        if len(data) == 1:
            named: dict[str, Any] = {default_name: data[0]}
        else:
            named = {f"_{i}_{default_name}": d for i, d in enumerate(data)}
    elif isinstance(data, Mapping):
        named = dict(data)
        bad = [k for k in named if not isinstance(k, str)]
        if bad:
            raise TypeError(f"NDArrayIter: the names of a dict of inputs must be strings, got {bad!r}")
    else:
        raise TypeError(f"NDArrayIter: input must be an array, a list of arrays or a dict of name to array, "
                        f"got {type(data).__name__}")
    out = []
    for k in sorted(named):
        out.append((k, _as_tensor(named[k], k)))
    return out


def _csr_rows(v: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Rows ``rows`` of the CSR array ``v`` as a new CSR array (never densified)."""
    crow, col, val = v.crow_indices(), v.col_indices(), v.values()
    rows = rows.to(crow.device)
    starts, counts = crow[rows], crow[rows + 1] - crow[rows]
    new_crow = torch.zeros(len(rows) + 1, dtype=crow.dtype, device=crow.device)
    torch.cumsum(counts, 0, out=new_crow[1:])
    # position j of new row r is old position starts[r] + j
    gather = torch.repeat_interleave(starts - new_crow[:-1], counts) + torch.arange(
        int(new_crow[-1]), dtype=crow.dtype, device=crow.device)
    shape = (len(rows),) + tuple(v.shape[1:])
    return csr_matrix((val[gather], col[gather], new_crow), shape=shape, dtype=v.dtype)


class NDArrayIter(DataIter):
    """Iterates over arrays in mini-batches; see the module docstring for MXNet's rules.

    ``data`` / ``label``: an array, a list of arrays or a dict of name to array (numpy arrays,
    torch tensors / mx.nd arrays).  The first data array's number of examples along the batch
    axis (``layout.find('N')``) is the iterator's; the other arrays need at least as many (more
    are not read, as in MXNet).
    """

    def __init__(
        self,
        data: Any,
        label: Any = None,
        batch_size: int = 1,
        shuffle: bool = False,
        last_batch_handle: str = "pad",
        data_name: str = "data",
        label_name: str = "softmax_label",
        layout: str = "NCHW",
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"NDArrayIter: batch_size must be a positive int, got {batch_size!r}")
        if last_batch_handle not in _LAST_BATCH_HANDLES:
            raise ValueError(f"NDArrayIter: unknown last_batch_handle {last_batch_handle!r}; "
                             f"use one of {list(_LAST_BATCH_HANDLES)}")
        if not isinstance(layout, str) or layout.count("N") != 1:
            raise ValueError(f"NDArrayIter: layout must be a string with one 'N' (the batch axis), "
                             f"got {layout!r}")
        super().__init__(int(batch_size))
        self.layout = layout
        self._axis = layout.find("N")
        self.data = init_data(data, allow_empty=False, default_name=data_name)
        self.label = init_data(label, allow_empty=True, default_name=label_name)
        if any(v.layout == torch.sparse_csr for _, v in self.data + self.label):
            if last_batch_handle != "discard" or self._axis != 0:
                raise NotImplementedError("NDArrayIter: CSR inputs need last_batch_handle='discard' and the "
                                          f"batch on axis 0 (got {last_batch_handle!r}, layout {layout!r}), "
                                          "as in MXNet")
        counts = {}
        for k, v in self.data + self.label:
            if v.dim() <= self._axis:
                raise ValueError(f"NDArrayIter: input {k!r} of shape {tuple(v.shape)} has no batch axis "
                                 f"{self._axis} (layout {layout!r})")
            counts[k] = int(v.shape[self._axis])
        # MXNet's rule: the first data array sets the number of examples; an input holding more is
        # read up to it, one holding fewer would give short batches and is refused
        self.num_data = next(iter(counts.values()))
        if min(counts.values()) < self.num_data:
            raise ValueError(f"NDArrayIter: data and label must have the same number of examples along the "
                             f"batch axis (at least as many as the first data array), got {counts}")
        if self.num_data == 0:
            raise ValueError("NDArrayIter: the inputs hold no examples")
        if last_batch_handle != "pad" and self.batch_size > self.num_data:
            raise ValueError(f"NDArrayIter: batch_size {self.batch_size} is larger than the number of "
                             f"examples {self.num_data} with last_batch_handle={last_batch_handle!r}, so an "
                             "epoch would have no batch; use a smaller batch_size or last_batch_handle='pad'")
        self.idx = np.arange(self.num_data)
        self.shuffle = bool(shuffle)
        self.last_batch_handle = last_batch_handle
        self.cursor = -self.batch_size
        self._cache_data: list[torch.Tensor] | None = None
        self._cache_label: list[torch.Tensor] | None = None
        self.reset()
        self.data_list = [v for _, v in self.data] + [v for _, v in self.label]
        self.num_source = len(self.data_list)

    def _descs(self, source: list[tuple[str, torch.Tensor]]) -> list[DataDesc]:
        out = []
        for k, v in source:
            shape = list(v.shape)
            shape[self._axis] = self.batch_size
            out.append(DataDesc(k, tuple(shape), numpy_dtype(v.dtype), layout=self.layout))
        return out

    @property
    def provide_data(self) -> list[DataDesc]:  # type: ignore[override]
        """Name, batch shape, dtype and layout of each data input."""
        return self._descs(self.data)

    @property
    def provide_label(self) -> list[DataDesc]:  # type: ignore[override]
        """Name, batch shape, dtype and layout of each label input."""
        return self._descs(self.label)

    def hard_reset(self) -> None:
        """Back to the start, forgetting any rolled-over examples."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self) -> None:
        """Back to the start (with 'roll_over', the carried-over examples come first)."""
        if self.shuffle:
            self._shuffle_data()
        if (self.last_batch_handle == "roll_over"
                and self.num_data - self.batch_size < self.cursor < self.num_data):
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self) -> bool:
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        data = self.getdata()
        label = self.getlabel()
        if data[0].shape[self._axis] != self.batch_size:
            # an incomplete last batch: kept for 'roll_over', dropped for 'discard'
            self._cache_data = data
            self._cache_label = label
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _slice(self, source: list[tuple[str, torch.Tensor]], start: int, end: int) -> list[torch.Tensor]:
        return [
            _csr_rows(v, torch.arange(start, end)) if v.layout == torch.sparse_csr
            else v.narrow(self._axis, start, end - start).clone()
            for _, v in source
        ]

    def _concat(self, first: list[torch.Tensor], second: list[torch.Tensor]) -> list[torch.Tensor]:
        if not first or not second:
            return first if first else second
        return [torch.cat([a, b], dim=self._axis) for a, b in zip(first, second)]

    def _batchify(
        self, source: list[tuple[str, torch.Tensor]], cache: list[torch.Tensor] | None
    ) -> list[torch.Tensor]:
        if self.cursor >= self.num_data:
            raise RuntimeError("NDArrayIter: the data are exhausted; call reset() before reading on")
        if not source:
            return []
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            if cache is None:
                raise RuntimeError("NDArrayIter: no rolled-over examples are cached for this batch; "
                                   "reset() only rolls over after an epoch ended with an incomplete batch")
            return self._concat(cache, self._slice(source, 0, self.cursor + self.batch_size))
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            pad = self.batch_size - self.num_data + self.cursor
            first = self._slice(source, self.cursor, self.num_data)
            # the filler restarts from the first example as often as needed (batch > data)
            reps, rest = divmod(pad, self.num_data)
            whole = self._slice(source, 0, self.num_data)
            parts = [first] + [whole] * reps + ([self._slice(source, 0, rest)] if rest else [])
            return [torch.cat([p[i] for p in parts], dim=self._axis) for i in range(len(source))]
        end = min(self.cursor + self.batch_size, self.num_data)
        return self._slice(source, self.cursor, end)

    def getdata(self) -> list[torch.Tensor]:
        out = self._batchify(self.data, self._cache_data)
        if self.last_batch_handle == "roll_over" and self.cursor < 0:
            self._cache_data = None
        return out

    def getlabel(self) -> list[torch.Tensor]:
        out = self._batchify(self.label, self._cache_label)
        if self.last_batch_handle == "roll_over" and self.cursor < 0:
            self._cache_label = None
        return out

    def getpad(self) -> int:
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0

    def _shuffle_data(self) -> None:
        np.random.shuffle(self.idx)
        order = torch.from_numpy(self.idx.copy())
        self.data = [(k, self._take(v, order)) for k, v in self.data]
        self.label = [(k, self._take(v, order)) for k, v in self.label]

    def _take(self, v: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        if v.layout == torch.sparse_csr:
            return _csr_rows(v, order)
        return v.index_select(self._axis, order.to(v.device))
