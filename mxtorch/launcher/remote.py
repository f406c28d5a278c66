"""Command lines that start a job on several hosts: over ssh, with ``mpirun``, or with ``srun``.

* **ssh** runs torchrun on every host of the hostfile (``--nnodes``, ``--node-rank``,
  ``--master-addr`` = the first host), with the job's environment exported, from the current
  directory (a shared file system is assumed, as MXNet's ssh launcher did).
* **mpi** (Open MPI's ``mpirun``) and **slurm** (``srun``) start every worker themselves;
  each worker runs through the package's entry point (``python -m mxtorch.launcher CMD
  ...``), which turns the rank and size that MPI or Slurm give into torchrun's variables
  (:func:`rank_environment`) and then replaces itself with the command.

A hostfile holds one host per line, optionally with a number of workers for it (``host
slots=4`` or ``host:4``); ``#`` starts a comment.  Hosts without a count take one worker
each, then the workers left over are spread over them in turn; hosts with a count never get
more.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from ..distributed.env import (
    DMLC_PS_ROOT_URI,
    DMLC_ROLE,
    DMLC_WORKER_ID,
    LOCAL_RANK,
    LOCAL_WORLD_SIZE,
    MASTER_ADDR,
    MASTER_PORT,
    MXTORCH_PS_SECRET,
    RANK,
    WORLD_SIZE,
    DistributedConfigError,
    world_info_from_env,
)
from .job import DEFAULT_MASTER_PORT, RESTART_ENV, JobSpec, LaunchError, worker_environment
from .secret import READ_SECRET

__all__ = ["Host", "parse_hostfile", "read_hostfile", "assign_workers", "torchrun_command", "ssh_commands",
           "mpi_command", "slurm_command", "run_commands", "rank_environment", "secret_delivery"]

_HOST_RE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Host:
    """A hostfile entry: ``name`` as ssh takes it (``user@host`` allowed), ``slots`` or ``None``."""

    name: str
    slots: int | None = None

    @property
    def address(self) -> str:
        """The host without its ``user@`` part (what other hosts connect to)."""
        return self.name.rpartition("@")[2]


def parse_hostfile(text: str, source: str = "hostfile") -> list[Host]:
    """Hosts listed in ``text``; errors name ``source`` and the line number."""
    hosts: list[Host] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source} line {number}"
        fields = line.split()
        name, slots_text = fields[0], None
        if ":" in name:
            name, _, slots_text = name.partition(":")
        extra = fields[1:]
        if len(extra) == 1 and extra[0].startswith("slots=") and slots_text is None:
            slots_text = extra[0][len("slots="):]
        elif extra:
            raise LaunchError(f"{where}: {raw.strip()!r}: expected 'HOST', 'HOST slots=K' or 'HOST:K'")
        if not _HOST_RE.match(name):
            raise LaunchError(f"{where}: {name!r} is not a host name (letters, digits, '.', '-', '_', "
                              "optionally 'user@')")
        slots = None
        if slots_text is not None:
            if not slots_text.isdigit() or int(slots_text) < 1:
                raise LaunchError(f"{where}: {raw.strip()!r}: the number of slots must be an integer >= 1, "
                                  f"got {slots_text!r}")
            slots = int(slots_text)
        if name in seen:
            raise LaunchError(f"{where}: host {name!r} is already listed on line {seen[name]}; "
                              "give it once, with slots=K for several workers")
        seen[name] = number
        hosts.append(Host(name, slots))
    if not hosts:
        raise LaunchError(f"{source} lists no hosts (one host per line, '#' for comments)")
    return hosts


def read_hostfile(path: str) -> list[Host]:
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise LaunchError(f"cannot read the hostfile {path!r}: {e.strerror}") from e
    return parse_hostfile(text, source=path)


def assign_workers(hosts: Sequence[Host], num_workers: int) -> list[tuple[Host, int]]:
    """How many workers each host runs, in hostfile order; hosts that get none are left out."""
    counts = [0] * len(hosts)
    left = num_workers
    for i, h in enumerate(hosts):  # first pass: every host up to its slots (1 without a count)
        take = min(left, h.slots or 1)
        counts[i] += take
        left -= take
    open_hosts = [i for i, h in enumerate(hosts) if h.slots is None]
    if left and not open_hosts:
        total = sum(h.slots or 0 for h in hosts)
        raise LaunchError(f"the hostfile offers {total} slots but {num_workers} workers were asked for: "
                          "raise slots=K, add hosts, or lower -n")
    for j in range(left):  # the rest round-robin over hosts without a count
        counts[open_hosts[j % len(open_hosts)]] += 1
    return [(h, c) for h, c in zip(hosts, counts) if c]


def _port(spec: JobSpec) -> int:
    return spec.master_port if spec.master_port is not None else DEFAULT_MASTER_PORT


def _exports(env: Mapping[str, str]) -> str:
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())


def torchrun_command(spec: JobSpec, *, nnodes: int, nproc_per_node: int, node_rank: int, master_addr: str,
                     python: str = sys.executable, run_id: str | None = None) -> list[str]:
    """The torchrun invocation one host runs (``--no-python``: the command is run as given).

    Without restarts: a static rendezvous (``--node-rank``, ``--master-addr``).  With restarts:
    torch's c10d rendezvous, which gives every attempt a fresh store (see :data:`RESTART_ENV`).
    """
    if spec.max_restarts:
        rdzv = ["--rdzv-backend=c10d", f"--rdzv-endpoint={master_addr}:{_port(spec)}",
                f"--rdzv-id={run_id or 'mxtorch-' + uuid.uuid4().hex[:12]}"]
    else:
        rdzv = [f"--node-rank={node_rank}", f"--master-addr={master_addr}", f"--master-port={_port(spec)}"]
    return [python, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc-per-node={nproc_per_node}",
            *rdzv, f"--max-restarts={spec.max_restarts}", "--no-python", *spec.command]


def ssh_commands(spec: JobSpec, hosts: Sequence[Host], *, python: str = sys.executable,
                 workdir: str | None = None, run_id: str | None = None) -> list[list[str]]:
    """One ``ssh`` command per host that runs workers, in node-rank order.

    With servers, the remote shell first reads the job's secret from ssh's stdin
    (:data:`~.secret.READ_SECRET`; :func:`run_commands` ``stdin=`` writes it there).
    """
    placed = assign_workers(hosts, spec.num_workers)
    master = placed[0][0].address
    env = worker_environment(spec, master, _port(spec))
    if spec.max_restarts:
        env.update(RESTART_ENV)
    run_id = run_id or "mxtorch-" + uuid.uuid4().hex[:12]  # one rendezvous id for every host
    cd = f"cd {shlex.quote(workdir or os.getcwd())}"
    if spec.num_servers:
        cd = f"{READ_SECRET} && {cd}"
    commands = []
    for node_rank, (host, n) in enumerate(placed):
        run = torchrun_command(spec, nnodes=len(placed), nproc_per_node=n, node_rank=node_rank,
                               master_addr=master, python=python, run_id=run_id)
        remote = f"{cd} && {_exports(env)} && {shlex.join(run)}"
        commands.append(["ssh", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", host.name, remote])
    return commands


def _no_restarts(spec: JobSpec, launcher: str) -> None:
    if spec.max_restarts:
        raise LaunchError(f"--max-restarts needs torchrun's agent, which the {launcher} launcher does not "
                          "use: use --launcher ssh or local, or --max-restarts 0")


def mpi_command(spec: JobSpec, hosts: Sequence[Host], *, python: str = sys.executable) -> list[str]:
    """An Open MPI ``mpirun`` command starting every worker (``-x NAME=VALUE`` for the environment;
    with servers ``-x MXTORCH_PS_SECRET``, whose value mpirun takes from its own environment)."""
    _no_restarts(spec, "mpi")
    placed = assign_workers(hosts, spec.num_workers)
    env = worker_environment(spec, placed[0][0].address, _port(spec))
    env.update({MASTER_ADDR: placed[0][0].address, MASTER_PORT: str(_port(spec))})
    cmd = ["mpirun", "-np", str(spec.num_workers), "-H", ",".join(f"{h.name}:{n}" for h, n in placed)]
    for k, v in env.items():
        cmd += ["-x", f"{k}={v}"]
    if spec.num_servers:
        cmd += ["-x", MXTORCH_PS_SECRET]
    return [*cmd, python, "-m", "mxtorch.launcher", *spec.command]


def slurm_command(spec: JobSpec, hosts: Sequence[Host] | None = None, *,
                  python: str = sys.executable) -> list[str]:
    """An ``srun`` command starting every worker in the current allocation (or on ``hosts``).

    Rank 0's host, the rendezvous address, is found by each worker from Slurm's node list.
    ``--export=ALL`` also hands the tasks srun's own environment, where the job's secret is.
    """
    _no_restarts(spec, "slurm")
    cmd = ["srun", f"--ntasks={spec.num_workers}"]
    if hosts:
        placed = assign_workers(hosts, spec.num_workers)
        cmd += [f"--nodes={len(placed)}", "--nodelist=" + ",".join(h.address for h, _ in placed)]
    env = worker_environment(spec, "", _port(spec))
    del env[DMLC_PS_ROOT_URI]  # Slurm orders the nodes: the entry point finds rank 0's host
    env[MASTER_PORT] = str(_port(spec))
    bad = [k for k, v in env.items() if "," in v]
    if bad:
        raise LaunchError(f"srun --export cannot carry values with ',' (in {', '.join(bad)}): "
                          "set them in the job script instead")
    cmd += ["--kill-on-bad-exit=1", "--export=ALL," + ",".join(f"{k}={v}" for k, v in env.items())]
    return [*cmd, python, "-m", "mxtorch.launcher", *spec.command]


def run_commands(commands: Sequence[Sequence[str]], *, timeout: float | None = None,
                 report: IO[str] | None = None, poll_s: float = 0.2, env: Mapping[str, str] | None = None,
                 stdin: bytes | None = None) -> int:
    """Run ``commands`` side by side; the first failure (or the time limit) stops the others.

    ``env`` is added to this process's environment for each command; ``stdin`` is written to
    each command's stdin, which is then closed (how ssh commands receive the job's secret).
    Returns 0, the failed command's exit status, or 124 on timeout.
    """
    out = report if report is not None else sys.stderr
    tool = commands[0][0]
    if shutil.which(tool) is None:
        raise LaunchError(f"{tool!r} is not on PATH: install it or use --dry-run to see the commands")
    full = {**os.environ, **env} if env else None
    procs = [_start(c, full, stdin) for c in commands]
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                i, code = failed[0]
                print(f"mxtorch launch: command {i} ({shlex.join(commands[i][:5])} ...) failed with exit "
                      f"code {code}; stopping the others", file=out, flush=True)
                return code if code and code > 0 else 1
            if all(c == 0 for c in codes):
                return 0
            if deadline is not None and time.monotonic() > deadline:
                print(f"mxtorch launch: the job did not finish within {timeout:g} s; stopping it", file=out,
                      flush=True)
                return 124
            time.sleep(poll_s)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def _start(command: Sequence[str], env: Mapping[str, str] | None,
           stdin: bytes | None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(list(command), env=env, stdin=subprocess.PIPE if stdin is not None else None)
    if stdin is not None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except BrokenPipeError:  # it ended at once: run_commands reports its exit status
            pass
    return proc


def secret_delivery(launcher: str, secret: str | None) -> dict[str, Any]:
    """How :func:`run_commands` hands ``secret`` to the commands of ``launcher`` (its keyword
    arguments): ssh reads it from stdin, mpirun and srun from their environment."""
    if secret is None:
        return {}
    if launcher == "ssh":
        return {"stdin": (secret + "\n").encode()}
    return {"env": {MXTORCH_PS_SECRET: secret}}


# ---- the worker entry point for mpirun / srun ---------------------------------------------------
def _first_slurm_host(nodelist: str) -> str:
    """The first host of a Slurm node list such as ``'node[07-09,12],gpu1'`` -> ``'node07'``."""
    first = re.split(r",(?![^\[]*\])", nodelist.strip(), maxsplit=1)[0]
    return re.sub(r"\[([^\],-]+)[^\]]*\]", r"\1", first)


def rank_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """torchrun's variables for a worker that MPI or Slurm started, from theirs (and, for a
    parameter-server job's worker, ``DMLC_WORKER_ID`` = its rank).

    The layout is read by :func:`mxtorch.distributed.env.world_info_from_env`; under Slurm,
    rank 0's host (``MASTER_ADDR``) is the first node of the step.
    """
    env = dict(environ)
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
    if not env.get(MASTER_ADDR) and nodelist:
        env[MASTER_ADDR] = _first_slurm_host(nodelist)
    try:
        info = world_info_from_env(env)
    except DistributedConfigError as e:
        raise LaunchError(str(e)) from e
    if info is None:
        raise LaunchError("python -m mxtorch.launcher runs a worker under mpirun or srun, but none of "
                          "OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID is set")
    out = {RANK: str(info.rank), WORLD_SIZE: str(info.world_size), LOCAL_RANK: str(info.local_rank),
           LOCAL_WORLD_SIZE: str(info.local_size), MASTER_ADDR: info.master_addr}
    if info.master_port is not None:
        out[MASTER_PORT] = str(info.master_port)
    out[DMLC_PS_ROOT_URI] = env.get(DMLC_PS_ROOT_URI) or info.master_addr
    if env.get(DMLC_ROLE) == "worker":  # a parameter-server job's worker: its id is its rank
        out[DMLC_WORKER_ID] = str(info.rank)
    return out
