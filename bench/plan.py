"""The planner against measurement: every feasible plan of a 4-process job, predicted vs measured.

``parallel.plan`` ranks the layouts of an MLP of Dense pairs (so that tensor parallelism is
possible) for 4 devices; then each plan is run for real on this machine (4 processes, gloo,
127.0.0.1, one thread each) with ``parallel.parallelize`` and the plan's settings.  Printed: each
plan's predicted and measured step time and peak memory (parameters + gradients + momentum +
the peak of the activations autograd saves, on the busiest rank), the Spearman rank correlation
of predicted against measured step times (goal >= 0.8), and how far the predicted best is from
the measured best (goal: within 10 %).

    python bench/plan.py [--width 512] [--pairs 4] [--batch 128] [--steps 9] [--micro 1,4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def run_config(width: int, pairs: int, batch: int, steps: int, runs: list[dict]) -> list[dict]:
    """On every rank of one (dp, pp, tp) job: each plan of ``runs`` for ``steps`` timed steps."""
    from pipeline import ChunkTimer, activation_peak, median_step
    from tensor_parallel import build

    from mxtorch import gluon, parallel

    out = []
    for r in runs:
        cfg = parallel.ParallelConfig(dp=r["dp"], pp=r["pp"], tp=r["tp"])
        pnet = parallel.parallelize(build(width, pairs), cfg, micro_batches=r["m"],
                                    schedule="gpipe" if r["schedule"] == "none" else r["schedule"],
                                    split_points=r["split_points"] or None, checkpoint_activations=r["ckpt"],
                                    kvstore="horovod" if r["dp"] > 1 else None)
        tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9},
                           kvstore=pnet.kvstore)
        local = batch // r["dp"]
        g = torch.Generator().manual_seed(1 + pnet.dp_rank)
        x = torch.randn(local, width, generator=g)
        y = torch.randint(0, 10, (local,), generator=g).float()
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        with ChunkTimer() as timer:
            # the mean step: the plan predicts throughput (a wait some steps see counts)
            _, step, _ = median_step(pnet, tr, x, y, loss_fn, batch, steps, timer, statistics.mean)
        peak = activation_peak(pnet, tr, x, y, loss_fn, batch)
        out.append({"step": step, "memory": pnet.param_bytes() * 3 + peak})
    return out


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return cov / var if var else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=9)
    ap.add_argument("--micro", default="1,4")
    ap.add_argument("--memory", default="8GiB")
    args = ap.parse_args()
    from tensor_parallel import build

    from mxtorch import parallel
    from mxtorch.distributed.testing import run_workers
    from mxtorch.parallel.planner import usable_cores
    from mxtorch.parallel.probe import probe_link

    torch.set_num_threads(1)
    net = build(args.width, args.pairs)
    sample = torch.randn(16, args.width)
    # the link and each layout's fixed costs, probed once with 4 processes (as plan() does when no
    # bandwidth is given; done here to print what the probe saw)
    layouts = [(4 // (tp * pp), pp, tp) for tp in (1, 2, 4) for pp in (1, 2, 4) if 4 % (tp * pp) == 0]
    t0 = time.perf_counter()
    bw, lat, over = probe_link(4, layouts)
    print(f"probe ({time.perf_counter() - t0:.1f} s): {bw / 1e6:.0f} MB/s, all-reduce latency "
          f"{lat * 1e6:.0f} us")
    assert over is not None
    for lay in layouts:
        print(f"  dp={lay[0]} pp={lay[1]} tp={lay[2]}: per step {over.step_s[lay] * 1e3:.2f} ms, per slot "
              f"{over.slot_s[lay] * 1e3:.2f} ms" + (f", per pair {over.pair_s[lay[2]] * 1e3:.2f} ms"
                                                     if lay[2] > 1 else ""))
    # four processes share this machine's cores: plan() charges each plan at least the CPU work of all
    # its processes (layers, gloo's collectives, updates) over the cores
    cores = usable_cores()
    plans = parallel.plan(net, sample, world_size=4, memory_per_device=args.memory, batch_size=args.batch,
                          micro_batches=[int(v) for v in args.micro.split(",")], bandwidth=bw, latency_s=lat,
                          overheads=over, cores=cores)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; {args.pairs} pairs of Dense({args.width}), "
          f"global batch {args.batch}, 4 processes x 1 thread on {cores} cores; {len(plans)} feasible plans")
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, p in enumerate(plans):
        groups.setdefault((p.config.dp, p.config.pp, p.config.tp), []).append(i)
    measured: dict[int, dict] = {}
    for (dp, pp, tp), idx in groups.items():
        runs = [{"dp": dp, "pp": pp, "tp": tp, "m": plans[i].micro_batches, "schedule": plans[i].schedule,
                 "ckpt": plans[i].checkpointing, "split_points": plans[i].split_points} for i in idx]
        path = os.pathsep.join([HERE, os.path.dirname(HERE)])
        per_rank = run_workers(run_config, 4, args.width, args.pairs, args.batch, args.steps, runs,
                               timeout=1800, env={"PYTHONPATH": path})
        for j, i in enumerate(idx):
            measured[i] = {"step": max(r[j]["step"] for r in per_rank),
                           "memory": max(r[j]["memory"] for r in per_rank)}
    print(f"{'#':>3} {'dp':>3} {'pp':>3} {'tp':>3} {'m':>3} {'schedule':<8} {'ckpt':<5} {'pred ms':>8} "
          f"{'meas ms':>8} {'pred MiB':>9} {'meas MiB':>9}")
    for i, p in enumerate(plans):
        c = p.config
        print(f"{i + 1:>3} {c.dp:>3} {c.pp:>3} {c.tp:>3} {p.micro_batches:>3} {p.schedule:<8} "
              f"{'yes' if p.checkpointing else 'no':<5} {p.predicted_step_s * 1e3:>8.1f} "
              f"{measured[i]['step'] * 1e3:>8.1f} {p.predicted_memory_bytes / 2**20:>9.2f} "
              f"{measured[i]['memory'] / 2**20:>9.2f}")
    pred = [p.predicted_step_s for p in plans]
    meas = [measured[i]["step"] for i in range(len(plans))]
    rho_t = spearman(pred, meas)
    rho_m = spearman([p.predicted_memory_bytes for p in plans],
                     [measured[i]["memory"] for i in range(len(plans))])
    best = min(range(len(plans)), key=lambda i: meas[i])
    print(f"Spearman rank correlation, step time: {rho_t:.2f} (goal >= 0.8); peak memory: {rho_m:.2f}")
    print(f"predicted best (#1) measured {meas[0] * 1e3:.1f} ms; measured best (#{best + 1}) "
          f"{meas[best] * 1e3:.1f} ms: {meas[0] / meas[best] - 1:+.1%} (goal within 10 %)")


if __name__ == "__main__":
    main()
