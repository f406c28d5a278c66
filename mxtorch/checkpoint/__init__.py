"""``mx.checkpoint``: checkpoints of a training job that resume it exactly, on any file system.

:class:`CheckpointManager` saves numbered checkpoints (parameters, trainer and optimizer states,
every RNG, the data loader's position, user values) under a folder that fsspec reaches (plain
paths, ``file://``, ``memory://``, ...), commits each one atomically with a manifest of sha256
checksums, keeps the last few, writes in the background, and restores the newest good one.
"""

from __future__ import annotations

from ..stateful import Stateful
from ._rng import RNGState, capture_rng, restore_rng
from .manager import MANIFEST, CheckpointError, CheckpointManager

__all__ = ["CheckpointManager", "CheckpointError", "MANIFEST", "RNGState", "Stateful", "capture_rng",
           "restore_rng"]
