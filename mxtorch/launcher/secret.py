"""The secret of a parameter-server job: one per job, in every process's environment, on no command line.

Every job with parameter servers that a launcher starts (``mxtorch launch -s M`` with any
``--launcher``, ``mxtorch train --servers M``) is authenticated: the launcher takes the
``MXTORCH_PS_SECRET`` of its own environment when the user set one (so that processes started
by hand can join the same job), else makes a fresh one (:func:`job_secret`), and each process
of the job receives it as ``MXTORCH_PS_SECRET``.  The scheduler then admits only nodes that
prove they know it, and servers answer only workers that did (:mod:`mxtorch.kvstore.ps.protocol`).

A command line is readable by every user of a machine (``ps``, ``/proc/PID/cmdline``), an
environment only by the process's owner, so the secret never appears in an argv:

=========  ==========================================================================================
launcher   how the secret reaches the job's processes
=========  ==========================================================================================
local      the launcher's environment, inherited by the scheduler, servers and torchrun's workers
ssh        ssh's stdin: the remote shell runs ``read -r MXTORCH_PS_SECRET; export ...`` first
           (:data:`READ_SECRET`), then the command; only the variable's *name* is on the line
           (the remote login shell must be a POSIX shell, as for the ``export`` it already runs)
mpi        ``mpirun -x MXTORCH_PS_SECRET`` (the name: Open MPI takes the value from mpirun's
           environment and ships it to the ranks with the job, not on a command line)
slurm      ``srun --export=ALL,...``: srun's own environment, which holds the secret, goes to the tasks
cluster    ``ip netns exec`` keeps the environment it was started with
=========  ==========================================================================================

``--dry-run`` prints the commands without the secret.  Jobs without servers get none:
torch.distributed (gloo/NCCL, its TCPStore rendezvous) takes no secret, so there would be
nothing for it to protect (docs/security.md says how to isolate that traffic).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping

from ..distributed.env import MXTORCH_PS_SECRET
from .job import JobSpec

__all__ = ["SECRET_BYTES", "READ_SECRET", "job_secret", "secret_environment"]

SECRET_BYTES = 32
"""Random bytes in a generated secret (64 hex digits)."""

READ_SECRET = f"read -r {MXTORCH_PS_SECRET} && export {MXTORCH_PS_SECRET}"
"""Shell words that set the secret from the first line of stdin (a builtin: no process, no argv)."""


def job_secret(spec: JobSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """The secret of ``spec``'s processes: ``None`` without servers; else the launcher's own
    ``MXTORCH_PS_SECRET`` when set (kept), else a fresh ``secrets.token_hex``.

    >>> len(job_secret(JobSpec(["x"], 1, 1), {}))
    64
    >>> job_secret(JobSpec(["x"], 1, 1), {"MXTORCH_PS_SECRET": "mine"}), job_secret(JobSpec(["x"], 1, 0))
    ('mine', None)
    """
    if not spec.num_servers:
        return None
    environ = os.environ if environ is None else environ
    given = environ.get(MXTORCH_PS_SECRET, "").strip()
    return given or secrets.token_hex(SECRET_BYTES)


def secret_environment(secret: str | None) -> dict[str, str]:
    """``{'MXTORCH_PS_SECRET': secret}``, or ``{}`` for a job without one."""
    return {} if secret is None else {MXTORCH_PS_SECRET: secret}

