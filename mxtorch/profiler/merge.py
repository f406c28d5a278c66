"""One timeline of a whole job: the per-process traces of ``mx.profiler.dump()`` merged.

Each worker's and server's trace becomes one process row (``rank 0``, ``rank 1``, ...,
``server 0``, ...), and every event is moved onto worker rank 0's clock:

* allreduce / Horovod jobs: each rank's trace carries its clock minus rank 0's, measured with
  barriers and an all-gather when the job started (:func:`mxtorch.distributed.init`);
* parameter-server jobs: each worker's trace carries each server's clock minus its own, measured
  with round trips when its profiler started; a server's offset is rank 0's reading of it, and
  another worker's is rank 0's reading of a server less that worker's reading of the same server.

A trace without that information is placed as recorded (its clocks are assumed to agree) and
the merge says so.  The result loads in ``chrome://tracing`` and Perfetto.
"""

from __future__ import annotations

import glob
import logging
import os
from dataclasses import dataclass
from typing import Any

from .. import bounded_json
from ..base import MXNetError

__all__ = ["TraceMergeError", "ProcessTrace", "load_trace", "merge_traces", "merge_dir"]

_logger = logging.getLogger("mxtorch.profiler")
MAX_TRACE_BYTES = 4 << 30  # one process's trace file; a larger one is refused, not read
_PID_STRIDE = 100  # rows of one process: its own pid, then its devices' rows (GPU streams)
_PROCESS_META = ("process_name", "process_sort_index", "process_labels")  # each row gets its own


class TraceMergeError(MXNetError):
    """A trace that cannot be merged (unreadable, not written by mx.profiler, or none at all)."""


@dataclass
class ProcessTrace:
    path: str
    role: str
    rank: int
    base_ns: int
    pid: Any
    offset_ns: int | None
    peers: dict[str, int]
    events: list[dict[str, Any]]

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.role == "worker" else f"{self.role} {self.rank}"


def _int(value: Any, default: int | None = None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def load_trace(path: str) -> ProcessTrace | None:
    """A trace file written by ``mx.profiler.dump()``; None for a JSON file that is not one."""
    size = os.path.getsize(path)
    if size > MAX_TRACE_BYTES:
        raise TraceMergeError(f"{path}: {size} bytes is larger than a trace may be ({MAX_TRACE_BYTES})")
    with open(path, "rb") as f:
        doc = bounded_json.loads(f.read(), path, TraceMergeError, max_bytes=MAX_TRACE_BYTES, expect=dict)
    meta = doc.get("mxtorch")
    events = doc.get("traceEvents")
    if not isinstance(meta, dict) or not isinstance(events, list):
        return None
    role = meta.get("role") if meta.get("role") in ("worker", "server") else "worker"
    raw = meta.get("peer_clock_offsets_ns")
    peers = {str(k): v for k, v in raw.items() if _int(v) is not None} if isinstance(raw, dict) else {}
    return ProcessTrace(path, str(role), _int(meta.get("rank"), 0) or 0,
                        _int(doc.get("baseTimeNanoseconds"), 0) or 0, meta.get("pid"),
                        _int(meta.get("clock_offset_ns")), peers, [e for e in events if isinstance(e, dict)])


def _offsets(traces: list[ProcessTrace]) -> dict[int, tuple[int, str]]:
    """Per trace (by index): its clock minus worker rank 0's (ns), and how that was found."""
    ref = next((t for t in traces if t.role == "worker" and t.rank == 0), None)
    out: dict[int, tuple[int, str]] = {}
    for i, t in enumerate(traces):
        if t is ref:
            out[i] = (0, "reference")
        elif t.role == "worker" and t.offset_ns is not None:
            out[i] = (t.offset_ns, "measured at job start")
        elif ref is not None and t.role == "server" and f"server{t.rank}" in ref.peers:
            out[i] = (ref.peers[f"server{t.rank}"], "rank 0's round trips")
        elif ref is not None and t.role == "worker" and set(t.peers) & set(ref.peers):
            s = sorted(set(t.peers) & set(ref.peers))[0]
            out[i] = (ref.peers[s] - t.peers[s], f"round trips to {s}")
        else:
            out[i] = (0, "not measured")
    return out


def merge_traces(traces: list[ProcessTrace]) -> dict[str, Any]:
    """The traces as one Chrome trace: a process row each, on worker rank 0's clock."""
    if not traces:
        raise TraceMergeError("no traces to merge")
    traces = sorted(traces, key=lambda t: (t.role != "worker", t.rank))
    offsets = _offsets(traces)
    aligned_base = [t.base_ns - offsets[i][0] for i, t in enumerate(traces)]
    base = min(aligned_base)
    events: list[dict[str, Any]] = []
    processes = []
    for i, t in enumerate(traces):
        row = (t.rank if t.role == "worker" else 10_000 + t.rank) * _PID_STRIDE
        shift_us = (aligned_base[i] - base) / 1000.0
        rows: dict[Any, int] = {t.pid: row}
        for e in t.events:
            pid = e.get("pid")
            if pid not in rows:
                rows[pid] = row + min(len(rows), _PID_STRIDE - 1)
                events.append({"ph": "M", "name": "process_name", "pid": rows[pid], "tid": 0,
                               "args": {"name": f"{t.label} ({pid})"}})
            if e.get("ph") == "M" and e.get("name") in _PROCESS_META:
                continue
            e = dict(e, pid=rows[pid])
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = e["ts"] + shift_us
            events.append(e)
        events.append({"ph": "M", "name": "process_name", "pid": row, "tid": 0, "args": {"name": t.label}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": row, "tid": 0,
                       "args": {"sort_index": row}})
        off, how = offsets[i]
        processes.append({"file": os.path.basename(t.path), "role": t.role, "rank": t.rank, "pid": row,
                          "clock_offset_ns": off, "aligned_by": how})
        if how == "not measured":
            _logger.warning("trace merge: %s (%s) carries no clock offset against rank 0: placed as recorded",
                            t.path, t.label)
    return {"traceEvents": events, "displayTimeUnit": "ms", "baseTimeNanoseconds": base,
            "mxtorch": {"processes": processes}}


def merge_dir(folder: str) -> dict[str, Any]:
    """Merge every trace ``mx.profiler.dump()`` wrote into ``folder`` (other JSON files are skipped)."""
    if not os.path.isdir(folder):
        raise TraceMergeError(f"{folder} is not a folder: pass the folder the job's traces were written to")
    traces = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        trace = load_trace(path)
        if trace is None:
            _logger.info("trace merge: %s is not a trace of mx.profiler: skipped", path)
            continue
        traces.append(trace)
    if not traces:
        raise TraceMergeError(f"{folder} holds no trace written by mx.profiler.dump() (*.json with an "
                              "'mxtorch' section)")
    seen: dict[tuple[str, int], str] = {}
    for t in traces:
        other = seen.setdefault((t.role, t.rank), t.path)
        if other != t.path:
            raise TraceMergeError(f"{other} and {t.path} are both {t.label}: merge one job's traces at "
                                  "a time")
    return merge_traces(traces)
