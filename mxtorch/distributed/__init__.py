"""Processes working as one job: the launch environment and the shared process group.

``env`` names every environment variable mxtorch reads and turns a launcher's variables
into a :class:`WorldInfo`; ``group`` joins, waits on and cleanly leaves the torch.distributed
process group; ``testing`` runs functions or scripts as the ranks of a local job (tests).
"""

from .env import DistributedConfigError, DistributedError, WorldInfo, default_timeout, world_info_from_env
from .group import backend, barrier, init, is_initialized, shutdown, timeout, world

__all__ = [
    "DistributedError", "DistributedConfigError", "WorldInfo", "world_info_from_env", "default_timeout",
    "init", "is_initialized", "world", "backend", "timeout", "barrier", "shutdown",
]
