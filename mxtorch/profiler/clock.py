"""``SpanClock``: the seconds one thread spends inside mxtorch's spans, summed by group, whether a
profiler records or not.

``mxtorch train`` uses it to split every step into waiting for data (``mxtorch/data.wait``), waiting
for communication (``mxtorch/allreduce``, ``mxtorch/pushpull``, ...) and the rest::

    clock = SpanClock({"data": DATA_SPANS, "comm": COMM_SPANS})
    with clock:                       # installed: spans on this thread are timed
        ...
    clock.seconds["comm"]             # the seconds inside communication spans so far

Only the thread that installed the clock is timed (a background thread's communication is not a
wait of the training loop), and a span inside another of the same group counts once.  While no
clock is installed a span costs what it did (one more global read); while one is, a span of a
group costs two ``perf_counter`` calls and one of no group a dictionary lookup.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import _spans

__all__ = ["COMM_SPANS", "DATA_SPANS", "SpanClock"]

DATA_SPANS = ("data.wait",)
"""The spans of waiting for a batch."""
COMM_SPANS = ("allreduce", "allreduce.wait", "broadcast", "pushpull", "ps.push", "ps.pull",
              "pipeline.send", "pipeline.recv", "pipeline.send.wait", "pipeline.recv.wait")
"""The spans of waiting for the other workers, the parameter servers or the neighbouring pipeline stages."""


class _GroupTimer:
    """A span of one group while the clock runs: falsy (callers skip computing the span's arguments,
    as while nothing records), and entering it times the group on the clock's thread."""

    __slots__ = ("clock", "group")

    def __init__(self, clock: SpanClock, group: str) -> None:
        self.clock, self.group = clock, group

    def __enter__(self) -> _GroupTimer:
        clock = self.clock
        if threading.get_ident() == clock.thread:
            depth = clock._depth[self.group]
            if depth == 0:
                clock._since[self.group] = clock.now()
            clock._depth[self.group] = depth + 1
        return self

    def __exit__(self, *exc: object) -> None:
        clock = self.clock
        if threading.get_ident() == clock.thread:
            depth = clock._depth[self.group] - 1
            clock._depth[self.group] = depth
            if depth == 0:
                clock.seconds[self.group] += clock.now() - clock._since[self.group]

    def __bool__(self) -> bool:
        return False

    def note(self, **args: Any) -> None:
        return None


class SpanClock:
    """Seconds inside the spans of each group (span names without ``mxtorch/``), on the thread that
    created the clock, from :meth:`start` (or ``with``) to :meth:`stop`; ``now`` reads the time."""

    def __init__(self, groups: Mapping[str, Iterable[str]],
                 now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now
        self.thread = threading.get_ident()
        self.seconds: dict[str, float] = {g: 0.0 for g in groups}
        self._depth = {g: 0 for g in groups}
        self._since = {g: 0.0 for g in groups}
        self._timers: dict[str, Any] = {}
        for group, names in groups.items():
            for name in names:
                if name in self._timers:
                    raise ValueError(f"SpanClock: span {name!r} is in two groups")
                self._timers[name] = _GroupTimer(self, group)
        self._before: Any = None

    def timer(self, name: str) -> Any:
        """What :func:`~mxtorch.profiler.span` enters for span ``name`` while this clock runs."""
        return self._timers.get(name, _spans._OFF)

    def start(self) -> SpanClock:
        """Time spans from now (the clock installed before, if any, resumes at :meth:`stop`)."""
        self._before = _spans.set_clock(self)
        return self

    def stop(self) -> None:
        """Stop timing; :attr:`seconds` keeps the sums."""
        if _spans._clock is self:
            _spans.set_clock(self._before)
        self._before = None

    def __enter__(self) -> SpanClock:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
