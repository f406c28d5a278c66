"""The profiler of this process: MXNet's configuration and states over ``torch.profiler``.

One ``torch.profiler.profile`` session runs from ``set_state('run')`` (or ``resume()``) to
``set_state('stop')`` (or ``pause()``).  When a session ends its Chrome trace is read back, the
arguments of our spans are written into their events, and the events join those of earlier
sessions (shifted onto one time base), so ``dump()`` writes everything recorded since the last
dump as one trace -- in a job one file per process, named by its rank -- and ``dumps()`` prints
the aggregate table of everything since the last reset.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections import defaultdict
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from ..base import MXNetError
from . import _spans
from ._process import identity
from ._table import AggregateStats

__all__ = ["Profiler", "PROFILER", "DEFAULT_CONFIG", "output_path"]

_logger = logging.getLogger("mxtorch.profiler")

DEFAULT_CONFIG: dict[str, Any] = {  # MXNet's defaults
    "filename": "profile.json", "profile_all": False, "profile_symbolic": True, "profile_imperative": True,
    "profile_memory": True, "profile_api": True, "continuous_dump": False, "dump_period": 1.0,
    "aggregate_stats": False, "profile_process": "worker",
}
_BOOLS = {"profile_all", "profile_symbolic", "profile_imperative", "profile_memory", "profile_api",
          "continuous_dump", "aggregate_stats"}
_MATCH_NS = 20_000_000  # else a span's own start and torch's event start agree within this
_SHOWN_CATEGORIES = {"cpu_op": "operator", "kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise MXNetError(f"profiler.set_config: {key}={value!r} is not a boolean: pass True or False")


def check_process(profile_process: str) -> str:
    if profile_process not in ("worker", "server"):
        raise MXNetError(f"profile_process={profile_process!r} is not understood: pass 'worker' or 'server'")
    return profile_process


def parse_config(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``set_config``'s keyword arguments, checked, as a new configuration (defaults filled in)."""
    config = dict(DEFAULT_CONFIG)
    for key, value in kwargs.items():
        if key not in DEFAULT_CONFIG:
            raise MXNetError(f"profiler.set_config: unknown argument {key!r}; known: "
                             f"{', '.join(DEFAULT_CONFIG)}")
        if key in _BOOLS:
            config[key] = _as_bool(key, value)
        elif key == "dump_period":
            config[key] = float(value)
        elif key == "profile_process":
            config[key] = check_process(str(value))
        else:
            if not isinstance(value, (str, os.PathLike)) or not str(value):
                raise MXNetError(f"profiler.set_config: filename must be a non-empty path, got {value!r}")
            config[key] = os.fspath(value)
    return config


def output_path(filename: str) -> str:
    """Where this process writes ``filename``: in a job ``<stem>.rank<r><ext>`` (a worker) or
    ``<stem>.server<r><ext>`` (a parameter server); the name itself in a one-process run."""
    me = identity()
    if not me.in_job():
        return filename
    stem, ext = os.path.splitext(filename)
    who = f"rank{me.rank}" if me.role == "worker" else f"server{me.rank}"
    return f"{stem}.{who}{ext or '.json'}"


class Profiler:
    """The process's profiler: configuration, state, recorded events, aggregate statistics."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.config = dict(DEFAULT_CONFIG)
        self.running = False  # set_state('run') and not stopped (a paused profiler is running)
        self.paused = False
        self.session: Any = None  # the torch.profiler.profile in progress
        self.events: list[dict[str, Any]] = []
        self.base_ns: int | None = None  # the time base (epoch ns) of self.events' "ts"
        self.header: dict[str, Any] = {}  # torch's top-level fields (schemaVersion, deviceProperties, ...)
        self.stats = AggregateStats()
        self.dropped = 0

    # ---- states ---------------------------------------------------------------------------
    def set_config(self, kwargs: dict[str, Any]) -> None:
        config = parse_config(kwargs)
        with self.lock:
            if self.running:
                raise MXNetError("profiler.set_config while the profiler runs: call set_state('stop') first")
            if config["continuous_dump"]:
                _logger.warning("profiler: continuous_dump is not supported; call profiler.dump() to write "
                                "the trace")
            self.config = config

    def set_state(self, state: str) -> None:
        if state not in ("run", "stop"):
            raise MXNetError(f"profiler.set_state: state={state!r} is not understood: pass 'run' or 'stop'")
        with self.lock:
            if state == "run" and not self.running:
                self.running, self.paused = True, False
                self._start()
            elif state == "stop" and self.running:
                self._end()
                self.running, self.paused = False, False

    def pause(self) -> None:
        with self.lock:
            if self.running and not self.paused:
                self._end()
                self.paused = True

    def resume(self) -> None:
        with self.lock:
            if self.running and self.paused:
                self.paused = False
                self._start()

    # ---- output ---------------------------------------------------------------------------
    def dump(self, finished: bool = True) -> str:
        """Write the trace recorded since the last dump; return its path."""
        with self.lock:
            recording = self.session is not None
            if recording:
                self._end()
            path = output_path(self.config["filename"])
            self._write(path)
            self.events, self.base_ns, self.header = [], None, {}
            if finished:
                self.running, self.paused = False, False
            elif recording:
                self._start()
            return path

    def dumps(self, reset: bool, format: str, sort_by: str, ascending: bool) -> str:
        with self.lock:
            if self.session is not None:  # what the running session holds so far counts too
                self._end()
                self._start()
            stats = self.stats
            text = stats.json(sort_by, ascending) if format == "json" else stats.table(sort_by, ascending)
            if reset:
                self.stats.clear()
            return text

    def add_own_event(self, event: dict[str, Any], when_ns: int) -> None:
        """A counter or marker event (ours, not torch's), stamped ``when_ns`` (epoch ns)."""
        with self.lock:
            if not self.running or self.paused:
                return
            event["ts_ns"] = when_ns
            self.events.append(event)

    # ---- sessions -------------------------------------------------------------------------
    def _start(self) -> None:
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        memory = bool(self.config["profile_all"])
        _spans.take_records()  # spans finished before this session have no event to join
        self.session = profile(activities=activities, profile_memory=memory, record_shapes=False)
        self.session.start()

    def _end(self) -> None:
        session, self.session = self.session, None
        if session is None:
            return
        session.stop()
        fd, tmp = tempfile.mkstemp(prefix="mxtorch-profile-", suffix=".json")
        os.close(fd)
        try:
            session.export_chrome_trace(tmp)
            with open(tmp) as f:
                trace = json.load(f)
        finally:
            os.unlink(tmp)
        records, dropped = _spans.take_records()
        self.dropped += dropped
        events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict)]
        base = int(trace.get("baseTimeNanoseconds", 0))
        _attach_args(events, base, records)
        self._aggregate(events)
        if self.base_ns is None:
            self.base_ns = base
            self.header = {k: v for k, v in trace.items()
                           if k not in ("traceEvents", "baseTimeNanoseconds", "displayTimeUnit", "mxtorch")}
        shift = (base - self.base_ns) / 1000.0
        seen_meta = {(e.get("name"), e.get("pid"), e.get("tid")) for e in self.events if e.get("ph") == "M"}
        for e in events:
            if e.get("ph") == "M":
                if (e.get("name"), e.get("pid"), e.get("tid")) in seen_meta:
                    continue
            elif shift and isinstance(e.get("ts"), (int, float)):
                e["ts"] += shift
            self.events.append(e)

    def _aggregate(self, events: list[dict[str, Any]]) -> None:
        if not self.config["aggregate_stats"]:
            return
        for e in events:
            if e.get("ph") != "X" or not isinstance(e.get("dur"), (int, float)):
                continue
            name = str(e.get("name", ""))
            args = e.get("args") or {}
            category = args.get("domain") if isinstance(args, dict) else None
            if category is None:
                if name.startswith(_spans.PREFIX):
                    category = "mxtorch"
                else:
                    category = _SHOWN_CATEGORIES.get(str(e.get("cat")))
            if category is not None:
                self.stats.add(str(category), name, float(e["dur"]))

    def _write(self, path: str) -> None:
        me = identity()
        base = self.base_ns if self.base_ns is not None else time.time_ns()
        events = []
        pid = os.getpid()
        for e in self.events:
            if "ts_ns" in e:  # our counters and markers: onto the trace's time base
                e = dict(e)
                e["ts"] = (e.pop("ts_ns") - base) / 1000.0
                e.setdefault("pid", pid)
            elif e.get("ph") == "M" and e.get("name") == "process_name" and e.get("pid") == pid:
                e = dict(e, args={"name": me.label()})
            events.append(e)
        # torch's own fields stay (trace readers such as Holistic Trace Analysis read them); a job's
        # rank is stated even where torch.distributed did not run (parameter-server processes)
        trace = {**self.header, "traceEvents": events, "baseTimeNanoseconds": base, "displayTimeUnit": "ms",
                 "mxtorch": dict(me.metadata(), spans_without_args=self.dropped)}
        if me.role == "worker" and me.in_job() and "rank" not in (trace.get("distributedInfo") or {}):
            trace["distributedInfo"] = {"rank": me.rank, "world_size": me.world_size}
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(trace, f)
        os.replace(tmp, path)
        _logger.info("profiler: wrote %d events to %s", len(events), path)
        self.dropped = 0


def _attach_args(events: list[dict[str, Any]], base_ns: int, records: list[_spans.SpanRecord]) -> None:
    """Write each span's arguments into its trace event: per thread and name, both in time order,
    each event takes the record that started within ``_MATCH_NS`` of it."""
    if not records:
        return
    by_key: dict[tuple[int, str], list[_spans.SpanRecord]] = defaultdict(list)
    for r in records:
        by_key[(r.tid, r.name)].append(r)
    spans: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        name = e.get("name")
        if e.get("ph") == "X" and isinstance(name, str) and (e.get("tid"), name) in by_key:
            spans[(e["tid"], name)].append(e)
    for key, evs in spans.items():
        recs = sorted(by_key[key], key=lambda r: r.start_ns)
        evs.sort(key=lambda e: e["ts"])
        if len(recs) == len(evs):  # the same spans seen twice: their order pairs them
            for e, r in zip(evs, recs):
                e["args"] = {k: _spans.describe(v) for k, v in r.args.items()}
            continue
        i = 0
        for e in evs:
            at = int(e["ts"] * 1000) + base_ns
            while i < len(recs) and recs[i].start_ns < at - _MATCH_NS:
                i += 1
            if i < len(recs) and recs[i].start_ns <= at + _MATCH_NS:
                e["args"] = {k: _spans.describe(v) for k, v in recs[i].args.items()}
                i += 1


PROFILER = Profiler()
