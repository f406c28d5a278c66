"""``span(name)``: a ``torch.profiler.record_function`` named ``mxtorch/<name>``, free when off.

Every communication path and phase of mxtorch runs inside one::

    with span("allreduce") as sp:
        if sp:  # only while a profiler records: the arguments cost nothing otherwise
            sp.note(keys=keys, bytes=nbytes, bucket=i)
        ...

While no profiler records (neither ``mx.profiler`` nor a ``torch.profiler.profile`` the user
started), :func:`span` returns one shared do-nothing object: a global read and a call, no
``record_function`` (whose dispatcher call costs microseconds).  While one records, the span
enters a ``record_function`` (so kernels nest under it in the trace) and keeps its arguments
on the side: torch's trace has no place for a span's arguments, so :mod:`._session` writes them
into the span's trace event when it exports the trace.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import torch.autograd.profiler as _autograd_profiler

__all__ = ["span", "recording", "span_active", "SpanRecord", "take_records", "set_paused", "set_clock",
           "PREFIX"]

PREFIX = "mxtorch/"
MAX_RECORDS = 1 << 20  # spans with arguments kept per trace; later ones keep their timing only
_ARG_CHARS = 200  # an argument's text is cut here (a list of a thousand keys stays readable)

_paused = False  # mx.profiler.pause(): torch still records, our spans do not
_clock: Any = None  # a SpanClock (mxtorch.profiler.clock) timing spans by group, profiler or not
_records: list[SpanRecord] = []
_dropped = 0


class SpanRecord:
    """A finished span's arguments: which thread, which name, when it began (epoch ns)."""

    __slots__ = ("tid", "name", "start_ns", "args")

    def __init__(self, tid: int, name: str, start_ns: int, args: dict[str, Any]) -> None:
        self.tid, self.name, self.start_ns, self.args = tid, name, start_ns, args


class _Off:
    """The span while nothing records: falsy, and entering it does nothing."""

    __slots__ = ()

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __bool__(self) -> bool:
        return False

    def note(self, **args: Any) -> None:
        return None


_OFF = _Off()


class _Span:
    __slots__ = ("name", "args", "_rf", "_start", "_timed")

    def __init__(self, name: str, args: dict[str, Any], timed: Any = _OFF) -> None:
        self.name = name
        self.args = args
        self._rf = _autograd_profiler.record_function(name)
        self._start = 0
        self._timed = timed  # the clock's timer of this span's group, or _OFF

    def __enter__(self) -> _Span:
        self._timed.__enter__()
        self._rf.__enter__()
        self._start = time.time_ns()  # after: the first enter in a process can take milliseconds
        return self

    def __exit__(self, *exc: object) -> None:
        self._rf.__exit__(None, None, None)
        self._timed.__exit__()
        if self.args:
            _keep(SpanRecord(threading.get_native_id(), self.name, self._start, self.args))

    def __bool__(self) -> bool:
        return True

    def note(self, **args: Any) -> None:
        """Add arguments to this span (shown in the trace event's ``args``)."""
        self.args.update(args)


def _keep(record: SpanRecord) -> None:
    global _dropped
    if len(_records) < MAX_RECORDS:
        _records.append(record)
    else:
        _dropped += 1


def recording() -> bool:
    """Whether a profiler records now (``mx.profiler`` running and not paused, or ``torch.profiler``)."""
    return _autograd_profiler._is_profiler_enabled and not _paused


def span_active(name: str) -> bool:
    """Whether :func:`span` of ``name`` would do anything now: a profiler records, or a
    :class:`~mxtorch.profiler.clock.SpanClock` times ``name`` (for callers whose span needs set-up)."""
    if _autograd_profiler._is_profiler_enabled and not _paused:
        return True
    return _clock is not None and _clock.timer(name) is not _OFF


def span(name: str, **args: Any) -> Any:
    """A ``record_function`` named ``mxtorch/<name>`` with ``args``, or a no-op while nothing records
    (timed, and still falsy, while a :class:`~mxtorch.profiler.clock.SpanClock` times its name)."""
    if not _autograd_profiler._is_profiler_enabled or _paused:
        return _OFF if _clock is None else _clock.timer(name)
    return _Span(PREFIX + name, args, _OFF if _clock is None else _clock.timer(name))


def set_clock(clock: Any) -> Any:
    """Install ``clock`` (a SpanClock, or None) as the one that times spans; returns the one before."""
    global _clock
    before, _clock = _clock, clock
    return before


def set_paused(paused: bool) -> None:
    global _paused
    _paused = paused


def take_records() -> tuple[list[SpanRecord], int]:
    """The spans' arguments kept since the last call, and how many were dropped (over the cap)."""
    global _records, _dropped
    out, dropped = _records, _dropped
    _records, _dropped = [], 0
    return out, dropped


def describe(value: Any) -> Any:
    """A JSON-friendly form of one argument: numbers and short strings as they are, else text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, str)) for v in value[:64]):
        text = ",".join(str(v) for v in value[:64]) + (",..." if len(value) > 64 else "")
        return text if len(text) <= _ARG_CHARS else text[:_ARG_CHARS] + "..."
    text = str(value)
    return text if len(text) <= _ARG_CHARS else text[:_ARG_CHARS] + "..."
