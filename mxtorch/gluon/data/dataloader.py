"""DataLoader: mini-batches from a Dataset, in this process, in worker processes or in threads."""

from __future__ import annotations

import collections
import concurrent.futures
import numbers
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch
import torch.utils.data

from ...base import MXNetError
from ...context import Context, cpu_pinned
from ...profiler import span
from .dataset import Dataset, SimpleDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_batchify_fn"]

_END = object()  # the end of an iterator (next's default)


def default_batchify_fn(data: list[Any]) -> Any:
    """Stack a list of samples into a batch.

    Tensors are stacked (keeping their dtype), numpy arrays and numpy scalars become tensors of
    their dtype, Python ints become int64, floats float32 and bools bool; tuples are batched
    element by element into a list, dicts key by key; strings are returned as a list.
    """
    if not isinstance(data, (list, tuple)) or len(data) == 0:
        raise ValueError(f"default_batchify_fn expects a non-empty list of samples, got {data!r}")
    first = data[0]
    if isinstance(first, torch.Tensor):
        try:
            return torch.stack(list(data))
        except RuntimeError as err:
            shapes = sorted({tuple(x.shape) for x in data if isinstance(x, torch.Tensor)})
            raise ValueError(f"cannot stack samples of different shapes {shapes} into a batch") from err
    if isinstance(first, np.ndarray):
        try:
            return torch.from_numpy(np.stack(data))
        except ValueError as err:
            shapes = sorted({np.shape(x) for x in data})
            raise ValueError(f"cannot stack samples of different shapes {shapes} into a batch") from err
    if isinstance(first, np.generic):
        return torch.from_numpy(np.asarray(data))
    if isinstance(first, tuple):
        return [default_batchify_fn(list(x)) for x in zip(*data)]
    if isinstance(first, dict):
        return {k: default_batchify_fn([d[k] for d in data]) for k in first}
    if isinstance(first, (str, bytes)):
        return list(data)
    if isinstance(first, (bool, numbers.Number, list)):
        arr = np.asarray(data)
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float32)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        elif arr.dtype.kind == "c":
            arr = arr.astype(np.complex64)
        elif arr.dtype.kind != "b":
            raise TypeError(f"cannot batch samples like {first!r}: got a numpy array of dtype {arr.dtype}")
        return torch.from_numpy(arr)
    raise TypeError(
        f"default_batchify_fn cannot batch samples of type {type(first).__name__} ({first!r}); "
        "expected tensors, numpy arrays, numbers, tuples or dicts of these, or pass batchify_fn"
    )


def _pin(batch: Any, ctx: Context, page_lock: bool) -> Any:
    """``batch``'s arrays in pinned memory (``page_lock``: torch's page-locked memory, which needs
    an accelerator), each reporting context ``ctx`` (``cpu_pinned(pin_device_id)``), as MXNet's
    CPU build hands out ordinary memory under that context."""
    if isinstance(batch, torch.Tensor):
        out = batch.pin_memory() if page_lock and not batch.is_pinned() else batch
        out._mx_ctx = ctx  # type: ignore[attr-defined]
        return out
    if isinstance(batch, list):
        return [_pin(b, ctx, page_lock) for b in batch]
    if isinstance(batch, tuple):
        return tuple(_pin(b, ctx, page_lock) for b in batch)
    if isinstance(batch, dict):
        return {k: _pin(v, ctx, page_lock) for k, v in batch.items()}
    return batch


def _identity(x: Any) -> Any:
    return x


class _BatchFetcher(torch.utils.data.Dataset):
    """Turns a list of indices into a batch: one batched index when the dataset allows it,
    else one ``dataset[i]`` per index followed by ``batchify_fn``."""

    def __init__(self, dataset: Any, batchify_fn: Callable[[list[Any]], Any] | None) -> None:
        self.dataset = dataset
        self.fast = batchify_fn is None and isinstance(dataset, Dataset) and dataset._batchable()
        self.batchify_fn = batchify_fn if batchify_fn is not None else default_batchify_fn

    def __getitem__(self, indices: list[int]) -> Any:
        if self.fast:
            return self.dataset._get_batch(torch.as_tensor(indices, dtype=torch.int64))
        return self.batchify_fn([self.dataset[i] for i in indices])

    def __len__(self) -> int:
        return len(self.dataset)


def _pass_of(ref: weakref.ref[DataLoader]) -> Iterator[Any]:
    """See :meth:`DataLoader._pass_batches`."""
    loader = ref()
    if loader is None:
        return
    skip, loader._skip = loader._skip, 0
    it = iter(loader._batch_sampler)
    del loader
    for _ in range(skip):
        if next(it, None) is None:
            return
    yield from it


class _PassSampler:
    """What torch's DataLoader iterates for worker processes: the loader's index batches of a pass."""

    def __init__(self, loader: DataLoader) -> None:
        # A weak reference: a strong one would put the loader, torch's iterator and its worker
        # queues in one reference cycle, and the garbage collector closes those queues before the
        # iterator's shutdown can tell the workers to stop: each worker then cost its 5 s join timeout.
        self._loader = weakref.ref(loader)

    def _target(self) -> DataLoader:
        loader = self._loader()
        if loader is None:
            raise RuntimeError("the DataLoader of these worker processes was garbage-collected")
        return loader

    def __iter__(self) -> Iterator[Any]:
        return self._target()._pass_batches()

    def __len__(self) -> int:
        return len(self._target())


class DataLoader:
    """Loads mini-batches from ``dataset``.

    Either give ``batch_size`` (with ``shuffle`` or a ``sampler``, and ``last_batch`` one of
    ``'keep'`` (default), ``'discard'``, ``'rollover'``) or a ``batch_sampler`` that yields
    lists of indices.  ``num_workers > 0`` loads in worker processes (torch's DataLoader
    machinery, kept alive between epochs) or, with ``thread_pool=True``, in threads;
    ``prefetch`` batches (default ``2 * num_workers``) are loaded ahead.

    When ``batchify_fn`` is not given and the dataset supports batched indexing (tensors,
    numpy arrays, in-memory vision datasets, and lazy transforms of these by mxtorch vision
    transforms), each batch is fetched with one indexing operation and transformed once;
    the result equals what per-sample loading and batching give.

    ``auto_reload=True`` (MXNet 1.9) makes the next epoch's iterator as soon as one epoch ends
    (and at construction), so worker processes start loading before the next ``iter()``;
    ``refresh()`` does that by hand and ``clean()`` drops it.  Batches are the same either way.

    :meth:`state_dict` / :meth:`load_state_dict` save and restore the position: passes completed,
    batches taken from the pass in progress, and the samplers' states (see
    :mod:`~mxtorch.gluon.data.sampler`).  A restored loader's next pass repeats the saved one and
    skips the batches already taken (their indices are drawn, nothing is loaded).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = None,
        shuffle: bool = False,
        sampler: Sampler | Iterable[int] | None = None,
        last_batch: str | None = None,
        batch_sampler: Sampler | Iterable[list[int]] | None = None,
        batchify_fn: Callable[[list[Any]], Any] | None = None,
        num_workers: int = 0,
        pin_memory: bool = False,
        pin_device_id: int = 0,
        prefetch: int | None = None,
        thread_pool: bool = False,
        timeout: int = 120,
        auto_reload: bool = False,
    ) -> None:
        if isinstance(dataset, (torch.Tensor, np.ndarray)):
            dataset = SimpleDataset(dataset)
        self._dataset = dataset
        if batch_sampler is None:
            if batch_size is None:
                raise ValueError("batch_size must be specified unless batch_sampler is specified")
            if sampler is None:
                sampler = RandomSampler(len(dataset)) if shuffle else SequentialSampler(len(dataset))
            elif shuffle:
                raise ValueError("shuffle must not be specified if sampler is specified")
            batch_sampler = BatchSampler(sampler, batch_size, last_batch if last_batch else "keep")
        elif batch_size is not None or shuffle or sampler is not None or last_batch is not None:
            raise ValueError(
                "batch_size, shuffle, sampler and last_batch must not be specified if batch_sampler is "
                f"specified (got batch_size={batch_size!r}, shuffle={shuffle!r}, sampler={sampler!r}, "
                f"last_batch={last_batch!r})"
            )
        self._batch_sampler = batch_sampler
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers must be an int >= 0, got {num_workers!r}")
        self._num_workers = num_workers
        if prefetch is None:
            prefetch = 2 * num_workers
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"prefetch must be an int >= 0 or None, got {prefetch!r}")
        self._prefetch = max(prefetch, 1)
        if isinstance(pin_device_id, bool) or not isinstance(pin_device_id, int) or pin_device_id < 0:
            raise ValueError(f"pin_device_id must be an int >= 0, got {pin_device_id!r}")
        self._pin_memory = bool(pin_memory) and torch.cuda.is_available()  # page-locked by torch
        self._pin_device_id = pin_device_id
        self._pin_ctx = cpu_pinned(pin_device_id) if pin_memory else None
        self._thread_pool = bool(thread_pool)
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
        self._timeout = timeout or 0
        self._fetcher = _BatchFetcher(dataset, batchify_fn)
        self._torch_loader: torch.utils.data.DataLoader | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.auto_reload = bool(auto_reload)
        self._iter: Iterator[Any] | None = None
        self._epochs = 0  # passes completed
        self._consumed = 0  # batches handed out by the pass in progress
        self._skip = 0  # batches the next pass skips (load_state_dict)
        self._count_from = 0
        if self.auto_reload:
            self.refresh()

    def state_dict(self) -> dict[str, Any]:
        """The loading position, as a JSON-able dict: ``epoch`` (passes completed), ``batches``
        (taken from the pass in progress) and the batch sampler's state (``None`` for a sampler
        without ``state_dict``).

        Exact for ``num_workers=0``, thread pools and worker processes; with worker processes
        and ``auto_reload`` the next pass's sampler may already have drawn its order."""
        bs = self._batch_sampler
        return {"format": "mxtorch.gluon.DataLoader", "version": 1, "epoch": self._epochs,
                "batches": self._consumed,
                "sampler": bs.state_dict() if hasattr(bs, "state_dict") else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at a position saved by :meth:`state_dict`: the next pass repeats the saved pass
        and starts after its ``batches`` batches.  Call it before iterating."""
        if not isinstance(state, dict) or state.get("format") != "mxtorch.gluon.DataLoader":
            raise MXNetError(f"not a DataLoader state: {state!r:.200}")
        if state.get("version") != 1:
            raise MXNetError(f"DataLoader state version {state.get('version')!r} is not one this mxtorch "
                             "reads (1)")
        epoch, batches = state.get("epoch"), state.get("batches")
        for name, v in (("epoch", epoch), ("batches", batches)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise MXNetError(f"bad DataLoader state: {name} {v!r}")
        assert isinstance(epoch, int) and isinstance(batches, int)
        bs, sampler_state = self._batch_sampler, state.get("sampler")
        if sampler_state is not None and hasattr(bs, "load_state_dict"):
            bs.load_state_dict(sampler_state, replay=batches > 0)
        elif batches > 0:
            warnings.warn(f"this DataLoader's batch sampler ({type(bs).__name__}) has no state_dict/"
                          f"load_state_dict: the resumed pass skips {batches} batches of a new order, which "
                          "equals the saved one only if the sampler is deterministic", stacklevel=2)
        self._epochs, self._skip, self._count_from = epoch, batches, batches
        if self._iter is not None:  # a pass prefetched before the position was known
            self._iter = None
            if self.auto_reload:
                self.refresh()

    def refresh(self) -> None:
        """Start loading an epoch now; the next ``iter()`` continues from it."""
        self._iter = self._new_iter()

    def clean(self) -> None:
        """Drop a prefetched epoch: loading starts at the next ``iter()``."""
        self._iter = None

    @property
    def fast_path(self) -> bool:
        """Whether batches are fetched by batched indexing (see the class docstring)."""
        return self._fetcher.fast

    def __len__(self) -> int:
        return len(self._batch_sampler)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        if self._iter is None and not self.auto_reload:
            return self._counting(self._new_iter())
        return self._counting(self._reloading_iter())

    def _counting(self, it: Iterator[Any]) -> Iterator[Any]:
        """``it``, counting the batches handed out (for :meth:`state_dict`)."""
        self._consumed, self._count_from = self._count_from, 0
        while True:
            with span("data.wait", batch=self._consumed):  # the time the training loop waits for data
                batch = next(it, _END)
            if batch is _END:
                break
            self._consumed += 1  # counted before the caller works on it: a checkpoint then includes it
            yield batch if self._pin_ctx is None else _pin(batch, self._pin_ctx, self._pin_memory)
        self._consumed = 0
        self._epochs += 1

    def _pass_batches(self) -> Iterator[Any]:
        """The batch sampler's index batches, less the ones a restored position skips (a generator:
        nothing happens before the first batch is asked for; torch's iterator makes and drops one).
        It holds the loader weakly: torch's persistent iterator keeps it, and a strong reference
        from a pass left unfinished would make the loader part of a reference cycle."""
        return _pass_of(weakref.ref(self))

    def _reloading_iter(self) -> Iterator[Any]:
        it = self._iter if self._iter is not None else self._new_iter()
        self._iter = None  # one prefetched epoch serves one iterator
        yield from it
        if self._iter is None and self.auto_reload:
            self.refresh()

    def _new_iter(self) -> Iterator[Any]:
        if self._num_workers == 0:
            return self._iter_same_process()
        if self._thread_pool:
            return self._iter_threads()
        return self._iter_processes()  # worker processes start loading here, threads at first next()

    def _iter_same_process(self) -> Iterator[Any]:
        fetch = self._fetcher.__getitem__
        for indices in self._pass_batches():
            # One intra-op thread while loading: a batch's ops are small, and torch's thread pool
            # costs far more than it gains on them whenever the cores are busy (measured: an
            # epoch of Fashion-MNIST took 3.4 s instead of 0.1 s with 2 threads on 2 loaded cores).
            threads = torch.get_num_threads()
            if threads > 1:
                torch.set_num_threads(1)
            try:
                batch = fetch(indices)
            finally:
                if threads > 1:
                    torch.set_num_threads(threads)
            yield batch

    def _iter_threads(self) -> Iterator[Any]:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._num_workers, thread_name_prefix="mxtorch-dataloader"
            )
        pending: collections.deque[concurrent.futures.Future[Any]] = collections.deque()
        indices_iter = self._pass_batches()
        window = max(self._prefetch, self._num_workers)
        try:
            for indices in indices_iter:
                pending.append(self._executor.submit(self._fetcher.__getitem__, indices))
                if len(pending) >= window:
                    yield self._finish(pending.popleft())
            while pending:
                yield self._finish(pending.popleft())
        finally:
            for fut in pending:
                fut.cancel()

    def _finish(self, fut: concurrent.futures.Future[Any]) -> Any:
        batch = fut.result(timeout=self._timeout or None)
        return batch

    def _iter_processes(self) -> Iterator[Any]:
        if self._torch_loader is None:
            self._torch_loader = torch.utils.data.DataLoader(
                self._fetcher,
                batch_size=None,
                sampler=_PassSampler(self),  # type: ignore[arg-type]
                collate_fn=_identity,
                num_workers=self._num_workers,
                pin_memory=self._pin_memory,
                timeout=self._timeout,
                prefetch_factor=max(1, -(-self._prefetch // self._num_workers)),
                persistent_workers=True,
            )
        if self._skip == 0:
            return iter(self._torch_loader)
        # a replayed pass (load_state_dict): torch's iterator draws its workers' base seed from the
        # global generator, which the interrupted pass did before the checkpoint; do not draw twice
        rng = torch.get_rng_state()
        try:
            return iter(self._torch_loader)
        finally:
            torch.set_rng_state(rng)

    def __del__(self) -> None:
        executor = getattr(self, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return (
            f"DataLoader({type(self._dataset).__name__} of {len(self._dataset)}, {self._batch_sampler!r}, "
            f"num_workers={self._num_workers}{', thread_pool' if self._thread_pool else ''})"
        )
