"""MXNet's profiling objects: Domain, Task, Frame, Event, Counter, Marker, and ``scope``.

Tasks, frames and events are ``record_function`` spans under their own names (their category in
``dumps()`` is their domain's name); a counter is a Chrome counter track (``"ph": "C"``) whose
values also reach the aggregate table; a marker is an instant event.  All of them record only
while the profiler runs, as in MXNet.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from typing import Any

from . import _spans
from ._session import PROFILER

__all__ = ["Domain", "Task", "Frame", "Event", "Counter", "Marker", "scope"]


class Domain:
    """A category that groups tasks, frames, counters and markers (MXNet's ``profiler.Domain``)."""

    def __init__(self, name: str) -> None:
        self.name = str(name)

    def __str__(self) -> str:
        return self.name

    def new_task(self, name: str) -> Task:
        return Task(self, name)

    def new_frame(self, name: str) -> Frame:
        return Frame(self, name)

    def new_counter(self, name: str, value: int | None = None) -> Counter:
        return Counter(self, name, value)

    def new_marker(self, name: str) -> Marker:
        return Marker(self, name)


class _Duration:
    """A span started and stopped by hand (``start()`` ... ``stop()``), or used as ``with``."""

    _category = "event"

    def __init__(self, name: str, category: str | None = None) -> None:
        self.name = str(name)
        self.category = category or self._category
        self._span: Any = None

    def start(self) -> None:
        """Start timing (nothing is recorded while the profiler does not run)."""
        if self._span is None and _spans.recording():
            self._span = _spans._Span(self.name, {"domain": self.category})
            self._span.__enter__()

    def stop(self) -> None:
        """Stop timing; the span joins the trace and the aggregate table."""
        span, self._span = self._span, None
        if span is not None:
            span.__exit__(None, None, None)

    def __enter__(self) -> _Duration:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __str__(self) -> str:
        return self.name


class Task(_Duration):
    """A unit of work of a thread; every pass through it joins one entry of the table."""

    def __init__(self, domain: Domain, name: str) -> None:
        super().__init__(name, domain.name)
        self.domain = domain


class Frame(_Duration):
    """A period between two points (a frame of a video, a step of training)."""

    def __init__(self, domain: Domain, name: str) -> None:
        super().__init__(name, domain.name)
        self.domain = domain


class Event(_Duration):
    """A demarcated region of code, outside any domain."""


class Counter:
    """A value tracked over time (a counter track in the trace)."""

    def __init__(self, domain: Domain, name: str, value: int | None = None) -> None:
        self.domain = domain
        self.name = str(name)
        self.value = 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value: int) -> None:
        self.value = int(value)
        now = time.time_ns()
        PROFILER.add_own_event({"ph": "C", "name": self.name, "cat": self.domain.name,
                                "tid": 0, "args": {self.name: self.value}}, now)
        if PROFILER.running and not PROFILER.paused and PROFILER.config["aggregate_stats"]:
            PROFILER.stats.add(self.domain.name, self.name, float(self.value), counter=True)

    def increment(self, delta: int = 1) -> None:
        self.set_value(self.value + int(delta))

    def decrement(self, delta: int = 1) -> None:
        self.set_value(self.value - int(delta))

    def __iadd__(self, delta: int) -> Counter:
        self.increment(delta)
        return self

    def __isub__(self, delta: int) -> Counter:
        self.decrement(delta)
        return self

    def __str__(self) -> str:
        return self.name


_SCOPES = {"global": "g", "process": "p", "thread": "t", "task": "t", "marker": "t"}


class Marker:
    """An instant in time, across the scope named at :meth:`mark`."""

    def __init__(self, domain: Domain, name: str) -> None:
        self.domain = domain
        self.name = str(name)

    def mark(self, scope: str = "process") -> None:
        """Mark now; ``scope``: 'global', 'process', 'thread', 'task' or 'marker'."""
        if scope not in _SCOPES:
            raise ValueError(f"Marker.mark: scope={scope!r} is not one of {', '.join(_SCOPES)}")
        import threading

        PROFILER.add_own_event({"ph": "i", "name": self.name, "cat": self.domain.name, "s": _SCOPES[scope],
                                "tid": threading.get_native_id()}, time.time_ns())


_current_scope: contextvars.ContextVar[str] = contextvars.ContextVar("mxtorch_profiler_scope",
                                                                     default="<unk>:")


@contextlib.contextmanager
def scope(name: str = "<unk>:", append_mode: bool = True) -> Iterator[str]:
    """A named phase (MXNet 2's ``profiler.scope``): nested scopes join as ``outer:inner:``;
    while the profiler runs the phase is a span of that name."""
    name = name if name.endswith(":") else name + ":"
    if append_mode and _current_scope.get() != "<unk>:":
        name = _current_scope.get() + name
    token = _current_scope.set(name)
    try:
        with _Duration(name, "scope"):
            yield name
    finally:
        _current_scope.reset(token)
