"""What a worker of an elastic job does for itself: die with its agent, and stop at a step boundary
when its agent restarts it (a worker joins)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

__all__ = ["ElasticRestart", "die_with_agent", "stop_on_sigterm", "stop_requested", "restart_agreed",
           "wait_for_stop"]

_PR_SET_PDEATHSIG = 1
_stop_requested = threading.Event()


class ElasticRestart(Exception):  # noqa: N818 - not an error: the agents restart the workers
    """The agents are restarting the workers (a worker joins); raised after the step's checkpoint."""


def stop_on_sigterm() -> None:
    """Turn the SIGTERM with which an agent stops its worker for a restart into a request that
    :func:`restart_agreed` sees at a step boundary, instead of an exit mid-step."""
    signal.signal(signal.SIGTERM, lambda *_: _stop_requested.set())


def stop_requested() -> bool:
    """Whether this worker's agent asked it to stop (a SIGTERM seen by :func:`stop_on_sigterm`)."""
    return _stop_requested.is_set()


def wait_for_stop(timeout: float = 60.0) -> bool:
    """After an agreed restart: wait until this worker's own agent stops it too (every agent sees the
    joining one within its monitor interval).  A worker that exited 0 first would tell its agent
    the job had finished, and that agent would leave the job.  False when no stop came."""
    return _stop_requested.wait(timeout)


RESTART_POLL_STEPS = 5
"""Workers agree on a restart every this many steps (a flag all-reduce: ~0.5 ms with 3 processes
on this 2-core machine), so a joining worker waits at most that many steps."""


def restart_agreed(step: int, force: bool = False) -> bool:
    """Whether any worker was asked to stop, checked after every :data:`RESTART_POLL_STEPS`-th step
    (or when ``force``, which must then hold on every worker): one all-reduce of a flag, so every
    worker must call it after the same steps."""
    if step % RESTART_POLL_STEPS and not force:
        return False
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return _stop_requested.is_set()
    flag = torch.tensor([int(_stop_requested.is_set())], dtype=torch.int32)
    if dist.get_backend() == "nccl":
        flag = flag.cuda()
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def die_with_agent() -> None:
    """Ask Linux to SIGKILL this worker when its agent (the parent) dies: a lost agent is a lost host,
    and its worker must not keep the others' collectives going.  A no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the agent died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)
