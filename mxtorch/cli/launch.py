"""``mxtorch launch``: start a distributed job (the successor of MXNet's tools/launch.py).

  mxtorch launch -n 2 python train.py --kvstore allreduce
  mxtorch launch -n 8 -H host1:4,host2:4 --env OMP_NUM_THREADS:4 python train.py
  mxtorch launch -n 4 --launcher mpi --hostfile hosts.txt --dry-run python train.py
  mxtorch launch -n 4 -s 2 python train.py --kvstore dist_sync
  mxtorch launch --nnodes 2 --node-rank 0 --rdzv-endpoint node0:29400 --nproc-per-node 8 python train.py

local (default): N workers on this machine, started by torchrun's agent; each gets RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and MXNet's DMLC_ROLE,
DMLC_NUM_WORKER, DMLC_NUM_SERVER, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT.  If one worker fails
the others are stopped, and the launcher exits non-zero naming the rank and showing its
traceback.  A bare `python` in COMMAND means the interpreter mxtorch runs in.

ssh / mpi / slurm: the command lines that start the job on the hosts of -H host1:4,host2:4 (as
horovodrun; -n defaults to the slots) or of --hostfile FILE (one host per line, optional `slots=K`
or `:K`, `#` comments); --dry-run prints them, one per line.  -H without --launcher means ssh, or
local when every host is localhost/127.0.0.1.  (-H FILE, the old spelling, still reads a hostfile.)

-s M (parameter servers): a scheduler and M servers run beside the workers (`mxtorch scheduler`,
`mxtorch server`; with --ps-roles same-command, COMMAND itself with DMLC_ROLE=scheduler|server,
as MXNet's launcher did), on the first host remotely.  Workers also get DMLC_WORKER_ID (= RANK);
servers get --env-server, and import the modules of --server-import first (where custom
optimizers the servers run are registered).  Every process gets the job's MXTORCH_PS_SECRET in
its environment (this shell's if set, else a fresh random one): only they can join the job.  It
is never put on a command line (ssh passes it on stdin), so --env cannot carry it.  The job's
exit status is the workers'; a scheduler or server that fails stops the job, and one still
running after the workers end is stopped and reported.

cluster: the hosts of an emulated cluster on this machine (`mxtorch cluster up`; --cluster NAME
when several are up), one torchrun agent per host; -H may list its hosts (h0, h1 slots=2, ...).

--elastic MIN:MAX, or --min-workers MIN --max-workers MAX (local or cluster): an elastic allreduce
job, one torch elastic agent per worker at a c10d rendezvous this command hosts; a lost worker (its
agent killed) or an added one
(`mxtorch launch --join HOST:PORT [--name NAME]`, the address it prints) makes the agents re-form
the group and restart their workers at the new size, between MIN and MAX.  `mxtorch train` resumes
from its newest checkpoint on each restart.  The job succeeds when an agent finishes it.
With -s K (local): an elastic parameter-server job (dist_sync/dist_async) -- a scheduler, K servers
and -n workers; a failed worker leaves (the others go on) and a replacement joins while fewer than
MAX run, a dead server is started again from its snapshot while the workers wait.

Per-node mode (torchrun's words), for schedulers that start one launcher per node: every node runs
`mxtorch launch --nnodes N --node-rank R --rdzv-endpoint HOST:PORT --nproc-per-node K COMMAND`
with the same N and endpoint (node 0's address, a free port there) and its own R; together they
form one job of N*K workers.  --nnodes MIN:MAX numbers nodes as they arrive (c10d rendezvous).

Devices: on a machine with GPUs every worker owns its own, local rank modulo the visible GPUs
(--gpus-per-worker K: K consecutive GPUs each); CUDA tensors go over NCCL, CPU tensors over gloo.
The job's identity may also come from horovodrun's HOROVOD_RANK/HOROVOD_SIZE/HOROVOD_LOCAL_RANK.

Every option can also come from the environment as MXTORCH_LAUNCH_<OPTION> (for example
MXTORCH_LAUNCH_NUM_WORKERS=4); a command-line option wins over the environment.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..distributed.env import MXTORCH_GPUS_PER_WORKER, MXTORCH_PS_SERVER_IMPORTS
from ..launcher import Host, JobSpec, LaunchError, parse_env_pairs
from ..launcher.hostlist import all_local, resolve_hosts
from ..launcher.job import PS_ROLE_MODES

LAUNCHERS = ("local", "ssh", "mpi", "slurm", "cluster")
ENV_PREFIX = "MXTORCH_LAUNCH_"
"""``MXTORCH_LAUNCH_<FIELD>`` sets a :class:`LaunchOptions` field the command line left out."""


@dataclass
class LaunchOptions:
    """Options of ``mxtorch launch`` (each flag maps onto the field of the same name)."""

    command: list[str] = field(default_factory=list)
    num_workers: int | None = None  # None: 1, or the slots of -H
    num_servers: int = 0
    launcher: str | None = None  # None: local, or ssh with -H hosts that are not this machine
    hostfile: str | None = None
    hosts: str | None = None
    env: list[str] = field(default_factory=list)
    env_worker: list[str] = field(default_factory=list)
    env_server: list[str] = field(default_factory=list)
    server_import: list[str] = field(default_factory=list)
    max_restarts: int = 0
    timeout: float | None = None
    dry_run: bool = False
    master_port: int | None = None
    cluster: str | None = None
    ps_hosts: str | None = None
    ps_roles: str = "separate"
    ps_root_port: int | None = None
    elastic: str | None = None
    join: str | None = None
    name: str | None = None
    local_addr: str | None = None
    rendezvous_timeout: float | None = None
    min_workers: int | None = None
    max_workers: int | None = None
    nnodes: str | None = None
    node_rank: int | None = None
    rdzv_endpoint: str | None = None
    nproc_per_node: int | None = None
    rdzv_id: str | None = None
    gpus_per_worker: int | None = None

    def job_spec(self) -> JobSpec:
        server_env = parse_env_pairs(self.env_server, "--env-server")
        if self.server_import:
            server_env[MXTORCH_PS_SERVER_IMPORTS] = server_imports(
                server_env.get(MXTORCH_PS_SERVER_IMPORTS), self.server_import)
        env = parse_env_pairs(self.env, "--env")
        if self.gpus_per_worker is not None:
            if isinstance(self.gpus_per_worker, bool) or self.gpus_per_worker < 1:
                raise LaunchError(f"--gpus-per-worker must be an integer >= 1, got {self.gpus_per_worker!r}")
            env[MXTORCH_GPUS_PER_WORKER] = str(self.gpus_per_worker)
        return JobSpec(
            command=list(self.command), num_workers=1 if self.num_workers is None else self.num_workers,
            num_servers=self.num_servers, env=env,
            worker_env=parse_env_pairs(self.env_worker, "--env-worker"),
            server_env=server_env, max_restarts=self.max_restarts,
            timeout=self.timeout, master_port=self.master_port, ps_roles=self.ps_roles,
            ps_root_port=self.ps_root_port,
        )


def add_parser(sub: Any) -> argparse.ArgumentParser:
    d = LaunchOptions()
    p = sub.add_parser("launch", help="start a distributed job (local, ssh, mpi, slurm)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       usage="mxtorch launch [options] COMMAND [ARGS ...]")
    # None marks "not given", so that the environment and then the defaults can fill in.
    p.add_argument("-n", "--num-workers", type=int, default=None, help=f"workers (default {d.num_workers})")
    p.add_argument("-s", "--num-servers", type=int, default=None,
                   help="parameter servers, plus a scheduler (default 0; for --kvstore dist_sync/dist_async)")
    p.add_argument("--ps-roles", choices=PS_ROLE_MODES, default=None,
                   help="what the scheduler and servers run: 'separate' (default): `mxtorch scheduler` / "
                        "`mxtorch server`; 'same-command': COMMAND with DMLC_ROLE=scheduler|server (MXNet's "
                        "way: the script becomes its role when it creates the dist KVStore)")
    p.add_argument("--ps-root-port", type=int, default=None,
                   help="the scheduler's port (default: a free port locally, --master-port + 1 remotely)")
    p.add_argument("--launcher", choices=LAUNCHERS, default=None, help=f"default {d.launcher}")
    p.add_argument("-H", "--hosts", default=None, metavar="HOST:SLOTS,...",
                   help="hosts as horovodrun takes them: -H host1:4,host2:4 (ssh/mpi/slurm/cluster; without "
                        "--launcher: ssh, or local for localhost)")
    p.add_argument("--hostfile", default=None, metavar="FILE",
                   help="a file of hosts for ssh/mpi/slurm/cluster, one per line (HOST, HOST slots=K, "
                        "HOST:K)")
    for flag, who in (("--env", "every process"), ("--env-worker", "workers"), ("--env-server", "servers")):
        p.add_argument(flag, action="append", default=None, metavar="NAME:VALUE",
                       help=f"set an environment variable for {who} (repeatable)")
    p.add_argument("--server-import", action="append", default=None, metavar="MODULE",
                   help="a module every server imports before serving, where custom optimizers the "
                        "servers run are registered (repeatable; sets MXTORCH_PS_SERVER_IMPORTS)")
    p.add_argument("--max-restarts", type=int, default=None,
                   help="restart all workers up to R times after a failure (local, ssh; default 0)")
    p.add_argument("--timeout", type=float, default=None, metavar="SEC",
                   help="stop the job after SEC seconds")
    p.add_argument("--dry-run", action="store_true", default=None, help="print the commands, run nothing")
    p.add_argument("--master-port", type=int, default=None,
                   help="rendezvous port on the first host (default: a free port locally, 29500 remotely)")
    p.add_argument("--cluster", default=None, metavar="NAME",
                   help="--launcher cluster: which emulated cluster (default: the only one up)")
    p.add_argument("--ps-hosts", default=None, metavar="HOSTS",
                   help="--launcher cluster with -s: the scheduler's host, then one per server (h2,h2,h3), "
                        "or one host for all (default: the last hosts, workers on the others)")
    p.add_argument("--elastic", default=None, nargs="?", const="", metavar="MIN:MAX",
                   help="an elastic job of MIN to MAX workers (-n to start with) that goes on when "
                        "workers are lost or join (local, cluster); or --elastic with --min-workers/"
                        "--max-workers")
    p.add_argument("--min-workers", type=int, default=None, metavar="MIN",
                   help="an elastic job's fewest workers (as --elastic MIN:MAX; default -n)")
    p.add_argument("--max-workers", type=int, default=None, metavar="MAX",
                   help="an elastic job's most workers (as --elastic MIN:MAX; default -n)")
    per_node: tuple[tuple[str, Any, str, str], ...] = (  # torchrun's flags, torchrun's meaning
        ("--nnodes", str, "N|MIN:MAX", "the job's number of nodes, each starting one `mxtorch launch`"),
        ("--node-rank", int, "R", "this node's index, 0..N-1 (with a fixed --nnodes N)"),
        ("--rdzv-endpoint", str, "HOST:PORT", "where the nodes meet, the same everywhere (node 0's address)"),
        ("--nproc-per-node", int, "K", "workers this node starts (default 1)"),
        ("--rdzv-id", str, "ID", "the job's id, the same on every node (default: from the endpoint)"),
    )
    for flag, kind, metavar, text in per_node:
        p.add_argument(flag, type=kind, default=None, metavar=metavar, help=f"per-node mode: {text}")
    p.add_argument("--gpus-per-worker", type=int, default=None, metavar="K",
                   help="GPUs each worker owns on machines with GPUs (default 1: local rank modulo the GPUs)")
    p.add_argument("--join", default=None, metavar="HOST:PORT",
                   help="add one worker to the running elastic job whose rendezvous is HOST:PORT "
                        "(no COMMAND)")
    p.add_argument("--name", default=None, help="with --join: this worker's host name in the logs")
    p.add_argument("--local-addr", default=None, metavar="ADDR",
                   help="with --join: the address the other workers reach this one at (default: this "
                        "machine's address on the route to the rendezvous host)")
    p.add_argument("--rendezvous-timeout", type=float, default=None, metavar="SEC",
                   help="with --elastic: how long a rendezvous round may wait for MIN workers (default 600)")
    # dest 'cmd': the entry point's subcommand name already lives in args.command
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND",
                   help="the program each worker runs, and its arguments")
    return p


def server_imports(current: str | None, modules: list[str]) -> str:
    """``MXTORCH_PS_SERVER_IMPORTS`` with ``modules`` added to ``current``; raises
    :class:`LaunchError` for a name that is not a module name."""
    from ..distributed.env import DistributedConfigError
    from ..kvstore.ps.config import parse_modules

    names = [n for n in (current or "").split(",") if n.strip()] + list(modules)
    try:
        return ",".join(parse_modules(",".join(names), MXTORCH_PS_SERVER_IMPORTS))
    except DistributedConfigError as e:
        raise LaunchError(f"--server-import: {e}") from None


def _from_env(f: dataclasses.Field[Any], text: str) -> Any:
    name = ENV_PREFIX + f.name.upper()
    kind = str(f.type)
    try:
        if kind.startswith("list"):
            return shlex.split(text)
        if kind.startswith("bool"):
            if text.strip().lower() not in ("1", "true", "yes", "0", "false", "no", ""):
                raise ValueError("expected 1/0, true/false or yes/no")
            return text.strip().lower() in ("1", "true", "yes")
        if kind.startswith("int"):
            return int(text)
        if kind.startswith("float"):
            return float(text)
        return text
    except ValueError as e:
        raise LaunchError(f"environment variable {name}={text!r}: {e}") from None


def options_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> LaunchOptions:
    """Command line > ``MXTORCH_LAUNCH_*`` environment > defaults."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in dataclasses.fields(LaunchOptions):
        given = getattr(args, "cmd" if f.name == "command" else f.name, None)
        if f.name == "command" and given and given[0] == "--":
            given = given[1:]
        if given not in (None, []):
            values[f.name] = given
        elif ENV_PREFIX + f.name.upper() in environ:
            values[f.name] = _from_env(f, environ[ENV_PREFIX + f.name.upper()])
    return LaunchOptions(**values)


def _check_servers(spec: JobSpec) -> None:
    if spec.num_servers == 0 and spec.server_env:
        print("mxtorch launch: note: --env-server is ignored, there are no servers (-s 0)",
              file=sys.stderr)


def launch(opts: LaunchOptions) -> int:
    """Start (or, with ``dry_run``, print) the job ``opts`` describes; returns its exit status."""
    from ..launcher import local, ps, remote, secret

    if opts.join:
        if opts.command:
            raise LaunchError(f"--join {opts.join} adds a worker to a running job, which runs that job's "
                              f"command: leave out {shlex.join(opts.command)!r}")
        from ..launcher.elastic import join_elastic

        return join_elastic(opts.join, opts.name, opts.local_addr)
    if opts.name or opts.local_addr:
        flag = "--name" if opts.name else "--local-addr"
        raise LaunchError(f"{flag} applies to the worker that --join adds (--join HOST:PORT)")
    opts, host_list = _resolve_hosts(opts)
    if any(v is not None for v in (opts.nnodes, opts.node_rank, opts.rdzv_endpoint, opts.nproc_per_node,
                                    opts.rdzv_id)):
        return _launch_per_node(opts)
    opts = dataclasses.replace(opts, elastic=elastic_range(opts.elastic, opts.min_workers, opts.max_workers,
                                                           opts.num_workers or 1))
    spec = opts.job_spec()
    if opts.elastic is not None:
        return _launch_elastic(opts, spec, host_list)
    if opts.rendezvous_timeout is not None:
        raise LaunchError("--rendezvous-timeout applies to --elastic jobs")
    _check_servers(spec)
    if opts.launcher not in LAUNCHERS:
        raise LaunchError(f"unknown launcher {opts.launcher!r}: choose one of {', '.join(LAUNCHERS)}")
    if opts.launcher == "cluster":
        from ..cluster.launch import launch_on_cluster

        code = launch_on_cluster(spec, opts.cluster, _cluster_hostfile(opts.hostfile, host_list),
                                 dry_run=bool(opts.dry_run),
                                 ps_hosts=opts.ps_hosts.split(",") if opts.ps_hosts else None)
        if opts.dry_run:
            _secret_note(spec)
        return code
    if opts.launcher == "local":
        if opts.hostfile or (host_list is not None and not all_local(host_list)):
            raise LaunchError("-H/--hostfile is for --launcher ssh, mpi or slurm; the local launcher runs "
                              "every worker on this machine")
        if opts.dry_run:
            for c in [*ps.local_ps_commands(spec), _local_equivalent(ps.worker_spec(spec, resolve=True))]:
                print(shlex.join(c))
            _secret_note(spec)
            return 0
        return ps.launch_local_with_servers(spec) if spec.num_servers else local.launch_local(spec)
    hosts = remote.read_hostfile(opts.hostfile) if opts.hostfile else host_list
    if opts.launcher == "slurm":  # without a hostfile: the nodes of the current allocation
        commands = [remote.slurm_command(spec, hosts)]
    elif hosts is None:
        raise LaunchError(f"--launcher {opts.launcher} needs hosts: -H host1:4,host2:4 or --hostfile FILE "
                          "(one host per line)")
    elif opts.launcher == "ssh":
        commands = remote.ssh_commands(ps.worker_spec(spec), hosts)  # with servers: DMLC_WORKER_ID too
    else:
        commands = [remote.mpi_command(spec, hosts)]
    commands = ps.remote_ps_commands(opts.launcher, spec, hosts) + commands  # scheduler, servers first
    if opts.dry_run:
        for c in commands:
            print(shlex.join(c))
        _secret_note(spec)
        return 0
    delivery = remote.secret_delivery(opts.launcher, secret.job_secret(spec))
    return remote.run_commands(commands, timeout=spec.timeout, **delivery)


def _secret_note(spec: JobSpec) -> None:
    if spec.num_servers:
        print("mxtorch launch: note: every process of the job also gets MXTORCH_PS_SECRET (this shell's, "
              "else a fresh one per job) in its environment; it is never on a command line, so it is not "
              "shown (ssh reads it from stdin, mpirun -x and srun --export=ALL from their environment)",
              file=sys.stderr)


def _launch_elastic(opts: LaunchOptions, spec: JobSpec, host_list: list[Host] | None) -> int:
    from ..launcher.elastic import check_elastic, launch_elastic

    if spec.num_servers:  # dist_sync/dist_async: workers leave and join, dead servers are restarted
        return _launch_elastic_ps(opts, spec, host_list)

    settings = check_elastic(str(opts.elastic), spec, opts.rendezvous_timeout)
    if opts.launcher == "cluster":
        from ..cluster.launch import launch_elastic_on_cluster

        hostfile = _cluster_hostfile(opts.hostfile, host_list)
        return launch_elastic_on_cluster(spec, settings, opts.cluster, hostfile, dry_run=bool(opts.dry_run))
    if opts.launcher != "local":
        raise LaunchError(f"--elastic runs with --launcher local or cluster, not {opts.launcher}")
    if opts.hostfile or (host_list is not None and not all_local(host_list)):
        raise LaunchError("-H/--hostfile is for --launcher ssh, mpi, slurm or cluster; the local launcher "
                          "runs every worker on this machine")
    return launch_elastic(spec, settings, dry_run=bool(opts.dry_run))


def _launch_elastic_ps(opts: LaunchOptions, spec: JobSpec, host_list: list[Host] | None) -> int:
    from ..elastic.env import parse_range
    from ..launcher.ps_elastic import launch_elastic_ps

    lo, hi = parse_range(str(opts.elastic))
    if opts.launcher != "local" or opts.hostfile or (host_list is not None and not all_local(host_list)):
        raise LaunchError(f"--elastic with -s {spec.num_servers} (an elastic parameter-server job) runs on "
                          "this machine only (--launcher local)")
    if opts.rendezvous_timeout is not None:
        raise LaunchError("--rendezvous-timeout applies to elastic allreduce jobs; an elastic parameter-"
                          "server job's scheduler waits MXTORCH_DIST_TIMEOUT for its first workers")
    return launch_elastic_ps(spec, lo, hi, dry_run=bool(opts.dry_run))


def elastic_range(elastic: str | None, min_workers: int | None, max_workers: int | None,
                  n: int) -> str | None:
    """The ``MIN:MAX`` of ``--elastic MIN:MAX`` and/or ``--min-workers``/``--max-workers`` (a missing
    side is ``-n``, as horovodrun's ``--min-np``); None for a job that is not elastic."""
    from ..elastic.env import parse_range

    if not elastic and min_workers is None and max_workers is None:
        if elastic == "":
            raise LaunchError("--elastic needs MIN:MAX, or --min-workers MIN and/or --max-workers MAX")
        return None
    for flag, value in (("--min-workers", min_workers), ("--max-workers", max_workers)):
        if value is not None and (isinstance(value, bool) or value < 1):
            raise LaunchError(f"{flag} must be an integer >= 1, got {value!r}")
    if elastic:
        mn, mx = parse_range(elastic)
        if (min_workers is not None and min_workers != mn) or (max_workers is not None and max_workers != mx):
            raise LaunchError(f"--elastic {elastic} and --min-workers {min_workers} --max-workers "
                              f"{max_workers} disagree: give the range one way")
        return elastic
    lo = n if min_workers is None else min_workers
    hi = max(n, lo) if max_workers is None else max_workers
    if hi < lo:
        raise LaunchError(f"--min-workers {lo} is more than --max-workers {hi}")
    return f"{lo}:{hi}"


def _resolve_hosts(opts: LaunchOptions) -> tuple[LaunchOptions, list[Host] | None]:
    """``-H`` as a host list (or an old hostfile), the launcher and -n it implies."""
    host_list, hostfile, note = resolve_hosts(opts.hosts, opts.hostfile)
    if note:
        print(f"mxtorch launch: note: {note}", file=sys.stderr)
    launcher, n = opts.launcher, opts.num_workers
    if host_list is not None:
        launcher = launcher or ("local" if all_local(host_list) else "ssh")
        n = sum(h.slots or 1 for h in host_list) if n is None else n
    return dataclasses.replace(opts, hosts=None, hostfile=hostfile, launcher=launcher or "local",
                               num_workers=n), host_list


def _cluster_hostfile(hostfile: str | None, hosts: list[Host] | None) -> str | None:
    """The cluster launcher reads a hostfile: an -H list is written to one (removed at exit)."""
    if hosts is None:
        return hostfile
    import atexit
    import tempfile

    with tempfile.NamedTemporaryFile("w", prefix="mxtorch-hosts-", suffix=".txt", delete=False) as f:
        f.write("".join(f"{h.name}{f' slots={h.slots}' if h.slots else ''}\n" for h in hosts))
    atexit.register(os.unlink, f.name)
    return f.name


def _launch_per_node(opts: LaunchOptions) -> int:
    """One node of a per-node job (:mod:`mxtorch.launcher.pernode`)."""
    from ..launcher import local
    from ..launcher.pernode import check_nodes

    wrong = [flag for flag, given in (
        ("--elastic/--min-workers/--max-workers (give the range as --nnodes MIN:MAX)",
         opts.elastic is not None or opts.min_workers is not None or opts.max_workers is not None),
        ("-n (the job's size is --nnodes x --nproc-per-node)", opts.num_workers is not None),
        ("-s (parameter servers)", bool(opts.num_servers)),
        ("-H/--hostfile (each node runs its own launcher)", bool(opts.hostfile)),
        (f"--launcher {opts.launcher}", opts.launcher not in (None, "local")),
    ) if given]
    if wrong:
        raise LaunchError(f"per-node mode (--nnodes/--node-rank/--rdzv-endpoint/--nproc-per-node) does not "
                          f"take {wrong[0]}")
    layout = check_nodes(opts.nnodes, opts.node_rank, opts.rdzv_endpoint, opts.nproc_per_node, opts.rdzv_id)
    spec = dataclasses.replace(opts, num_workers=layout.fixed_world_size or layout.nproc_per_node).job_spec()
    if layout.node_rank is not None and not layout.static:
        print(f"mxtorch launch: note: --nnodes {opts.nnodes} numbers the nodes as they arrive; --node-rank "
              f"{layout.node_rank} is not used", file=sys.stderr)
    if opts.dry_run:
        backend = "static" if layout.static else "c10d"
        rank = ["--node-rank", str(layout.node_rank)] if layout.static else []
        nnodes = f"{layout.min_nodes}:{layout.max_nodes}" if layout.by_arrival else str(layout.min_nodes)
        print(shlex.join(["torchrun", "--nnodes", nnodes, *rank, "--nproc-per-node",
                          str(layout.nproc_per_node), "--rdzv-backend", backend, "--rdzv-endpoint",
                          layout.endpoint, "--rdzv-id", layout.run_id, *spec.command]))
        return 0
    return local.launch_local(spec, nodes=layout)


def _local_equivalent(spec: JobSpec) -> list[str]:
    """The torchrun command line equal to a local launch (what --dry-run prints)."""
    from ..launcher import DEFAULT_MASTER_PORT, resolve_command, torchrun_command, worker_environment
    from ..launcher.job import RESTART_ENV

    port = spec.master_port if spec.master_port is not None else DEFAULT_MASTER_PORT
    resolved = dataclasses.replace(spec, command=resolve_command(spec.command), master_port=port)
    env = worker_environment(resolved, "127.0.0.1", port)
    if spec.max_restarts:
        env.update(RESTART_ENV)
    run = torchrun_command(resolved, nnodes=1, nproc_per_node=spec.num_workers, node_rank=0,
                           master_addr="127.0.0.1")
    return ["env", *(f"{k}={v}" for k, v in env.items()), *run]


def run(args: argparse.Namespace) -> int:
    try:
        return launch(options_from_args(args))
    except LaunchError as e:
        print(f"mxtorch launch: error: {e}", file=sys.stderr)
        return 2
