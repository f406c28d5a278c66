"""The errors of the emulated cluster."""

from __future__ import annotations

from ..base import MXNetError

__all__ = ["ClusterError", "ClusterUnavailable"]


class ClusterError(MXNetError):
    """A cluster operation failed: bad option, unknown host or cluster, an ``ip``/``tc`` command failed."""


class ClusterUnavailable(ClusterError):
    """This machine cannot make network namespaces (not root, no kernel support, no iproute2).

    ``reason`` says what is missing and how to get it; the cluster tests skip with it.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)
