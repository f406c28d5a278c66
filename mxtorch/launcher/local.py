"""Run a job's workers on this machine through torchrun's machinery.

Workers are started by torch's elastic agent (:func:`torch.distributed.launcher.api.elastic_launch`,
c10d rendezvous on 127.0.0.1 at the job's port), so they receive exactly what torchrun gives
them (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT`` — a fresh store port for every attempt), restarts follow ``--max-restarts``
and one worker's failure stops the others.  Each worker's output lines are shown with its
rank in front (``[worker1]:``).
mxtorch adds MXNet's ``DMLC_*`` variables, a time limit, and a failure report naming the rank
that failed first, with its traceback (from torch's error file when the script used
``@record``, otherwise the tail of that worker's stderr, which is copied to a log file).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import IO, Any

from .job import RESTART_ENV, JobSpec, LaunchError, resolve_command, worker_environment
from .pernode import NodeLayout

__all__ = ["launch_local", "JobTimedOut", "EXIT_TIMEOUT"]

EXIT_TIMEOUT = 124
"""Exit status of a job stopped by its time limit (as coreutils' ``timeout``)."""

_STDERR_TAIL_LINES = 30
_SHUTDOWN_GRACE_S = 5  # SIGTERM -> SIGKILL for workers that ignore SIGTERM


class JobTimedOut(LaunchError):
    """The job ran past its time limit and was stopped."""


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _environ(extra: Mapping[str, str]) -> Iterator[None]:
    # Workers inherit the agent's os.environ; torch's launcher also writes into it.  Restore all.
    saved = dict(os.environ)
    os.environ.update(extra)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    if seconds is None:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        raise LaunchError("a time limit (--timeout) can only be set when launching from the main thread")

    def expire(signum: int, frame: Any) -> None:
        raise JobTimedOut(f"the job did not finish within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _quiet_torch_elastic() -> Iterator[None]:
    # torch's agent logs each worker it stops or sees fail; mxtorch prints one summary instead.
    log = logging.getLogger("torch.distributed.elastic")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _recording_logs_specs(log_dir: str) -> Any:
    """torch's default log layout, remembering where each attempt's stderr files are.

    Both streams are copied to files and shown line by line with the worker's rank in front
    (``[worker1]:...``): whole lines never interleave, and a failed worker's stderr can be read
    back for the report.
    """
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, Std

    class RecordingLogsSpecs(DefaultLogsSpecs):
        def __init__(self) -> None:
            super().__init__(log_dir=log_dir, tee=Std.ALL)
            self.stderr_files: dict[int, str] = {}

        def reify(self, envs: dict[int, dict[str, str]]) -> Any:
            dest = super().reify(envs)
            self.stderr_files = dict(dest.stderrs)  # keyed by local rank, latest attempt
            return dest

    return RecordingLogsSpecs()


def launch_local(spec: JobSpec, *, master_addr: str = "127.0.0.1", report: IO[str] | None = None,
                 hidden_env: Mapping[str, str] | None = None, nodes: NodeLayout | None = None) -> int:
    """Run ``spec`` with ``spec.num_workers`` local workers; returns the job's exit status.

    ``hidden_env``: variables the workers also get that must not show in a report or command
    line (the job's ``MXTORCH_PS_SECRET``, :mod:`.secret`).  ``nodes``: this launcher is one node
    of a per-node job (:mod:`.pernode`); it runs ``nodes.nproc_per_node`` workers and meets the
    other nodes at ``nodes.endpoint``.

    0 when every worker succeeded; the first failed worker's exit code (128 + signal number
    for a signal) when one failed, after printing which rank failed and why to ``report``
    (default stderr); :data:`EXIT_TIMEOUT` when the time limit stopped the job.
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    out = report if report is not None else sys.stderr
    command = resolve_command(spec.command)
    if nodes is not None:
        master_addr, port = nodes.endpoint_host, nodes.endpoint_port
    else:
        port = spec.master_port if spec.master_port is not None else _free_port(master_addr)
    env = worker_environment(spec, master_addr, port)
    env.update(RESTART_ENV)
    env.update(hidden_env or {})
    if spec.num_workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun: N workers must not oversubscribe the cores
    log_dir = tempfile.mkdtemp(prefix="mxtorch-launch-")
    logs = _recording_logs_specs(log_dir)
    rendezvous: dict[str, Any] = dict(
        min_nodes=1, max_nodes=1, nproc_per_node=spec.num_workers, run_id=uuid.uuid4().hex,
        rdzv_backend="c10d", rdzv_endpoint=f"{master_addr}:{port}", rdzv_configs={}, local_addr=master_addr)
    if nodes is not None:
        rendezvous.update(min_nodes=nodes.min_nodes, max_nodes=nodes.max_nodes,
                          nproc_per_node=nodes.nproc_per_node, run_id=nodes.run_id,
                          rdzv_endpoint=nodes.endpoint, local_addr=None,
                          rdzv_backend="static" if nodes.static else "c10d",
                          rdzv_configs={"rank": nodes.node_rank} if nodes.static else {})
    config = LaunchConfig(
        role="worker", max_restarts=spec.max_restarts, monitor_interval=0.1, logs_specs=logs,
        log_line_prefix_template="[worker${rank}]:", shutdown_timeout=_SHUTDOWN_GRACE_S, **rendezvous,
    )
    start = time.monotonic()
    keep_logs = False
    try:
        with _environ(env), _quiet_torch_elastic(), _time_limit(spec.timeout):
            elastic_launch(config, command[0])(*command[1:])
        return 0
    except ChildFailedError as e:
        keep_logs = True
        failures = sorted(e.failures.items(), key=lambda kv: _cause_order(kv[0], kv[1], logs.stderr_files))
        print(_failure_report(failures, logs.stderr_files, spec, time.monotonic() - start, log_dir),
              file=out, flush=True)
        return _exit_status(failures[0][1].exitcode)
    except JobTimedOut as e:
        print(f"mxtorch launch: {e}; all {spec.num_workers} workers were stopped", file=out, flush=True)
        return EXIT_TIMEOUT
    except SignalException as e:
        print(f"mxtorch launch: interrupted by {e.sigval.name}; all workers were stopped", file=out,
              flush=True)
        return 128 + int(e.sigval)
    finally:
        if not keep_logs:
            shutil.rmtree(log_dir, ignore_errors=True)


def _exit_status(exitcode: int) -> int:
    if exitcode > 0:
        return min(exitcode, 255)
    if exitcode < 0:
        return 128 - exitcode
    return 1


def _killed_by_launcher(exitcode: int) -> bool:
    return exitcode in (-signal.SIGTERM, -signal.SIGKILL)


def _cause_order(rank: int, failure: Any, stderr_files: Mapping[int, str]) -> tuple[int, float, int]:
    """Sort key putting the root cause first: a worker that failed on its own, earliest first.

    torch stamps failures without an error file with the time it noticed them, the same for
    all; the stderr log's last write tells when each worker really stopped.
    """
    when = float(failure.timestamp)
    if _error_message(failure) is None:
        path = stderr_files.get(failure.local_rank, "")
        with contextlib.suppress(OSError):
            when = os.path.getmtime(path)
    return (1 if _killed_by_launcher(failure.exitcode) else 0, when, rank)


def _error_message(failure: Any) -> Any:
    """What the worker wrote to torch's error file (it does when its entry point used ``@record``)."""
    if not os.path.isfile(failure.error_file):
        return None
    return failure.error_file_data.get("message") or None


def _traceback_of(failure: Any, stderr_file: str | None) -> str:
    message = _error_message(failure)
    if isinstance(message, dict):  # written by torch's @record: the exception and its call stack
        info = message.get("extraInfo", {})
        stack = info.get("py_callstack") if isinstance(info, dict) else None
        if stack:
            return str(stack).rstrip()
        return str(message.get("message", "")).rstrip()
    if isinstance(message, str) and message:
        return message.rstrip()
    if stderr_file and os.path.isfile(stderr_file):
        with open(stderr_file, errors="replace") as f:
            lines = f.read().splitlines()
        if lines:
            shown = lines[-_STDERR_TAIL_LINES:]
            head = "" if len(shown) == len(lines) else f"(last {len(shown)} of {len(lines)} lines)\n"
            return head + "\n".join(shown)
    return "(the worker wrote nothing to stderr)"


def _describe_exit(exitcode: int) -> str:
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"killed by {name}"
    return f"exit code {exitcode}"


def _failure_report(failures: list[tuple[int, Any]], stderr_files: Mapping[int, str], spec: JobSpec,
                    elapsed: float, log_dir: str) -> str:
    rank, first = failures[0]
    restarts = f" after {spec.max_restarts} restart(s)" if spec.max_restarts else ""
    lines = [
        f"mxtorch launch: worker rank {rank} failed ({_describe_exit(first.exitcode)}, local rank "
        f"{first.local_rank}, pid {first.pid}) after {elapsed:.1f} s{restarts}; the other workers were "
        "stopped.",
        f"---- rank {rank} ----",
        _traceback_of(first, stderr_files.get(first.local_rank)),
        "----",
    ]
    for other_rank, f in failures[1:]:
        if _killed_by_launcher(f.exitcode):
            lines.append(f"rank {other_rank}: stopped by the launcher ({_describe_exit(f.exitcode)})")
        else:
            last = _traceback_of(f, stderr_files.get(f.local_rank)).splitlines()[-1:]
            lines.append(f"rank {other_rank} also failed ({_describe_exit(f.exitcode)}): "
                         f"{last[0] if last else ''}")
    lines.append(f"worker logs: {log_dir}")
    return "\n".join(lines)
