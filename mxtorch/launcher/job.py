"""What every launcher needs to know about a job, and the environment its processes receive.

A :class:`JobSpec` is launcher-neutral: the command, how many workers (and parameter servers),
the environment to add, restarts and a time limit.  :func:`worker_environment` turns it into
the variables MXNet's launcher used to set (``DMLC_*``), so that scripts written for MXNet
still find their role and the scheduler's address; rank, world size and the rendezvous
address (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ...) come from torchrun or, for MPI and
Slurm, from the worker entry point ``python -m mxtorch.launcher``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..distributed.env import (
    DMLC_NUM_SERVER,
    DMLC_NUM_WORKER,
    DMLC_PS_ROOT_PORT,
    DMLC_PS_ROOT_URI,
    DMLC_ROLE,
    MXTORCH_PS_SECRET,
    LaunchError,
)

__all__ = ["LaunchError", "JobSpec", "parse_env_pairs", "worker_environment", "resolve_command",
           "DEFAULT_MASTER_PORT", "RESTART_ENV", "PS_ROLE_MODES"]

DEFAULT_MASTER_PORT = 29500
"""Rendezvous port on the first host when none is given (torchrun's default too)."""

RESTART_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
"""For torchrun agents of jobs that may restart: workers then get a fresh store for every attempt.
A store shared with the agent keeps the previous attempt's keys, and restarted gloo/NCCL groups
dial dead peers (pytorch/pytorch#135712)."""

PS_ROLE_MODES = ("separate", "same-command")
"""What parameter-server processes run: ``separate`` = ``mxtorch scheduler`` / ``mxtorch server``;
``same-command`` = the workers' command with ``DMLC_ROLE=scheduler|server`` (MXNet's way: the
script becomes its role when it creates the dist KVStore)."""

_PYTHON_NAMES = ("python", "python3", f"python3.{sys.version_info.minor}")


@dataclass
class JobSpec:
    """One distributed job, independent of the launcher that starts it.

    ``env`` goes to every process, ``worker_env`` to workers and ``server_env`` to parameter
    servers (applied after ``env``, so they win); none may hold ``MXTORCH_PS_SECRET``, which
    travels apart from command lines (:mod:`.secret`).  ``timeout`` is in seconds (``None``: no
    limit); ``master_port`` ``None`` lets the launcher choose.  With servers, ``ps_roles``
    says what the scheduler and servers run (:data:`PS_ROLE_MODES`) and ``ps_root_port`` is the
    scheduler's port (``None``: a free port locally, ``master_port + 1`` on a cluster).
    """

    command: list[str]
    num_workers: int = 1
    num_servers: int = 0
    env: dict[str, str] = field(default_factory=dict)
    worker_env: dict[str, str] = field(default_factory=dict)
    server_env: dict[str, str] = field(default_factory=dict)
    max_restarts: int = 0
    timeout: float | None = None
    master_port: int | None = None
    ps_roles: str = "separate"
    ps_root_port: int | None = None

    def __post_init__(self) -> None:
        if not self.command:
            raise LaunchError("no command to launch: give it after the options, "
                              "e.g. `mxtorch launch -n 2 python train.py`")
        _check_int("the number of workers (-n)", self.num_workers, 1)
        _check_int("the number of servers (-s)", self.num_servers, 0)
        _check_int("--max-restarts", self.max_restarts, 0)
        if self.timeout is not None and not self.timeout > 0:
            raise LaunchError(f"--timeout must be a number of seconds > 0, got {self.timeout!r}")
        if self.master_port is not None and not 0 < self.master_port < 65536:
            raise LaunchError(f"--master-port must be in 1..65535, got {self.master_port!r}")
        if self.ps_root_port is not None and not 0 < self.ps_root_port < 65536:
            raise LaunchError(f"--ps-root-port must be in 1..65535, got {self.ps_root_port!r}")
        if self.ps_roles not in PS_ROLE_MODES:
            raise LaunchError(f"--ps-roles {self.ps_roles!r}: choose one of {', '.join(PS_ROLE_MODES)}")
        if self.num_servers and self.max_restarts:
            raise LaunchError(f"--max-restarts {self.max_restarts} with -s {self.num_servers}: the scheduler "
                              "admits each worker once, so restarted workers cannot rejoin a "
                              "parameter-server job; use --max-restarts 0")
        for option, env in (("--env", self.env), ("--env-worker", self.worker_env),
                            ("--env-server", self.server_env)):
            if MXTORCH_PS_SECRET in env:  # it would be on command lines: ps shows them to every user
                raise LaunchError(f"{option} {MXTORCH_PS_SECRET}:...: a secret on a command line can be read "
                                  f"by every user of the machine (ps); export {MXTORCH_PS_SECRET} in the "
                                  "launcher's environment instead (every process of the job gets it), or "
                                  "leave it out: the launcher makes one per job")


def _check_int(what: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LaunchError(f"{what} must be an integer >= {minimum}, got {value!r}")


def parse_env_pairs(items: Iterable[str], option: str = "--env") -> dict[str, str]:
    """``['A:1', 'B:x:y']`` -> ``{'A': '1', 'B': 'x:y'}`` (the value is everything after the first ':')."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(":")
        name = name.strip()
        if not sep:
            raise LaunchError(f"{option} {item!r}: expected NAME:VALUE, e.g. {option} OMP_NUM_THREADS:4 "
                              f"(to pass on this shell's value write {option} {item}:${item})")
        if not name or not (name[0].isalpha() or name[0] == "_") or \
                not all(c.isalnum() or c == "_" for c in name):
            raise LaunchError(f"{option} {item!r}: {name!r} is not a valid environment variable name "
                              "(letters, digits and '_', not starting with a digit)")
        out[name] = value
    return out


def worker_environment(spec: JobSpec, master_addr: str, master_port: int) -> dict[str, str]:
    """Variables every worker gets on top of the launcher's environment (user values last).

    The parameter-server root port is ``spec.ps_root_port``, else ``master_port + 1``: it must
    differ from torch's rendezvous store on ``master_port``.
    """
    ps_port = spec.ps_root_port if spec.ps_root_port is not None else master_port + 1
    env = {
        DMLC_ROLE: "worker",
        DMLC_NUM_WORKER: str(spec.num_workers),
        DMLC_NUM_SERVER: str(spec.num_servers),
        DMLC_PS_ROOT_URI: master_addr,
        DMLC_PS_ROOT_PORT: str(ps_port),
    }
    env.update(spec.env)
    env.update(spec.worker_env)
    return env


def resolve_command(command: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The command a local worker runs: a bare ``python``/``python3`` becomes this interpreter
    (so the job uses the environment mxtorch runs in), as does ``mxtorch`` (this mxtorch's
    command line), a ``*.py`` file is run with it, and any other program must be found on PATH
    or be a path to an executable file.
    """
    environ = os.environ if environ is None else environ
    prog, rest = command[0], list(command[1:])
    if prog in _PYTHON_NAMES:
        return [sys.executable, *rest]
    if prog == "mxtorch":
        return [sys.executable, "-m", "mxtorch.cli.main", *rest]
    if prog.endswith(".py") and os.path.isfile(prog):
        return [sys.executable, prog, *rest]
    if os.sep in prog:
        if not (os.path.isfile(prog) and os.access(prog, os.X_OK)):
            raise LaunchError(f"cannot run {prog!r}: no such executable file")
        return [prog, *rest]
    found = shutil.which(prog, path=environ.get("PATH"))
    if found is None:
        raise LaunchError(f"cannot run {prog!r}: not found on PATH")
    return [found, *rest]
