"""Shared fixtures of the test suite.

* ``seeded`` (automatic): every test starts from the same torch / numpy / ``random`` state, so a
  failure reproduces when the test runs alone.
* ``free_port``: a factory of free TCP ports on 127.0.0.1 (each distributed test takes its own).
* ``processes``: starts processes (``processes.start(argv, env=...)``) and guarantees that none
  outlives the test: on teardown each one still running is killed and reaped.
* ``run_ranks``: :func:`mxtorch.distributed.testing.run_workers` (a function on N ranks of a real
  gloo job over 127.0.0.1, with a timeout; ranks fork from a forkserver that imported torch once,
  see :func:`~mxtorch.distributed.testing.process_context`) -- the one harness for multi-process
  tests; scripts run with :func:`~mxtorch.distributed.testing.run_script`, parameter-server jobs with
  :func:`mxtorch.kvstore.ps.testing.run_ps_job` (scheduler and servers on top of the same rules).

Markers (``pyproject.toml``): ``slow`` (``bash scripts/test.sh -m slow``) and ``cluster``
(network namespaces, ``tests/cluster``).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
import torch

from mxtorch.distributed import testing as _dist_testing

PY = sys.executable


@pytest.fixture(autouse=True)
def seeded() -> None:
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)


@pytest.fixture
def free_port() -> Callable[[], int]:
    return _dist_testing.free_port


class Processes:
    """Processes a test started; :meth:`stop_all` kills and reaps the ones still running."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def start(self, argv: Sequence[str], env: dict[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen[str]:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        env = env if env is not None else dict(os.environ)
        p = subprocess.Popen(list(argv), env=env, text=True, **kwargs)
        self.started.append(p)
        return p

    def stop_all(self) -> None:
        for p in self.started:
            if p.poll() is None:
                p.kill()
        for p in self.started:
            try:
                p.communicate(timeout=10)
            except (subprocess.TimeoutExpired, ValueError):
                pass


@pytest.fixture
def processes() -> Iterator[Processes]:
    procs = Processes()
    try:
        yield procs
    finally:
        procs.stop_all()


@pytest.fixture
def run_ranks() -> Callable[..., list[Any]]:
    return _dist_testing.run_workers
