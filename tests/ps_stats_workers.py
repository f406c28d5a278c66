"""Worker functions for tests/test_ps_server_stats.py (importable by spawned processes)."""

from __future__ import annotations

from typing import Any

import torch

PUSHES, PULLS = 3, 2


def counted_job() -> dict[str, Any]:
    """dist_sync: init two keys, push key 3 PUSHES times and pull it PULLS times, push 'w' once;
    after a barrier (every request of both workers handled) ask the servers for their counters."""
    torch.set_num_threads(1)
    import mxtorch as mx

    kv = mx.kv.create("dist_sync")
    kv.init(3, mx.nd.zeros((4, 5)))
    kv.init("w", mx.nd.zeros((10,)))
    out = mx.nd.zeros((4, 5))
    for _ in range(PUSHES):
        kv.push(3, mx.nd.ones((4, 5)))
    for _ in range(PULLS):
        kv.pull(3, out=out)
    kv.push("w", mx.nd.ones((10,)))
    kv.barrier()
    stats = kv.server_stats()
    kv.barrier()
    return {"rank": kv.rank, "stats": stats}
