"""``mxtorch launch --launcher cluster``: a job across the hosts of an emulated cluster.

As the ssh launcher does for real machines, every host that runs workers runs one torchrun
agent (static rendezvous at the first worker host's address), here started with
``ip netns exec`` instead of ssh.  Workers get the usual variables (``RANK``, ...,
``DMLC_*``) plus their host's interface (``GLOO_SOCKET_IFNAME``, ``DMLC_INTERFACE``), so all
traffic between hosts crosses their shaped links.

Placement.  Workers: a hostfile (``-H``) lists cluster hosts by name (``h0``), index or
address, optionally with ``slots=K``, read as for the ssh launcher; without one, worker
``i`` runs on host ``i mod H`` of the hosts left to workers.  With parameter servers
(``-s M``): ``ps_hosts`` names the scheduler's host and then one host per server (or one host
for all of them); by default the servers take the last ``min(M, H - 1)`` hosts (round robin),
the scheduler sits with server 0, and the workers get the other hosts, so that every byte
between a worker and a server crosses two shaped links.  The job's ``MXTORCH_PS_SECRET``
(:mod:`mxtorch.launcher.secret`) is in the environment of every command, never on its line.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Sequence

from ..launcher import DEFAULT_MASTER_PORT, JobSpec, LaunchError, resolve_command, worker_environment
from ..launcher import remote as _remote
from ..launcher.elastic import ElasticSettings
from ..launcher.job import RESTART_ENV
from ..launcher.secret import job_secret, secret_environment
from .cluster import Cluster, Host, host_environment
from .errors import ClusterError

__all__ = ["cluster_commands", "launch_elastic_on_cluster", "launch_on_cluster", "ps_placement"]


def _hosts(cluster: Cluster, names: Sequence[str]) -> list[Host]:
    try:
        return [cluster.host(n) for n in names]
    except ClusterError as e:
        raise LaunchError(str(e)) from e


def ps_placement(cluster: Cluster, num_servers: int, ps_hosts: Sequence[str] | None = None,
                 worker_hosts: Sequence[str] | None = None) -> tuple[Host, list[Host], list[Host]]:
    """(scheduler's host, each server's host, hosts left for workers) of a job with ``num_servers``."""
    everyone = cluster.hosts
    if ps_hosts:
        chosen = _hosts(cluster, ps_hosts)
        if len(chosen) == 1:
            chosen = chosen * (num_servers + 1)
        if len(chosen) != num_servers + 1:
            raise LaunchError(f"--ps-hosts {','.join(ps_hosts)}: give the scheduler's host and then one host "
                              f"per server ({num_servers + 1} in all), or one host for all of them")
        sched, servers = chosen[0], chosen[1:]
    else:
        taken = {h.name for h in _hosts(cluster, worker_hosts)} if worker_hosts else set()
        free = [h for h in everyone if h.name not in taken]
        if not worker_hosts:
            free = free[len(free) - min(num_servers, len(free) - 1):] if len(free) > 1 else free
        pool = free or everyone
        servers = [pool[i % len(pool)] for i in range(num_servers)]
        sched = servers[0]
    ps_names = {sched.name, *(h.name for h in servers)}
    left = [h for h in everyone if h.name not in ps_names] or everyone
    return sched, servers, left


def _worker_hosts(cluster: Cluster, hosts: Sequence[_remote.Host] | None, num_workers: int,
                  default_pool: Sequence[Host]) -> list[tuple[Host, int]]:
    """(cluster host, workers) for each host that runs workers, in node-rank order."""
    if hosts is None:
        hosts = [_remote.Host(h.name) for h in default_pool]
    placed = _remote.assign_workers(hosts, num_workers)
    chosen = _hosts(cluster, [h.address for h, _ in placed])
    names = [h.name for h in chosen]
    if len(set(names)) != len(names):
        raise LaunchError(f"the hostfile names one cluster host twice ({', '.join(names)}): list each once, "
                          "with slots=K for several workers")
    return [(h, n) for h, (_, n) in zip(chosen, placed)]


def _in_host(cluster: Cluster, host: Host, env: dict[str, str], argv: Sequence[str]) -> list[str]:
    variables = {**env, **host_environment(host)}
    return cluster.command(host, ["env", *(f"{k}={v}" for k, v in variables.items()), *argv])


def cluster_commands(spec: JobSpec, cluster: Cluster, hosts: Sequence[_remote.Host] | None = None, *,
                     ps_hosts: Sequence[str] | None = None, python: str = sys.executable) -> list[list[str]]:
    """The job's command lines: scheduler and servers first (with ``-s``), then one torchrun agent per
    worker host, each ``ip netns exec NETNS env VARS... COMMAND``."""
    job = dataclasses.replace(spec, command=resolve_command(spec.command))
    commands: list[list[str]] = []
    pool = cluster.hosts
    root_uri: str | None = None  # the scheduler's address, with servers
    if spec.num_servers:
        from ..distributed.env import DMLC_NODE_HOST
        from ..launcher import ps

        sched, servers, pool = ps_placement(cluster, spec.num_servers, ps_hosts,
                                            [h.address for h in hosts] if hosts else None)
        port = spec.master_port if spec.master_port is not None else DEFAULT_MASTER_PORT
        root_port = spec.ps_root_port if spec.ps_root_port is not None else port + 1
        root_uri = sched.address
        job = dataclasses.replace(ps.worker_spec(job), ps_root_port=root_port)
        for role in ps.ps_roles(spec, sched.address, root_port, python=python, resolve=True):
            host = sched if role.role == "scheduler" else servers[role.index]
            env = {**role.env, DMLC_NODE_HOST: host.address} if role.role == "server" else role.env
            commands.append(_in_host(cluster, host, env, role.command))
    elif ps_hosts:
        raise LaunchError("--ps-hosts places parameter servers: give -s M too, or leave it out")
    placed = _worker_hosts(cluster, hosts, spec.num_workers, pool)
    master = placed[0][0].address
    port = spec.master_port if spec.master_port is not None else DEFAULT_MASTER_PORT
    job = dataclasses.replace(job, master_port=port)
    env = worker_environment(job, master, port)
    if root_uri is not None:
        from ..distributed.env import DMLC_PS_ROOT_URI

        env[DMLC_PS_ROOT_URI] = root_uri
    if spec.max_restarts:
        env.update(RESTART_ENV)
    if spec.num_workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        env.setdefault("OMP_NUM_THREADS", "1")  # as the local launcher: the hosts share this machine's cores
    run_id = f"mxtorch-{cluster.name}-{os.getpid()}"
    for node_rank, (host, n) in enumerate(placed):
        run = _remote.torchrun_command(job, nnodes=len(placed), nproc_per_node=n, node_rank=node_rank,
                                       master_addr=master, python=python, run_id=run_id)
        commands.append(_in_host(cluster, host, env, run))
    return commands


def launch_on_cluster(spec: JobSpec, cluster_name: str | None, hostfile: str | None, *, dry_run: bool = False,
                      ps_hosts: Sequence[str] | None = None) -> int:
    """Run (or print, with ``dry_run``) ``spec`` on the cluster; returns the job's exit status.

    Every process runs until the job ends; the first one to fail stops the others.
    """
    try:
        cluster = Cluster.attach(cluster_name)
    except ClusterError as e:
        raise LaunchError(str(e)) from e
    if spec.num_servers:
        from ..launcher import ps

        ps.check_available(spec)
    hosts = _remote.read_hostfile(hostfile) if hostfile else None
    commands = cluster_commands(spec, cluster, hosts, ps_hosts=ps_hosts)
    if dry_run:
        for c in commands:
            print(shlex.join(c))
        return 0
    # the job's secret: in the environment `ip netns exec` passes on, not among the `env VAR=...` words
    return _remote.run_commands(commands, timeout=spec.timeout, env=secret_environment(job_secret(spec)))


ELASTIC_STORE_PORT = 29400
"""The elastic job's rendezvous store port on the first worker host (ports are per host here)."""


def launch_elastic_on_cluster(spec: JobSpec, settings: ElasticSettings, cluster_name: str | None,
                              hostfile: str | None, *, dry_run: bool = False) -> int:
    """``mxtorch launch --launcher cluster --elastic MIN:MAX -n N``: one elastic agent on each of N
    hosts (named after them), the rendezvous store a process on the first of them (losing that host
    ends the job, as losing torchrun's c10d store host does); returns the job's exit status."""
    import subprocess
    import uuid

    from ..launcher.elastic import agent_command, job_description, supervise

    try:
        cluster = Cluster.attach(cluster_name)
    except ClusterError as e:
        raise LaunchError(str(e)) from e
    hosts = _remote.read_hostfile(hostfile) if hostfile else None
    placed = _worker_hosts(cluster, hosts, spec.num_workers, cluster.hosts)
    if any(n > 1 for _, n in placed):
        raise LaunchError(f"--elastic on the cluster runs one worker per host: -n {spec.num_workers} needs "
                          f"{spec.num_workers} hosts (the cluster has {len(cluster.hosts)}), slots=1 each")
    port = spec.master_port or ELASTIC_STORE_PORT
    first = placed[0][0]
    endpoint = f"{first.address}:{port}"
    job = job_description(spec, settings, f"mxtorch-elastic-{cluster.name}-{uuid.uuid4().hex[:8]}")
    store_argv = [sys.executable, "-m", "mxtorch.elastic.store", "--addr", first.address, "--port", str(port)]
    agents = [_in_host(cluster, h, {}, agent_command(endpoint, h.name, local_addr=h.address))
              for h, _ in placed]
    if dry_run:
        print("# rendezvous store (job description on stdin): "
              + shlex.join(_in_host(cluster, first, {}, store_argv)))
        for c in agents:
            print(shlex.join(c))
        return 0
    store = subprocess.Popen(_in_host(cluster, first, {}, store_argv), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=False, start_new_session=True)
    assert store.stdin is not None and store.stdout is not None
    store.stdin.write(job.to_json())
    store.stdin.close()
    line = store.stdout.readline().decode(errors="replace").strip()
    if not line.startswith("ready"):
        store.kill()
        raise LaunchError(f"the rendezvous store on {first.name} ({endpoint}) did not start: "
                          f"{line or 'no output'}")
    print(f"mxtorch launch: elastic job {job.run_id} on {', '.join(h.name for h, _ in placed)}: "
          f"{settings.min_workers} to {settings.max_workers} workers; rendezvous {endpoint} (on "
          f"{first.name}); add a worker: mxtorch cluster exec HOST -- mxtorch launch --join {endpoint} "
          "--name HOST", file=sys.stderr, flush=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for (h, _), argv in zip(placed, agents):
            procs[h.name] = subprocess.Popen(argv, env=cluster.environment(h), start_new_session=True)
        return supervise(procs, spec.timeout, sys.stderr)
    finally:
        from ..launcher.elastic import _stop

        _stop({**procs, "store": store})
