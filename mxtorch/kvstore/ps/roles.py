"""Running a process as its ``DMLC_ROLE``: the entry points of schedulers and servers.

``mxtorch scheduler`` / ``mxtorch server`` call ``run_scheduler(PSConfig.from_env())`` /
``run_server(...)``, which return an exit status.  :func:`become_role` is MXNet's "same
script for every role" mode: a training script started with ``DMLC_ROLE=server`` (or
``scheduler``) creates its ``dist_sync`` KVStore as usual, and that call serves the role until
the job ends and then exits the process (status 0 when the job ended normally).
``python -m mxtorch.kvstore.ps`` runs the role named by the environment.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from ...distributed.env import DistributedConfigError
from ..base import KVStoreError
from .config import PSConfig
from .scheduler import run_scheduler
from .server import run_server

__all__ = ["run_role", "become_role", "run_scheduler", "run_server", "main"]


def run_role(config: PSConfig | None = None) -> int:
    """Run the scheduler or a server, as ``config.role`` says; return the exit status."""
    config = PSConfig.from_env() if config is None else config
    if config.role == "scheduler":
        return run_scheduler(config)
    if config.role == "server":
        return run_server(config)
    raise KVStoreError("DMLC_ROLE=worker: a worker runs the training script, which creates the dist KVStore; "
                       "only schedulers and servers run a role")


def become_role(config: PSConfig | None = None) -> NoReturn:
    """Serve as this process's scheduler or server until the job ends, then exit the process."""
    sys.exit(run_role(config))


def main(argv: list[str] | None = None) -> int:
    """``python -m mxtorch.kvstore.ps``: run the role of ``DMLC_ROLE`` (a configuration error exits 2)."""
    try:
        return run_role()
    except DistributedConfigError as e:
        print(f"mxtorch ps: {e}", file=sys.stderr)
        return 2
