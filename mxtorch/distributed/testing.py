"""Run a function (or a command line) in several real processes, as ranks of one job.

This is the one helper every distributed test uses.  Each rank is a fresh process with the
variables a launcher would set (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR=127.0.0.1``, ``MASTER_PORT``: a free port), one torch
thread, and a time limit.  Ranks that raise, crash or hang make the call raise
:class:`WorkerFailed` or :class:`WorkerTimeout` with each rank's traceback or stderr.

Example (``fn`` must be importable by the child processes: define it at module level in an
importable module, e.g. ``tests/dist_workers.py``)::

    # dist_workers.py
    def sum_ranks():
        import torch, mxtorch as mx
        kv = mx.kv.create("allreduce")
        t = torch.tensor([float(kv.rank)])
        kv.pushpull(0, t)
        return t.item()

    # test_x.py
    from mxtorch.distributed.testing import run_workers
    assert run_workers(dist_workers.sum_ranks, 2) == [1.0, 1.0]
"""

from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import pickle
import queue
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..base import MXNetError
from . import env as _env

__all__ = ["free_port", "run_workers", "run_script", "rank_env", "process_context", "child_environment",
           "WorkerFailed", "WorkerTimeout"]

_GRACE_S = 5.0
"""After one rank fails, how long the others get to report (often their own, clearer error)."""
_TAIL = 4000


class WorkerFailed(MXNetError):
    """A rank raised, crashed, or exited without returning.

    ``rank`` is the lowest failing rank, ``traceback`` its traceback (or stderr) text and
    ``failures`` maps every failing rank to its text.
    """

    def __init__(self, failures: dict[int, str]) -> None:
        self.failures = dict(sorted(failures.items()))
        self.rank = min(self.failures)
        self.traceback = self.failures[self.rank]
        parts = [f"--- rank {r} ---\n{text.rstrip()}" for r, text in self.failures.items()]
        super().__init__(f"worker rank(s) {sorted(self.failures)} failed:\n" + "\n".join(parts))


class WorkerTimeout(MXNetError):
    """Some ranks did not finish within the time limit; every rank was killed.

    ``ranks`` lists the ranks that were still running; ``output`` maps each to its output.
    """

    def __init__(self, ranks: list[int], timeout: float, output: dict[int, str]) -> None:
        self.ranks = sorted(ranks)
        self.timeout = timeout
        self.output = output
        tails = "\n".join(f"--- rank {r} output ---\n{text.rstrip()}" for r, text in sorted(output.items())
                          if text.strip())
        super().__init__(
            f"worker rank(s) {self.ranks} did not finish within {timeout:g} s and were killed (with every "
            f"other rank): a collective waits for a peer that never joins it, or the work is too slow for "
            f"the limit{chr(10) + tails if tails else ''}"
        )


_START_METHOD = "MXTORCH_TEST_START_METHOD"
_PRELOAD = ["numpy", "torch"]
_contexts: dict[str, Any] = {}


def process_context() -> Any:
    """The multiprocessing context the test harnesses start their processes with.

    ``forkserver`` where the platform has it: one server process per test process imports
    ``torch`` and ``numpy`` once, and each rank is forked from it, so a rank does not pay the
    ~1 s of CPU that importing torch costs (most of a short multi-process test on a small
    machine).  Each child still gets the parent's *current* environment, ``sys.path`` and
    working directory (the harnesses pass the environment; multiprocessing the rest), as a
    spawned one would.  ``MXTORCH_TEST_START_METHOD=spawn`` starts fresh interpreters instead:
    use it when a rank needs a variable that torch or numpy read while being imported (torch
    reads ``OMP_NUM_THREADS``, ``CUDA_VISIBLE_DEVICES`` and the like later, at first use).
    """
    raw = os.environ.get(_START_METHOD, "").strip().lower()
    if raw not in ("", "spawn", "forkserver"):
        raise ValueError(f"{_START_METHOD}={raw!r} is not a start method the test harnesses use: set it to "
                         f"'forkserver' or 'spawn', or unset it (forkserver where available)")
    method = raw or ("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    ctx = _contexts.get(method)
    if ctx is None:
        ctx = mp.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(_PRELOAD)
        _contexts[method] = ctx
    return ctx


def child_environment(variables: Mapping[str, str]) -> None:
    """In a harness's child: make ``os.environ`` exactly ``variables`` (the parent's environment
    at start, plus the rank's variables), whatever environment the process was forked with."""
    os.environ.clear()
    os.environ.update(variables)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (another process may take it later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def rank_env(rank: int, world_size: int, port: int, backend: str | None = None) -> dict[str, str]:
    """The variables a single-host launcher sets for ``rank`` (plus one torch thread)."""
    out = {
        _env.RANK: str(rank),
        _env.WORLD_SIZE: str(world_size),
        _env.LOCAL_RANK: str(rank),
        _env.LOCAL_WORLD_SIZE: str(world_size),
        _env.GROUP_RANK: "0",
        _env.MASTER_ADDR: "127.0.0.1",
        _env.MASTER_PORT: str(port),
        "OMP_NUM_THREADS": "1",
    }
    if backend is not None:
        out[_env.MXTORCH_DIST_BACKEND] = backend
    return out


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    return text[-_TAIL:]


def _bootstrap(fn: Callable[..., Any], args: tuple[Any, ...], variables: dict[str, str], rank: int,
               stderr_path: str, results: Any) -> None:
    # Runs in the child: keep stderr for the parent, set the launcher's variables, run fn.
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    faulthandler.enable()  # a crash (segfault, abort) leaves its Python stack in that stderr
    child_environment(variables)
    import torch

    from . import exit_status, group

    torch.set_num_threads(1)
    try:
        payload = pickle.dumps(fn(*args))
        group.shutdown()
        results.put((rank, True, payload))
    except BaseException as e:
        text = traceback.format_exc()
        exit_status.note_failure(f"raised {type(e).__name__}: {e}")  # what its peers are told
        group.shutdown(wait_for_peers=False)
        results.put((rank, False, text))


def run_workers(fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 60.0,
                env: Mapping[str, str] | None = None, backend: str | None = "gloo") -> list[Any]:
    """Run ``fn(*args)`` in ``world_size`` new processes, one per rank; return each rank's result.

    ``env`` adds variables to every rank; ``backend`` is passed as ``MXTORCH_DIST_BACKEND``
    (None: choose automatically).  Results must be picklable.  A rank that raises makes this
    raise :class:`WorkerFailed` with its traceback (the others are stopped); one still
    running after ``timeout`` seconds makes it raise :class:`WorkerTimeout`.  A rank that
    returns but then exits with a non-zero code (e.g. an abort at interpreter exit) counts
    as failed.  Each rank leaves the process group cleanly after ``fn`` returns.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    ctx = process_context()
    results: Any = ctx.Queue()
    port = free_port()
    extra = dict(env or {})
    with tempfile.TemporaryDirectory(prefix="mxtorch-workers-") as tmp:
        paths = [os.path.join(tmp, f"rank{r}.stderr") for r in range(world_size)]
        procs = []
        for r in range(world_size):
            variables = {**os.environ, **rank_env(r, world_size, port, backend), **extra}
            # not daemonic, so that fn may start processes of its own (data loader workers)
            p = ctx.Process(target=_bootstrap, args=(fn, args, variables, r, paths[r], results),
                            name=f"mxtorch-rank{r}")
            p.start()
            procs.append(p)
        try:
            return _collect(procs, results, paths, timeout)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join(5)
            results.close()
            _replay(paths)


def _collect(procs: list[Any], results: Any, paths: list[str], timeout: float) -> list[Any]:
    n = len(procs)
    deadline = time.monotonic() + timeout
    values: dict[int, Any] = {}
    failures: dict[int, str] = {}
    give_up_at: float | None = None
    while len(values) + len(failures) < n:
        now = time.monotonic()
        if give_up_at is not None and now >= give_up_at:
            break
        if now >= deadline:
            stuck = [r for r in range(n) if r not in values and r not in failures]
            if failures:
                break
            raise WorkerTimeout(stuck, timeout, {r: _tail(paths[r]) for r in stuck})
        try:
            rank, ok, payload = results.get(timeout=min(0.2, deadline - now))
        except queue.Empty:
            for r, p in enumerate(procs):  # died without a word: crashed, killed, os._exit
                if r not in values and r not in failures and p.exitcode is not None and _drained(results):
                    failures[r] = (f"exited with code {p.exitcode} without returning (a crash, a signal, or "
                                   f"os._exit); its stderr:\n{_tail(paths[r])}")
            if failures and give_up_at is None:
                give_up_at = time.monotonic() + _GRACE_S
            continue
        if ok:
            values[rank] = pickle.loads(payload)
        else:
            failures[rank] = payload
            if give_up_at is None:
                give_up_at = time.monotonic() + _GRACE_S
    if failures:
        raise WorkerFailed(failures)
    for r, p in enumerate(procs):  # results are in; the exits must be clean too
        p.join(max(1.0, deadline - time.monotonic()))
        if p.exitcode is None:
            raise WorkerTimeout([r], timeout, {r: _tail(paths[r])})
        if p.exitcode != 0:
            failures[r] = (f"returned its result but then exited with code {p.exitcode} (an abort at "
                           f"interpreter exit?); its stderr:\n{_tail(paths[r])}")
    if failures:
        raise WorkerFailed(failures)
    return [values[r] for r in range(n)]


def _drained(results: Any) -> bool:
    # A rank that exited may still have its result in the pipe: only call it dead once empty.
    return bool(results.empty())


def _replay(paths: list[str]) -> None:
    for r, path in enumerate(paths):
        text = _tail(path)
        if text.strip():
            sys.stderr.write(f"--- rank {r} stderr ---\n{text}")


def run_script(argv: Sequence[str], world_size: int, timeout: float = 60.0,
               env: Mapping[str, str | None] | None = None) -> list[tuple[int, str, str]]:
    """Run the command line ``argv`` once per rank, with the launcher's variables set.

    Returns ``(returncode, stdout, stderr)`` for each rank, whatever the return codes; a
    value of None in ``env`` removes that variable.  Raises :class:`WorkerTimeout` (after
    killing every rank) when one is still running after ``timeout`` seconds.
    """
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mxtorch-script-") as tmp:
        procs, files = [], []
        try:
            for r in range(world_size):
                variables: dict[str, str] = {**os.environ, **rank_env(r, world_size, port)}
                for k, v in (env or {}).items():
                    if v is None:
                        variables.pop(k, None)
                    else:
                        variables[k] = v
                out = open(os.path.join(tmp, f"rank{r}.out"), "w+")
                err = open(os.path.join(tmp, f"rank{r}.err"), "w+")
                files.append((out, err))
                procs.append(subprocess.Popen(list(argv), env=variables, stdout=out, stderr=err,
                                              stdin=subprocess.DEVNULL))
            deadline = time.monotonic() + timeout
            for p in procs:
                try:
                    p.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            stuck = [r for r, p in enumerate(procs) if p.poll() is None]
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            outputs = []
            for out, err in files:
                out.seek(0)
                err.seek(0)
                outputs.append((out.read(), err.read()))
            if stuck:
                raise WorkerTimeout(stuck, timeout, {r: outputs[r][0][-_TAIL:] + outputs[r][1][-_TAIL:]
                                                     for r in stuck})
            return [(int(p.returncode), o, e) for p, (o, e) in zip(procs, outputs)]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for out, err in files:
                out.close()
                err.close()
