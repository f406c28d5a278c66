"""MXNet's ``mx.engine``: the bulk-execution size, and operator failures raised at the next read.

MXNet's engine could bundle up to ``size`` small operators into one scheduled unit.  mxtorch
runs every operator eagerly on PyTorch, so there is nothing to bundle: the size is recorded
(``set_bulk_size`` returns the previous one, as in MXNet) and results are the same with any size.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .base import MXNetError

__all__ = ["set_bulk_size", "bulk", "PendingError", "defer", "rethrow", "wait_for_all"]


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


class PendingError:
    """An operator's failure not raised yet: MXNet's engine ran operators after the call returned,
    so a check that failed inside one surfaces at the next read of its result (``asnumpy``,
    ``wait_to_read``) or at ``mx.nd.waitall()``, once, and is then cleared."""

    __slots__ = ("error", "__weakref__")

    def __init__(self, error: BaseException) -> None:
        self.error: BaseException | None = error

    def take(self) -> BaseException | None:
        """The error, cleared (a failure is raised once, as MXNet's engine rethrows it once)."""
        error, self.error = self.error, None
        return error


_pending: list[weakref.ref[PendingError]] = []  # failures whose arrays are still alive, oldest first
_pending_lock = threading.Lock()


def defer(error: BaseException) -> PendingError:
    """Record ``error`` as pending (its arrays hold the returned object; waitall sees it while they live)."""
    pending = PendingError(error)
    with _pending_lock:
        _pending[:] = [r for r in _pending if r() is not None]
        _pending.append(weakref.ref(pending))
    return pending


def rethrow(pending: PendingError | None) -> None:
    """Raise ``pending``'s error if it is still set (then it is cleared)."""
    error = pending.take() if pending is not None else None
    if error is not None:
        raise error


def wait_for_all() -> None:
    """MXNet's ``waitall``: clear every pending failure and raise the oldest of them, if any."""
    with _pending_lock:
        live = [p for p in (r() for r in _pending) if p is not None]
        _pending.clear()
    errors = [e for e in (p.take() for p in live) if e is not None]
    if errors:
        raise errors[0]
