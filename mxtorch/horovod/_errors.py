"""Errors raised by ``mxtorch.horovod``."""

from __future__ import annotations

from ..base import MXNetError

__all__ = ["HorovodError", "NotInitializedError", "CollectiveMismatchError"]


class HorovodError(MXNetError):
    """A Horovod-style collective could not run (bad arguments, a failing peer, ...)."""


class NotInitializedError(HorovodError, ValueError):
    """A collective or a rank query was used before ``hvd.init()``."""


class CollectiveMismatchError(HorovodError):
    """Ranks called different collectives, or one collective with different names, shapes or dtypes."""
