"""Who this process is in the job (a worker's rank, a server's rank) and how its clock sits
against worker rank 0's: what a trace file is named by and what ``mxtorch trace merge`` aligns.

The distributed components tell it: :func:`mxtorch.distributed.init` (rank, size, and the clock
offset it measures against rank 0 when the job starts), a parameter-server worker (its rank and
each server's clock against its own), a parameter server (its rank).
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Identity", "identity", "set_identity", "ntp_offset", "measure_collective_offset"]

_logger = logging.getLogger("mxtorch.profiler")


@dataclass
class Identity:
    role: str = "worker"  # "worker" or "server"
    rank: int | None = None
    world_size: int = 1
    offset_ns: int | None = None  # this clock minus worker rank 0's (None: not measured)
    peers: dict[str, int] = field(default_factory=dict)  # "server<r>" -> its clock minus this one

    def label(self) -> str:
        return f"{'rank' if self.role == 'worker' else self.role} {self.rank if self.rank is not None else 0}"

    def in_job(self) -> bool:
        return self.role == "server" or (self.rank is not None and self.world_size > 1)

    def metadata(self) -> dict[str, object]:
        return {"role": self.role, "rank": self.rank if self.rank is not None else 0,
                "world_size": self.world_size, "pid": os.getpid(), "host": os.uname().nodename,
                "clock_offset_ns": self.offset_ns, "peer_clock_offsets_ns": dict(self.peers)}


_identity = Identity()


def identity() -> Identity:
    return _identity


def set_identity(role: str, rank: int, world_size: int = 1, offset_ns: int | None = None) -> None:
    """Record that this process is ``role`` ``rank`` of a job of ``world_size`` workers."""
    _identity.role, _identity.rank, _identity.world_size = role, int(rank), int(world_size)
    if offset_ns is not None:
        _identity.offset_ns = int(offset_ns)
    elif role == "worker" and rank == 0:
        _identity.offset_ns = 0


def ntp_offset(ask: Callable[[], int], rounds: int = 5) -> int:
    """The peer's clock minus ours (ns), from ``rounds`` round trips of ``ask`` (returns the peer's
    ``time.time_ns()``): the reading of the shortest round trip, against its midpoint."""
    best: tuple[int, int] | None = None
    for _ in range(rounds):
        t0 = time.time_ns()
        peer = ask()
        t1 = time.time_ns()
        if best is None or t1 - t0 < best[0]:
            best = (t1 - t0, peer - (t0 + t1) // 2)
    assert best is not None
    return best[1]


def measure_collective_offset(rounds: int = 3) -> int | None:
    """This rank's clock minus rank 0's, from ``rounds`` barriers each followed by an all-gather
    of every rank's time at the barrier's end (the median); every rank must call it together."""
    import torch
    import torch.distributed as dist

    try:
        rank, size = dist.get_rank(), dist.get_world_size()
        if size == 1:
            return 0
        seen = []
        for _ in range(rounds):
            dist.barrier()
            mine = torch.tensor([time.time_ns()], dtype=torch.int64)
            every = [torch.zeros(1, dtype=torch.int64) for _ in range(size)]
            dist.all_gather(every, mine)
            seen.append(int(every[rank]) - int(every[0]))
        return int(statistics.median(seen))
    except Exception as e:  # the job goes on without aligned clocks; the merge says so
        _logger.warning("could not measure this rank's clock against rank 0: %s: %s", type(e).__name__, e)
        return None
