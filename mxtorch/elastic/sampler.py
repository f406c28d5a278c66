"""Re-shardable data order: global batches of a fixed size, each split over the current workers.

:class:`ElasticBatchSampler` draws one permutation of the data set per epoch (seeded by ``seed``
and the epoch, the same on every worker) and cuts it into global batches of ``batch_size``
samples; worker ``r`` of ``n`` takes slice ``[B*r//n, B*(r+1)//n)`` of each.  The samples of
global batch ``k`` are the same for every world size, so a job that resumes at step ``k`` on
another number of workers (:meth:`set_start`) continues with exactly the batches the old job
would have taken, and ``trainer.step(batch_size)`` keeps MXNet's global-batch rule (the store
sums the workers' gradients, shares may differ by one sample).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

__all__ = ["ElasticBatchSampler"]


class ElasticBatchSampler:
    """Batch sampler (for ``DataLoader(batch_sampler=...)``) of worker ``part_index`` of ``num_parts``.

    ``len()`` is the number of global batches in an epoch (``length // batch_size``; the rest of
    the permutation is dropped).  Call :meth:`set_epoch` before each epoch; :meth:`set_start`
    makes the next pass begin at a global batch of the epoch (a resumed job)."""

    def __init__(self, length: int, batch_size: int, num_parts: int = 1, part_index: int = 0, *,
                 seed: int = 0, shuffle: bool = True) -> None:
        for name, v, lo in (("length", length, 0), ("batch_size", batch_size, 1), ("num_parts", num_parts, 1),
                            ("part_index", part_index, 0), ("seed", seed, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        if part_index >= num_parts:
            raise ValueError(f"part_index must be below num_parts ({num_parts}), got {part_index}")
        if batch_size < num_parts:
            raise ValueError(f"batch_size {batch_size} (the global batch) is smaller than the {num_parts} "
                             "workers: some would get no samples")
        self.length, self.batch_size = length, batch_size
        self.num_parts, self.part_index = num_parts, part_index
        self.seed, self.shuffle = seed, bool(shuffle)
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def set_start(self, batch: int) -> None:
        """Begin the next pass at global batch ``batch`` of the epoch (0: from its start)."""
        if batch < 0:
            raise ValueError(f"batch must be >= 0, got {batch}")
        self.start = int(batch)

    def reshard(self, num_parts: int, part_index: int) -> None:
        """Serve worker ``part_index`` of ``num_parts`` from now on (the job's group changed size:
        the global batches stay the same, each worker's share changes)."""
        if not 0 <= part_index < num_parts or num_parts > self.batch_size:
            raise ValueError(f"reshard: need 0 <= part_index < num_parts <= batch_size ({self.batch_size}), "
                             f"got part {part_index} of {num_parts}")
        self.num_parts, self.part_index = int(num_parts), int(part_index)

    def share(self) -> tuple[int, int]:
        """This worker's slice ``[lo, hi)`` of every global batch."""
        b, n, r = self.batch_size, self.num_parts, self.part_index
        return b * r // n, b * (r + 1) // n

    def order(self, epoch: int) -> list[int]:
        """The epoch's permutation of ``range(length)``, the same on every worker."""
        if not self.shuffle:
            return list(range(self.length))
        gen = torch.Generator()
        gen.manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.length, generator=gen).tolist()

    def __len__(self) -> int:
        return self.length // self.batch_size

    def __iter__(self) -> Iterator[list[int]]:
        order, (lo, hi), b = self.order(self.epoch), self.share(), self.batch_size
        start, self.start = self.start, 0
        for k in range(start, len(self)):
            yield order[k * b + lo:k * b + hi]
