"""Errors shared by every mxtorch module."""

from __future__ import annotations

__all__ = ["MXNetError", "DeferredInitializationError"]


class MXNetError(RuntimeError):
    """Base class of mxtorch's errors (named as in MXNet so ``except mx.MXNetError`` works)."""


class DeferredInitializationError(MXNetError):
    """A parameter's shape is not known yet: run a forward pass first, or give the shape."""
