"""One worker's torch elastic agent (its "host"):
``python -m mxtorch.launcher.elastic_agent --endpoint H:P --name N`` (``mxtorch.elastic.agent``, its
old path, still runs it).

The agent reads the job's settings from the rendezvous store (:data:`mxtorch.elastic.env.JOB_KEY`,
JSON), then runs torch's :func:`~torch.distributed.launcher.api.elastic_launch` with one worker
(``nproc_per_node=1``), a c10d rendezvous at that store (which the launcher hosts, so losing any
agent leaves the rendezvous up) and ``min_nodes``/``max_nodes`` from ``--elastic MIN:MAX``.
torch's agent does the rest: when a worker fails (a peer's host died) the agents restart their
workers after a new rendezvous round of the agents still alive; when an agent joins a running
job, the others see it waiting and restart theirs so that it is admitted.  Workers get
``MXTORCH_ELASTIC=1`` and ``MXTORCH_ELASTIC_HOST=<name>`` on top of torchrun's variables.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from datetime import timedelta
from typing import Any

from ..elastic.env import (
    AGENT_COUNT_KEY,
    JOB_KEY,
    MXTORCH_ELASTIC,
    MXTORCH_ELASTIC_ENDPOINT,
    MXTORCH_ELASTIC_HOST,
    MXTORCH_ELASTIC_MODE,
    ElasticJob,
    parse_endpoint,
)
from .job import RESTART_ENV, LaunchError

__all__ = ["run_agent", "connect", "read_job", "agent_names"]

LAST_CALL_S = 2  # how long a round waits for more agents once MIN are there (torch's default: 30 s)
KEEP_ALIVE_S = 1  # heartbeat period; an agent silent for KEEP_ALIVE_S * KEEP_ALIVE_MISSES is dead
KEEP_ALIVE_MISSES = 3
SHUTDOWN_S = 60  # SIGTERM -> SIGKILL: a stopped worker first saves the checkpoint of its current step
_STORE_WAIT_S = 30.0


def connect(endpoint: str, timeout: float = _STORE_WAIT_S) -> Any:
    """A client of the job's rendezvous store; :class:`LaunchError` when nothing answers there."""
    from torch.distributed import TCPStore

    host, port = parse_endpoint(endpoint)
    try:
        return TCPStore(host, port, is_master=False, timeout=timedelta(seconds=timeout))
    except (RuntimeError, OSError) as e:
        raise LaunchError(f"no elastic job's rendezvous answers at {endpoint} ({e}); is "
                          "`mxtorch launch --elastic` running, and is this its address?") from None


def read_job(store: Any, endpoint: str) -> ElasticJob:
    try:
        if not store.check([JOB_KEY]):
            raise LaunchError(f"the store at {endpoint} holds no elastic job (no {JOB_KEY!r} key): it is "
                              "not the rendezvous of `mxtorch launch --elastic`")
        return ElasticJob.from_json(store.get(JOB_KEY), f"the store at {endpoint}")
    except RuntimeError as e:
        raise LaunchError(f"cannot read the elastic job at {endpoint}: {e}") from None


def agent_names(store: Any) -> list[str]:
    """The agents that registered with the job, in the order they came (lost ones included)."""
    count = int(store.add(AGENT_COUNT_KEY, 0))
    return [store.get(f"{AGENT_COUNT_KEY}/{i}").decode(errors="replace") for i in range(1, count + 1)]


def _register(store: Any, name: str, endpoint: str) -> None:
    if int(store.add(f"{AGENT_COUNT_KEY}/name/{name}", 1)) > 1:
        raise LaunchError(f"an agent named {name!r} already joined the job at {endpoint}: give this one "
                          "another name (--name)")
    i = int(store.add(AGENT_COUNT_KEY, 1))
    store.set(f"{AGENT_COUNT_KEY}/{i}", name.encode())


def _timeout_message(job: ElasticJob, store: Any, endpoint: str, name: str, waited: float) -> str:
    try:
        came = agent_names(store)
    except RuntimeError:
        came = []
    return (f"mxtorch elastic agent {name}: the rendezvous at {endpoint} (run {job.run_id}) did not complete "
            f"within {job.rendezvous_timeout:g} s (waited {waited:.0f} s): the job needs at least "
            f"{job.min_workers} worker(s) (--elastic {job.min_workers}:{job.max_workers}); agents that ever "
            f"registered: {len(came)} ({', '.join(came) or 'none'}), lost ones included. Start the missing "
            f"workers with `mxtorch launch --join {endpoint}`, or lower MIN.")


def address_towards(host: str) -> str | None:
    """This machine's address on the route to ``host`` (what the rendezvous advertises for this
    agent, and rank 0's agent for the workers' MASTER_ADDR): torch's default, this machine's
    hostname, does not resolve on every network. None when no route is known (torch's default)."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))  # a UDP "connect" sends nothing: it only picks the route
            addr: str = s.getsockname()[0]
            return addr
    except OSError:
        return None


def run_agent(endpoint: str, name: str | None = None, local_addr: str | None = None) -> int:
    """Run one agent of the elastic job whose rendezvous store is at ``endpoint`` until the job
    ends; returns its exit status (0: the job finished)."""
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousClosedError, RendezvousTimeoutError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    name = name or f"{socket.gethostname()}-{os.getpid()}"
    store = connect(endpoint)
    job = read_job(store, endpoint)
    _register(store, name, endpoint)
    host, _ = parse_endpoint(endpoint)
    os.environ.update(job.env)
    os.environ.update(RESTART_ENV)
    os.environ.update({MXTORCH_ELASTIC: "1", MXTORCH_ELASTIC_HOST: name, MXTORCH_ELASTIC_ENDPOINT: endpoint})
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as torchrun: workers must not oversubscribe the cores
    if os.environ.get(MXTORCH_ELASTIC_MODE) == "inprocess":  # the workers re-form the group themselves
        from .elastic_inprocess import run_inprocess_agent

        return run_inprocess_agent(job, store, name)
    log_dir = tempfile.mkdtemp(prefix=f"mxtorch-elastic-{name}-")
    config = LaunchConfig(
        min_nodes=job.min_workers, max_nodes=job.max_workers, nproc_per_node=1, run_id=job.run_id,
        role="worker", rdzv_backend="c10d", rdzv_endpoint=endpoint,
        rdzv_configs={"is_host": False, "join_timeout": int(job.rendezvous_timeout),
                      "last_call_timeout": LAST_CALL_S, "close_timeout": 10,
                      "keep_alive_interval": KEEP_ALIVE_S, "keep_alive_max_attempt": KEEP_ALIVE_MISSES},
        local_addr=local_addr or address_towards(host),
        max_restarts=job.max_restarts, monitor_interval=0.5,
        logs_specs=DefaultLogsSpecs(log_dir=log_dir, tee=Std.ALL), log_line_prefix_template=f"[{name}]:",
        shutdown_timeout=SHUTDOWN_S,
    )
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)  # our own lines say it
    start = time.monotonic()
    try:
        elastic_launch(config, job.command[0])(*job.command[1:])
        return 0
    except RendezvousClosedError:
        print(f"mxtorch elastic agent {name}: the job at {endpoint} (run {job.run_id}) has ended (its "
              "rendezvous is closed): there is nothing to join", file=sys.stderr, flush=True)
        return 3
    except RendezvousTimeoutError:
        print(_timeout_message(job, store, endpoint, name, time.monotonic() - start), file=sys.stderr,
              flush=True)
        return 3
    except ChildFailedError as e:
        rank, failure = next(iter(sorted(e.failures.items())))
        print(f"mxtorch elastic agent {name}: its worker (rank {rank}) failed with exit code "
              f"{failure.exitcode} after {job.max_restarts} restart(s); worker logs: {log_dir}",
              file=sys.stderr, flush=True)
        log_dir = ""
        return 1
    finally:
        if log_dir:
            shutil.rmtree(log_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mxtorch.launcher.elastic_agent", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", required=True, metavar="HOST:PORT", help="the job's rendezvous store")
    p.add_argument("--name", default=None, help="this agent's (host's) name (default: hostname-pid)")
    p.add_argument("--local-addr", default=None, help="the address other workers reach this host at")
    args = p.parse_args(argv)
    try:
        return run_agent(args.endpoint, args.name, args.local_addr)
    except LaunchError as e:
        print(f"mxtorch elastic agent: error: {e}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
