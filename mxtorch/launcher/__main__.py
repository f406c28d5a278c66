"""``python -m mxtorch.launcher COMMAND [ARGS...]``: run one worker that mpirun or srun started.

Sets torchrun's variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``) from MPI's or Slurm's, then replaces itself with the
command (a bare ``python`` means this interpreter), so the worker is any program that
torchrun could have started.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .job import LaunchError, resolve_command
from .remote import rank_environment


def main(argv: Sequence[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if not command:
        print("usage: python -m mxtorch.launcher COMMAND [ARGS...]", file=sys.stderr)
        return 2
    try:
        os.environ.update(rank_environment(os.environ))
        command = resolve_command(command)
    except LaunchError as e:
        print(f"python -m mxtorch.launcher: {e}", file=sys.stderr)
        return 2
    try:
        os.execv(command[0], command)
    except OSError as e:
        print(f"python -m mxtorch.launcher: cannot run {command[0]!r}: {e.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached: execv replaced this process


if __name__ == "__main__":
    sys.exit(main())
