"""What a worker of an elastic job does for itself: die with its agent, and the test hook that
kills a host."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from typing import Any

from .env import MXTORCH_TEST_KILL_HOST_AT_STEP, MXTORCH_TEST_PAUSE_AT_STEP, host_name

__all__ = ["die_with_agent", "test_kill_host_hook", "test_pause_hook"]

_PR_SET_PDEATHSIG = 1


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


def test_pause_hook(step: int, world_size: int, ckpt: Any, timeout: float = 120.0) -> None:
    """TEST-ONLY: with ``MXTORCH_TEST_PAUSE_AT_STEP=K:N``, every worker pauses after step K (its part
    of the last save written) while the job has fewer than N workers, for at most ``timeout``
    seconds: a worker that joins meanwhile makes the agents restart the workers, and the grown job
    resumes from the last checkpoint.  The elastic tests use it; nothing else sets it."""
    spec = os.environ.get(MXTORCH_TEST_PAUSE_AT_STEP)
    if not spec:
        return
    at, _, want = spec.partition(":")
    if int(at) != step or world_size >= int(want):
        return
    ckpt.wait()
    time.sleep(timeout)  # the agents stop this worker when the joining one is admitted
