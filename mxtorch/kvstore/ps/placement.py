"""Where a worker's keys live: :func:`place` decides, :class:`KeyPlan` remembers.

Every worker places the keys of its ``kv.init`` calls in the same order with the same rule,
so all agree without asking anyone (the scheduler checks that their inits agree): a key of at
most ``MXNET_KVSTORE_BIGARRAY_BOUND`` elements goes to the server with the fewest bytes so far;
a larger key is cut into contiguous flat slices, at row boundaries when the key was
initialized row_sparse: as many as it takes to keep each within ``MXTORCH_PS_PIECE_BYTES``
(4 MiB by default; at least one per server, and a multiple of the number of servers), dealt
round robin to the servers.  Pieces of a few MiB travel at the socket's speed, pipelined over
the servers; one message of 32 MiB or more lands in a freshly mapped buffer whose every page
faults, which made a 100 MiB key move 2-3 times slower than the same bytes in 4 MiB pieces
(bench/ps.py).  ``MXTORCH_PS_PIECE_BYTES=0`` cuts one slice per server, as MXNet does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..base import Key, KVStoreError
from .rows import row_size

__all__ = ["KeyPlan", "place"]


@dataclass
class KeyPlan:
    """Where one key lives: ``shards[i] = (server, flat offset, numel)``."""

    key: Key
    shape: torch.Size
    dtype: torch.dtype
    numel: int
    shards: list[tuple[int, int, int]]
    kind: str = "dense"  # 'row_sparse': initialized with a row_sparse value, split by rows
    group: str | None = None  # the key prefix of the worker group that owns the key (None: the job's)
    index: Key | None = None  # the group's own name of the key (its Trainer's index); None: ``key``
    pushed: list[int] = field(default_factory=list)  # pushes sent to each slice so far

    def push_arg(self, i: int, low: int = 0) -> int:
        """The ``arg`` of this worker's next push to slice ``i``: its sequence number (1, 2, ...)
        shifted past the low byte, which carries ``low`` (a PUSHPULL's narrow dtype code).  A server
        restored from a snapshot tells by it a push sent again from one it has not counted yet."""
        if len(self.pushed) < len(self.shards):
            self.pushed.extend([0] * (len(self.shards) - len(self.pushed)))
        self.pushed[i] += 1
        return self.pushed[i] << 8 | low

    def numbered_from(self, i: int, reply: Any) -> None:
        """A worker that joined a running elastic job numbers its pushes to slice ``i`` from the
        version the INIT reply carries: in dist_sync its first push belongs to the next round."""
        self.push_arg(i)  # sizes the list
        self.pushed[i] = max(int(reply.arg), 0)

    @property
    def own_key(self) -> Key:
        """The key as its owner names it: the server optimizer's index of the key."""
        return self.key if self.index is None else self.index

    @property
    def row(self) -> int:
        """Elements per row of the key."""
        return row_size(self.shape)

    def describe(self, i: int) -> str:
        if len(self.shards) == 1:
            return f"key {self.key!r}"
        return f"key {self.key!r} (shard {i} of {len(self.shards)})"

    def operation(self, op: str, i: int) -> str:
        return f"{op} of {self.describe(i)}"

    def residual_key(self, i: int) -> Key:
        """The compressor's key for slice ``i`` (error feedback is kept per slice)."""
        return self.key if len(self.shards) == 1 else f"{self.key!r}#{i}/{len(self.shards)}"

    def rows_check(self) -> None:
        if not self.shape:
            raise KVStoreError(f"key {self.key!r} holds a scalar: it has no rows for row_sparse values")


def place(numel: int, itemsize: int, server_bytes: list[int], bound: int,
          row: int = 1, piece: int = 0) -> list[tuple[int, int, int]]:
    """Where a key of ``numel`` elements goes: ``[(server, flat offset, numel), ...]``.

    At most ``bound`` elements: the server with the fewest bytes so far (ties: lowest rank).
    More: contiguous slices, dealt round robin to the servers: ``ceil(numel / piece)`` of them
    (``piece``: elements per slice at most; 0: no limit), rounded up to a multiple of the
    number of servers, sizes differing by at most one ``row`` of elements (a key with fewer
    rows than slices is cut at elements).  ``server_bytes`` (bytes assigned to each server so
    far) is updated.

    >>> loads = [0, 0]
    >>> place(25, 4, loads, bound=10), place(3, 4, loads, bound=10), loads
    ([(0, 0, 13), (1, 13, 12)], [(1, 0, 3)], [52, 60])
    >>> place(25, 4, [0, 0], bound=10, row=5)
    [(0, 0, 15), (1, 15, 10)]
    >>> place(25, 4, [0, 0], bound=10, piece=8)
    [(0, 0, 7), (1, 7, 6), (0, 13, 6), (1, 19, 6)]
    >>> place(25, 4, [0], bound=10, piece=8)
    [(0, 0, 7), (0, 7, 6), (0, 13, 6), (0, 19, 6)]
    """
    n = len(server_bytes)
    count = n if n > 1 else 0
    if numel > bound and piece > 0:
        count = max(count, -(-numel // piece))
        count = -(-count // n) * n
    if numel > bound and count > 1:
        unit = row if row > 0 and numel % row == 0 and numel // row >= count else 1
        base, extra = divmod(numel // unit, count)
        shards, off = [], 0
        for i in range(count):
            s = i % n
            size = (base + (1 if i < extra else 0)) * unit
            shards.append((s, off, size))
            server_bytes[s] += size * itemsize
            off += size
        return shards
    s = min(range(n), key=lambda r: (server_bytes[r], r))
    server_bytes[s] += numel * itemsize
    return [(s, 0, numel)]
