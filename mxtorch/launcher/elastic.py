"""``mxtorch launch --elastic MIN:MAX -n N``: an allreduce job that survives losing and gaining workers.

The launcher hosts the job's rendezvous store (a ``TCPStore`` on ``master_addr``), writes the
job's settings into it, and starts N agents (:mod:`mxtorch.launcher.elastic_agent`), each in its own
session: one torch elastic agent with one worker, i.e. one "host".  Killing an agent's process
group is losing that host; the others re-form the group at the next rendezvous round and their
workers restart at the new world size (``mxtorch train`` resumes from its newest checkpoint).
``mxtorch launch --join HOST:PORT`` starts one more agent (here or on another machine that
reaches the store): the running agents restart their workers so that it is admitted.

The job's exit status is 0 when an agent finished it; agents lost on the way are reported.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import IO, Any

from .job import JobSpec, LaunchError, resolve_command
from .local import EXIT_TIMEOUT

__all__ = ["ElasticSettings", "check_elastic", "launch_elastic", "join_elastic", "agent_command"]

DEFAULT_MAX_RESTARTS = 10
"""Worker restarts each agent allows when ``--max-restarts`` is not given (every membership change
after a failure uses one; a worker joining does not)."""


@dataclasses.dataclass
class ElasticSettings:
    min_workers: int
    max_workers: int
    rendezvous_timeout: float = 600.0


def check_elastic(text: str, spec: JobSpec, rendezvous_timeout: float | None = None) -> ElasticSettings:
    """Parse ``--elastic MIN:MAX`` against ``-n``; :class:`LaunchError` saying what is wrong."""
    from ..elastic.env import parse_range

    mn, mx = parse_range(text)
    n = spec.num_workers
    if mn > n:
        raise LaunchError(f"--elastic {text} with -n {n}: the job starts with {n} worker(s) but needs at "
                          f"least MIN={mn} to run; start at least {mn} (-n {mn}) or lower MIN")
    if n > mx:
        raise LaunchError(f"--elastic {text} with -n {n}: more workers than MAX={mx}; use -n {mx} or "
                          "raise MAX")
    if spec.num_servers:
        raise LaunchError(f"--elastic with -s {spec.num_servers}: this launcher runs elastic allreduce jobs; "
                          "an elastic parameter-server job runs on this machine (mxtorch launch --elastic "
                          "MIN:MAX -n N -s K --launcher local)")
    timeout = 600.0 if rendezvous_timeout is None else float(rendezvous_timeout)
    if not timeout > 0:
        raise LaunchError(f"--rendezvous-timeout must be a number of seconds > 0, got {rendezvous_timeout!r}")
    return ElasticSettings(mn, mx, timeout)


def agent_command(endpoint: str, name: str, python: str = sys.executable,
                  local_addr: str | None = None) -> list[str]:
    cmd = [python, "-m", "mxtorch.launcher.elastic_agent", "--endpoint", endpoint, "--name", name]
    return [*cmd, "--local-addr", local_addr] if local_addr else cmd


def host_store(addr: str, port: int | None) -> Any:
    """A TCPStore server on ``addr`` (``port`` None: a free one), the rendezvous of the job."""
    from torch.distributed import TCPStore

    try:
        return TCPStore(addr, port or 0, is_master=True, wait_for_workers=False,
                        timeout=timedelta(seconds=60))
    except (RuntimeError, OSError) as e:
        raise LaunchError(f"cannot host the rendezvous store on {addr}:{port}: {e}") from None


def job_description(spec: JobSpec, settings: ElasticSettings, run_id: str) -> Any:
    from ..elastic.env import ElasticJob

    env = {**spec.env, **spec.worker_env}
    return ElasticJob(run_id=run_id, min_workers=settings.min_workers, max_workers=settings.max_workers,
                      command=resolve_command(spec.command), env=env,
                      max_restarts=spec.max_restarts or DEFAULT_MAX_RESTARTS,
                      rendezvous_timeout=settings.rendezvous_timeout, start_workers=spec.num_workers)


def _describe(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"


def _stop(procs: dict[str, subprocess.Popen[Any]], grace: float = 5.0) -> None:
    for p in procs.values():
        if p.poll() is None:
            _killpg(p, signal.SIGTERM)
    end = time.monotonic() + grace
    for p in procs.values():
        try:
            p.wait(max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _killpg(p, signal.SIGKILL)
            p.wait()


def _killpg(p: subprocess.Popen[Any], sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def supervise(procs: dict[str, subprocess.Popen[Any]], timeout: float | None, out: IO[str],
              on_lost: Callable[[str, int], None] | None = None) -> int:
    """Wait for the agents; 0 when one finished the job, else the first failure's status."""
    start = time.monotonic()
    results: dict[str, int] = {}
    try:
        while len(results) < len(procs):
            for name, p in procs.items():
                rc = p.poll()
                if rc is None or name in results:
                    continue
                results[name] = rc
                if rc != 0 and len(results) < len(procs):
                    print(f"mxtorch launch: agent {name} (pid {p.pid}) ended ({_describe(rc)}); the job "
                          "goes on with the other agents", file=out, flush=True)
                    if on_lost is not None:
                        on_lost(name, rc)
            if timeout is not None and time.monotonic() - start > timeout:
                print(f"mxtorch launch: the job did not finish within {timeout:g} s; all agents were stopped",
                      file=out, flush=True)
                _stop(procs)
                return EXIT_TIMEOUT
            time.sleep(0.2)
    except KeyboardInterrupt:
        print("mxtorch launch: interrupted; all agents were stopped", file=out, flush=True)
        _stop(procs)
        return 130
    # in the agents' order, not the order they ended in (which varies from run to run)
    finished = [n for n in procs if results[n] == 0]
    lost = [f"{n} ({_describe(results[n])})" for n in procs if results[n] != 0]
    if finished:
        print(f"mxtorch launch: elastic job finished on agent(s) {', '.join(finished)}"
              + (f"; lost on the way: {', '.join(lost)}" if lost else ""), file=out, flush=True)
        return 0
    first = min(results.values(), key=lambda rc: (rc < 0, 0))
    print(f"mxtorch launch: elastic job failed: {', '.join(lost)}", file=out, flush=True)
    return first if first > 0 else 128 - first


def launch_elastic(spec: JobSpec, settings: ElasticSettings, *, master_addr: str = "127.0.0.1",
                   dry_run: bool = False, report: IO[str] | None = None,
                   place: Callable[[int, list[str]], list[str]] | None = None,
                   names: Sequence[str] | None = None,
                   local_addrs: Sequence[str | None] | None = None) -> int:
    """Host the rendezvous store and run ``spec.num_workers`` agents; returns the job's exit status.

    ``place(i, argv)`` wraps agent ``i``'s command line (the cluster launcher runs it in a host's
    namespace); ``names`` are the agents' names (default ``a0``, ``a1``, ...)."""
    out = report if report is not None else sys.stderr
    n = spec.num_workers
    names = list(names) if names is not None else [f"a{i}" for i in range(n)]
    addrs = list(local_addrs) if local_addrs is not None else [None] * n
    run_id = f"mxtorch-elastic-{uuid.uuid4().hex[:12]}"
    job = job_description(spec, settings, run_id)
    if dry_run:
        port = spec.master_port or 29400
        endpoint = f"{master_addr}:{port}"
        print(f"# rendezvous store on {endpoint} (hosted by mxtorch launch), job: {job.to_json().decode()}")
        for i in range(n):
            argv = agent_command(endpoint, names[i], local_addr=addrs[i])
            print(shlex.join(place(i, argv) if place else argv))
        return 0
    store = host_store(master_addr, spec.master_port)
    endpoint = f"{master_addr}:{store.port}"
    from ..elastic.env import JOB_KEY

    store.set(JOB_KEY, job.to_json())
    print(f"mxtorch launch: elastic job {run_id}: {n} worker(s), {settings.min_workers} to "
          f"{settings.max_workers}; rendezvous {endpoint}; add a worker with: "
          f"mxtorch launch --join {endpoint}", file=out, flush=True)
    procs: dict[str, subprocess.Popen[Any]] = {}
    try:
        for i in range(n):
            argv = agent_command(endpoint, names[i], local_addr=addrs[i])
            procs[names[i]] = subprocess.Popen(place(i, argv) if place else argv, start_new_session=True)
        return supervise(procs, spec.timeout, out)
    finally:
        _stop(procs)
        del store


def join_elastic(endpoint: str, name: str | None = None, local_addr: str | None = None) -> int:
    """Run one more agent of the elastic job at ``endpoint`` in this process; its exit status."""
    from .elastic_agent import run_agent

    return run_agent(endpoint, name, local_addr)
