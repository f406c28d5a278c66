"""Membership of an in-process elastic job: numbered generations agreed in the job's store.

Each membership of the job is a *generation* ``G`` with its own keys in the store (under
:data:`PREFIX`).  A process enters a generation by taking a ticket (``g<G>/n``, an atomic add)
and writing who it is (``g<G>/m<ticket>``: its rank in the last generation, or -1, its host and
pid).  Any waiting process may *close* the generation (``compare_set`` of ``g<G>/closed``, so
exactly one count wins) once ``MAX`` processes are in, or at least ``MIN`` are in and nobody
came for :data:`LAST_CALL_S` seconds.  A process whose ticket lies beyond the closing count came
too late: it is what the running group sees as a worker waiting to join (:meth:`Rendezvous.joiners_waiting`),
and it goes on to ``G+1``.  Generation 0 forms the job; a later one only closes once a member of
the group before it has entered, so a joiner never starts a job of its own beside a running one.

New ranks keep the old order: members of the last generation by their old rank, then newcomers
by ticket.  The new group then meets in ``g<G>/pg/`` (:func:`mxtorch.distributed.rejoin`).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..distributed.env import DistributedError

__all__ = ["PREFIX", "LAST_CALL_S", "FINISHED_KEY", "Membership", "Rendezvous", "RendezvousTimeout",
           "JobFinished"]

PREFIX = "mxtorch/elastic/inprocess/"
LAST_CALL_S = 2.0
"""How long a generation waits for more processes once MIN are in (torch's agent: 30 s)."""
START_GRACE_S = 30.0
"""Generation 0 short of the workers the job starts with closes with MIN or more after this long
without a newcomer (a worker that failed to start must not hold the job)."""
_POLL_S = 0.1
_LATEST_KEY = "latest"
FINISHED_KEY = "finished"
"""Set (under :data:`PREFIX`) when the job's training function returned: nothing is left to join."""


class RendezvousTimeout(DistributedError):
    """The job's membership did not reach MIN workers in time."""


class JobFinished(DistributedError):
    """The job finished while this process waited to join it."""


@dataclass(frozen=True)
class Member:
    ticket: int
    previous_rank: int  # -1: new to the job
    host: str
    pid: int


@dataclass(frozen=True)
class Membership:
    """One generation of the job as this process sees it."""

    generation: int
    rank: int
    members: tuple[Member, ...]

    @property
    def world_size(self) -> int:
        return len(self.members)

    @property
    def local(self) -> tuple[int, int, int, int]:
        """``(local_rank, local_size, cross_rank, cross_size)`` from the members' hosts."""
        me = self.members[self.rank]
        hosts = list(dict.fromkeys(m.host for m in self.members))
        same = [m for m in self.members if m.host == me.host]
        return same.index(me), len(same), hosts.index(me.host), len(hosts)


def _parse_member(ticket: int, raw: bytes) -> Member:
    fields = raw.decode(errors="replace").split()
    try:
        return Member(ticket, int(fields[0]), fields[1], int(fields[2]))
    except (IndexError, ValueError):
        raise DistributedError(f"elastic rendezvous: the store's entry of ticket {ticket} is not "
                               f"'RANK HOST PID': {raw[:80]!r}") from None


def _number(raw: bytes, key: str) -> int:
    """A count the store holds under ``key``; :class:`DistributedError` for anything else."""
    text = raw[:20].decode(errors="replace")
    if len(raw) > 20 or not text.isdigit():
        raise DistributedError(f"elastic rendezvous: the store's {PREFIX}{key} is not a count: {raw[:40]!r}")
    return int(text)


class Rendezvous:
    """The generations of one job in ``store`` (a ``torch.distributed.Store`` every worker reaches)."""

    def __init__(self, store: Any, min_workers: int, max_workers: int, timeout: float = 600.0,
                 last_call: float = LAST_CALL_S, start_workers: int = 0) -> None:
        if not 1 <= min_workers <= max_workers:
            raise ValueError(f"need 1 <= min_workers <= max_workers, got {min_workers}:{max_workers}")
        # generation 0 waits for every worker the job starts with: a slow starter is not a joiner
        self.start_workers = min(max(start_workers, min_workers), max_workers)
        import torch.distributed as dist

        self.base = store
        self.store = dist.PrefixStore(PREFIX, store)
        self.min_workers, self.max_workers = min_workers, max_workers
        self.timeout, self.last_call = float(timeout), float(last_call)

    def group_store(self, generation: int) -> Any:
        """Where generation ``generation``'s process group meets."""
        import torch.distributed as dist

        return dist.PrefixStore(f"g{generation}/pg/", self.store)

    def latest(self) -> int:
        """The newest generation known to have closed (-1: none yet)."""
        if not self.store.check([_LATEST_KEY]):
            return -1
        return _number(self.store.get(_LATEST_KEY), _LATEST_KEY)

    def join(self, previous: Membership | None, first_generation: int | None = None,
             admit_late: bool = True) -> tuple[Membership | None, int]:
        """Enter the generation after ``previous`` (a new process: ``first_generation``, else the
        newest one) and wait until it closes; ``(membership, next)``.  A process that comes too
        late for a generation goes on to the next one, or, with ``admit_late=False``, returns
        ``(None, next)`` at once (a joiner that starts alone, :meth:`ElasticContext.start`).
        :class:`RendezvousTimeout` after ``timeout`` seconds."""
        if previous is not None:
            generation = previous.generation + 1
        else:
            generation = max(self.latest(), 0) if first_generation is None else first_generation
        previous_rank = previous.rank if previous is not None else -1
        deadline = time.monotonic() + self.timeout
        me = f"{previous_rank} {socket.gethostname()} {os.getpid()}"
        while True:
            ticket = int(self.store.add(f"g{generation}/n", 1))
            self.store.set(f"g{generation}/m{ticket}", me)
            closed = self._wait_closed(generation, deadline)
            if ticket <= closed:
                members = [self._member(generation, t) for t in range(1, closed + 1)]
                order = sorted(members, key=lambda m: (m.previous_rank < 0, m.previous_rank if
                                                       m.previous_rank >= 0 else m.ticket, m.ticket))
                rank = [m.ticket for m in order].index(ticket)
                if self.latest() < generation:
                    self.store.set(_LATEST_KEY, str(generation))
                return Membership(generation, rank, tuple(order)), generation + 1
            generation += 1  # too late for it (the running group sees the ticket): wait for the next
            if not admit_late:
                return None, generation

    def finish(self) -> None:
        """Tell processes waiting to join (and the agents) that the job's training has ended."""
        self.store.set(FINISHED_KEY, "1")

    def finished(self) -> bool:
        return bool(self.store.check([FINISHED_KEY]))

    def joiners_waiting(self, membership: Membership) -> bool:
        """Whether a process came too late for ``membership``'s generation (it waits in the next)."""
        count = int(self.store.add(f"g{membership.generation}/n", 0))
        return count > membership.world_size

    def _wait_closed(self, generation: int, deadline: float) -> int:
        key = f"g{generation}/closed"
        seen, since = -1, time.monotonic()
        while True:
            if self.store.check([key]):
                return _number(self.store.get(key), key)
            if self.store.check([FINISHED_KEY]):
                raise JobFinished(f"elastic rendezvous: the job finished while this process waited for "
                                  f"generation {generation}: there is nothing left to join")
            count = int(self.store.add(f"g{generation}/n", 0))
            now = time.monotonic()
            if count != seen:
                seen, since = count, now
            ready = count >= self.max_workers or (generation == 0 and count >= self.start_workers) or (
                count >= self.min_workers and now - since >= (self.last_call if generation else START_GRACE_S)
                and self._has_old_member(generation, count))
            if ready:
                return _number(self.store.compare_set(key, "", str(count)), key)
            if now > deadline:
                raise RendezvousTimeout(
                    f"elastic rendezvous: generation {generation} of the job has {count} worker(s) after "
                    f"{self.timeout:g} s, it needs at least {self.min_workers} (and one from the running "
                    "group if there is one): start more workers, or lower MIN")
            time.sleep(_POLL_S)

    def _has_old_member(self, generation: int, count: int) -> bool:
        if generation == 0:
            return True
        return any(self._member(generation, t).previous_rank >= 0 for t in range(1, count + 1))

    def _member(self, generation: int, ticket: int) -> Member:
        return _parse_member(ticket, self.store.get(f"g{generation}/m{ticket}"))


def world_info(membership: Membership, store_addr: str = "", store_port: int | None = None) -> Any:
    """The :class:`~mxtorch.distributed.env.WorldInfo` of this process in ``membership`` (the job's
    store stands for the master address: the group meets there)."""
    from ..distributed.env import WorldInfo

    local_rank, local_size, cross_rank, cross_size = membership.local
    return WorldInfo(membership.rank, membership.world_size, local_rank, local_size, cross_rank, cross_size,
                     store_addr, store_port, f"mxtorch elastic generation {membership.generation}")


def describe(before: Sequence[Member] | None, after: Membership) -> str:
    """``generation 2: 3 -> 2 workers (left: rank 1 pid 812 on h1)``, for the log."""
    if before is None:
        return f"generation {after.generation}: {after.world_size} worker(s); this process: rank {after.rank}"
    now = {(m.host, m.pid) for m in after.members}
    left = [f"rank {r} (pid {m.pid} on {m.host})" for r, m in enumerate(before) if (m.host, m.pid) not in now]
    came = [f"pid {m.pid} on {m.host}" for m in after.members if m.previous_rank < 0]
    parts = [f"left: {', '.join(left)}"] * bool(left) + [f"joined: {', '.join(came)}"] * bool(came)
    return (f"generation {after.generation}: {len(before)} -> {after.world_size} worker(s)"
            + (f" ({'; '.join(parts)})" if parts else "") + f"; this process is rank {after.rank}")
