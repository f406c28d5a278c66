"""Datasets: indexable collections of samples, as in ``mxnet.gluon.data``.

Every :class:`Dataset` is also a ``torch.utils.data.Dataset``.

Batched indexing (internal): a dataset whose ``_batchable()`` is true can return a whole batch,
already stacked as the default batchify function would stack its samples, from
``_get_batch(indices)``.  :class:`~mxtorch.gluon.data.DataLoader` uses it to fetch a batch with
one indexing operation instead of one call per sample.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.utils.data

from .sampler import FilterSampler, Sampler, SequentialSampler

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset"]


class Dataset(torch.utils.data.Dataset):
    """Abstract dataset: subclasses define ``__getitem__(idx)`` and ``__len__()``."""

    def __getitem__(self, idx: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    # -- batched indexing (see module docstring) ------------------------------------------
    def _batchable(self) -> bool:
        return False

    def _get_batch(self, indices: torch.Tensor) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not support batched indexing")

    # -- MXNet's dataset combinators --------------------------------------------------------
    def transform(self, fn: Callable[..., Any], lazy: bool = True) -> Dataset:
        """A dataset whose samples are ``fn(*sample)`` (``fn(sample)`` for non-tuple samples).

        ``lazy=False`` applies ``fn`` to every sample now and keeps the results.
        """
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        trans = _LazyTransformDataset(self, fn)
        if lazy:
            return trans
        return SimpleDataset([trans[i] for i in range(len(trans))])

    def transform_first(self, fn: Callable[[Any], Any], lazy: bool = True) -> Dataset:
        """Like :meth:`transform`, but ``fn`` changes only the first element of each sample
        (the data, leaving the label alone)."""
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        return self.transform(_TransformFirstClosure(fn), lazy)

    def filter(self, fn: Callable[[Any], bool]) -> Dataset:
        """The samples for which ``fn(sample)`` is true (evaluated once, now)."""
        return _SampledDataset(self, FilterSampler(fn, self))

    def shard(self, num_shards: int, index: int) -> Dataset:
        """Contiguous shard ``index`` of ``num_shards``; shard sizes differ by at most one.

        For distributed training, shard before shuffling.
        """
        if isinstance(num_shards, bool) or not isinstance(num_shards, (int, np.integer)) or num_shards < 1:
            raise ValueError(f"num_shards must be a positive int, got {num_shards!r}")
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < num_shards:
            raise ValueError(f"index must be an int in [0, num_shards) = [0, {num_shards}), got {index!r}")
        base, rest = divmod(len(self), int(num_shards))
        start = base * index + min(index, rest)
        size = base + (1 if index < rest else 0)
        return _SampledDataset(self, SequentialSampler(size, start))

    def take(self, count: int | None) -> Dataset:
        """The first ``count`` samples (all of them when ``count`` is None or too large)."""
        if count is None or count > len(self):
            count = len(self)
        if count < 0:
            raise ValueError(f"count must be >= 0 or None, got {count!r}")
        return _SampledDataset(self, SequentialSampler(count))

    def sample(self, sampler: Sampler) -> Dataset:
        """The samples at the indices ``sampler`` yields (drawn once, now)."""
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be a mxtorch.gluon.data.Sampler, got {type(sampler).__name__}")
        return _SampledDataset(self, sampler)


class SimpleDataset(Dataset):
    """Wraps anything with ``len()`` and indexing (a list, a numpy array, a tensor)."""

    def __init__(self, data: Any) -> None:
        try:
            len(data)
        except TypeError:
            raise TypeError(f"data must support len() and indexing, got {type(data).__name__}") from None
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, idx: int) -> Any:
        return self._data[idx]

    def _batchable(self) -> bool:
        return _array_batchable(self._data)

    def _get_batch(self, indices: torch.Tensor) -> Any:
        return _array_batch(self._data, indices)

    def __repr__(self) -> str:
        return f"SimpleDataset(<{type(self._data).__name__} of {len(self._data)}>)"


def _array_batchable(a: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return a.dim() >= 1
    if isinstance(a, np.ndarray):
        return a.ndim >= 1 and a.dtype.kind in "biuf"
    if isinstance(a, Dataset):
        return a._batchable()
    return False


def _array_batch(a: Any, indices: torch.Tensor) -> Any:
    if isinstance(a, torch.Tensor):
        return a[indices.to(a.device)]
    if isinstance(a, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(a[indices.numpy()]))
    return a._get_batch(indices)


class ArrayDataset(Dataset):
    """Zips equally long arrays (tensors, numpy arrays, lists, datasets): sample ``i`` is
    ``(a[i], b[i], ...)``, or just ``a[i]`` when there is a single array.
    """

    def __init__(self, *args: Any) -> None:
        if not args:
            raise ValueError("ArrayDataset needs at least one array")
        lengths = []
        for i, a in enumerate(args):
            try:
                lengths.append(len(a))
            except TypeError:
                raise TypeError(
                    f"array {i} of ArrayDataset must support len() and indexing, got {type(a).__name__}"
                ) from None
        if len(set(lengths)) != 1:
            raise ValueError(
                "all arrays of ArrayDataset must have the same length, got lengths "
                + ", ".join(f"array {i}: {n}" for i, n in enumerate(lengths))
            )
        self._length = lengths[0]
        self._data = list(args)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, idx: int) -> Any:
        if len(self._data) == 1:
            return self._data[0][idx]
        return tuple(a[idx] for a in self._data)

    def _batchable(self) -> bool:
        return all(_array_batchable(a) for a in self._data)

    def _get_batch(self, indices: torch.Tensor) -> Any:
        if len(self._data) == 1:
            return _array_batch(self._data[0], indices)
        return [_array_batch(a, indices) for a in self._data]

    def __repr__(self) -> str:
        kinds = ", ".join(type(a).__name__ for a in self._data)
        return f"ArrayDataset({kinds}; length {self._length})"


class _LazyTransformDataset(Dataset):
    """Applies ``fn`` to each sample on access."""

    def __init__(self, data: Dataset, fn: Callable[..., Any]) -> None:
        self._data = data
        self._fn = fn

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, idx: int) -> Any:
        item = self._data[idx]
        if isinstance(item, tuple):
            return self._fn(*item)
        return self._fn(item)

    def _batchable(self) -> bool:
        return bool(getattr(self._fn, "_mxtorch_batchable", False)) and _dataset_batchable(self._data)

    def _get_batch(self, indices: torch.Tensor) -> Any:
        batch = self._data._get_batch(indices)
        out = self._fn(*batch) if isinstance(batch, list) else self._fn(batch)
        return list(out) if isinstance(out, tuple) else out


class _TransformFirstClosure:
    """``fn`` applied to the first element of a sample; picklable, unlike a lambda."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn

    @property
    def _mxtorch_batchable(self) -> bool:
        return bool(getattr(self._fn, "_mxtorch_batchable", False))

    def __call__(self, x: Any, *args: Any) -> Any:
        if args:
            return (self._fn(x), *args)
        return self._fn(x)

    def __repr__(self) -> str:
        return f"transform_first({self._fn!r})"


class _SampledDataset(Dataset):
    """The samples of ``data`` at the indices ``sampler`` yields."""

    def __init__(self, data: Dataset, sampler: Sampler | Sequence[int]) -> None:
        self._data = data
        self._indices = list(iter(sampler))
        self._indices_t: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, idx: int) -> Any:
        return self._data[self._indices[idx]]

    def _batchable(self) -> bool:
        return _dataset_batchable(self._data)

    def _get_batch(self, indices: torch.Tensor) -> Any:
        if self._indices_t is None:
            self._indices_t = torch.as_tensor(self._indices, dtype=torch.int64)
        return self._data._get_batch(self._indices_t[indices])


def _dataset_batchable(data: Any) -> bool:
    return isinstance(data, Dataset) and data._batchable()
