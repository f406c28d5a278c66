"""Run the ranks of a job on the hosts of an emulated cluster (tests and benchmarks).

:class:`HostJob` starts one process per rank, each inside its host, with the variables a
launcher sets (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` = the first rank's host address,
...) plus the host's interface variables, and keeps each rank's output in a file so a test
can wait for a line ("step 3") and then inject a fault at that moment::

    job = HostJob(cluster, [sys.executable, "train.py"], world_size=2)
    job.wait_for_output(0, "step 3", timeout=60)
    cluster.link_down("h1")
    results = job.wait(timeout=60)       # [(returncode, stdout, stderr), ...]

:class:`ParameterServerNodes` starts the scheduler and the servers of a ``dist_sync`` /
``dist_async`` job on chosen hosts (``python -m mxtorch.kvstore.ps``); its
:meth:`~ParameterServerNodes.worker_env` goes into the workers' ``HostJob``, and a server can
be killed and started again (same ``DMLC_SERVER_ID``, same host) to test snapshot recovery.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from .._closing import Closing
from ..distributed import env as _env
from ..distributed.testing import WorkerTimeout
from .cluster import Cluster, Host
from .errors import ClusterError

__all__ = ["HostJob", "ParameterServerNodes", "rank_placement", "DEFAULT_PORT", "DEFAULT_PS_ROOT_PORT"]

DEFAULT_PORT = 29500
"""Rendezvous port on the first rank's host: every host has its own ports, so it is always free."""

DEFAULT_PS_ROOT_PORT = 29501
"""The scheduler's port on its host."""

_TAIL = 6000


def rank_placement(cluster: Cluster, world_size: int,
                   hosts: Sequence[str | int] | None = None) -> list[Host]:
    """Where each rank runs: ``hosts[r]`` when given, else rank ``r`` on host ``r % len(cluster.hosts)``."""
    if hosts is not None:
        if len(hosts) != world_size:
            raise ClusterError(f"{len(hosts)} hosts given for {world_size} ranks: give one host per rank")
        return [cluster.host(h) for h in hosts]
    return [cluster.hosts[r % len(cluster.hosts)] for r in range(world_size)]


def _close_logs(files: Sequence[IO[Any]], folder: str) -> None:
    """Close the log files of a job and remove their folder."""
    for f in files:
        f.close()
    shutil.rmtree(folder)


class HostJob(Closing):
    """``argv`` running as ``world_size`` ranks on the cluster's hosts (see the module docstring).

    ``env`` is added to every rank (None values remove a variable); ``port`` is the
    rendezvous port on rank 0's host.  Ranks on one host get consecutive local ranks.
    """

    def __init__(self, cluster: Cluster, argv: Sequence[str], world_size: int, *,
                 hosts: Sequence[str | int] | None = None, env: Mapping[str, str | None] | None = None,
                 port: int = DEFAULT_PORT) -> None:
        self.cluster = cluster
        self.placement = rank_placement(cluster, world_size, hosts)
        self._dir = tempfile.mkdtemp(prefix="mxtorch-hostjob-")
        self._files: list[tuple[IO[str], IO[str]]] = []
        self.procs: list[subprocess.Popen[Any]] = []
        master = self.placement[0].address
        local_sizes = {h.name: sum(1 for p in self.placement if p.name == h.name) for h in self.placement}
        seen: dict[str, int] = {}
        try:
            for r, host in enumerate(self.placement):
                local = seen.get(host.name, 0)
                seen[host.name] = local + 1
                variables: dict[str, str | None] = {
                    _env.RANK: str(r), _env.WORLD_SIZE: str(world_size), _env.LOCAL_RANK: str(local),
                    _env.LOCAL_WORLD_SIZE: str(local_sizes[host.name]), _env.MASTER_ADDR: master,
                    _env.MASTER_PORT: str(port), "OMP_NUM_THREADS": "1",
                }
                variables.update(env or {})
                out = open(os.path.join(self._dir, f"rank{r}.out"), "w+")
                err = open(os.path.join(self._dir, f"rank{r}.err"), "w+")
                self._files.append((out, err))
                self.procs.append(cluster.popen(host, argv, env=variables, stdout=out, stderr=err,
                                                stdin=subprocess.DEVNULL))
        except BaseException:
            self.kill()
            self.close()
            raise

    def output(self, rank: int) -> tuple[str, str]:
        """What rank ``rank`` has written so far: (stdout, stderr)."""
        out, err = self._files[rank]
        with open(out.name, errors="replace") as o, open(err.name, errors="replace") as e:
            return o.read(), e.read()

    def wait_for_output(self, rank: int, text: str, timeout: float, poll_s: float = 0.1) -> None:
        """Wait until ``text`` appears in the rank's stdout; raise if it exits or time runs out first."""
        deadline = time.monotonic() + timeout
        while True:
            out, err = self.output(rank)
            if text in out:
                return
            code = self.procs[rank].poll()
            if code is not None:
                raise ClusterError(f"rank {rank} exited with code {code} before printing {text!r}; stderr:\n"
                                   f"{err[-_TAIL:]}")
            if time.monotonic() > deadline:
                raise WorkerTimeout([rank], timeout, {rank: (out + err)[-_TAIL:]})
            time.sleep(poll_s)

    def wait(self, timeout: float) -> list[tuple[int, str, str]]:
        """Wait for every rank; returns ``(returncode, stdout, stderr)`` each, whatever the codes.

        Raises :class:`~mxtorch.distributed.testing.WorkerTimeout` (after killing every rank)
        when one still runs after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        stuck = [r for r, p in enumerate(self.procs) if p.poll() is None]
        if stuck:
            self.kill()
            raise WorkerTimeout(stuck, timeout, {r: "".join(self.output(r))[-_TAIL:] for r in stuck})
        return [(int(p.returncode), *self.output(r)) for r, p in enumerate(self.procs)]

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()

    def close(self) -> None:
        """Kill what still runs and remove the output files."""
        self.kill()
        _close_logs([f for pair in self._files for f in pair], self._dir)


class ParameterServerNodes(Closing):
    """The scheduler and ``num_servers`` servers of a parameter-server job, each in a cluster host.

    ``scheduler_host`` and ``server_hosts`` (one per server) choose the hosts; ``env`` goes to
    every node (e.g. ``MXTORCH_PS_SNAPSHOT_DIR``).  Workers are started separately, with
    :meth:`worker_env` in their environment (which holds the job's fresh ``MXTORCH_PS_SECRET``,
    as a launcher's job would, unless ``env`` gives one or None).  Each node's output is kept in a file
    (:meth:`output`); :meth:`close` kills whatever still runs.
    """

    def __init__(self, cluster: Cluster, num_workers: int, num_servers: int, *, scheduler_host: str | int,
                 server_hosts: Sequence[str | int], env: Mapping[str, str | None] | None = None,
                 root_port: int = DEFAULT_PS_ROOT_PORT) -> None:
        if len(server_hosts) != num_servers:
            raise ClusterError(f"{len(server_hosts)} server hosts given for {num_servers} servers: "
                               "give one each")
        self.cluster = cluster
        self.scheduler_host = cluster.host(scheduler_host)
        self.server_hosts = [cluster.host(h) for h in server_hosts]
        self.num_workers, self.num_servers = num_workers, num_servers
        self.root_port = root_port
        self.env = dict(env or {})
        # None in env: a job without a secret (as one started by hand)
        self.secret = self.env.get(_env.MXTORCH_PS_SECRET, secrets.token_hex(32))
        self._dir = tempfile.mkdtemp(prefix="mxtorch-psnodes-")
        self.procs: dict[str, subprocess.Popen[Any]] = {}
        self._files: list[IO[str]] = []
        try:
            self._start("scheduler", self.scheduler_host, {_env.DMLC_ROLE: "scheduler"})
            for i in range(num_servers):
                self.start_server(i)
        except BaseException:
            self.close()
            raise

    def worker_env(self) -> dict[str, str]:
        """The ``DMLC_*`` variables of this job's workers (``DMLC_WORKER_ID`` comes from ``RANK``)."""
        return {
            _env.DMLC_ROLE: "worker",
            _env.DMLC_PS_ROOT_URI: self.scheduler_host.address,
            _env.DMLC_PS_ROOT_PORT: str(self.root_port),
            _env.DMLC_NUM_SERVER: str(self.num_servers),
            _env.DMLC_NUM_WORKER: str(self.num_workers),
            **({_env.MXTORCH_PS_SECRET: self.secret} if self.secret else {}),
        }

    def start_server(self, rank: int) -> None:
        """Start server ``rank`` on its host (again, after it was killed: it rejoins with its snapshot)."""
        from ..distributed.env import DMLC_NODE_HOST, DMLC_SERVER_ID

        host = self.server_hosts[rank]
        self._start(f"server{rank}", host, {_env.DMLC_ROLE: "server", DMLC_SERVER_ID: str(rank),
                                            DMLC_NODE_HOST: host.address})

    def _start(self, name: str, host: Host, role_env: Mapping[str, str]) -> None:
        old = self.procs.get(name)
        if old is not None and old.poll() is None:
            raise ClusterError(f"the {name} is still running (pid {old.pid}): kill it first")
        variables: dict[str, str | None] = {**self.worker_env(), **role_env, "OMP_NUM_THREADS": "1"}
        variables.update(self.env)
        log = open(os.path.join(self._dir, f"{name}.log"), "a+")
        self._files.append(log)
        self.procs[name] = self.cluster.popen(host, [sys.executable, "-m", "mxtorch.kvstore.ps"],
                                              env=variables, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL)

    def kill_server(self, rank: int) -> None:
        """SIGKILL server ``rank`` (only that process, not its host) and reap it."""
        p = self.procs[f"server{rank}"]
        if p.poll() is None:
            p.kill()
        p.wait()

    def output(self, name: str) -> str:
        """Everything ``'scheduler'`` or ``'server<R>'`` has written (all its starts)."""
        with open(os.path.join(self._dir, f"{name}.log"), errors="replace") as f:
            return f.read()

    def wait(self, timeout: float) -> dict[str, int | None]:
        """Wait up to ``timeout`` s for every node to exit; returns exit codes (None: still running)."""
        deadline = time.monotonic() + timeout
        for p in self.procs.values():
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        return {name: p.poll() for name, p in self.procs.items()}

    def close(self) -> None:
        """Kill what still runs and remove the logs."""
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        _close_logs(self._files, self._dir)
