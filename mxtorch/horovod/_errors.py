"""Errors raised by ``mxtorch.horovod``."""

from __future__ import annotations

from ..base import MXNetError

__all__ = ["HorovodError", "NotInitializedError", "CollectiveMismatchError", "CollectiveValueError",
           "CollectiveTypeError"]


class HorovodError(MXNetError):
    """A Horovod-style collective could not run (bad arguments, a failing peer, ...)."""


class NotInitializedError(HorovodError, ValueError):
    """A collective or a rank query was used before ``hvd.init()``."""


class CollectiveMismatchError(HorovodError):
    """Ranks called different collectives, or one collective with different names, shapes or dtypes."""


class CollectiveValueError(HorovodError, ValueError):
    """A collective's arguments are wrong (found when the ranks negotiate it).

    Horovod's MXNet binding reports these as ``MXNetError``; this is both, so code catching
    either keeps working."""


class CollectiveTypeError(HorovodError, TypeError):
    """A collective's tensor or argument has an unsupported type (``MXNetError`` and ``TypeError``)."""
