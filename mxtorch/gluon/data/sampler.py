"""Samplers: iterables of sample indices (or of index batches) that drive a DataLoader.

Random draws come from torch's global generator (``torch.manual_seed`` makes them repeatable),
except :class:`SplitSampler`, which shuffles with its own seed so that every worker of a
distributed job draws the same permutation.

The built-in samplers have ``state_dict()`` / ``load_state_dict(state, replay=False)``: JSON-able
dicts that :meth:`DataLoader.state_dict` (and so :mod:`mxtorch.checkpoint`) saves.  A state
describes the pass in progress (or last started); ``replay=True`` makes the next pass repeat it
exactly (same order, same rollover leftovers) without drawing from torch's global generator, so a
job resumed in the middle of an epoch sees the batches the uninterrupted job would have seen.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch
import torch.utils.data

from ...base import MXNetError

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


def _check_state(sampler: Any, state: Any) -> dict[str, Any]:
    """``state`` checked to be a state dict of ``sampler``'s class."""
    name = type(sampler).__name__
    if not isinstance(state, dict) or state.get("type") != name:
        got = state.get("type") if isinstance(state, dict) else type(state).__name__
        raise MXNetError(f"cannot load the state of a {got!r} sampler into a {name}: the data loader must be "
                         "built as it was when the state was saved")
    return state


class Sampler(torch.utils.data.Sampler):
    """Base class of samplers: subclasses define ``__iter__`` and ``__len__``."""

    def __init__(self) -> None:  # torch's Sampler takes a deprecated data_source argument; skip it
        pass

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")


class _ArgumentsOnlySampler(Sampler):
    """A sampler whose order depends on nothing but its arguments: its state is its type."""

    def state_dict(self) -> dict[str, Any]:
        """``{"type": <class name>}``: nothing else decides the order."""
        return {"type": type(self).__name__}

    def load_state_dict(self, state: dict[str, Any], replay: bool = False) -> None:
        _check_state(self, state)


class SequentialSampler(_ArgumentsOnlySampler):
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
    """A fresh random permutation of ``[0, length)`` on every pass (torch's global generator).

    Each pass remembers the generator state it drew from (a few KB), which is what
    :meth:`state_dict` saves: a replayed pass draws the same permutation from a private generator.
    """

    def __init__(self, length: int) -> None:
        super().__init__()
        self._length = _check_int("length", length, 0)
        self._pass_rng: torch.Tensor | None = None  # the global generator's state the last pass drew from
        self._replay: torch.Tensor | None = None

    def __iter__(self) -> Iterator[int]:
        if self._replay is not None:
            gen = torch.Generator()
            gen.set_state(self._replay)
            self._pass_rng, self._replay = self._replay, None
            return iter(torch.randperm(self._length, generator=gen).tolist())
        self._pass_rng = torch.get_rng_state()
        return iter(torch.randperm(self._length).tolist())

    def __len__(self) -> int:
        return self._length

    def state_dict(self) -> dict[str, Any]:
        rng = None if self._pass_rng is None else base64.b64encode(self._pass_rng.numpy().tobytes()).decode()
        return {"type": "RandomSampler", "length": self._length, "pass_rng": rng}

    def load_state_dict(self, state: dict[str, Any], replay: bool = False) -> None:
        """``replay``: the next pass repeats the saved one (torch's global generator is not used)."""
        _check_state(self, state)
        if not replay:
            self._replay = None
            return
        if state.get("length") != self._length:
            raise MXNetError(f"cannot replay a RandomSampler pass over {state.get('length')} samples on "
                             f"one of {self._length}: the dataset changed")
        rng = state.get("pass_rng")
        if not isinstance(rng, str):
            raise MXNetError("this RandomSampler state has no pass to replay (no pass had started)")
        raw = bytearray(base64.b64decode(rng))
        self._replay = torch.frombuffer(raw, dtype=torch.uint8).clone()

    def __repr__(self) -> str:
        return f"RandomSampler(length={self._length})"


class FilterSampler(_ArgumentsOnlySampler):
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
        self._pass_prev: list[Any] = []  # the rollover leftovers the pass in progress started with
        self._replay_prev: list[Any] | None = None

    def __iter__(self) -> Iterator[list[Any]]:
        if self._replay_prev is not None:
            batch, self._replay_prev, self._prev = self._replay_prev, None, []
        else:
            batch, self._prev = self._prev, []
        self._pass_prev = list(batch)
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

    def state_dict(self) -> dict[str, Any]:
        """The rollover leftovers (for the next pass and the one in progress) and the inner
        sampler's state (``None`` when it has no ``state_dict``)."""
        inner = self._sampler.state_dict() if hasattr(self._sampler, "state_dict") else None
        return {"type": "BatchSampler", "batch_size": self._batch_size, "last_batch": self._last_batch,
                "prev": [int(i) for i in self._prev], "pass_prev": [int(i) for i in self._pass_prev],
                "sampler": inner}

    def load_state_dict(self, state: dict[str, Any], replay: bool = False) -> None:
        _check_state(self, state)
        if (state.get("batch_size"), state.get("last_batch")) != (self._batch_size, self._last_batch):
            raise MXNetError(f"cannot load a BatchSampler state of batch_size={state.get('batch_size')}, "
                             f"last_batch={state.get('last_batch')!r} into one of "
                             f"batch_size={self._batch_size}, last_batch={self._last_batch!r}")
        inner = state.get("sampler")
        if inner is not None and hasattr(self._sampler, "load_state_dict"):
            self._sampler.load_state_dict(inner, replay=replay)
        self._prev = [int(i) for i in state.get("prev", [])]
        self._replay_prev = [int(i) for i in state.get("pass_prev", [])] if replay else None

    def __repr__(self) -> str:
        return (
            f"BatchSampler({self._sampler!r}, batch_size={self._batch_size}, last_batch={self._last_batch!r})"
        )


class IntervalSampler(_ArgumentsOnlySampler):
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
        self._pass_epoch: int | None = None  # the epoch of the pass in progress (or last started)
        self._replay_epoch: int | None = None
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
        advance = not self._epoch_set
        if self._replay_epoch is not None:  # load_state_dict(replay=True): the saved pass again
            epoch, self._replay_epoch, advance = self._replay_epoch, None, False
        else:
            epoch = self._epoch
        self._pass_epoch = epoch
        if self._shuffle:
            gen = torch.Generator().manual_seed(_mix_seed(self._seed, epoch))
            order = torch.randperm(self._length, generator=gen)
            idx = order[self._positions]
        else:
            gen = None
            idx = self._positions
        if self._repeat > 1:
            idx = idx.repeat(self._repeat)
            if gen is not None:
                idx = idx[torch.randperm(len(idx), generator=gen)]
        if advance:
            self._epoch += 1
        return iter(idx.tolist())

    def __len__(self) -> int:
        return len(self._positions) * self._repeat

    def _layout(self) -> dict[str, Any]:
        return {"length": self._length, "num_parts": self._num_parts, "part_index": self._part_index,
                "even_size": self._even_size, "repeat": self._repeat, "shuffle": self._shuffle,
                "seed": self._seed, "interleave": self._interleave}

    def state_dict(self) -> dict[str, Any]:
        """The epoch counter and the epoch of the pass in progress, with the sampler's arguments."""
        return {"type": "SplitSampler", "epoch": self._epoch, "epoch_set": self._epoch_set,
                "pass_epoch": self._pass_epoch, **self._layout()}

    def load_state_dict(self, state: dict[str, Any], replay: bool = False) -> None:
        """Take the epoch counter; ``replay``: the next pass repeats the saved pass in progress.

        Replaying needs the same split (length, parts, part, seed ...): a position in one
        worker's share of another split means nothing, and such a state raises MXNetError.
        """
        _check_state(self, state)
        epoch = state.get("epoch")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise MXNetError(f"bad SplitSampler state: epoch {epoch!r}")
        if replay:
            saved = {k: state.get(k) for k in self._layout()}
            if saved != self._layout():
                diff = ", ".join(f"{k}: saved {saved[k]!r}, now {v!r}" for k, v in self._layout().items()
                                 if saved[k] != v)
                raise MXNetError(f"cannot resume a SplitSampler pass in the middle on another split "
                                 f"({diff}); re-sharding a data position onto another world size is not "
                                 "supported")
            if not isinstance(state.get("pass_epoch"), int):
                raise MXNetError("this SplitSampler state has no pass to replay (no pass had started)")
        self._epoch = epoch
        self._epoch_set = bool(state.get("epoch_set"))
        self._replay_epoch = int(state["pass_epoch"]) if replay else None

    def __repr__(self) -> str:
        return (
            f"SplitSampler(length={self._length}, num_parts={self._num_parts}, "
            f"part_index={self._part_index}, even_size={self._even_size}, repeat={self._repeat}, "
            f"shuffle={self._shuffle}, seed={self._seed})"
        )
