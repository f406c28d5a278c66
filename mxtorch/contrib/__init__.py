"""Contributed extensions outside MXNet 1.x's core API (``mxtorch.contrib.pruning``).

Nothing here is imported by ``import mxtorch``: ``from mxtorch.contrib import pruning``.
"""

from __future__ import annotations

__all__ = ["pruning"]
