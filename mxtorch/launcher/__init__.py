"""Starting distributed jobs: MXNet's ``tools/launch.py``, on torchrun.

``mxtorch launch`` (:mod:`mxtorch.cli.launch`) is the command line; this package holds what
it uses: the job description (:mod:`.job`), the local launcher on torch's elastic agent
(:mod:`.local`), the ssh / mpirun / srun command builders (:mod:`.remote`) and the per-job
secret of parameter-server jobs, handed over outside command lines (:mod:`.secret`).
"""

from .job import (
    DEFAULT_MASTER_PORT,
    JobSpec,
    LaunchError,
    parse_env_pairs,
    resolve_command,
    worker_environment,
)
from .local import EXIT_TIMEOUT, JobTimedOut, launch_local
from .remote import (
    Host,
    assign_workers,
    mpi_command,
    parse_hostfile,
    rank_environment,
    read_hostfile,
    run_commands,
    slurm_command,
    ssh_commands,
    torchrun_command,
)

__all__ = ["DEFAULT_MASTER_PORT", "EXIT_TIMEOUT", "Host", "JobSpec", "JobTimedOut", "LaunchError",
           "assign_workers", "launch_local", "mpi_command", "parse_env_pairs", "parse_hostfile",
           "rank_environment", "read_hostfile", "resolve_command", "run_commands", "slurm_command",
           "ssh_commands", "torchrun_command", "worker_environment"]
