"""Allreduce benchmark: mxtorch's 'horovod' KVStore against raw torch.distributed and DDP.

Runs its own worker processes (default 2, gloo on 127.0.0.1) and prints, measured in the
same run and interleaved:

(a) bus bandwidth of ``kv.pushpull`` against ``torch.distributed.all_reduce`` on the same
    tensor (1, 16, 128 MiB) — ratio mxtorch/raw (≥ 0.95 is the target);
(b) training step time of a Gluon ``Trainer`` with ``kvstore='horovod'`` against
    ``torch.nn.parallel.DistributedDataParallel`` on the same model, batch and optimizer
    (MLP, LeNet, ResNet-18) — ratio mxtorch/DDP (≤ 1.05 is the target).

    python bench/allreduce.py [--workers 2] [--sizes 1,16,128] [--models mlp,lenet,resnet18]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from _models import mx_net, mx_train_step, torch_net

MiB = 1 << 20


def _bus_bw(nbytes: int, seconds: float, world: int) -> float:
    return 2 * (world - 1) / world * nbytes / seconds / 1e9


def bench_bandwidth(sizes: list[int], iters: int, rounds: int) -> list[tuple[int, float, float]]:
    import mxtorch as mx

    kv = mx.kv.create("horovod")
    world = dist.get_world_size()
    rows = []
    # warm gloo's connections and buffers for both paths before anything is timed
    warm = torch.ones(MiB // 4)
    kv.init("warm", warm.clone())
    for _ in range(20):
        dist.all_reduce(warm)
        kv.pushpull("warm", warm)
    for mib in sizes:
        n = mib * MiB // 4
        reps = max(iters, 64 // mib)  # small tensors: more calls per timing, less timer noise
        a = torch.ones(n)
        b = torch.ones(n)
        key = f"bw{mib}"
        kv.init(key, b)
        t_raw: list[float] = []
        t_kv: list[float] = []
        dist.all_reduce(a)
        kv.pushpull(key, b)
        for r in range(rounds):
            for which in (("raw", "kv") if r % 2 == 0 else ("kv", "raw")):
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(reps):
                    if which == "raw":
                        dist.all_reduce(a)
                    else:
                        kv.pushpull(key, b)
                dt = (time.perf_counter() - t0) / reps
                (t_raw if which == "raw" else t_kv).append(dt)
        rows.append((mib, _bus_bw(n * 4, statistics.median(t_raw), world),
                     _bus_bw(n * 4, statistics.median(t_kv), world)))
    return rows


def _data(name: str, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(dist.get_rank())
    shape = (batch, 3, 32, 32) if name == "resnet18" else (batch, 1, 28, 28)
    return torch.rand(shape, generator=g), torch.randint(0, 10, (batch,), generator=g)


def _make_ddp_step(name: str, x: torch.Tensor, y: torch.Tensor) -> Any:
    import mxtorch as mx
    from mxtorch import autograd

    # ResNet-18: mxtorch's own network wrapped by DDP, so both sides run the same layers
    ref_net = torch_net(name) if name != "resnet18" else mx_net(name)
    if name == "resnet18":
        ref_net.initialize(mx.init.Xavier())
        ref_net(x)
    ddp = torch.nn.parallel.DistributedDataParallel(ref_net)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    def step() -> None:
        with autograd.train_mode():
            loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def bench_training(models: list[str], batch: int, steps: int, rounds: int) -> list[tuple[str, float, float]]:
    rows = []
    for name in models:
        x, y = _data(name, batch)
        fns = {"ddp": _make_ddp_step(name, x, y),
               "mx": mx_train_step(name, x, y, kvstore="horovod", hybridize=False)}
        n_steps = max(2, steps // 4) if name == "resnet18" else steps
        for fn in fns.values():
            for _ in range(3):
                fn()
        t: dict[str, list[float]] = {"ddp": [], "mx": []}
        for r in range(rounds):
            for which in (("ddp", "mx") if r % 2 == 0 else ("mx", "ddp")):
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(n_steps):
                    fns[which]()
                t[which].append((time.perf_counter() - t0) / n_steps)
        rows.append((name, statistics.median(t["ddp"]), statistics.median(t["mx"])))
        del fns
    return rows


def worker(args: argparse.Namespace) -> dict[str, Any] | None:
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    try:
        out: dict[str, Any] = {}
        if args.sizes:
            out["bw"] = bench_bandwidth([int(s) for s in args.sizes.split(",")], args.iters, args.rounds)
        if args.models:
            out["train"] = bench_training(args.models.split(","), args.batch, args.steps, args.rounds)
        return out if dist.get_rank() == 0 else None
    finally:
        from mxtorch.distributed import group

        group.shutdown()


def _entry(rank: int, world: int, port: int, args: argparse.Namespace, q: Any) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    res = worker(args)
    if res is not None:
        q.put(res)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sizes", default="1,16,128", help="MiB; empty to skip")
    ap.add_argument("--models", default="mlp,lenet,resnet18", help="empty to skip")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="per worker")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    args = ap.parse_args()
    import torch.multiprocessing as mp

    from mxtorch.distributed.testing import free_port

    port = free_port()
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    procs = [ctx.Process(target=_entry, args=(r, args.workers, port, args, q)) for r in range(args.workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        raise SystemExit(f"a worker failed: exit codes {[p.exitcode for p in procs]}")
    res = q.get()
    print(f"torch {torch.__version__}, gloo, {args.workers} processes x {args.threads} thread(s), 127.0.0.1")
    if "bw" in res:
        print("\n(a) allreduce bus bandwidth, GB/s (median of rounds)")
        print(f"{'size':>8}{'raw all_reduce':>16}{'kv.pushpull':>14}{'ratio':>8}")
        for mib, raw, kvbw in res["bw"]:
            print(f"{mib:>5} MiB{raw:>16.3f}{kvbw:>14.3f}{kvbw / raw:>8.3f}")
    if "train" in res:
        print(f"\n(b) training step, ms (batch {args.batch} per worker, SGD momentum)")
        print(f"{'model':>9}{'DDP':>10}{'mxtorch':>10}{'ratio':>8}")
        for name, t_ddp, t_mx in res["train"]:
            print(f"{name:>9}{t_ddp * 1e3:>10.2f}{t_mx * 1e3:>10.2f}{t_mx / t_ddp:>8.3f}")


if __name__ == "__main__":
    main()
