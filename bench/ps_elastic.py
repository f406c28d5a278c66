"""Elastic parameter-server jobs: how long a departure and a server restart hold the workers up.

Prints, for each setting of ``MXTORCH_PS_HEARTBEAT_S`` / ``MXTORCH_PS_DEAD_S`` given (default: the
defaults 1 / 5 and 0.2 / 1), measured on 127.0.0.1 with :func:`mxtorch.kvstore.ps.testing.ps_cluster`:

* **leave**: a 3-worker dist_sync job whose rank 2 ends its process (no close) after a step: the
  seconds from its exit until the survivors' next round completed without it (the scheduler finds
  the closed connection, waits ``MXTORCH_PS_DEAD_S`` of silence, announces the membership);
* **restore**: a 2-worker dist_sync job whose server is SIGKILLed while rank 0 waits in a round and
  started again at once (same ``DMLC_SERVER_ID``, snapshot + write-ahead log): the seconds from
  the kill until the round completed, and of them the new process's start (until it registered,
  from the scheduler's log), its restore and what follows (READY, NODE_BACK, the resent request).

Nothing is asserted; the machine's load shows in the process start.  Run:
``python bench/ps_elastic.py [--repeat 3] [--settings 1:5,0.2:1]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _ps_elastic_jobs as jobs  # noqa: E402

from mxtorch.kvstore.ps.testing import ps_cluster  # noqa: E402

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*")


def _logged_at(text: str, needle: str) -> float | None:
    """The time (epoch seconds) of the first log line holding ``needle``."""
    for line in text.splitlines():
        m = _STAMP.match(line)
        if m and needle in line:
            return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return None


def measure_leave(env: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory() as folder, ps_cluster(3, 1, env=env, timeout=300) as c:
        c.start_workers(jobs.leave, folder, 2)
        outcomes = c.join_workers()
        died = float(open(os.path.join(folder, "died")).read())
        done = [o.value["done"] for o in outcomes[:2] if o.ok]
        if len(done) != 2:
            raise RuntimeError([o.error for o in outcomes])
        return max(done) - died


def measure_restore(env: dict[str, str]) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as folder:
        snapshots = {**env, "MXTORCH_PS_SNAPSHOT_DIR": os.path.join(folder, "snap")}
        return _restore(folder, snapshots)


def _restore(folder: str, env: dict[str, str]) -> tuple[float, float, float]:
    with ps_cluster(2, 1, env=env, timeout=300) as c:
        c.start_workers(jobs.across_restart, folder)
        jobs.wait_for(os.path.join(folder, "mid"))
        time.sleep(0.5)  # rank 0's step 3 reaches the server and waits
        killed = time.time()
        c.kill_server(0)
        c.start_server(0)
        with open(os.path.join(folder, "restarted"), "w") as f:
            f.write("yes")
        outcomes = c.join_workers()
        if not all(o.ok for o in outcomes):
            raise RuntimeError([o.error for o in outcomes])
        total = max(o.value["done"] for o in outcomes) - killed
        joined = _logged_at(c.stderr("scheduler"), "rejoins") or killed
        return total, joined - killed, total - (joined - killed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--settings", default="1:5,0.2:1", help="HEARTBEAT_S:DEAD_S pairs, comma-separated")
    args = p.parse_args()
    print(f"{'heartbeat/dead s':>17} {'leave s':>9} {'restore s':>10} {'(start':>7} {'rest)':>6}  "
          f"[median of {args.repeat}]")
    for pair in args.settings.split(","):
        hb, dead = pair.split(":")
        env = {"MXTORCH_PS_ELASTIC": "1", "MXTORCH_PS_HEARTBEAT_S": hb, "MXTORCH_PS_DEAD_S": dead,
               "MXTORCH_DIST_TIMEOUT": "120"}
        leaves = [measure_leave(env) for _ in range(args.repeat)]
        restores = [measure_restore(env) for _ in range(args.repeat)]
        med = [statistics.median(r[i] for r in restores) for i in range(3)]
        print(f"{hb + '/' + dead:>17} {statistics.median(leaves):9.2f} {med[0]:10.2f} {med[1]:7.2f} "
              f"{med[2]:6.2f}", flush=True)


if __name__ == "__main__":
    main()
