"""Samplers: iterables of sample indices (or of index batches) that drive a DataLoader.

Random draws come from torch's global generator (``torch.manual_seed`` makes them repeatable),
except :class:`SplitSampler`, which shuffles with its own seed so that every worker of a
distributed job draws the same permutation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch
import torch.utils.data

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "FilterSampler",
    "BatchSampler",
    "IntervalSampler",
    "SplitSampler",
]

_LAST_BATCH_MODES = ("keep", "discard", "rollover")


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


class Sampler(torch.utils.data.Sampler):
    """Base class of samplers: subclasses define ``__iter__`` and ``__len__``."""

    def __init__(self) -> None:  # torch's Sampler takes a deprecated data_source argument; skip it
        pass

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")


class SequentialSampler(Sampler):
    """Indices ``start, start+1, ..., start+length-1`` in order."""

    def __init__(self, length: int, start: int = 0) -> None:
        super().__init__()
        self._length = _check_int("length", length, 0)
        self._start = _check_int("start", start, 0)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._start, self._start + self._length))

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"SequentialSampler(length={self._length}, start={self._start})"


class RandomSampler(Sampler):
    """A fresh random permutation of ``[0, length)`` on every pass (torch's global generator)."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self._length = _check_int("length", length, 0)

    def __iter__(self) -> Iterator[int]:
        return iter(torch.randperm(self._length).tolist())

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"RandomSampler(length={self._length})"


class FilterSampler(Sampler):
    """Indices ``i`` of ``dataset`` for which ``fn(dataset[i])`` is true (evaluated once, here)."""

    def __init__(self, fn: Callable[[Any], bool], dataset: Any) -> None:
        super().__init__()
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        self._indices = [i for i in range(len(dataset)) if fn(dataset[i])]

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``.

    ``last_batch`` says what happens to an incomplete last batch: ``'keep'`` yields it,
    ``'discard'`` drops it, ``'rollover'`` keeps its indices and puts them at the front of
    the first batch of the next pass.
    """

    def __init__(self, sampler: Sampler | Iterable[Any], batch_size: int, last_batch: str = "keep") -> None:
        super().__init__()
        self._sampler = sampler
        self._batch_size = _check_int("batch_size", batch_size, 1)
        if last_batch not in _LAST_BATCH_MODES:
            raise ValueError(f"last_batch must be one of {list(_LAST_BATCH_MODES)}, got {last_batch!r}")
        self._last_batch = last_batch
        self._prev: list[Any] = []

    def __iter__(self) -> Iterator[list[Any]]:
        batch, self._prev = self._prev, []
        for i in self._sampler:
            batch.append(i)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self) -> int:
        n = len(self._sampler)  # type: ignore[arg-type]
        if self._last_batch == "keep":
            return (n + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return n // self._batch_size
        return (len(self._prev) + n) // self._batch_size

    def __repr__(self) -> str:
        return (
            f"BatchSampler({self._sampler!r}, batch_size={self._batch_size}, last_batch={self._last_batch!r})"
        )


class IntervalSampler(Sampler):
    """Indices ``0, interval, 2*interval, ...``; with ``rollover`` then ``1, 1+interval, ...`` and
    so on until every index in ``[0, length)`` was visited once.
    """

    def __init__(self, length: int, interval: int, rollover: bool = True) -> None:
        super().__init__()
        self._length = _check_int("length", length, 0)
        self._interval = _check_int("interval", interval, 1)
        if self._interval > self._length and self._length > 0:
            raise ValueError(f"interval ({interval}) must not exceed length ({length})")
        self._rollover = bool(rollover)

    def __iter__(self) -> Iterator[int]:
        starts = range(self._interval) if self._rollover else range(1)
        for s in starts:
            yield from range(s, self._length, self._interval)

    def __len__(self) -> int:
        if self._rollover:
            return self._length
        return (self._length + self._interval - 1) // self._interval

    def __repr__(self) -> str:
        return f"IntervalSampler(length={self._length}, interval={self._interval}, rollover={self._rollover})"


def _mix_seed(seed: int, epoch: int) -> int:
    # distinct (seed, epoch) pairs give distinct generator seeds with overwhelming likelihood
    return (seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) % (1 << 63)


class SplitSampler(Sampler):
    """Part ``part_index`` of ``num_parts`` disjoint parts of ``[0, length)``: one worker's share
    in distributed training.

    Parts are contiguous ranges (``interleave=True``: part ``p`` takes ``p, p+num_parts, ...``).
    Without ``even_size`` the parts together hold every index once and their sizes differ by at
    most one; with ``even_size=True`` each part has ``ceil(length / num_parts)`` indices, the
    short ones padded by wrapping around to the start, so every worker runs the same number of
    steps.  ``repeat`` repeats the part that many times per pass.

    With ``shuffle`` the whole index range is permuted before it is split, by a generator seeded
    from ``seed`` and the epoch: give every worker the same ``seed`` and the parts stay disjoint.
    Call :meth:`set_epoch` at the start of each epoch, or let the sampler count passes itself
    (its epoch goes up by one after each pass until ``set_epoch`` is called).
    """

    def __init__(
        self,
        length: int,
        num_parts: int = 1,
        part_index: int = 0,
        even_size: bool = False,
        repeat: int = 1,
        shuffle: bool = True,
        *,
        seed: int = 0,
        interleave: bool = False,
    ) -> None:
        super().__init__()
        self._length = _check_int("length", length, 0)
        self._num_parts = _check_int("num_parts", num_parts, 1)
        part_index = _check_int("part_index", part_index, 0)
        if part_index >= self._num_parts:
            raise ValueError(
                f"part_index must be in [0, num_parts) = [0, {self._num_parts}), got {part_index}"
            )
        self._part_index = part_index
        self._even_size = bool(even_size)
        self._repeat = _check_int("repeat", repeat, 1)
        self._shuffle = bool(shuffle)
        self._seed = _check_int("seed", seed, 0)
        self._interleave = bool(interleave)
        self._epoch = 0
        self._epoch_set = False
        self._positions = self._part_positions()

    def _part_positions(self) -> torch.Tensor:
        n, parts, p = self._length, self._num_parts, self._part_index
        if self._even_size:
            size = math.ceil(n / parts) if n else 0
            if self._interleave:
                pos = p + parts * torch.arange(size)
            else:
                pos = p * size + torch.arange(size)
            return pos % n if n else pos
        if self._interleave:
            return torch.arange(p, max(n, p), parts)
        base, rest = divmod(n, parts)
        start = p * base + min(p, rest)
        return torch.arange(start, start + base + (1 if p < rest else 0))

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next pass's permutation (and stop counting passes automatically)."""
        self._epoch = _check_int("epoch", epoch, 0)
        self._epoch_set = True

    @property
    def epoch(self) -> int:
        """The epoch the next pass will use."""
        return self._epoch

    def __iter__(self) -> Iterator[int]:
        if self._shuffle:
            gen = torch.Generator().manual_seed(_mix_seed(self._seed, self._epoch))
            order = torch.randperm(self._length, generator=gen)
            idx = order[self._positions]
        else:
            gen = None
            idx = self._positions
        if self._repeat > 1:
            idx = idx.repeat(self._repeat)
            if gen is not None:
                idx = idx[torch.randperm(len(idx), generator=gen)]
        if not self._epoch_set:
            self._epoch += 1
        return iter(idx.tolist())

    def __len__(self) -> int:
        return len(self._positions) * self._repeat

    def __repr__(self) -> str:
        return (
            f"SplitSampler(length={self._length}, num_parts={self._num_parts}, "
            f"part_index={self._part_index}, even_size={self._even_size}, repeat={self._repeat}, "
            f"shuffle={self._shuffle}, seed={self._seed})"
        )
