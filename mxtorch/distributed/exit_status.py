"""Whether this process is ending in failure, so that it can skip waiting for its peers and tell them why.

Python runs its exit handlers (:mod:`atexit`) alike for ``sys.exit(0)`` and ``sys.exit(3)`` and
does not tell them the status.  :func:`track` records it as it happens, in the main thread:

* an uncaught exception (through ``sys.excepthook``): ``"raised ValueError: shard 1 is corrupt"``;
* ``sys.exit(status)`` with a status other than 0 / None: ``"exited with status 3"``.

Code that knows of a failure some other way reports it with :func:`note_failure`.  Not seen:
``raise SystemExit(3)`` written out and the interactive ``exit(3)`` builtin (they bypass
``sys.exit``); such a process is treated as ending normally, so it waits for its peers at exit.
A ``sys.exit(3)`` that the program catches and survives still counts as a failure: the process
then leaves without waiting for its peers, which costs nothing when they are done too.

The distributed process group (:mod:`.group`) and the parameter-server worker read
:func:`failure` at exit.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, NoReturn

__all__ = ["track", "failure", "note_failure"]

_MAX_REASON = 300

_lock = threading.Lock()
_failure: str | None = None
_tracking = False


def track() -> None:
    """Start recording how the process ends (idempotent; wraps ``sys.excepthook`` and ``sys.exit``)."""
    global _tracking
    with _lock:
        if _tracking:
            return
        _tracking = True
        previous_hook = sys.excepthook
        previous_exit: Callable[..., Any] = sys.exit

    def excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            note_failure("was interrupted (KeyboardInterrupt)")
        else:
            text = str(value).strip().splitlines()
            note_failure(f"raised {kind.__name__}" + (f": {text[0]}" if text else ""))
        previous_hook(kind, value, tb)

    def exit(status: object = None) -> NoReturn:  # noqa: A001 - stands in for sys.exit
        if status is not None and status is not False and status != 0 and \
                threading.current_thread() is threading.main_thread():
            note_failure(f"exited with status {status}" if isinstance(status, int)
                         else f"exited with message {str(status)!r} (status 1)")
        previous_exit(status)
        raise SystemExit(status)  # only reached if the wrapped sys.exit returned

    exit.__doc__ = previous_exit.__doc__
    sys.excepthook = excepthook
    sys.exit = exit


def failure() -> str | None:
    """Why this process is failing (``"exited with status 3"``), or None while nothing says so."""
    return _failure


def note_failure(reason: str) -> None:
    """Record that the process is ending in failure; the first reason given is kept."""
    global _failure
    with _lock:
        if _failure is None:
            reason = " ".join(reason.split())
            _failure = reason if len(reason) <= _MAX_REASON else reason[:_MAX_REASON - 3] + "..."
