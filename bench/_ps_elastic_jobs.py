"""What the workers of bench/ps_elastic.py run (importable by spawned processes)."""

from __future__ import annotations

import os
import time
from typing import Any

import torch


def wait_for(path: str, limit: float = 300.0) -> None:
    """Until ``path`` exists (polled every 10 ms: the times measured include the poll)."""
    for _ in range(int(limit * 100)):
        if os.path.exists(path):
            return
        time.sleep(0.01)
    raise TimeoutError(f"{path} did not appear within {limit:g} s")


def leave(folder: str, leave_after: int) -> dict[str, Any]:
    """dist_sync, 3 workers: rank 2 ends its process (no close) after step ``leave_after``, writing the
    time first; the others time their next step, which completes once the scheduler has announced
    the membership without rank 2."""
    import mxtorch as mx

    kv = mx.kv.create("dist_sync")
    kv.init("w", torch.zeros(4))
    out = torch.zeros(4)
    for step in range(1, leave_after + 2):
        kv.push("w", torch.ones(4))
        kv.pull("w", out=out)
        if kv.rank == 2 and step == leave_after:
            with open(os.path.join(folder, "died"), "w") as f:
                f.write(repr(time.time()))
            os._exit(3)
    return {"done": time.time()}


def across_restart(folder: str) -> dict[str, Any]:
    """dist_sync, 2 workers, SGD on the servers: rank 1 stops after step 2 until the server was
    killed and started again (``restarted``); rank 0's step 3 waits on the dead server; both time
    when step 3 returns."""
    import mxtorch as mx

    kv = mx.kv.create("dist_sync")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.5))
    kv.init("w", torch.zeros(4))
    out = torch.zeros(4)
    for step in range(1, 4):
        kv.push("w", torch.ones(4))
        kv.pull("w", out=out)
        if kv.rank == 1 and step == 2:
            with open(os.path.join(folder, "mid"), "w") as f:
                f.write("yes")
            wait_for(os.path.join(folder, "restarted"))
    return {"done": time.time(), "value": float(out[0])}
