"""Compressed payloads: all-gathers of compressors' parts, packed into buckets by dtype and device."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


# ---- compressed payloads ----------------------------------------------------------------
def _all_reduce_share(world: int) -> float:
    """Bytes one worker sends per byte all-reduced: a ring all-reduce's 2(n-1)/n."""
    return 2.0 * (world - 1) / world


PAYLOAD_BUCKET_BYTES = 1 << 20
"""A bucket of compressed payloads starts its all-gather once it holds this many bytes."""


class _PayloadExchange:
    """All-gathers of compressed payload parts, packed by (dtype, device) into buckets.

    :meth:`add` files a key's parts and returns where they went; a full bucket is flattened
    and its all-gather launched asynchronously at once; :meth:`finish` launches the rest and
    waits for all; :meth:`gathered` returns every rank's copy of a key's parts.  With
    ``summed`` the buckets are all-reduced (summed in their dtype) instead, and
    :meth:`gathered` returns one list: the sums.  ``group``: the process group of the
    ``world`` workers (None: torch's default group).
    """

    def __init__(self, world: int, bucket_bytes: int = PAYLOAD_BUCKET_BYTES, summed: bool = False,
                 group: Any = None) -> None:
        self.world = world
        self.group = group
        self.bucket_bytes = bucket_bytes
        self.summed = summed
        self.open: dict[tuple[torch.dtype, torch.device], _PayloadBucket] = {}
        self.launched: list[_PayloadBucket] = []

    def add(self, parts: list[torch.Tensor]) -> list[tuple[_PayloadBucket, int]]:
        slots = []
        for t in parts:
            t = t.contiguous()
            where = (t.dtype, t.device)
            bucket = self.open.get(where)
            if bucket is None:
                bucket = self.open[where] = _PayloadBucket()
            slots.append((bucket, len(bucket.parts)))
            bucket.parts.append(t)
            bucket.nbytes += t.numel() * t.element_size()
            if bucket.nbytes >= self.bucket_bytes:
                self._launch(self.open.pop(where))
        return slots

    def _launch(self, bucket: _PayloadBucket) -> None:
        flat = bucket.parts[0].reshape(-1) if len(bucket.parts) == 1 else torch.cat(
            [p.reshape(-1) for p in bucket.parts])
        if self.summed:
            # in place: a one-part bucket's part becomes the sum (payloads are only decompressed
            # after the exchange, so nothing needs the local one any more)
            bucket.received = [flat]
            bucket.work = dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group, async_op=True)
        else:
            bucket.received = [torch.empty_like(flat) for _ in range(self.world)]
            bucket.work = dist.all_gather(bucket.received, flat, group=self.group, async_op=True)
        bucket.flat = flat  # kept alive until the gather is done
        self.launched.append(bucket)

    def finish(self) -> None:
        for where in list(self.open):
            self._launch(self.open.pop(where))
        for bucket in self.launched:
            bucket.work.wait()

    @staticmethod
    def gathered(slots: list[tuple[_PayloadBucket, int]]) -> list[list[torch.Tensor]]:
        """``[rank][part]``: every rank's copy of the parts filed at ``slots`` (summed: ``[[sum]]``)."""
        world = len(slots[0][0].received) if slots else 0
        return [[b.part_of(r, i) for b, i in slots] for r in range(world)]


class _PayloadBucket:
    def __init__(self) -> None:
        self.parts: list[torch.Tensor] = []
        self.nbytes = 0
        self.received: list[torch.Tensor] = []
        self.work: Any = None
        self.flat: torch.Tensor | None = None
        self._offsets: list[int] | None = None

    def part_of(self, rank: int, i: int) -> torch.Tensor:
        if self._offsets is None:
            offsets = [0]
            for p in self.parts:
                offsets.append(offsets[-1] + p.numel())
            self._offsets = offsets
        p = self.parts[i]
        return self.received[rank].narrow(0, self._offsets[i], p.numel()).view(p.shape)
