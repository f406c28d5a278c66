"""``mxtorch scheduler`` and ``mxtorch server``: the parameter-server processes of a job.

``mxtorch launch -s N`` starts them itself; start them by hand to place them yourself.  Both
read MXNet's variables (options given here win over them):

  DMLC_PS_ROOT_URI   the scheduler's address        (--root-uri)
  DMLC_PS_ROOT_PORT  the scheduler's port           (--root-port)
  DMLC_NUM_WORKER    how many workers the job has   (--num-workers)
  DMLC_NUM_SERVER    how many servers the job has   (--num-servers)
  DMLC_ROLE          must be unset or name this subcommand
  MXTORCH_PS_SERVER_IMPORTS  modules a server imports first: custom optimizers (server --import)
  DMLC_SERVER_ID, DMLC_NODE_HOST, DMLC_INTERFACE, MXTORCH_PS_SECRET, MXTORCH_DIST_TIMEOUT, ...
                     see mxtorch.kvstore.ps.PSConfig

  DMLC_PS_ROOT_URI=10.0.0.1 DMLC_PS_ROOT_PORT=9000 DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=1 mxtorch scheduler
  DMLC_PS_ROOT_URI=10.0.0.1 DMLC_PS_ROOT_PORT=9000 DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=1 mxtorch server

The scheduler exits 0 once every worker has shut down, and stops the servers.  A missing or
malformed variable is an error (exit status 2) naming it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from ..base import MXNetError
from ..distributed.env import (
    DMLC_NUM_SERVER,
    DMLC_NUM_WORKER,
    DMLC_PS_ROOT_PORT,
    DMLC_PS_ROOT_URI,
    DMLC_ROLE,
    MXTORCH_PS_SERVER_IMPORTS,
    DistributedConfigError,
)

ROLES = ("scheduler", "server")

_OPTIONS = (  # (flag, variable, metavar)
    ("--root-uri", DMLC_PS_ROOT_URI, "HOST"),
    ("--root-port", DMLC_PS_ROOT_PORT, "PORT"),
    ("--num-workers", DMLC_NUM_WORKER, "N"),
    ("--num-servers", DMLC_NUM_SERVER, "N"),
)


def add_parser(sub: Any) -> None:
    """Register both subcommands (``mxtorch.cli.main`` calls this once for the module)."""
    helps = {"scheduler": "run the scheduler of a parameter-server job",
             "server": "run one parameter server of a job"}
    for role in ROLES:
        p = sub.add_parser(role, help=helps[role], description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        for flag, var, metavar in _OPTIONS:
            p.add_argument(flag, dest=var, default=None, metavar=metavar, help=f"instead of {var}")
        if role == "server":
            p.add_argument("--import", dest="imports", action="append", default=None, metavar="MODULE",
                           help="import MODULE before serving, where custom optimizers are registered "
                                f"(repeatable; added to {MXTORCH_PS_SERVER_IMPORTS})")


def role_environment(role: str, args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the role reads: ``environ`` with ``DMLC_ROLE`` set and the options applied.

    Raises :class:`DistributedConfigError` if ``DMLC_ROLE`` names another role.
    """
    env = dict(environ)
    given = env.get(DMLC_ROLE, "").strip()
    if given and given != role:
        raise DistributedConfigError(
            f"environment variable {DMLC_ROLE}={given!r}, but `mxtorch {role}` runs the {role}: unset "
            f"{DMLC_ROLE} or set it to {role!r} (a worker runs the training script instead)")
    env[DMLC_ROLE] = role
    for _, var, _ in _OPTIONS:
        value = getattr(args, var, None)
        if value is not None:
            env[var] = value
    imports = getattr(args, "imports", None)
    if imports:
        from ..kvstore.ps.config import parse_modules

        names = [n for n in env.get(MXTORCH_PS_SERVER_IMPORTS, "").split(",") if n.strip()] + imports
        env[MXTORCH_PS_SERVER_IMPORTS] = ",".join(parse_modules(",".join(names), "--import"))
    return env


def run(args: argparse.Namespace) -> int:
    role = args.command
    prog = f"mxtorch {role}"
    try:
        env = role_environment(role, args, os.environ)
        from ..kvstore.ps import PSConfig, run_scheduler, run_server

        config = PSConfig.from_env(env)
    except DistributedConfigError as e:
        print(f"{prog}: error: {e}", file=sys.stderr, flush=True)
        return 2
    except ImportError as e:
        print(f"{prog}: error: this mxtorch has no parameter server (mxtorch.kvstore.ps: {e})",
              file=sys.stderr, flush=True)
        return 2
    try:
        return int(run_scheduler(config) if role == "scheduler" else run_server(config))
    except MXNetError as e:  # a peer timed out or died, a bad message, ...: say what, not where
        print(f"{prog}: error: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr, flush=True)
        return 130
