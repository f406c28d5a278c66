"""Where a collective runs (the global job or a process set), as the collectives read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Scope"]


@dataclass(frozen=True)
class Scope:
    """Where a collective runs: the torch group, its size, this rank's index and the global ranks."""

    group: Any
    size: int
    rank: int
    ranks: tuple[int, ...]
    set_id: int
