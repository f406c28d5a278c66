"""The two jobs bench/soak.py runs on the emulated cluster, undisturbed and under faults.

* :class:`ElasticHorovodJob`: ``mxtorch launch --launcher cluster --elastic 2:H -n H`` running
  ``mxtorch train --kvstore horovod`` with a checkpoint every few steps, one worker per host;
  a killed worker makes the agents restart the workers, which resume from the newest checkpoint.
* :class:`DistSyncJob`: ``mxtorch train --kvstore dist_sync`` on two worker hosts, with a
  scheduler and two servers (:class:`mxtorch.cluster.testing.ParameterServerNodes`) that write
  a snapshot every PS_SNAPSHOT_EVERY updates and a write-ahead log of every update between them;
  a killed server is started again at once and restores both (it resumes where it was killed).

Each worker runs through ``bench/soak.py --train-worker``, which counts the training steps
its process completes in a file per process (``<host>-<pid>.steps``, one line a step), so the
soak sees progress and how many steps were done again after restarts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import mxtorch as mx
from mxtorch.cluster import Cluster
from mxtorch.cluster.testing import HostJob, ParameterServerNodes

__all__ = ["JobResult", "ElasticHorovodJob", "DistSyncJob", "JOB_TYPES", "FAULTS_OF", "count_steps",
           "train_worker"]

SOAK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak.py")
DATA_ROOT = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT
JOB_TYPES = ("horovod", "dist_sync")
FAULTS_OF = {"horovod": ("worker-kill", "partition", "cpu-hog"),
             "dist_sync": ("server-kill", "partition", "hostile", "cpu-hog")}
"""The faults each job is soaked with (a hostile sender needs the parameter server's ports)."""
PS_SERVER_PORT = 29600  # every server binds it on its own host, so the hostile sender knows where
PS_SNAPSHOT_EVERY = 50
"""dist_sync servers snapshot once every key slice completed this many more rounds (steps); the
write-ahead log holds the updates between snapshots, so a server killed mid-step loses none."""


@dataclass
class JobResult:
    """How one run of a job ended."""

    ok: bool
    error: str
    accuracy: float | None
    params: dict[str, Any] | None
    steps: int
    false_deaths: list[str] = field(default_factory=list)
    log_tail: str = ""


def count_steps(folder: str) -> dict[str, int]:
    """Training steps completed per host, summed over every process that ran there."""
    out: dict[str, int] = {}
    if not os.path.isdir(folder):
        return out
    for name in os.listdir(folder):
        if name.endswith(".steps"):
            host = name.rsplit("-", 1)[0]
            out[host] = out.get(host, 0) + os.path.getsize(os.path.join(folder, name)) // 2
    return out


def train_worker(spec: dict[str, Any]) -> int:
    """``mxtorch train`` in this process, appending a line to this process's steps file after each
    completed ``Trainer.step`` (a bench's instrumentation: mxtorch train logs no per-step line)."""
    import faulthandler

    from mxtorch.cli.main import main
    from mxtorch.gluon import Trainer

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the soak asks for stacks when a job stalls
    host = os.environ.get("MXTORCH_CLUSTER_HOST", "local")
    fd = os.open(os.path.join(spec["steps_dir"], f"{host}-{os.getpid()}.steps"),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    original = Trainer.step

    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        os.write(fd, b"s\n")
        return out

    Trainer.step = step  # type: ignore[method-assign]
    return main(["train", *spec["argv"]])


def _train_args(kvstore: str, epochs: int, seed: int, out: str, extra: list[str]) -> list[str]:
    return ["--data-root", DATA_ROOT, "--model", "mlp", "--epochs", str(epochs), "--batch-size", "64",
            "--kvstore", kvstore, "--no-progress", "--threads", "1", "--seed", str(seed), "--output", out,
            *extra]


def _worker_argv(steps_dir: str, argv: list[str]) -> list[str]:
    return ["python", SOAK, "--train-worker", json.dumps({"steps_dir": steps_dir, "argv": argv})]


def _read_result(out: str) -> tuple[float | None, dict[str, Any] | None]:
    try:
        with open(os.path.join(out, "metrics.json")) as f:
            acc = json.load(f).get("final_test_acc")
        params = mx.nd.load(os.path.join(out, "model.params"))
    except (OSError, ValueError, KeyError):
        return None, None
    return (float(acc) if acc is not None else None), dict(params)


def _tail(text: str, n: int = 8000) -> str:
    return text[-n:]


class ElasticHorovodJob:
    """``mxtorch train --kvstore horovod`` as an elastic job over every host of ``cluster``."""

    kind = "horovod"

    def __init__(self, cluster: Cluster, folder: str, *, epochs: int, seed: int, timeout: float) -> None:
        self.cluster, self.folder = cluster, folder
        self.steps_dir = os.path.join(folder, "steps")
        self.out = os.path.join(folder, "out")
        os.makedirs(self.steps_dir)
        self.hosts = [h.name for h in cluster.hosts]
        n = len(self.hosts)
        train = _train_args("horovod", epochs, seed, self.out,
                            ["--checkpoint-dir", os.path.join(folder, "ckpt"), "--checkpoint-every", "10"])
        argv = [sys.executable, "-m", "mxtorch.cli.main", "launch", "--launcher", "cluster", "--cluster",
                cluster.name, "--elastic", f"2:{n}", "-n", str(n), "--rendezvous-timeout", "120",
                "--timeout", str(int(timeout)), *_worker_argv(self.steps_dir, train)]
        self.log_path = os.path.join(folder, "launch.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def steps(self) -> int:
        return max(count_steps(self.steps_dir).values(), default=0)

    def running(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def worker_pids(self, host: str) -> list[int]:
        """The training worker processes now running in ``host`` (not its elastic agent)."""
        from mxtorch.cluster.netns import netns_pids

        pids = []
        for pid in netns_pids(self.cluster.host(host).netns):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"--train-worker" in cmd and b"elastic_agent" not in cmd and b"elastic.agent" not in cmd:
                pids.append(pid)
        return pids

    def dump_stacks(self) -> None:
        """Every training worker prints its threads' Python stacks (to the launcher's log)."""
        for h in self.hosts:
            for pid in self.worker_pids(h):
                _signal(pid, signal.SIGUSR1)

    def false_deaths(self) -> list[str]:
        """Hosts the agents dropped from the job (the soak kills workers, never an agent)."""
        text = self.log()
        found = [f"membership lost {m.group(1)}" for m in re.finditer(r"left: ([^;)]+)", text)]
        found += [f"agent lost: {m.group(1)}" for m in re.finditer(r"lost on the way: ([^\n]+)", text)]
        return found

    def finish(self, timeout: float) -> JobResult:
        try:
            rc = self.proc.wait(timeout)
            error = "" if rc == 0 else f"the launcher exited with code {rc}"
        except subprocess.TimeoutExpired:
            self.stop()
            error = f"still running after {timeout:.0f} s: stopped"
        self._log.close()
        acc, params = _read_result(self.out)
        if not error and acc is None:
            error = "no metrics.json / model.params"
        return JobResult(not error, error, acc, params, self.steps(), self.false_deaths(),
                         "" if not error else _tail(self.log()))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for h in self.hosts:  # agents and workers the launcher could not stop
            for pid in self.worker_pids(h):
                _kill(pid)
        if not self._log.closed:
            self._log.close()


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _kill(pid: int) -> None:
    _signal(pid, signal.SIGKILL)


class DistSyncJob:
    """``mxtorch train --kvstore dist_sync``: 2 workers (h0, h1), 2 servers (h1, last host), the
    scheduler on the last host; servers snapshot every PS_SNAPSHOT_EVERY updates and log every update."""

    kind = "dist_sync"
    workers = 2

    def __init__(self, cluster: Cluster, folder: str, *, epochs: int, seed: int, timeout: float,
                 dead_s: float | None) -> None:
        self.cluster, self.folder = cluster, folder
        self.steps_dir = os.path.join(folder, "steps")
        self.out = os.path.join(folder, "out")
        os.makedirs(self.steps_dir)
        last = cluster.hosts[-1].name
        self.worker_hosts = [cluster.hosts[0].name, cluster.hosts[1].name]
        self.server_hosts = [cluster.hosts[1].name, last]
        self.scheduler_host = last
        self.env = {"MXTORCH_PS_SNAPSHOT_DIR": os.path.join(folder, "snapshots"),
                    "MXTORCH_PS_SNAPSHOT_EVERY": str(PS_SNAPSHOT_EVERY),
                    "MXTORCH_PS_PORT": str(PS_SERVER_PORT), "MXTORCH_DIST_TIMEOUT": str(int(timeout))}
        if dead_s is not None:
            self.env["MXTORCH_PS_DEAD_S"] = f"{dead_s:g}"
        # the nodes make the job's MXTORCH_PS_SECRET (in worker_env): hostile packets do not know it
        self.nodes = ParameterServerNodes(cluster, self.workers, len(self.server_hosts),
                                          scheduler_host=self.scheduler_host, server_hosts=self.server_hosts,
                                          env=self.env)
        argv = _worker_argv(self.steps_dir, _train_args("dist_sync", epochs, seed, self.out, []))
        argv[0] = sys.executable
        try:
            self.job = HostJob(cluster, argv, self.workers, hosts=self.worker_hosts,
                               env={**self.nodes.worker_env(), **self.env})
        except BaseException:
            self.nodes.close()
            raise

    def steps(self) -> int:
        return max(count_steps(self.steps_dir).values(), default=0)

    def running(self) -> bool:
        return any(p.poll() is None for p in self.job.procs)

    def targets(self) -> list[tuple[str, str, int]]:
        """(name, address, port) of the scheduler and of every server: where hostile packets go."""
        from mxtorch.cluster.testing import DEFAULT_PS_ROOT_PORT

        out = [("scheduler", self.cluster.host(self.scheduler_host).address, DEFAULT_PS_ROOT_PORT)]
        out += [(f"server{r}", self.cluster.host(h).address, PS_SERVER_PORT)
                for r, h in enumerate(self.server_hosts)]
        return out

    def restart_server(self, rank: int) -> None:
        """SIGKILL server ``rank`` and start it again at once (it restores its snapshot and log)."""
        self.nodes.kill_server(rank)
        self.nodes.start_server(rank)

    def dump_stacks(self) -> None:
        """Every worker prints its threads' Python stacks to its stderr."""
        for p in self.job.procs:
            if p.poll() is None:
                _signal(p.pid, signal.SIGUSR1)

    def node_alive(self, name: str) -> bool:
        return self.nodes.procs[name].poll() is None

    def false_deaths(self) -> list[str]:
        """Nodes the scheduler declared dead (the soak kills only servers, and starts them again)."""
        text = self.nodes.output("scheduler")
        return [m.group(1) for m in re.finditer(r"mxtorch ps scheduler: ([^\n]*): declared dead\n", text)]

    def log(self) -> str:
        parts = [f"--- worker {r} ---\n" + "".join(self.job.output(r))[-6000:] for r in range(self.workers)]
        parts += [f"--- {n} ---\n" + self.nodes.output(n)[-2000:] for n in self.nodes.procs]
        return "\n".join(parts)

    def finish(self, timeout: float) -> JobResult:
        deadline = time.monotonic() + timeout
        error = ""
        for p in self.job.procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                error = f"still running after {timeout:.0f} s: stopped"
        if error:
            self.job.kill()
        codes = [p.returncode for p in self.job.procs]
        nodes = self.nodes.wait(40)
        if not error and any(c != 0 for c in codes):
            error = f"worker exit codes {codes}"
        if not error and any(c != 0 for c in nodes.values()):
            error = f"scheduler/server exit codes {nodes}"
        deaths, log = self.false_deaths(), self.log()
        acc, params = _read_result(self.out)
        if not error and acc is None:
            error = "no metrics.json / model.params"
        return JobResult(not error, error, acc, params, self.steps(), deaths, "" if not error else log)

    def stop(self) -> None:
        self.job.close()
        self.nodes.close()
