"""Horovod's timeline: ``HOROVOD_TIMELINE=/path/timeline.json`` or ``hvd.start_timeline(path)``.

It lives beside the profiler (not in :mod:`mxtorch.horovod`) because the allreduce KVStore, which
``hvd.DistributedTrainer`` runs on, records into it too.

Rank 0 writes a Chrome trace in Horovod's format: a JSON list whose first event names process 0
with ``start_time_since_epoch_in_micros``; then every tensor is a "process" (``pid`` = its index,
``process_name`` = its name) with its phases as begin/end pairs: ``NEGOTIATE_ALLREDUCE`` (with a
tick per ready rank), then the operation (``ALLREDUCE``, ``BROADCAST``, ...) holding its activities
(``MEMCPY_IN_FUSION_BUFFER`` when tensors are fused, ``GLOO_ALLREDUCE`` / ``NCCL_ALLREDUCE``, ...),
ended with the tensor's dtype and shape.  ``mark_cycles=True`` adds a ``CYCLE_START`` instant at
each collective (mxtorch runs each collective when it is called: a call is a cycle).

Differences from Horovod, and why: collectives are synchronous here, so negotiation is the
header exchange every rank makes before each collective, and every rank's tick is written when
that exchange completes (rank 0 learns no earlier arrival time).  Events are kept in memory
(at most ``MAX_EVENTS``) and the file is written by ``stop_timeline()`` (and at exit), so it is
valid JSON once stopped.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["start_timeline", "stop_timeline", "active", "describe", "activity", "Timeline",
           "HOROVOD_TIMELINE",
           "MAX_EVENTS"]

HOROVOD_TIMELINE = "HOROVOD_TIMELINE"  # Horovod's variable: start a timeline at hvd.init()
HOROVOD_TIMELINE_MARK_CYCLES = "HOROVOD_TIMELINE_MARK_CYCLES"
MAX_EVENTS = 5_000_000  # later events are dropped (and counted) rather than exhausting memory
_logger = logging.getLogger("mxtorch.horovod")


class Timeline:
    """The events of one timeline file, in Horovod's format."""

    def __init__(self, path: str, mark_cycles: bool, world_size: int) -> None:
        self.path = path
        self.mark_cycles = mark_cycles
        self.world_size = world_size
        self.lock = threading.Lock()
        self._t0 = time.perf_counter_ns()
        self.start_epoch_us = time.time_ns() // 1000
        self.tensors: dict[str, int] = {}
        self.events: list[dict[str, Any]] = []
        self.dropped = 0

    def _now(self) -> int:
        return (time.perf_counter_ns() - self._t0) // 1000

    def _add(self, event: dict[str, Any]) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append(event)
        else:
            self.dropped += 1

    def _pid(self, name: str) -> int:
        pid = self.tensors.get(name)
        if pid is None:
            pid = self.tensors[name] = len(self.tensors) + 1
            self._add({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
            self._add({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
        return pid

    def _phase(self, names: Sequence[str], ph: str, op: str | None = None,
               args: Sequence[dict[str, Any]] | None = None, ts: int | None = None) -> None:
        ts = self._now() if ts is None else ts
        for i, name in enumerate(names):
            event: dict[str, Any] = {"ph": ph, "ts": ts, "pid": self._pid(name)}
            if op is not None:
                event["name"] = op
            if args:
                event["args"] = args[i]
            self._add(event)

    def negotiate_begin(self, names: Sequence[str], kind: str) -> None:
        """The header exchange every rank makes before a collective begins: NEGOTIATE_<kind>."""
        with self.lock:
            if self.mark_cycles:
                self._add({"ph": "i", "name": "CYCLE_START", "ts": self._now(), "s": "g"})
            self._phase(names, "B", f"NEGOTIATE_{kind}")

    def negotiate_end(self, names: Sequence[str]) -> None:
        """Every rank is ready (a tick each), negotiation ends."""
        with self.lock:
            now = self._now()
            for r in range(self.world_size):
                self._phase(names, "X", str(r), ts=now)
            self._phase(names, "E", ts=now)

    def op_begin(self, names: Sequence[str], kind: str, activity: str, fused: bool = False) -> None:
        """The collective starts: <kind> (ALLREDUCE, BROADCAST, ...) and its ``activity`` in it."""
        with self.lock:
            self._phase(names, "B", kind)
            if fused:
                self._phase(names, "B", "MEMCPY_IN_FUSION_BUFFER")
                self._phase(names, "E")
            self._phase(names, "B", activity)

    def op_end(self, names: Sequence[str], fused: bool = False,
               args: Sequence[dict[str, Any]] | None = None) -> None:
        """The collective is done; each tensor's last event carries its ``args`` (dtype, shape)."""
        with self.lock:
            self._phase(names, "E")
            if fused:
                self._phase(names, "B", "MEMCPY_OUT_FUSION_BUFFER")
                self._phase(names, "E")
            self._phase(names, "E", args=args)

    @contextmanager
    def negotiation(self, names: Sequence[str], kind: str) -> Iterator[None]:
        self.negotiate_begin(names, kind)
        yield
        self.negotiate_end(names)

    @contextmanager
    def operation(self, names: Sequence[str], kind: str, activity: str, fused: bool = False,
                  args: Sequence[dict[str, Any]] | None = None) -> Iterator[None]:
        self.op_begin(names, kind, activity, fused)
        try:
            yield
        finally:
            self.op_end(names, fused, args)

    def write(self) -> None:
        with self.lock:
            head = [{"name": "process_name", "ph": "M", "pid": 0,
                     "args": {"start_time_since_epoch_in_micros": self.start_epoch_us}},
                    {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}]
            events = head + self.events
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(events, f)
        os.replace(tmp, self.path)
        if self.dropped:
            _logger.warning("horovod timeline: %d events past %d were dropped", self.dropped, MAX_EVENTS)
        _logger.info("horovod timeline: wrote %d events for %d tensors to %s", len(events), len(self.tensors),
                     self.path)


_active: Timeline | None = None
_atexit = False


def describe(tensors: Sequence[Any]) -> list[dict[str, Any]]:
    """Horovod's end-of-operation arguments of each tensor: its dtype and shape."""
    return [{"dtype": str(t.dtype).removeprefix("torch."), "shape": str(list(t.shape))} for t in tensors]


def activity(kind: str, t: Any) -> str:
    """The transport's activity name: NCCL_<kind> for CUDA tensors, GLOO_<kind> otherwise."""
    return f"{'NCCL' if getattr(t, 'is_cuda', False) else 'GLOO'}_{kind}"


def active() -> Timeline | None:
    """The timeline being recorded (on rank 0), or None."""
    return _active


def start_timeline(file_path: str, mark_cycles: bool, rank: int, world_size: int) -> None:
    """Start recording Horovod's timeline into ``file_path`` on rank 0 (``hvd.start_timeline``
    passes the job's rank and size); starting again with another path finishes the current file."""
    global _active, _atexit
    if not isinstance(file_path, (str, os.PathLike)) or not os.fspath(file_path):
        raise ValueError(f"start_timeline needs a file path, got {file_path!r}")
    if rank != 0:
        return
    path = os.fspath(file_path)
    if _active is not None:
        if _active.path == path:
            _active.mark_cycles = bool(mark_cycles)
            return
        stop_timeline()
    _active = Timeline(path, bool(mark_cycles), world_size)
    if not _atexit:
        atexit.register(stop_timeline)
        _atexit = True


def stop_timeline() -> None:
    """Stop recording and write the file (valid JSON from then on)."""
    global _active
    timeline, _active = _active, None
    if timeline is not None:
        timeline.write()


def start_from_environment(rank: int, world_size: int) -> None:
    """At hvd.init(): ``HOROVOD_TIMELINE`` names the file, ``HOROVOD_TIMELINE_MARK_CYCLES=1`` marks cycles."""
    path = os.environ.get(HOROVOD_TIMELINE, "").strip()
    if path:
        flag = os.environ.get(HOROVOD_TIMELINE_MARK_CYCLES, "0").strip().lower()
        start_timeline(path, flag in ("1", "true", "yes", "on"), rank, world_size)
