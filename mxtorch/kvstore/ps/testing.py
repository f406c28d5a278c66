"""Local parameter-server jobs in real processes, for tests.

:func:`run_ps_job` runs ``fn(*args)`` on every worker of a job with a scheduler and servers on
127.0.0.1 (a free port) and returns the workers' results by rank; anything that fails (a
worker raising or crashing, a server or the scheduler exiting non-zero) raises
:class:`PSJobFailed` with each failing process's traceback or stderr, and a job still running
after ``timeout`` is killed and raises :class:`~mxtorch.distributed.testing.WorkerTimeout`.

:func:`ps_cluster` gives the process handles, for tests that kill or restart nodes::

    with ps_cluster(num_workers=2, num_servers=2, env={"MXTORCH_PS_DEAD_S": "2"}) as c:
        c.start_workers(ps_workers.pull_forever)
        c.kill_worker(1)
        outcomes = c.join_workers()      # WorkerOutcome per rank, nothing raised

``fn`` must be importable by the child processes (module level of an importable module), and
its result picklable (it comes back through a multiprocessing queue, as in
:func:`mxtorch.distributed.testing.run_workers`).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import queue
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ...base import MXNetError
from ...distributed import env as _env
from ...distributed.testing import WorkerTimeout, child_environment, free_port, process_context

__all__ = ["run_ps_job", "ps_cluster", "PSCluster", "PSJobFailed", "WorkerOutcome"]

_TAIL = 4000
_EXIT_GRACE_S = 30.0


class PSJobFailed(MXNetError):
    """A process of a parameter-server job failed.

    ``failures`` maps 'worker 1', 'server 0', 'scheduler' to its traceback or stderr; ``node``
    is the first of them and ``traceback`` its text.
    """

    def __init__(self, failures: dict[str, str]) -> None:
        self.failures = dict(sorted(failures.items()))
        self.node = next(iter(self.failures))
        self.traceback = self.failures[self.node]
        parts = [f"--- {name} ---\n{text.rstrip()}" for name, text in self.failures.items()]
        super().__init__(f"{', '.join(self.failures)} failed:\n" + "\n".join(parts))


@dataclass
class WorkerOutcome:
    """What became of one worker: its return value, or its error text and exit code."""

    rank: int
    ok: bool
    value: Any = None
    error: str = ""
    exitcode: int | None = None


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-_TAIL:]
    except OSError:
        return ""


def _redirect(stderr_path: str, variables: Mapping[str, str]) -> None:
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    faulthandler.enable()
    child_environment(variables)


def _role_main(variables: dict[str, str], stderr_path: str) -> None:
    _redirect(stderr_path, variables)
    import torch

    from .roles import run_role

    torch.set_num_threads(1)
    code = run_role()
    _fast_exit(code)


def _fast_exit(code: int) -> None:
    # Everything is closed and reported: skip the interpreter's teardown of torch, which takes
    # seconds on a loaded machine and would dominate short test jobs.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _worker_main(fn: Callable[..., Any], args: tuple[Any, ...], variables: dict[str, str], rank: int,
                 stderr_path: str, results: Any) -> None:
    _redirect(stderr_path, variables)
    import torch

    from .worker import close_all

    torch.set_num_threads(1)
    report: tuple[int, bool, Any]
    try:
        payload = pickle.dumps(fn(*args))
        close_all()
        report = (rank, True, payload)
    except SystemExit as e:  # same-script mode: a scheduler or server process ends here
        _fast_exit(e.code if isinstance(e.code, int) else 1)
        raise
    except BaseException:
        text = traceback.format_exc()
        try:
            close_all()
        finally:
            report = (rank, False, text)
    results.put(report)
    results.close()
    results.join_thread()
    _fast_exit(0)


class PSCluster:
    """A running local job's processes (see :func:`ps_cluster`)."""

    def __init__(self, num_workers: int, num_servers: int, env: Mapping[str, str] | None, timeout: float,
                 tmpdir: str) -> None:
        self.num_workers = num_workers
        self.num_servers = num_servers
        self.timeout = timeout
        self.tmpdir = tmpdir
        self.port = free_port()
        self.env: dict[str, str] = {
            _env.DMLC_PS_ROOT_URI: "127.0.0.1", _env.DMLC_PS_ROOT_PORT: str(self.port),
            _env.DMLC_NUM_SERVER: str(num_servers), _env.DMLC_NUM_WORKER: str(num_workers),
            _env.DMLC_NODE_HOST: "127.0.0.1", _env.MXTORCH_DIST_TIMEOUT: str(timeout), "OMP_NUM_THREADS": "1",
            **dict(env or {}),
        }
        self.ctx = process_context()
        self.results: Any = self.ctx.Queue()
        self.scheduler: Any = None
        self.servers: list[Any] = [None] * num_servers
        self.workers: list[Any] = [None] * num_workers
        self._outcomes: dict[int, WorkerOutcome] = {}

    def log_path(self, name: str) -> str:
        return os.path.join(self.tmpdir, name.replace(" ", "") + ".stderr")

    def stderr(self, name: str) -> str:
        """The stderr of 'scheduler', 'server 0', 'worker 1' (the tail)."""
        return _tail(self.log_path(name))

    def _role_env(self, role: str, rank: int | None, extra: Mapping[str, str] | None) -> dict[str, str]:
        out = {**os.environ, **self.env, _env.DMLC_ROLE: role}
        if role == "worker" and rank is not None:
            out[_env.DMLC_WORKER_ID] = str(rank)
        elif role == "worker":  # a worker joining an elastic job: the scheduler gives it a new rank
            out.pop(_env.DMLC_WORKER_ID, None)
            out.pop(_env.RANK, None)
        elif role == "server":
            out[_env.DMLC_SERVER_ID] = str(rank)
        out.update(extra or {})
        return out

    def start_scheduler(self, fn: Callable[..., Any] | None = None, *args: Any,
                        env: Mapping[str, str] | None = None) -> Any:
        """Start the scheduler (with ``fn``: run ``fn(*args)`` as a same-script process)."""
        self.scheduler = self._start("scheduler", None, fn, args, env)
        return self.scheduler

    def start_server(self, rank: int, fn: Callable[..., Any] | None = None, *args: Any,
                     env: Mapping[str, str] | None = None) -> Any:
        """Start (or restart) server ``rank``."""
        self.servers[rank] = self._start("server", rank, fn, args, env)
        return self.servers[rank]

    def start_workers(self, fn: Callable[..., Any], *args: Any,
                      env: Mapping[str, str] | None = None) -> list[Any]:
        """Start every worker running ``fn(*args)``."""
        for r in range(self.num_workers):
            self.workers[r] = self._start("worker", r, fn, args, env)
        return list(self.workers)

    def add_worker(self, fn: Callable[..., Any], *args: Any, env: Mapping[str, str] | None = None) -> int:
        """Start one more worker running ``fn(*args)``, joining the running (elastic) job without a
        ``DMLC_WORKER_ID``; returns its slot in :attr:`workers` (its outcome's ``rank``; the rank the
        scheduler gives it is its store's ``kv.rank``)."""
        slot = self.num_workers
        self.num_workers += 1
        self.workers.append(self._start("worker", slot, fn, args, env, assigned=False))
        return slot

    def _start(self, role: str, rank: int | None, fn: Callable[..., Any] | None, args: tuple[Any, ...],
               extra: Mapping[str, str] | None = None, assigned: bool = True) -> Any:
        name = role if rank is None else f"{role} {rank}"
        variables = self._role_env(role, rank if assigned else None, extra)
        path = self.log_path(name)
        if fn is None:
            p = self.ctx.Process(target=_role_main, args=(variables, path), name=f"mxtorch-ps-{role}")
        else:
            worker_rank = rank if role == "worker" and rank is not None else -1
            p = self.ctx.Process(target=_worker_main, name=f"mxtorch-ps-{role}",
                                 args=(fn, args, variables, worker_rank, path, self.results))
        p.start()
        return p

    def kill_worker(self, rank: int) -> None:
        _kill(self.workers[rank])

    def kill_server(self, rank: int) -> None:
        _kill(self.servers[rank])

    def join_workers(self, timeout: float | None = None) -> list[WorkerOutcome]:
        """Wait for every worker; their outcomes by rank (never raises for a failed worker).

        Raises :class:`WorkerTimeout` (after killing the job) if some are still running after
        ``timeout`` seconds (default: the cluster's timeout).
        """
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while len(self._outcomes) < self.num_workers:
            now = time.monotonic()
            if now >= deadline:
                stuck = [r for r in range(self.num_workers) if r not in self._outcomes]
                self.close()
                raise WorkerTimeout(stuck, limit, {r: self.stderr(f"worker {r}") for r in stuck})
            try:
                rank, ok, payload = self.results.get(timeout=min(0.2, deadline - now))
            except queue.Empty:
                for r, p in enumerate(self.workers):
                    if r in self._outcomes or p is None or p.exitcode is None or not self.results.empty():
                        continue
                    self._outcomes[r] = WorkerOutcome(r, False, error=(
                        f"exited with code {p.exitcode} without returning (killed, crashed, or os._exit); "
                        f"its stderr:\n{self.stderr(f'worker {r}')}"), exitcode=p.exitcode)
                continue
            if rank < 0:
                continue
            if ok:
                self._outcomes[rank] = WorkerOutcome(rank, True, value=pickle.loads(payload))
            else:
                self._outcomes[rank] = WorkerOutcome(rank, False, error=payload)
        for r, p in enumerate(self.workers):
            p.join(max(1.0, deadline - time.monotonic()))
            self._outcomes[r].exitcode = p.exitcode
            if self._outcomes[r].ok and p.exitcode not in (0, None):
                self._outcomes[r].ok = False
                self._outcomes[r].error = (f"returned its result but then exited with code {p.exitcode}; its "
                                           f"stderr:\n{self.stderr(f'worker {r}')}")
        return [self._outcomes[r] for r in range(self.num_workers)]

    def wait_exit(self, timeout: float = _EXIT_GRACE_S) -> dict[str, int | None]:
        """Wait for the scheduler and servers to exit; their exit codes (None: still running)."""
        deadline = time.monotonic() + timeout
        named = [("scheduler", self.scheduler)] + [(f"server {r}", p) for r, p in enumerate(self.servers)]
        codes: dict[str, int | None] = {}
        for name, p in named:
            if p is None:
                continue
            p.join(max(0.1, deadline - time.monotonic()))
            codes[name] = p.exitcode
        return codes

    def close(self) -> None:
        """Kill whatever still runs."""
        for p in [self.scheduler, *self.servers, *self.workers]:
            if p is not None and p.is_alive():
                _kill(p)
        self.results.close()


def _kill(p: Any) -> None:
    if p is None or not p.is_alive():
        return
    try:
        os.kill(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.join(10)


@contextlib.contextmanager
def ps_cluster(num_workers: int, num_servers: int, env: Mapping[str, str] | None = None,
               timeout: float = 60.0, start: bool = True) -> Iterator[PSCluster]:
    """A local job (scheduler and servers started unless ``start=False``); killed on exit."""
    tmpdir = tempfile.mkdtemp(prefix="mxtorch-ps-")
    cluster = PSCluster(num_workers, num_servers, env, timeout, tmpdir)
    try:
        if start:
            cluster.start_scheduler()
            for r in range(num_servers):
                cluster.start_server(r)
        yield cluster
    finally:
        cluster.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


def run_ps_job(fn: Callable[..., Any], num_workers: int, num_servers: int, *args: Any, timeout: float = 60.0,
               env: Mapping[str, str] | None = None, mode: str | None = None) -> list[Any]:
    """Run ``fn(*args)`` on ``num_workers`` workers of a local job with ``num_servers`` servers.

    ``mode``: None or 'separate' (the scheduler and servers run :func:`run_scheduler` /
    :func:`run_server`), 'same-script' (they run ``fn`` too, and become their role when it
    creates the dist KVStore).  Returns the workers' results by rank; raises
    :class:`PSJobFailed` if any process failed (including a scheduler or server exiting
    non-zero after the workers finished) and :class:`WorkerTimeout` past ``timeout``.
    """
    if mode not in (None, "separate", "same-script"):
        raise ValueError(f"mode must be None, 'separate' or 'same-script', got {mode!r}")
    same = mode == "same-script"
    with ps_cluster(num_workers, num_servers, env, timeout, start=False) as c:
        if same:
            c.start_scheduler(fn, *args)
            for r in range(num_servers):
                c.start_server(r, fn, *args)
        else:
            c.start_scheduler()
            for r in range(num_servers):
                c.start_server(r)
        c.start_workers(fn, *args)
        outcomes = c.join_workers()
        failures = {f"worker {o.rank}": o.error for o in outcomes if not o.ok}
        if failures:
            raise PSJobFailed(failures)
        for name, code in c.wait_exit().items():
            if code != 0:
                what = "did not exit" if code is None else f"exited with code {code}"
                failures[name] = f"{what} after the workers finished; its stderr:\n{c.stderr(name)}"
        if failures:
            raise PSJobFailed(failures)
        return [o.value for o in outcomes]
