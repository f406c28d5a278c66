"""bench/ps.py (e): what the parameter server's write-ahead log costs a dist_sync step.

Jobs of 2 workers and ``--train-servers`` servers with a snapshot folder, alternately with the
log on and off (``MXTORCH_PS_WAL``; a job's servers read it when they start, so each round is a
pair of jobs, the order rotating), snapshots every ``--wal-snapshot-every`` updates (as the soak):

* ``train``: the Trainer step of ``--model`` (optimizer on the servers, SGD momentum);
* ``big``: ``kv.pushpull`` of ``--wal-mib`` of fp32 in 4 MiB keys with SGD momentum on the
  servers: each step the log takes every slice's new value and momentum (2 x the model), the
  most it writes per byte pushed.

Each job reports the median step time of its workers' ``--steps`` steps after ``--warmup``;
the table gives the median over rounds and the ratio on/off (also with ``MXTORCH_PS_WAL_FSYNC=1``
with ``--wal-fsync``).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

MiB = 1 << 20


def wal_worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """One job's steps: the Trainer of ``cfg['model']`` or pushpulls of ``cfg['numels']`` keys."""
    import mxtorch as mx
    from mxtorch import optimizer

    torch.set_num_threads(cfg["threads"])
    if cfg["kind"] == "train":
        from ps import _data, _trainer_step

        kv = mx.kv.create("dist_sync")
        x, y = _data(cfg["model"], cfg["batch"], kv.rank)
        step, _ = _trainer_step(cfg["model"], x, y, "dist_sync")
        run: Callable[[], Any] = step
    else:
        kv = mx.kv.create("dist_sync")
        kv.set_optimizer(optimizer.SGD(learning_rate=0.01, momentum=0.9))
        keys = list(range(len(cfg["numels"])))
        values = [torch.zeros(n) for n in cfg["numels"]]
        kv.init(keys, values)
        grads = [torch.full((n,), 1e-3) for n in cfg["numels"]]

        def run() -> None:
            kv.pushpull(keys, grads, out=values)
    for _ in range(cfg["warmup"]):
        run()
    kv.barrier()
    times = []
    for _ in range(cfg["steps"]):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    kv.barrier()
    return {"step": statistics.median(times)}


def bench_wal(args: Any, run_job: Callable[..., list[Any]]) -> None:
    """(e): the table of step times with the log on and off (see the module docstring)."""
    numel = int(args.wal_mib * MiB) // 4
    piece = 1 << 20  # 4 MiB of fp32 per key
    numels = [piece] * (numel // piece) + ([numel % piece] if numel % piece else [])
    settings = [("off", {"MXTORCH_PS_WAL": "0"}), ("on", {"MXTORCH_PS_WAL": "1"})]
    if args.wal_fsync:
        settings.append(("on+fsync", {"MXTORCH_PS_WAL": "1", "MXTORCH_PS_WAL_FSYNC": "1"}))
    print(f"\n(e) write-ahead log on/off: step ms of 2 workers, {args.train_servers} server(s), snapshots "
          f"every {args.wal_snapshot_every} updates; median of {args.wal_rounds} rounds (one job per setting "
          f"and round, order rotating) of the median of {args.steps} steps")
    jobs = (("train", f"Trainer step, {args.model}, batch {args.batch}, SGD momentum on the servers"),
            ("big", f"pushpull of {args.wal_mib:g} MiB fp32 in {len(numels)} keys, SGD momentum"))
    for kind, what in jobs:
        cfg = {"kind": kind, "model": args.model, "batch": args.batch, "numels": numels,
               "threads": args.threads, "warmup": args.warmup, "steps": args.steps}
        times: dict[str, list[float]] = {name: [] for name, _ in settings}
        for r in range(args.wal_rounds):
            order = settings[r % len(settings):] + settings[:r % len(settings)]
            for name, env in order:
                with tempfile.TemporaryDirectory(prefix="mxtorch-wal-bench-", dir=args.wal_dir) as snap:
                    job_env = {**env, "MXTORCH_PS_SNAPSHOT_DIR": snap,
                               "MXTORCH_PS_SNAPSHOT_EVERY": str(args.wal_snapshot_every)}
                    res = run_job(wal_worker, cfg, 2, args.train_servers, args.timeout, env=job_env)
                times[name].append(max(w["step"] for w in res))
        med = {name: statistics.median(ts) for name, ts in times.items()}
        print(f"  {what}")
        for name, _ in settings:
            print(f"    {name:>9} {med[name] * 1e3:9.2f} ms   rounds: "
                  + " ".join(f"{t * 1e3:.2f}" for t in times[name]))
        for name, _ in settings[1:]:
            print(f"    ratio {name}/off {med[name] / med['off']:.3f}")
    print(f"  (log folder: {args.wal_dir or tempfile.gettempdir()} on {os.uname().sysname}; a killed server "
          "loses nothing with the log on: tests/test_ps_wal.py)")
