"""``mxtorch trace merge DIR -o job.json``: a job's per-process traces as one timeline.

``DIR`` holds the files ``mx.profiler.dump()`` wrote in every worker (``profile.rank<r>.json``)
and server (``profile.server<r>.json``); the output has one process row each, all on worker rank
0's clock (see :mod:`mxtorch.profiler.merge`), for ``chrome://tracing`` or https://ui.perfetto.dev.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("trace", help="work with mx.profiler traces (merge a job's into one timeline)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="trace_command", metavar="ACTION")
    m = actions.add_parser("merge", help="merge the per-rank and per-server traces of a job")
    m.add_argument("folder", metavar="DIR", help="the folder holding the job's trace files")
    m.add_argument("-o", "--output", required=True, help="the merged trace to write (JSON)")
    return p


def run(args: argparse.Namespace) -> int:
    from mxtorch.profiler.merge import TraceMergeError, merge_dir

    if getattr(args, "trace_command", None) != "merge":
        raise SystemExit("name an action: mxtorch trace merge DIR -o job.json")
    try:
        merged = merge_dir(args.folder)
    except TraceMergeError as e:
        raise SystemExit(str(e)) from None
    out = os.path.abspath(args.output)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = f"{out}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(merged, f)
    os.replace(tmp, out)
    rows = ", ".join(f"{p['role']} {p['rank']} ({p['aligned_by']})" for p in merged["mxtorch"]["processes"])
    print(f"wrote {out}: {len(merged['traceEvents'])} events; {rows}")
    return 0
