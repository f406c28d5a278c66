"""What the workers of the write-ahead-log tests run (importable by spawned processes)."""

from __future__ import annotations

import os
import time
from typing import Any

import torch

# init order and sizes place 'a' and 'p' on server 0, 'b' and 'c' on server 1, and cut 'big' (above
# MXNET_KVSTORE_BIGARRAY_BOUND=20) in one slice per server
SHAPES: dict[str, tuple[int, ...]] = {"a": (4,), "b": (3, 2), "p": (6,), "big": (40,), "c": (5,)}
PUSHPULLED = ["a", "b", "big", "c"]


def _wait_for(path: str, limit: float = 90.0) -> None:
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear")
        time.sleep(0.05)


def steps_across_a_server_kill(folder: str, steps: int, kill_steps: list[int],
                               hyper_step: int) -> dict[str, Any]:
    """dist_sync, Adam with a FactorScheduler on the servers; each step pushes 'p' (PUSH, acknowledged
    at once), pushpulls the other keys, then pulls 'p'.  At each of ``kill_steps`` worker 1 stops
    halfway through the step ('a' and 'b' done: 'a''s round is complete on server 0; 'big' and 'p'
    wait there on worker 1), writes ``folder/mid-step-<step>`` and goes on once the test killed and
    restarted server 0 (``folder/restarted-<step>``, ``folder/restarted`` for the last).  At the first
    one it has the servers write a snapshot first (worker 0's push of 'p' is then open: the new log
    must carry it).  At ``hyper_step`` the workers change rescale_grad (a SET_HYPER).  Returns the
    final values and, from worker 0, the paths of the servers' final snapshots."""
    import mxtorch as mx
    from mxtorch import lr_scheduler, optimizer

    kv = mx.kv.create("dist_sync")
    r = kv.rank
    opt = optimizer.Adam(learning_rate=0.05, lr_scheduler=lr_scheduler.FactorScheduler(step=3, factor=0.8,
                                                                                        base_lr=0.05))
    kv.set_optimizer(opt)
    for k, shape in SHAPES.items():
        kv.init(k, torch.arange(float(torch.Size(shape).numel())).view(shape) / 10)
    gen = torch.Generator().manual_seed(100 + r)
    outs = {k: torch.zeros(s) for k, s in SHAPES.items()}
    for step in range(1, steps + 1):
        grads = {k: torch.randn(s, generator=gen) for k, s in SHAPES.items()}
        if step == hyper_step:
            opt.rescale_grad = 0.5  # sent to the servers with the next push
        if step in kill_steps and r == 1:
            kv.pushpull(["a", "b"], [grads["a"], grads["b"]], out=[outs["a"], outs["b"]])
            if step == kill_steps[0]:
                kv._snapshot()
            with open(os.path.join(folder, f"mid-step-{step}"), "w") as f:
                f.write(str(step))
            last = step == kill_steps[-1]
            _wait_for(os.path.join(folder, "restarted" if last else f"restarted-{step}"))
            rest = ["big", "c"]
            kv.pushpull(rest, [grads[k] for k in rest], out=[outs[k] for k in rest])
            kv.push("p", grads["p"])
        else:
            kv.push("p", grads["p"])
            kv.pushpull(PUSHPULLED, [grads[k] for k in PUSHPULLED], out=[outs[k] for k in PUSHPULLED])
        kv.pull("p", out=outs["p"])
    kv.barrier()
    paths = kv._snapshot() if r == 0 else []
    kv.barrier()
    return {"values": outs, "snapshots": paths}
