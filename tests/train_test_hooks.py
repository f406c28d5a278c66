"""Test-only hooks of ``mxtorch train``'s training loop, loaded by the workers of a test's job through
``MXTORCH_TRAIN_HOOKS=train_test_hooks`` (:func:`env` gives the variables): they kill or pause a run at
a known step, so that the tests of exact resume and of elastic membership are deterministic.  The
product itself holds no test code.

* ``MXTORCH_TEST_KILL_AT_STEP=K``: every worker SIGKILLs its own process right after training step K,
  once the checkpoint of an earlier step is committed (saves are waited for, then the workers meet
  at a barrier).
* ``MXTORCH_TEST_KILL_HOST_AT_STEP=NAME:K`` (elastic jobs): the worker of agent NAME kills its agent and
  itself with SIGKILL right after step K, once its part of the last save is written and a checkpoint
  before step K is committed (the host is lost mid-epoch).
* ``MXTORCH_TEST_PAUSE_AT_STEP=K:N`` (elastic jobs): every worker pauses after step K (its part of the
  last save written) while the job has fewer than N workers, for at most 120 s: a worker that joins
  meanwhile makes the agents restart the workers, and the grown job resumes from this step.
* ``MXTORCH_TEST_SLOW_DATA=R:S``: the worker of rank R waits S more seconds for every training batch,
  inside an ``mxtorch/data.wait`` span as a slow loader would (the slow-rank report must name it).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from mxtorch.cli.train_hooks import TrainHook

KILL_AT_STEP = "MXTORCH_TEST_KILL_AT_STEP"
KILL_HOST_AT_STEP = "MXTORCH_TEST_KILL_HOST_AT_STEP"
PAUSE_AT_STEP = "MXTORCH_TEST_PAUSE_AT_STEP"
SLOW_DATA = "MXTORCH_TEST_SLOW_DATA"
_TESTS = os.path.dirname(os.path.abspath(__file__))


def env(**variables: str) -> dict[str, str]:
    """The environment variables that load these hooks in a job's processes (this folder on
    PYTHONPATH), plus ``variables``."""
    path = os.environ.get("PYTHONPATH", "")
    return {"MXTORCH_TRAIN_HOOKS": "train_test_hooks",
            "PYTHONPATH": os.pathsep.join(p for p in (_TESTS, path) if p), **variables}


def _committed_before(step: int, manager: Any, timeout: float, what: str) -> None:
    """Wait for this worker's saves and for a committed checkpoint before ``step``."""
    manager.wait()
    deadline = time.monotonic() + timeout
    while not any(s < step for s in manager.list()):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: no checkpoint before step {step} within {timeout:g} s")
        time.sleep(0.05)


class KillAtStep(TrainHook):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_step(self, run: Any) -> None:
        if run.step != self.at or run.checkpoint is None:
            return
        _committed_before(run.step, run.checkpoint.manager, 0.0, f"{KILL_AT_STEP}={self.at}")
        if run.kv is not None:
            run.kv.barrier()
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


class KillHostAtStep(TrainHook):
    def __init__(self, spec: str, timeout: float = 120.0) -> None:
        self.spec, self.timeout = spec, timeout
        name, _, at = spec.rpartition(":")
        self.name, self.at = name, int(at)

    def on_step(self, run: Any) -> None:
        from mxtorch.elastic.env import host_name

        if self.name != host_name() or run.step != self.at:
            return
        _committed_before(run.step, run.checkpoint.manager, self.timeout, f"{KILL_HOST_AT_STEP}={self.spec}")
        sys.stdout.flush()
        os.kill(os.getppid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


class PauseAtStep(TrainHook):
    def __init__(self, spec: str, timeout: float = 120.0) -> None:
        at, _, want = spec.partition(":")
        self.at, self.want, self.timeout = int(at), int(want), timeout

    def on_step(self, run: Any) -> None:
        from mxtorch.elastic.worker import stop_requested

        if run.step != self.at or run.n_workers >= self.want:
            return
        run.checkpoint.manager.wait()
        deadline = time.monotonic() + self.timeout
        while not stop_requested() and time.monotonic() < deadline:
            time.sleep(0.05)  # the agents stop this worker (SIGTERM) when the joining one is admitted
        run.force_restart_check = True  # every worker paused here: agree on the restart now


class _SlowLoader:
    """``loader`` whose every batch comes ``seconds`` later, the delay spanned as data waiting."""

    def __init__(self, loader: Any, seconds: float) -> None:
        self.loader, self.seconds = loader, seconds

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def __iter__(self) -> Any:
        from mxtorch.profiler import span

        for batch in self.loader:
            with span("data.wait"):
                time.sleep(self.seconds)
            yield batch


class SlowData(TrainHook):
    def __init__(self, spec: str) -> None:
        rank, _, seconds = spec.partition(":")
        self.rank, self.seconds = int(rank), float(seconds)

    def on_start(self, run: Any) -> None:
        if run.rank == self.rank:
            run.train_loader = _SlowLoader(run.train_loader, self.seconds)


def train_hooks(run: Any) -> list[TrainHook]:
    """The hooks the ``MXTORCH_TEST_*`` variables ask for (read by ``MXTORCH_TRAIN_HOOKS``)."""
    hooks: list[TrainHook] = []
    if os.environ.get(KILL_AT_STEP):
        hooks.append(KillAtStep(int(os.environ[KILL_AT_STEP])))
    if run.elastic and os.environ.get(KILL_HOST_AT_STEP):
        hooks.append(KillHostAtStep(os.environ[KILL_HOST_AT_STEP]))
    if run.elastic and os.environ.get(PAUSE_AT_STEP):
        hooks.append(PauseAtStep(os.environ[PAUSE_AT_STEP]))
    if os.environ.get(SLOW_DATA):
        hooks.append(SlowData(os.environ[SLOW_DATA]))
    return hooks
