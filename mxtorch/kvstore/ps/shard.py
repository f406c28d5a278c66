"""One key's slice on one server: its value, version, and the sync round in progress.

A key of at most ``MXNET_KVSTORE_BIGARRAY_BOUND`` elements lives whole on one server (shard 0
of 1, the key's own shape); a larger key is cut into one contiguous flat slice per server
(shard ``s`` of ``S``, shape ``(numel,)``).

Sync rounds.  A round completes when every worker has pushed once; a worker that pushes again
before that is queued for the next round (:meth:`KeyShard.add_push` returns the version the
push will be part of).  Pushes are summed in fp32 for fp16/bf16 keys (one rounding at the
end), in the key's dtype otherwise; the first push of a round is adopted without a copy.

Versions.  ``version`` counts completed rounds (sync) or applied pushes (async).  A pull is
answered once ``version`` reaches the round of the asking worker's latest push to this shard
(``last_target``), so a pull after a push returns the updated value; the server tracks this
itself, relying on ZeroMQ's per-connection ordering.

``kind`` is the value type ('dense'); a row-sparse value type would add its own storage and
its own ``add_push``/apply here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from ..base import Key

__all__ = ["KeyShard", "LOW_PRECISION"]

LOW_PRECISION = (torch.float16, torch.bfloat16)


@dataclass
class KeyShard:
    key: Key
    shard: int
    num_shards: int
    shape: tuple[int, ...]  # the whole key's shape
    dtype: torch.dtype
    offset: int  # flat offset of this slice in the key
    numel: int
    kind: str = "dense"
    value: torch.Tensor | None = None
    version: int = 0
    owner: int | None = None  # rank whose INIT data filled value
    inited_by: set[int] = field(default_factory=set)
    init_waiters: list[tuple[bytes, int]] = field(default_factory=list)
    round: set[int] = field(default_factory=set)
    agg: torch.Tensor | None = None
    queued: dict[int, deque[torch.Tensor]] = field(default_factory=dict)
    last_target: dict[int, int] = field(default_factory=dict)
    pulls: list[tuple[bytes, int, int]] = field(default_factory=list)  # identity, request id, target
    inflight: list[Any] = field(default_factory=list)  # MessageTrackers of zero-copy sends of value

    @property
    def value_shape(self) -> tuple[int, ...]:
        return self.shape if self.num_shards == 1 else (self.numel,)

    @property
    def agg_dtype(self) -> torch.dtype:
        return torch.float32 if self.dtype in LOW_PRECISION else self.dtype

    def describe(self) -> str:
        where = "" if self.num_shards == 1 else f" (shard {self.shard} of {self.num_shards})"
        return f"key {self.key!r}{where}"

    # ---- sync rounds ------------------------------------------------------------------------
    def add_push(self, worker: int, grad: torch.Tensor) -> int:
        """Count ``grad`` into the current round, or queue it; return the version it will produce."""
        if worker in self.round:
            q = self.queued.setdefault(worker, deque())
            q.append(grad)
            target = self.version + 1 + len(q)
        else:
            self._accumulate(worker, grad)
            target = self.version + 1
        self.last_target[worker] = target
        return target

    def _accumulate(self, worker: int, grad: torch.Tensor) -> None:
        if self.agg is None:
            # adopt the received buffer (owned, writable) unless it must be widened
            self.agg = grad.to(torch.float32) if grad.dtype in LOW_PRECISION else grad
        else:
            self.agg.add_(grad)
        self.round.add(worker)

    def take_round(self) -> torch.Tensor:
        """End the complete round: return its sum and start the next from the queued pushes."""
        agg = self.agg
        assert agg is not None
        self.agg = None
        self.round = set()
        for worker, q in list(self.queued.items()):
            self._accumulate(worker, q.popleft())
            if not q:
                del self.queued[worker]
        return agg

    # ---- values -----------------------------------------------------------------------------
    def set_value(self, new: torch.Tensor) -> None:
        """Replace the value (no copy: zero-copy sends of the old one stay valid)."""
        if new.dtype != self.dtype:
            new = new.to(self.dtype)
        self.value = new.view(self.value_shape)
        self.inflight = []

    def writable_value(self) -> torch.Tensor:
        """The value, safe to update in place: copied first if a zero-copy send still reads it."""
        assert self.value is not None
        if self.inflight:
            if not all(t.done for t in self.inflight):
                self.value = self.value.clone()
            self.inflight = []
        return self.value

    def track(self, trackers: list[Any]) -> None:
        if trackers:
            self.inflight = [t for t in self.inflight if not t.done] + trackers
