"""Elastic parameter-server jobs (``MXTORCH_PS_ELASTIC=1``): who the live workers are.

In an elastic job the workers may change while it runs:

* a worker **leaves** when it closes its store (SHUTDOWN) or is declared dead (its connections
  closed and it was silent for ``MXTORCH_PS_DEAD_S``; silent ``MXTORCH_PS_LOST_S`` with them
  open); neither is a failure of the job;
* a worker **joins** by registering while the job runs (no ``DMLC_WORKER_ID``): the scheduler
  gives it a new rank (ranks are never reused; at most :data:`MAX_WORKER_RANKS` in a job's life)
  and the current servers; its ``kv.init`` of keys the job already agreed on is answered at once
  and keeps the servers' values (it pulls them), its ``set_optimizer`` declares nothing (the
  servers run the job's), and it takes part in the rounds from its first push on;
* after every change the scheduler sends MEMBERSHIP (an epoch number that only grows, and the
  sorted live ranks) to every live server and worker.  ``kv.num_workers`` is the live count a
  worker last heard of.

dist_sync rounds.  A round of a key completes once every worker of the latest membership has
pushed to it; a push that reached a server counts in its round whoever sent it (a worker that
left after pushing still counts in that round; nothing is taken back).  So when a worker leaves,
a round waiting only for it completes without it; when one joins, rounds not yet complete wait
for it too.  A worker counts from its greeting (HELLO) on, even before the server hears of the
membership that includes it (the greeting carries the epoch the worker joined at, and a membership
of an earlier epoch arriving late does not remove it), so its first push is never left out of a
round.  dist_async needs no rounds: a leaving worker stops holding
back the staleness bound, a joining one is bounded from its first push.

The Trainer keeps MXNet's rule: ``step(batch_size)`` rescales the summed gradient by
``1/batch_size``, so a script passes the global batch, ``per_worker_batch * kv.num_workers``,
read at every step (the round that was in progress when a worker left may hold its gradient
too: that one step is off by one worker's share).

A dead server, in an elastic job, is waited for: the workers keep their requests (up to
``MXTORCH_DIST_TIMEOUT``) until the restarted server (same ``DMLC_SERVER_ID``, its snapshot and
write-ahead log, :mod:`.recovery`) is back, then send them again.  The scheduler fails the job
at the end only if a server is still dead then.
"""

from __future__ import annotations

from typing import Any

from .protocol import Command, Message, ProtocolError

__all__ = ["MAX_WORKER_RANKS", "membership_message", "read_membership"]

MAX_WORKER_RANKS = 4096
"""Worker ranks an elastic job hands out in its life (joins beyond it are refused)."""


def membership_message(epoch: int, ranks: list[int]) -> Message:
    """The MEMBERSHIP notice of ``epoch``: the live worker ranks."""
    return Message(Command.MEMBERSHIP, meta={"epoch": epoch, "workers": sorted(ranks)})


def read_membership(meta: dict[str, Any] | None) -> tuple[int, list[int]]:
    """``(epoch, ranks)`` of a MEMBERSHIP (or LAYOUT/ASSIGN) meta; :class:`ProtocolError` if malformed."""
    m = meta or {}
    epoch, ranks = m.get("epoch"), m.get("workers")
    if type(epoch) is not int or epoch < 0 or not isinstance(ranks, list) or len(ranks) > MAX_WORKER_RANKS:
        raise ProtocolError("malformed MEMBERSHIP (epoch, workers)")
    if not all(type(r) is int and 0 <= r < MAX_WORKER_RANKS for r in ranks):
        raise ProtocolError(f"malformed MEMBERSHIP: worker ranks must be ints in 0..{MAX_WORKER_RANKS - 1}")
    return epoch, sorted(set(ranks))
