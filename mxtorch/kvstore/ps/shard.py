"""One key's slice on one server: its value, version, and the sync round in progress.

A key of at most ``MXNET_KVSTORE_BIGARRAY_BOUND`` elements lives whole on one server (shard 0
of 1, the key's own shape); a larger key is cut into one contiguous flat slice per server
(shard ``s`` of ``S``, shape ``(numel,)``), at row boundaries when the key was initialized
row_sparse (``kind == 'row_sparse'``, see :mod:`.rows`).

Sync rounds.  A round completes when every worker of the key has pushed once (``workers``: the
ranks that initialized it as a group, e.g. one pipeline stage's data-parallel ranks; None:
every worker of the job, MXNet's rule); a worker that pushes again before that is queued for
the next round (:meth:`KeyShard.add_push` returns the version the
push will be part of).  A push is a dense tensor or :class:`~.rows.Rows` (a row-sparse push);
dense pushes are summed in fp32 for fp16/bf16 keys (one rounding at the end), in the key's
dtype otherwise, the first push of a round adopted without a copy; rows are summed by row
(:func:`~.rows.merge_rows`), and a round mixing both is dense.

Versions.  ``version`` counts completed rounds (sync) or applied pushes (async).  A pull is
answered once ``version`` reaches the round of the asking worker's latest push to this shard
(``last_target``), so a pull after a push returns the updated value; the server tracks this
itself, relying on ZeroMQ's per-connection ordering.  ``pushes`` counts each worker's pushes
(dist_async's staleness bound compares them).

Restarts.  A slice restored from a snapshot (``restored``) is at the version of its last round
before the snapshot (with the write-ahead log, :mod:`.recovery`: of its last round before the
kill, and the acknowledged PUSHes of the round in progress are counted again from the log), and
it lost the rest of the round in progress.  Its workers may be anywhere around it:
one sends again a push whose round it never saw complete (the old process died first, or its
reply was not read yet when the restart was announced), another already saw that round, or
later ones, complete on the old process.  So each push carries the worker's sequence number of
its pushes to the slice, which in dist_sync is the round it belongs to: a push whose round was
counted or applied already is not counted again (:meth:`KeyShard.add_push` returns its round,
and a pull of it is answered from the value), and a worker whose first push after the restart
belongs to a later round takes no part in the rounds before it (``skip``: those rounds were
lost with the old process, whole: they complete without an update, the others' pushes to them
answered with the restored value).  Without this one
resent push counts twice and that worker stays one round off the others until the job hangs.

``stored`` is the row ids the value holds when rows were assigned to it (a row-sparse push
without an optimizer: the other rows are zero, as MXNet assigns), None for a dense value.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from ..base import Key
from .protocol import Message, ProtocolError
from .rows import Rows, aligned, element_positions, merge_rows, row_size

__all__ = ["KeyShard", "LOW_PRECISION", "PendingPull", "Push"]

LOW_PRECISION = (torch.float16, torch.bfloat16)
Push = torch.Tensor | Rows


@dataclass
class PendingPull:
    """A pull (PULL or ROW_PULL) waiting for a round, or for slower workers (staleness)."""

    identity: bytes
    msg: Message
    worker: int
    target: int  # the version it needs (sync)
    ids: torch.Tensor | None = None  # ROW_PULL: the rows asked for
    stored: bool = False  # PULL + ROW_SPARSE: the rows the value stores are wanted
    narrow: torch.dtype | None = None  # the value cast to this (float16/bfloat16) is wanted


@dataclass
class KeyShard:
    key: Key
    shard: int
    num_shards: int
    shape: tuple[int, ...]  # the whole key's shape
    dtype: torch.dtype
    offset: int  # flat offset of this slice in the key
    numel: int
    kind: str = "dense"  # 'row_sparse': initialized row-sparse, slices cut at row boundaries
    value: torch.Tensor | None = None
    version: int = 0
    owner: int | None = None  # rank whose INIT data filled value
    workers: frozenset[int] | None = None  # the ranks that push this key (None: every worker)
    group: str | None = None  # the key prefix of the worker group owning the key (None: the job's)
    index: Key | None = None  # the group's own name of the key: its optimizer's index (None: key)
    inited_by: set[int] = field(default_factory=set)
    init_waiters: list[tuple[bytes, int]] = field(default_factory=list)
    round: set[int] = field(default_factory=set)
    agg: torch.Tensor | None = None
    agg_rows: list[Rows] = field(default_factory=list)
    agg_frame: Any = None  # the received frame whose memory agg is (adopted), else None
    queued: dict[int, deque[tuple[Push, Any]]] = field(default_factory=dict)
    last_target: dict[int, int] = field(default_factory=dict)
    pushes: dict[int, int] = field(default_factory=dict)
    pulls: list[PendingPull] = field(default_factory=list)
    inflight: list[Any] = field(default_factory=list)  # MessageTrackers of zero-copy sends of value
    frame: Any = None  # the received ZeroMQ frame whose memory value is (re-sent as is), else None
    stored: torch.Tensor | None = None
    restored: bool = False  # loaded from a snapshot: pushes are counted by their sequence numbers
    skip: dict[int, int] = field(default_factory=dict)  # worker -> the last round it takes no part in

    @property
    def own_key(self) -> Key:
        """The key as its owner names it: the index its optimizer updates it under."""
        return self.key if self.index is None else self.index

    @property
    def value_shape(self) -> tuple[int, ...]:
        return self.shape if self.num_shards == 1 else (self.numel,)

    @property
    def agg_dtype(self) -> torch.dtype:
        return torch.float32 if self.dtype in LOW_PRECISION else self.dtype

    @property
    def row(self) -> int:
        """Elements per row of the key."""
        return row_size(self.shape)

    def round_size(self, num_workers: int) -> int:
        """Pushes that complete a sync round: one per worker of the key."""
        return num_workers if self.workers is None else len(self.workers)

    def pushes_key(self, worker: int) -> bool:
        """Whether ``worker`` is one of the ranks that push this key."""
        return self.workers is None or worker in self.workers

    def describe(self) -> str:
        where = "" if self.num_shards == 1 else f" (shard {self.shard} of {self.num_shards})"
        return f"key {self.key!r}{where}"

    # ---- sync rounds ------------------------------------------------------------------------
    def _next_round(self, worker: int) -> int:
        """The round ``worker``'s next push belongs to, as this slice has counted its pushes."""
        base = max(self.version, self.skip.get(worker, 0))
        return base + 1 + (worker in self.round) + len(self.queued.get(worker, ()))

    def add_push(self, worker: int, grad: Push, frame: Any = None, seq: int = 0) -> int:
        """Count ``grad`` into the current round, or queue it; return the version it will produce.

        ``frame``: the received frame whose memory a dense ``grad`` is (the round may adopt it).
        ``seq``: the worker's sequence number of this push (0: not given); on a restored slice a
        push already counted is not counted again and one ahead skips the rounds before it.
        """
        if seq < 0:
            raise ProtocolError(f"a push of {self.describe()} carries the sequence number {seq}")
        target = self._next_round(worker)
        if seq and self.restored:
            if seq < target:  # counted or applied before the restart: sent again
                return seq
            if seq > target and worker not in self.round and worker not in self.queued:
                self.skip[worker] = seq - 1  # its pushes before this one died with the old process
                target = seq
        self.pushes[worker] = self.pushes.get(worker, 0) + 1
        if worker in self.round or self.skip.get(worker, 0) > self.version:
            self.queued.setdefault(worker, deque()).append((grad, frame))
        else:
            self._accumulate(worker, grad, frame)
        self.last_target[worker] = target
        return target

    def round_complete(self, workers: int | range | set[int]) -> bool:
        """Whether every worker of the key pushed to the current round or takes no part in it.

        ``workers``: the job's workers -- their number (ranks 0..n-1) or, in an elastic job, the
        live ranks (:mod:`.membership`: a push that arrived counts whoever sent it, and a round
        needs at least one)."""
        job = range(workers) if isinstance(workers, int) else workers
        if not self.skip and isinstance(job, range):
            return len(self.round) >= self.round_size(len(job))
        members = job if self.workers is None else self.workers
        if not self.skip:
            return bool(self.round) and all(w in self.round for w in members)
        return all(w in self.round or self.skip.get(w, 0) > self.version for w in members)

    def _accumulate(self, worker: int, grad: Push, frame: Any) -> None:
        if isinstance(grad, Rows):
            self.agg_rows.append(grad)
        elif self.agg is None:
            # adopt the received buffer (owned, writable) unless it must be widened
            if grad.dtype in LOW_PRECISION:
                self.agg = grad.to(torch.float32)
            else:
                self.agg, self.agg_frame = grad, frame
        else:
            self.agg.add_(grad)
        self.round.add(worker)

    def take_round(self) -> tuple[Push | None, Any]:
        """End the complete round: return its sum (and the frame whose memory the sum is, or None;
        a sum None: every worker skipped the round) and start the next round from the queued pushes."""
        agg, parts, frame = self.agg, self.agg_rows, self.agg_frame
        self.agg, self.agg_rows, self.agg_frame = None, [], None
        if any(last > self.version for last in self.skip.values()):
            # a worker saw this round complete on the process that died: it was lost with that
            # process after its snapshot, whole; the pushes sent again do not make a partial one
            agg, parts, frame = None, [], None
        self.round = set()
        starting = self.version + 2  # the round that starts now
        for worker, q in list(self.queued.items()):
            if self.skip.get(worker, 0) >= starting:
                continue  # its next push belongs to a later round
            self._accumulate(worker, *q.popleft())
            if not q:
                del self.queued[worker]
        if self.skip:
            self.skip = {w: last for w, last in self.skip.items() if last >= starting}
        if agg is None:
            if not parts:
                return None, None
            return merge_rows(parts, self.agg_dtype), None
        if parts:
            self.add_rows_into(agg, merge_rows(parts, agg.dtype))
        return agg, frame

    # ---- rows of this slice -----------------------------------------------------------------
    def add_rows_into(self, dense: torch.Tensor, rows: Rows) -> None:
        """``dense`` (this slice's shape) += ``rows`` (the parts inside the slice)."""
        flat = dense.view(-1)
        pos, inside = element_positions(rows.ids, self.row, self.offset, self.numel)
        flat.index_add_(0, pos[inside], rows.values.to(dense.dtype)[inside])

    def rows_view(self, weight: torch.Tensor, rows: Rows) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(weight2d, local ids, grad2d)`` for a lazy row update of ``rows`` on this slice.

        A slice cut at row boundaries is viewed as its rows (n, R); one cutting rows is viewed
        as (numel, 1), its elements standing for rows (the same lazy update for element-wise
        optimizers, and the same elements for norm-based ones).
        """
        row = self.row
        if aligned(row, self.offset, self.numel):
            return (weight.view(self.numel // row, row), rows.ids - self.offset // row,
                    rows.values.reshape(-1, row))
        pos, inside = element_positions(rows.ids, row, self.offset, self.numel)
        return weight.view(self.numel, 1), pos[inside], rows.values.reshape(-1, row)[inside].view(-1, 1)

    def assign_rows(self, rows: Rows) -> None:
        """Without an optimizer: the value becomes these rows (the others zero), as MXNet assigns."""
        new = torch.zeros(self.value_shape, dtype=self.dtype)
        self.add_rows_into(new, rows)
        self.set_value(new)
        _, inside = element_positions(rows.ids, self.row, self.offset, self.numel)
        self.stored = rows.ids[inside.any(dim=1)] if rows.ids.numel() else rows.ids

    # ---- values -----------------------------------------------------------------------------
    def set_value(self, new: torch.Tensor, frame: Any = None) -> None:
        """Replace the value (no copy: zero-copy sends of the old one stay valid).

        ``frame``: the received frame whose memory ``new`` is; pulls then re-send that frame.
        """
        if new.dtype != self.dtype:
            new, frame = new.to(self.dtype), None
        shape = self.value_shape
        self.value = new if new.shape == shape else new.view(shape)
        self.frame = frame
        self.inflight = []
        self.stored = None

    def writable_value(self) -> torch.Tensor:
        """The value, safe to update in place: copied first if a zero-copy send may still read it
        (a tracked send not done yet, or any re-send of the received frame it is)."""
        assert self.value is not None
        if self.frame is not None:
            self.value, self.frame = self.value.clone(), None
        elif self.inflight and not all(t.done for t in self.inflight):
            self.value = self.value.clone()
        self.inflight = []
        self.stored = None
        return self.value

    def track(self, trackers: list[Any]) -> None:
        if trackers:
            self.inflight = [t for t in self.inflight if not t.done] + trackers
