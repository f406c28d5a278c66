"""Iterators built on other iterators: ``ResizeIter``, ``PrefetchingIter`` and ``DataLoaderIter``."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .._closing import Closing
from .._dtype import to_torch_dtype
from .base import BatchIter, DataBatch, DataDesc, DataIter, numpy_dtype

__all__ = ["ResizeIter", "PrefetchingIter", "DataLoaderIter"]


class ResizeIter(BatchIter):
    """Makes ``data_iter`` give exactly ``size`` batches per epoch.

    When ``data_iter`` runs out it is reset and read on; when ``size`` batches have been given
    the epoch ends.  ``reset()`` resets ``data_iter`` too only if ``reset_internal`` (default),
    otherwise the next epoch continues where this one stopped.
    """

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True) -> None:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValueError(f"ResizeIter: size must be an int >= 0 (batches per epoch), got {size!r}")
        super().__init__()
        self.data_iter = data_iter
        self.size = int(size)
        self.reset_internal = bool(reset_internal)
        self.cur = 0
        self.current_batch: DataBatch | None = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self) -> None:
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            try:
                self.current_batch = self.data_iter.next()
            except StopIteration:
                raise RuntimeError(
                    "ResizeIter: the wrapped iterator gives no batch even right after reset(), so it cannot "
                    "be stretched to any size"
                ) from None
        self.cur += 1
        return True


class _Prefetcher:
    """The state one PrefetchingIter shares with its threads (which must not hold the iterator
    itself, so that dropping the iterator stops them).  One thread per source iterator reads
    one batch ahead: it waits for ``taken[i]``, reads, stores the outcome and sets ``ready[i]``."""

    def __init__(self, iters: list[DataIter]) -> None:
        self.iters = iters
        self.ready = [threading.Event() for _ in iters]
        self.taken = [threading.Event() for _ in iters]
        self.outcome: list[tuple[str, Any]] = [("end", None) for _ in iters]
        self.closing = False
        self.threads = [
            threading.Thread(target=self._run, args=(i,), name=f"mxtorch-PrefetchingIter-{i}", daemon=True)
            for i in range(len(iters))
        ]
        for ev in self.taken:
            ev.set()
        for t in self.threads:
            t.start()

    def _run(self, i: int) -> None:
        while True:
            self.taken[i].wait()
            if self.closing:
                return
            self.taken[i].clear()
            try:
                self.outcome[i] = ("batch", self.iters[i].next())
            except StopIteration:
                self.outcome[i] = ("end", None)
            except BaseException as err:  # noqa: BLE001 - handed to the consumer thread
                self.outcome[i] = ("error", err)
            self.ready[i].set()

    def close(self) -> None:
        self.closing = True
        for ev in self.taken:
            ev.set()
        current = threading.current_thread()
        for t in self.threads:
            if t is not current:
                t.join()


class PrefetchingIter(BatchIter, Closing):
    """Reads the next batch of each of ``iters`` in background threads while the current one is
    used, and joins them into one batch (data and labels concatenated in the order of ``iters``).

    ``rename_data`` / ``rename_label``: one dict per iterator mapping its names to new ones (a
    name not in the dict is kept).  An exception raised by a source iterator in its thread is
    re-raised by ``next()``; the failed read is retried on the following call.  ``close()`` (also
    on ``with`` exit and when the iterator is garbage-collected) stops the threads.
    """

    def __init__(
        self,
        iters: DataIter | Sequence[DataIter],
        rename_data: Sequence[Mapping[str, str]] | None = None,
        rename_label: Sequence[Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__()
        iters = [iters] if isinstance(iters, DataIter) else list(iters)
        if not iters:
            raise ValueError("PrefetchingIter: iters is empty; give one DataIter or a list of them")
        for what, rename in (("rename_data", rename_data), ("rename_label", rename_label)):
            if rename is not None and len(rename) != len(iters):
                raise ValueError(f"PrefetchingIter: {what} has {len(rename)} dicts for {len(iters)} "
                                 "iterators; give one dict per iterator")
        self.n_iter = len(iters)
        self.iters = iters
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0].shape[0]
        self.current_batch: DataBatch | None = None
        self._state = _Prefetcher(iters)
        self._finalizer = weakref.finalize(self, self._state.close)
        self._finalizer.atexit = False  # daemon threads; a source blocked at exit must not hang it

    @staticmethod
    def _renamed(descs: list[Any], rename: Mapping[str, str] | None) -> list[DataDesc]:
        out = []
        for x in descs:
            d = x if isinstance(x, DataDesc) else DataDesc(*x)
            name = rename.get(d.name, d.name) if rename is not None else d.name
            out.append(DataDesc(name, d.shape, d.dtype, d.layout))
        return out

    @property
    def provide_data(self) -> list[DataDesc]:  # type: ignore[override]
        renames: Sequence[Mapping[str, str] | None] = self.rename_data or [None] * self.n_iter
        return [d for it, r in zip(self.iters, renames) for d in self._renamed(it.provide_data, r)]

    @property
    def provide_label(self) -> list[DataDesc]:  # type: ignore[override]
        renames: Sequence[Mapping[str, str] | None] = self.rename_label or [None] * self.n_iter
        return [d for it, r in zip(self.iters, renames) for d in self._renamed(it.provide_label, r)]

    def close(self) -> None:
        """Stop the background threads (idempotent); the iterator cannot be used afterwards."""
        self._finalizer()

    def _check_open(self) -> None:
        if not self._finalizer.alive:
            raise RuntimeError("PrefetchingIter is closed; make a new one to read on")

    def reset(self) -> None:
        self._check_open()
        st = self._state
        for ev in st.ready:
            ev.wait()
        for it in self.iters:
            it.reset()
        for ev in st.ready:
            ev.clear()
        for ev in st.taken:
            ev.set()

    def iter_next(self) -> bool:
        self._check_open()
        st = self._state
        for ev in st.ready:
            ev.wait()
        for i, (kind, value) in enumerate(st.outcome):
            if kind == "error":
                st.ready[i].clear()
                st.taken[i].set()  # read that iterator again at the next call
                raise value
        kinds = [kind for kind, _ in st.outcome]
        if "end" in kinds:
            if any(k != "end" for k in kinds):
                ended = [i for i, k in enumerate(kinds) if k == "end"]
                raise RuntimeError(f"PrefetchingIter: iterators {ended} ended while the others still have "
                                   "batches; all iterators must give the same number of batches")
            return False
        batches: list[DataBatch] = [value for _, value in st.outcome]
        pads = [b.pad for b in batches]
        if any(p != pads[0] for p in pads):
            raise RuntimeError(f"PrefetchingIter: the iterators' batches have different pad values {pads}; "
                               "all iterators must give batches of the same examples")
        self.current_batch = DataBatch(
            [d for b in batches for d in (b.data or [])],
            [x for b in batches for x in (b.label or [])],
            batches[0].pad,
            batches[0].index,
            provide_data=self.provide_data,
            provide_label=self.provide_label,
        )
        for ev in st.ready:
            ev.clear()
        for ev in st.taken:
            ev.set()
        return True


def _as_batch_tensor(x: Any, what: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    raise TypeError(f"DataLoaderIter: the loader's {what} is a {type(x).__name__}; expected a tensor or "
                    "numpy array")


class DataLoaderIter(DataIter):
    """A ``gluon.data.DataLoader`` (or any re-iterable giving ``(data, label)`` batches) as a
    DataIter for ``mx.mod.Module`` (MXNet's ``mx.contrib.io.DataLoaderIter``).

    ``batch_size`` and the shapes in ``provide_data`` / ``provide_label`` come from the loader's
    first batch.  Data and labels are cast to ``dtype`` (default 'float32', as in MXNet; None
    keeps the loader's dtypes).  A smaller last batch is padded to ``batch_size`` like
    ``NDArrayIter``'s ``'pad'``: with the first examples of the epoch (the epoch's first batch,
    repeated if needed) and ``pad`` set to their number; MXNet leaves the filler uninitialised.
    ``index`` is None.
    """

    def __init__(self, loader: Any, data_name: str = "data", label_name: str = "softmax_label",
                 dtype: Any = "float32") -> None:
        super().__init__()
        self._loader = loader
        self._dtype = None if dtype is None else to_torch_dtype(dtype)
        try:
            first = next(iter(loader))
        except StopIteration:
            raise ValueError("DataLoaderIter: the loader gives no batch") from None
        data, label = self._split(first)
        self.batch_size = int(data.shape[0])
        self.provide_data = [DataDesc(data_name, tuple(data.shape), numpy_dtype(data.dtype))]
        self.provide_label = [DataDesc(label_name, tuple(label.shape), numpy_dtype(label.dtype))]
        self._iter: Iterator[Any] = iter(())
        self._epoch_first: tuple[torch.Tensor, torch.Tensor] | None = None
        self._current_batch: tuple[torch.Tensor, torch.Tensor] | None = None
        self._pad = 0
        self.reset()

    def _split(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(batch, (list, tuple)) or len(batch) != 2:
            size = f" of {len(batch)}" if isinstance(batch, (list, tuple)) else ""
            raise TypeError(f"DataLoaderIter: the loader must give (data, label) batches, got "
                            f"{type(batch).__name__}{size}")
        data = _as_batch_tensor(batch[0], "data")
        label = _as_batch_tensor(batch[1], "label")
        if self._dtype is not None:
            data, label = data.to(self._dtype), label.to(self._dtype)
        if data.dim() == 0 or label.dim() == 0 or data.shape[0] != label.shape[0]:
            raise ValueError(f"DataLoaderIter: a batch's data {tuple(data.shape)} and label "
                             f"{tuple(label.shape)} must have the same (non-zero) number of examples along "
                             "axis 0")
        return data, label

    def reset(self) -> None:
        self._iter = iter(self._loader)
        self._epoch_first = None
        self._current_batch = None

    def _fill(self, x: torch.Tensor, first: torch.Tensor, pad: int) -> torch.Tensor:
        reps = -(-pad // first.shape[0])
        filler = first.repeat((reps,) + (1,) * (first.dim() - 1))[:pad]
        return torch.cat([x, filler.to(x.device)], dim=0)

    def iter_next(self) -> bool:
        try:
            raw = next(self._iter)
        except StopIteration:
            self._current_batch = None
            return False
        data, label = self._split(raw)
        n = int(data.shape[0])
        if n > self.batch_size:
            raise ValueError(f"DataLoaderIter: the loader gave a batch of {n} examples, more than its first "
                             f"batch's {self.batch_size}")
        if self._epoch_first is None:
            self._epoch_first = (data, label)
        self._pad = self.batch_size - n
        if self._pad:
            fd, fl = self._epoch_first
            data, label = self._fill(data, fd, self._pad), self._fill(label, fl, self._pad)
        self._current_batch = (data, label)
        return True

    def _current(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._current_batch is None:
            raise RuntimeError("DataLoaderIter: there is no current batch; call iter_next() (or next()) "
                               "first")
        return self._current_batch

    def getdata(self) -> list[Any]:
        return [self._current()[0]]

    def getlabel(self) -> list[Any]:
        return [self._current()[1]]

    def getpad(self) -> int:
        self._current()
        return self._pad

    def getindex(self) -> Any:
        return None
