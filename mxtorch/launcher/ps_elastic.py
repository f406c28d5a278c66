"""Elastic parameter-server jobs on this machine: ``mxtorch launch --elastic MIN:MAX -n N -s K``.

The launcher starts a scheduler, ``K`` servers and ``N`` workers, every one with
``MXTORCH_PS_ELASTIC=1`` (:mod:`mxtorch.kvstore.ps.membership`), and then watches them:

* a **server** that ends while the job runs (killed, crashed) is started again with its
  ``DMLC_SERVER_ID``; it restores its snapshot and write-ahead log (the servers get a
  ``MXTORCH_PS_SNAPSHOT_DIR``: the user's, else a folder of the launcher's, removed at the end)
  while the workers wait, at most :data:`SERVER_RESTARTS` times per server;
* a **worker** that fails (non-zero exit, killed) leaves the job -- the others go on -- and a
  replacement is started while fewer than ``MAX`` workers run (it joins with a new rank), at most
  ``MAX`` replacements in the job's life; a worker that exits 0 has finished its part;
* the job fails when fewer than ``MIN`` workers run and no replacement may be started, or when
  the scheduler fails.

The job ends when the scheduler does (once every worker has finished or left): exit status 0
when it ended normally and every failed worker was replaced, else 1 (or the scheduler's).  A
worker can also join by hand: start the script with the job's ``DMLC_*`` variables (without
``DMLC_WORKER_ID``), ``MXTORCH_PS_ELASTIC=1`` and the job's ``MXTORCH_PS_SECRET``.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import IO

from ..distributed.env import (
    DMLC_NODE_HOST,
    DMLC_PS_ROOT_PORT,
    DMLC_WORKER_ID,
    MXTORCH_PS_ELASTIC,
    MXTORCH_PS_SNAPSHOT_DIR,
    RANK,
)
from .job import JobSpec, LaunchError, resolve_command, worker_environment
from .ps import PS_EXIT_GRACE_S, PSRole, _free_port, _Node, check_available, ps_roles
from .secret import job_secret, secret_environment

__all__ = ["launch_elastic_ps", "SERVER_RESTARTS"]

SERVER_RESTARTS = 5
"""How many times the launcher starts one server again in a job's life."""

_POLL_S = 0.1


def _say(out: IO[str], text: str) -> None:
    print(f"mxtorch launch: {text}", file=out, flush=True)


class _Job:
    """The processes of one elastic parameter-server job and the rules that keep it going."""

    def __init__(self, spec: JobSpec, lo: int, hi: int, roles: list[PSRole], worker_env: dict[str, str],
                 base: Mapping[str, str], log_dir: str, out: IO[str]) -> None:
        self.spec, self.lo, self.hi, self.out = spec, lo, hi, out
        self.base, self.log_dir, self.worker_env = base, log_dir, worker_env
        self.command = resolve_command(spec.command)
        self.nodes: list[_Node] = []
        self.server_restarts = [0] * spec.num_servers
        self.replacements = 0
        self.unreplaced = 0
        self.workers: list[_Node] = []
        self.finished: set[int] = set()  # worker slots that ended (and were handled)
        for r in roles:
            self.nodes.append(self._start(r))
        for _ in range(spec.num_workers):
            self._start_worker(initial=True)

    def _start(self, role: PSRole) -> _Node:
        return _Node(role, {**self.base, **role.env}, self.log_dir, sys.stdout, sys.stderr)

    def _start_worker(self, initial: bool) -> None:
        slot = len(self.workers)
        env = dict(self.worker_env)
        if initial:
            env[DMLC_WORKER_ID] = str(slot)
        self.workers.append(self._start(PSRole("worker", slot, self.command, env)))

    @property
    def scheduler(self) -> _Node:
        return self.nodes[0]

    def running_workers(self) -> int:
        return sum(1 for w in self.workers if w.poll() is None)

    def step(self) -> int | None:
        """Look at every process once; the job's exit status once it is over, else None."""
        code = self.scheduler.poll()
        if code is not None:
            return code
        for node in self.nodes[1:]:
            if node.poll() not in (None, 0):  # 0: the scheduler stopped it (the job is ending)
                self._restart_server(node)
        for slot, w in enumerate(self.workers):
            if slot in self.finished or w.poll() is None:
                continue
            self.finished.add(slot)
            if w.proc.returncode != 0:
                self._replace(w)
        return None

    def _restart_server(self, node: _Node) -> None:
        i = node.role.index
        elapsed = time.monotonic() - node.started
        if self.server_restarts[i] >= SERVER_RESTARTS:
            raise LaunchError(f"the {node.role.name} ended ({node.describe_exit()}) {SERVER_RESTARTS + 1} "
                              f"times; its last stderr:\n{node.stderr_tail()}")
        self.server_restarts[i] += 1
        _say(self.out, f"the {node.role.name} ended ({node.describe_exit()}, pid {node.proc.pid}, after "
                       f"{elapsed:.1f} s); starting it again from its snapshot")
        self.nodes[self.nodes.index(node)] = self._start(node.role)

    def _replace(self, w: _Node) -> None:
        running = self.running_workers()
        if running < self.hi and self.replacements < self.hi:
            self.replacements += 1
            _say(self.out, f"the {w.role.name} failed ({w.describe_exit()}); {running} worker(s) go on, "
                           "a replacement joins the job")
            self._start_worker(initial=False)
            return
        self.unreplaced += 1
        _say(self.out, f"the {w.role.name} failed ({w.describe_exit()}); {running} worker(s) go on")
        if running < self.lo:
            raise LaunchError(f"{running} worker(s) left, fewer than the --elastic minimum {self.lo}, and no "
                              f"replacement may start ({self.replacements} of at most {self.hi} started); "
                              f"the last failure's stderr:\n{w.stderr_tail()}")

    def stop(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for every process to end on its own, then stop the rest."""
        everyone = [*self.nodes, *self.workers]
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(n.poll() is None for n in everyone):
            time.sleep(_POLL_S)
        for n in everyone:
            if n.proc.poll() is None:
                n.stopped = True
                n.proc.terminate()
        for n in everyone:
            try:
                n.proc.wait(5.0)
            except Exception:  # noqa: BLE001  (TimeoutExpired: it ignored SIGTERM)
                n.proc.kill()
                n.proc.wait()
            n.drain()


def launch_elastic_ps(spec: JobSpec, lo: int, hi: int, *, master_addr: str = "127.0.0.1",
                      report: IO[str] | None = None, dry_run: bool = False) -> int:
    """Run ``spec`` (with ``-s K`` servers) as an elastic job of ``lo`` to ``hi`` workers on this
    machine (see the module docstring); returns the job's exit status."""
    out = report if report is not None else sys.stderr
    if not spec.num_servers:
        raise LaunchError("launch_elastic_ps needs parameter servers (-s K)")
    if not 1 <= lo <= spec.num_workers <= hi:
        raise LaunchError(f"--elastic {lo}:{hi} with -n {spec.num_workers}: need 1 <= MIN <= -n <= MAX")
    check_available(spec)
    port = spec.ps_root_port if spec.ps_root_port is not None else _free_port(master_addr)
    snapshots = spec.server_env.get(MXTORCH_PS_SNAPSHOT_DIR) or spec.env.get(MXTORCH_PS_SNAPSHOT_DIR) or \
        os.environ.get(MXTORCH_PS_SNAPSHOT_DIR)
    own_snapshots = None
    if not snapshots:  # a dry run shows where a by-hand job could keep them
        snapshots = os.path.join(tempfile.gettempdir(), "mxtorch-ps-snapshots") if dry_run else \
            tempfile.mkdtemp(prefix="mxtorch-ps-snapshots-")
        own_snapshots = None if dry_run else snapshots
    spec = dataclasses.replace(spec, ps_root_port=port, env={**spec.env, MXTORCH_PS_ELASTIC: "1"},
                               server_env={MXTORCH_PS_SNAPSHOT_DIR: snapshots, **spec.server_env})
    roles = ps_roles(spec, master_addr, port)
    for r in roles:
        if r.role == "server":
            r.env.setdefault(DMLC_NODE_HOST, master_addr)
    worker_env = worker_environment(spec, master_addr, port)
    if not worker_env[DMLC_PS_ROOT_PORT].isdigit():
        raise LaunchError(f"--env {DMLC_PS_ROOT_PORT}:{worker_env[DMLC_PS_ROOT_PORT]}: not a port number")
    if dry_run:
        for r in roles:
            print(shlex.join(["env", *(f"{k}={v}" for k, v in r.env.items()), *r.command]))
        for slot in range(spec.num_workers):
            env = {**worker_env, DMLC_WORKER_ID: str(slot)}
            print(shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *resolve_command(spec.command)]))
        return 0
    base = {k: v for k, v in os.environ.items() if k not in (DMLC_WORKER_ID, RANK)}
    base.update(secret_environment(job_secret(spec)))
    base.setdefault("OMP_NUM_THREADS", "1")  # the processes share this machine's cores
    log_dir = tempfile.mkdtemp(prefix="mxtorch-ps-")
    job: _Job | None = None
    status = 1
    deadline = None if spec.timeout is None else time.monotonic() + spec.timeout
    try:
        job = _Job(spec, lo, hi, roles, worker_env, base, log_dir, out)
        code = None
        while code is None:
            if deadline is not None and time.monotonic() > deadline:
                raise LaunchError(f"the job ran past --timeout {spec.timeout:g} s; stopped")
            time.sleep(_POLL_S)
            code = job.step()
        job.stop(PS_EXIT_GRACE_S)
        if code != 0:
            _say(out, f"the scheduler ended with {job.scheduler.describe_exit()}:\n"
                      f"{job.scheduler.stderr_tail()}")
        status = (code if code > 0 else 1) if code != 0 else int(job.unreplaced > 0)
    except LaunchError as e:
        _say(out, f"error: {e}")
    finally:
        if job is not None:
            job.stop(0.0)  # whatever still runs (an error, an interrupt)
        if status == 0:
            shutil.rmtree(log_dir, ignore_errors=True)
        else:
            _say(out, f"scheduler, server and worker logs: {log_dir}")
        if own_snapshots is not None:
            shutil.rmtree(own_snapshots, ignore_errors=True)
    return status
