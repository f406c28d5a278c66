"""What a worker of an elastic job does for itself: die with its agent, stop at a step boundary
when its agent restarts it (a worker joins), and the test hooks that lose a host or wait for one."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any

from .env import MXTORCH_TEST_KILL_HOST_AT_STEP, MXTORCH_TEST_PAUSE_AT_STEP, host_name

__all__ = ["ElasticRestart", "die_with_agent", "stop_on_sigterm", "restart_agreed", "test_kill_host_hook",
           "test_pause_hook", "wait_for_stop"]

_PR_SET_PDEATHSIG = 1
_stop_requested = threading.Event()


class ElasticRestart(Exception):  # noqa: N818 - not an error: the agents restart the workers
    """The agents are restarting the workers (a worker joins); raised after the step's checkpoint."""


def stop_on_sigterm() -> None:
    """Turn the SIGTERM with which an agent stops its worker for a restart into a request that
    :func:`restart_agreed` sees at a step boundary, instead of an exit mid-step."""
    signal.signal(signal.SIGTERM, lambda *_: _stop_requested.set())


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


def test_kill_host_hook(step: int, ckpt: Any, timeout: float = 120.0) -> None:
    """TEST-ONLY: with ``MXTORCH_TEST_KILL_HOST_AT_STEP=NAME:K``, the worker of agent NAME kills its
    agent and itself with SIGKILL right after step K, once its part of the last save is written
    and a checkpoint before step K is committed.  The elastic tests use it to lose a host mid-epoch
    at a known step; nothing else sets it."""
    spec = os.environ.get(MXTORCH_TEST_KILL_HOST_AT_STEP)
    if not spec:
        return
    name, _, at = spec.rpartition(":")
    if name != host_name() or int(at) != step:
        return
    ckpt.wait()
    deadline = time.monotonic() + timeout
    while not any(s < step for s in ckpt.list()):
        if time.monotonic() > deadline:
            raise SystemExit(f"{MXTORCH_TEST_KILL_HOST_AT_STEP}={spec}: no checkpoint before step {step} "
                             f"within {timeout:g} s")
        time.sleep(0.05)
    sys.stdout.flush()
    os.kill(os.getppid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def test_pause_hook(step: int, world_size: int, ckpt: Any, timeout: float = 120.0) -> bool:
    """TEST-ONLY: with ``MXTORCH_TEST_PAUSE_AT_STEP=K:N``, every worker pauses after step K (its part
    of the last save written) while the job has fewer than N workers, for at most ``timeout``
    seconds: a worker that joins meanwhile makes the agents restart the workers, and the grown job
    resumes from this step.  Returns whether it paused (the same on every worker).  The elastic
    tests use it; nothing else sets it."""
    spec = os.environ.get(MXTORCH_TEST_PAUSE_AT_STEP)
    if not spec:
        return False
    at, _, want = spec.partition(":")
    if int(at) != step or world_size >= int(want):
        return False
    ckpt.wait()
    deadline = time.monotonic() + timeout
    while not _stop_requested.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)  # the agents stop this worker (SIGTERM) when the joining one is admitted
    return True
