"""MXNet's ``mx.engine``: the bulk-execution size.

MXNet's engine could bundle up to ``size`` small operators into one scheduled unit.  mxtorch
runs every operator eagerly on PyTorch, so there is nothing to bundle: the size is recorded
(``set_bulk_size`` returns the previous one, as in MXNet) and results are the same with any size.
"""

from __future__ import annotations

import threading
from typing import Any

from .base import MXNetError

__all__ = ["set_bulk_size", "bulk"]


class _BulkState(threading.local):
    size = 0  # MXNet's default: no bulking


_bulk = _BulkState()


def set_bulk_size(size: int) -> int:
    """Set the most operators one bulk may bundle; returns the previous size."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise MXNetError(f"set_bulk_size: size must be an int >= 0, got {size!r}")
    prev = _bulk.size
    _bulk.size = size
    return prev


class _BulkScope:
    """``with mx.engine.bulk(size):`` — the bulk size inside the block, restored after."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._old_size: int | None = None

    def __enter__(self) -> _BulkScope:
        self._old_size = set_bulk_size(self._size)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._old_size is not None:
            set_bulk_size(self._old_size)


def bulk(size: int) -> _BulkScope:
    """A scope that lets the engine bundle up to ``size`` operators (``with mx.engine.bulk(10):``)."""
    return _BulkScope(size)
