"""A parameter server's load counters, per command and per key range, and ``kv.server_stats()``.

Each server counts, for every request command, and for every key slice (key range) it holds:
requests, tensor bytes in (the request's tensors) and out (its replies' tensors, a deferred
PULL_REPLY counted against the pull it answers), queue wait and busy time.  Queue wait is the time
a request waited behind the requests handled before it since the server's poll saw its socket
ready (the part of the wait the server can see: time spent in ZeroMQ's buffers before that poll
is not); busy time is the time its handler ran.  A worker asks with a STATS message; the reply
is one JSON dict per server (:func:`server_stats`).  Counters live in memory only, so a restarted
server starts from zero (``uptime_s`` says how long it has counted).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .protocol import Command, Message

if TYPE_CHECKING:
    from .client import PSClient
    from .shard import KeyShard

__all__ = ["Counts", "ServerStats", "server_stats"]


@dataclass
class Counts:
    """One row of counters."""

    requests: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    queue_wait_s: float = 0.0
    busy_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
                "queue_wait_s": self.queue_wait_s, "busy_s": self.busy_s}


def _nbytes(msg: Message) -> int:
    return sum(t.numel() * t.element_size() for t in msg.tensors)


@dataclass
class _Slice:
    """The counters of one key slice, by command."""

    key: Any
    shard: int
    begin: int
    end: int
    commands: dict[str, Counts] = field(default_factory=dict)


class ServerStats:
    """The counters of one server.  Per-slice rows exist only for slices the server holds, so a
    peer naming keys the server never saw cannot grow them (its requests count in the totals)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.commands: dict[str, Counts] = {}
        self.slices: dict[tuple[Any, int], _Slice] = {}
        self._current: Message | None = None  # the request being handled (bytes out are its)

    def _rows(self, msg: Message, shards: dict[tuple[Any, int], KeyShard]) -> list[Counts]:
        name = msg.command.name
        rows = [self.commands.setdefault(name, Counts())]
        sh = shards.get((msg.key, msg.shard)) if msg.key is not None else None
        if sh is not None:
            sl = self.slices.get((sh.key, sh.shard))
            if sl is None:
                sl = _Slice(sh.key, sh.shard, sh.offset, sh.offset + sh.numel)
                self.slices[(sh.key, sh.shard)] = sl
            rows.append(sl.commands.setdefault(name, Counts()))
        return rows

    @contextmanager
    def handling(self, msg: Message, ready_at: float,
                 shards: dict[tuple[Any, int], KeyShard]) -> Iterator[None]:
        """Count ``msg``: its bytes in, its wait since ``ready_at`` (monotonic), its handler's time."""
        start = time.monotonic()
        self._current = msg
        try:
            yield
        finally:
            busy = time.monotonic() - start
            self._current = None
            for row in self._rows(msg, shards):  # after the handler: an INIT's slice exists now
                row.requests += 1
                row.bytes_in += _nbytes(msg)
                row.queue_wait_s += max(0.0, start - ready_at)
                row.busy_s += busy

    @contextmanager
    def answering(self, request: Message) -> Iterator[None]:
        """Replies sent inside count as ``request``'s (a pull answered when its round completes)."""
        outer, self._current = self._current, request
        try:
            yield
        finally:
            self._current = outer

    def sent(self, reply: Message, shards: dict[tuple[Any, int], KeyShard]) -> None:
        """Count a reply's tensor bytes against the request being handled or answered."""
        if self._current is None or not reply.tensors:
            return
        n = _nbytes(reply)
        for row in self._rows(self._current, shards):
            row.bytes_out += n

    def report(self, rank: int) -> dict[str, Any]:
        """The STATS reply: plain JSON (keys that are strings or ints travel as they are)."""
        slices = [{"key": s.key, "shard": s.shard, "range": [s.begin, s.end],
                   "commands": {c: n.as_dict() for c, n in s.commands.items()}}
                  for s in self.slices.values()]
        return {"server": rank, "uptime_s": time.monotonic() - self.started,
                "commands": {c: n.as_dict() for c, n in self.commands.items()}, "keys": slices}


def server_stats(client: PSClient) -> list[dict[str, Any]]:
    """Every server's counters, by server rank (see the module's docstring for the fields)."""
    rids = [client.send(s, Message(Command.STATS), "STATS of kv.server_stats()")
            for s in range(client.num_servers)]
    client.wait()
    return [dict(client.replies.pop(rid).meta or {}) for rid in rids]
