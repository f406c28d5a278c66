"""What the workers of the elastic parameter-server tests run (importable by spawned processes).

Every job pushes ``rank + 1`` (a 4-element tensor of it) to key 'w' per step, so a dist_sync round
without an optimizer stores the sum of the ranks + 1 of the workers that took part, and a
dist_async job with SGD(learning_rate=1) on the servers ends at minus the sum of every push.
Hand-offs between processes go through files in ``folder`` (no timing assumptions)."""

from __future__ import annotations

import os
import time
from typing import Any

import torch
from ps_wal_workers import _wait_for  # (tests/ is on sys.path)

SHAPE = (4,)


def _touch(folder: str, name: str) -> None:
    with open(os.path.join(folder, name), "w") as f:
        f.write("yes")


def _wait_workers(kv: Any, n: int, limit: float = 90.0) -> None:
    """Until this worker has heard of ``n`` live workers (kv.num_workers takes in the notices)."""
    deadline = time.monotonic() + limit
    while kv.num_workers != n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"kv.num_workers stayed {kv.num_workers}, waiting for {n}")
        time.sleep(0.05)


def _step(kv: Any, out: torch.Tensor) -> float:
    kv.push("w", torch.full(SHAPE, float(kv.rank + 1)))
    kv.pull("w", out=out)
    return float(out[0])


def sync_leave(folder: str, steps: int, leave_after: int, how: str) -> dict[str, Any]:
    """dist_sync of 3 workers, no optimizer; rank 2 leaves after step ``leave_after`` (its round
    pulled): ``how='killed'`` ends the process without closing its store (a death the scheduler
    finds by the closed connection), ``'closed'`` closes the store and returns."""
    import mxtorch as mx

    kv = mx.kv.create("dist_sync")
    kv.init("w", torch.zeros(SHAPE))
    out, values = torch.zeros(SHAPE), []
    for step in range(1, steps + 1):
        values.append(_step(kv, out))
        if kv.rank == 2 and step == leave_after:
            if how == "killed":
                os._exit(3)
            kv.close()
            return {"values": values, "rank": kv.rank}
    # the barrier needs the live workers only, so rank 2's leave was announced before it ends (on the
    # same connection as its reply): kv.num_workers has taken it in
    kv.barrier()
    live = kv.num_workers
    kv.barrier()  # no survivor leaves (and changes the count) before every survivor has read it
    return {"values": values, "rank": kv.rank, "num_workers": live}


def sync_join(folder: str, steps: int, join_after: int) -> dict[str, Any]:
    """dist_sync, no optimizer: ranks 0 and 1 run ``join_after`` steps (each then writes
    ``ready-<rank>``), wait until the worker the test adds has joined (``joined``), and go on with it
    to ``steps``.  The joiner inits 'w' (its value stays the servers'), pulls it, and runs the
    remaining steps."""
    import mxtorch as mx

    kv = mx.kv.create("dist_sync")
    joiner = kv.rank >= 2
    kv.init("w", torch.full(SHAPE, -1.0) if joiner else torch.zeros(SHAPE))
    out, values, counts, first = torch.zeros(SHAPE), [], [], None
    if joiner:
        kv.pull("w", out=out)
        first = float(out[0])
        _touch(folder, "joined")
    for step in range(join_after + 1 if joiner else 1, steps + 1):
        if not joiner and step == join_after + 1:
            _touch(folder, f"ready-{kv.rank}")
            _wait_for(os.path.join(folder, "joined"))
            _wait_workers(kv, 3)  # the scheduler's notice of the joiner (on another connection)
        values.append(_step(kv, out))
        counts.append(kv.num_workers)
    return {"values": values, "first": first, "rank": kv.rank, "counts": counts}


def async_leave_and_join(folder: str, before: int, after: int) -> dict[str, Any]:
    """dist_async, SGD(learning_rate=1) on the servers.  Ranks 0 and 1 push ``before`` times; rank
    1 then dies (no close); rank 0 waits until it is alone (``alone``), then for the joiner the
    test adds, and both push ``after`` times; a barrier of the live workers, a pull."""
    import mxtorch as mx

    kv = mx.kv.create("dist_async")
    joiner = kv.rank >= 2
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=1.0))
    kv.init("w", torch.zeros(SHAPE))
    out, seen = torch.zeros(SHAPE), []
    if not joiner:
        for _ in range(before):
            kv.push("w", torch.full(SHAPE, float(kv.rank + 1)))
        if kv.rank == 1:
            os._exit(3)
        _wait_workers(kv, 1)
        seen.append(kv.num_workers)
        _touch(folder, "alone")
        _wait_workers(kv, 2)
    seen.append(kv.num_workers)
    for _ in range(after):
        kv.push("w", torch.full(SHAPE, float(kv.rank + 1)))
    kv.barrier()
    kv.pull("w", out=out)
    return {"value": float(out[0]), "rank": kv.rank, "seen": seen}


def sync_across_server_restart(folder: str, steps: int, stop_at: int) -> dict[str, Any]:
    """dist_sync, SGD(learning_rate=0.5) on the servers; rank 1 stops after step ``stop_at`` (writes
    ``mid``) until the test killed and restarted server 0 (``restarted``), while rank 0 already
    waits in the next round.  Returns every pulled value."""
    import mxtorch as mx

    kv = mx.kv.create("dist_sync")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.5))
    kv.init("w", torch.zeros(SHAPE))
    out, values = torch.zeros(SHAPE), []
    waited = 0.0
    for step in range(1, steps + 1):
        start = time.monotonic()
        values.append(_step(kv, out))
        waited = max(waited, time.monotonic() - start)
        if kv.rank == 1 and step == stop_at:
            _touch(folder, "mid")
            _wait_for(os.path.join(folder, "restarted"))
    return {"values": values, "rank": kv.rank, "waited": waited}


def trainer_join(folder: str, steps: int, join_after: int) -> dict[str, Any]:
    """A Gluon Trainer (SGD lr 0.1 on the servers) of a Dense(1) on dist_sync: ranks 0 and 1 run
    ``join_after`` steps, then wait for the worker the test adds; every step passes the global batch,
    4 samples per worker times ``kv.num_workers``.  The joiner's own initial weights (9) are
    replaced by the job's when its Trainer first steps."""
    import mxtorch as mx
    from mxtorch import gluon

    kv = mx.kv.create("dist_sync")
    joiner = kv.rank >= 2
    net = gluon.nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(mx.init.Constant(9.0 if joiner else 0.5))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    if joiner:
        _touch(folder, "joined")
    weights = []
    for step in range(join_after + 1 if joiner else 1, steps + 1):
        if not joiner and step == join_after + 1:
            _touch(folder, f"ready-{kv.rank}")
            _wait_for(os.path.join(folder, "joined"))
            _wait_workers(kv, 3)
        with mx.autograd.record():
            loss = net(torch.ones(4, 2)).sum()
        loss.backward()
        trainer.step(4 * kv.num_workers)
        weights.append(float(net.weight.data()[0, 0]))
    return {"rank": kv.rank, "weights": weights}
