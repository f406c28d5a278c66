"""Gradient-compression benchmark: what each compressor costs and what it saves.

Prints, measured in one run:

(a) compress + decompress throughput of every compressor on a gradient-like fp32 tensor
    (normal values, shaped as a 1024-column matrix so that PowerSGD has a matrix to factor;
    1, 16, 64 MiB), in GB/s of fp32 input, next to ``tensor.clone()`` of the same tensor timed
    in the same interleaved rounds (ratio = compressor GB/s / copy GB/s);
(b) payload bytes one worker sends per training step for whole models (every trainable
    parameter's gradient compressed once), against fp32;
(c) training step time of a Gluon ``Trainer`` on the 'horovod' KVStore in 2 processes (gloo,
    127.0.0.1), without and with each compressor, interleaved rounds, medians; the KVStore's
    own count of payload bytes sent per step is printed beside it.

    python bench/compression.py [--sizes 1,16,64] [--compressors 2bit,1bit,fp16,bf16,topk,powersgd]
                                [--wire-models lenet_bn,mlp,resnet18] [--train-models lenet] [--rounds 3]

On one 2-core machine the two workers share the cores and "the network" is a memory copy, so
(c) shows the compute overhead of compression, not the bandwidth it saves on a real network.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import torch
from _models import mx_net

MiB = 1 << 20
COMPRESSORS = ("2bit", "1bit", "fp16", "bf16", "topk", "powersgd")


def _params_for(name: str, args: argparse.Namespace) -> dict[str, Any]:
    two_bit: dict[str, Any] = {"threshold": args.threshold}
    if args.residual_limit:
        two_bit["residual_limit"] = args.residual_limit
    extra = {"2bit": two_bit, "topk": {"ratio": args.ratio}, "powersgd": {"rank": args.rank}}.get(name, {})
    return {"type": name, **extra}


def _gradient_like(mib: int) -> torch.Tensor:
    n = mib * MiB // 4
    g = torch.Generator().manual_seed(mib)
    return (torch.randn(n, generator=g) * 0.5).reshape(-1, 1024)


# ---- (a) throughput ------------------------------------------------------------------------
def bench_throughput(args: argparse.Namespace) -> list[tuple[int, str, float, float]]:
    from mxtorch import compression

    torch.set_num_threads(args.threads)
    rows = []
    for mib in [int(s) for s in args.sizes.split(",") if s]:
        grad = _gradient_like(mib)
        nbytes = grad.numel() * 4
        for name in args.compressors.split(","):
            comp = compression.create(_params_for(name, args))

            def roundtrip(comp: Any = comp, grad: torch.Tensor = grad) -> None:
                payload, ctx = comp.compress(grad, key="g")
                comp.decompress(payload, ctx)

            def copy(grad: torch.Tensor = grad) -> None:
                grad.clone()

            roundtrip()  # warm-up (and the first residual / PowerSGD Q)
            copy()
            reps = max(1, min(args.iters, 64 // mib))
            t: dict[str, list[float]] = {"comp": [], "copy": []}
            for r in range(args.rounds):
                for which, fn in ((("comp", roundtrip), ("copy", copy)) if r % 2 == 0
                                  else (("copy", copy), ("comp", roundtrip))):
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        fn()
                    t[which].append((time.perf_counter() - t0) / reps)
            rows.append((mib, name, nbytes / statistics.median(t["comp"]) / 1e9,
                         nbytes / statistics.median(t["copy"]) / 1e9))
    return rows


# ---- (b) bytes on the wire per step ----------------------------------------------------------
def _model(name: str) -> Any:
    import mxtorch as mx

    if name in ("mlp", "lenet", "resnet18"):
        net = mx_net(name)  # the benchmarks' networks (resnet18 = resnet18_v1 thumbnail)
    else:
        net = mx.gluon.model_zoo.vision.get_model(name, classes=10)
    net.initialize(mx.init.Xavier())
    shape = (1, 3, 32, 32) if name.startswith("resnet") else (1, 1, 28, 28)
    net(torch.zeros(shape))
    return net


def bench_wire(args: argparse.Namespace) -> list[tuple[str, int, int, dict[str, int]]]:
    from mxtorch import compression

    rows = []
    for model in [m for m in args.wire_models.split(",") if m]:
        net = _model(model)
        grads = [(i, torch.randn(p.shape) * 0.5) for i, p in enumerate(net.collect_params().values())
                 if p.grad_req != "null"]
        fp32 = sum(g.numel() * 4 for _, g in grads)
        sent = {}
        for name in args.compressors.split(","):
            comp = compression.create(_params_for(name, args))
            sent[name] = sum(comp.wire_bytes(comp.compress(g, key=i)[0]) for i, g in grads)
        rows.append((model, sum(g.numel() for _, g in grads), fp32, sent))
    return rows


# ---- (c) 2-process training step ------------------------------------------------------------
def _train_step(model: str, x: torch.Tensor, y: torch.Tensor,
                params: dict[str, Any] | None) -> tuple[Any, Any, list[torch.Tensor]]:
    import mxtorch as mx
    from mxtorch import autograd, gluon

    net = mx_net(model)
    net.initialize(mx.init.Xavier())
    net(x)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4},
                            kvstore="horovod", compression_params=params)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step() -> None:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])

    grads = [p.data() for p in net.collect_params().values() if p.grad_req != "null"]
    return step, trainer._kvstore, grads


def train_worker(args: argparse.Namespace) -> dict[str, Any]:
    """One rank of (c): every configuration built side by side, timed in interleaved rounds."""
    import torch.distributed as dist

    torch.set_num_threads(args.threads)
    rank = int(os.environ["RANK"])
    out: dict[str, Any] = {}
    for model in [m for m in args.train_models.split(",") if m]:
        g = torch.Generator().manual_seed(rank)
        shape = (args.batch, 3, 32, 32) if model == "resnet18" else (args.batch, 1, 28, 28)
        x, y = torch.rand(shape, generator=g), torch.randint(0, 10, (args.batch,), generator=g)
        names = ["none", *args.compressors.split(",")]
        built = {n: _train_step(model, x, y, None if n == "none" else _params_for(n, args)) for n in names}
        for fn, _, _ in built.values():
            for _ in range(2):
                fn()
        sent0 = {n: kv.wire_bytes_sent for n, (_, kv, _) in built.items()}
        times: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for n in order:
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    built[n][0]()
                times[n].append((time.perf_counter() - t0) / args.steps)
        total_steps = args.rounds * args.steps
        out[model] = {n: (statistics.median(times[n]), (built[n][1].wire_bytes_sent - sent0[n]) / total_steps)
                      for n in names}
        # uncompressed, the store all-reduces the fp32 gradients themselves
        net_bytes = sum(p.numel() * 4 for p in built["none"][2])
        out[model]["none"] = (out[model]["none"][0], float(net_bytes))
    return out


def _fmt_bytes(n: float) -> str:
    for unit, size in (("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,16,64", help="(a) tensor sizes in MiB; empty to skip")
    ap.add_argument("--compressors", default=",".join(COMPRESSORS))
    ap.add_argument("--wire-models", default="lenet_bn,mlp,resnet18", help="(b) models; empty to skip")
    ap.add_argument("--train-models", default="lenet",
                    help="(c) models (mlp, lenet, resnet18); empty to skip")
    ap.add_argument("--threshold", type=float, default=0.5, help="2bit threshold")
    ap.add_argument("--residual-limit", type=float, default=1.0,
                    help="2bit residual bound in thresholds, as `mxtorch train` uses (0: unbounded, MXNet's)")
    ap.add_argument("--ratio", type=float, default=0.01, help="topk ratio")
    ap.add_argument("--rank", type=int, default=1, help="powersgd rank")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=4, help="(a) calls per timing (fewer for large tensors)")
    ap.add_argument("--steps", type=int, default=8, help="(c) steps per timing")
    ap.add_argument("--batch", type=int, default=64, help="(c) samples per worker")
    ap.add_argument("--workers", type=int, default=2, help="(c) processes")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (per worker in (c))")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {args.threads} thread(s); compressors: 2bit threshold "
          f"{args.threshold} residual_limit {args.residual_limit or 'none'}, topk ratio {args.ratio}, "
          f"powersgd rank {args.rank}")

    if args.sizes:
        print("\n(a) compress + decompress, GB/s of fp32 input (median of rounds); copy = tensor.clone()")
        print(f"{'size':>8} {'compressor':>10}{'GB/s':>9}{'copy GB/s':>11}{'ratio':>8}")
        for mib, name, comp_bw, copy_bw in bench_throughput(args):
            print(f"{mib:>5} MiB {name:>10}{comp_bw:>9.3f}{copy_bw:>11.3f}{comp_bw / copy_bw:>8.3f}")

    if args.wire_models:
        print("\n(b) payload one worker sends per step (every trainable gradient compressed once; "
              "mlp = 784-512-512-10, resnet18 = resnet18_v1 thumbnail)")
        names = args.compressors.split(",")
        print(f"{'model':>10}{'params':>11}{'fp32':>12}" + "".join(f"{n:>12}" for n in names))
        for model, numel, fp32, sent in bench_wire(args):
            print(f"{model:>10}{numel:>11,}{_fmt_bytes(fp32):>12}"
                  + "".join(f"{_fmt_bytes(sent[n]):>12}" for n in names))
            print(f"{'':>10}{'':>11}{'ratio':>12}" + "".join(f"{fp32 / sent[n]:>11.1f}x" for n in names))

    if args.train_models:
        from mxtorch.distributed.testing import run_workers

        res = run_workers(train_worker, args.workers, args, timeout=600)[0]
        print(f"\n(c) training step, {args.workers} processes x {args.threads} thread(s), 'horovod' KVStore, "
              f"batch {args.batch} per worker, SGD momentum; ms/step (median of {args.rounds} rounds of "
              f"{args.steps}); wire = payload bytes a worker sent per step, counted by the KVStore "
              "(none: the fp32 gradients it all-reduces)")
        for model, per in res.items():
            base = per["none"][0]
            print(f"{model}:")
            print(f"{'compressor':>12}{'ms/step':>10}{'vs none':>9}{'wire/step':>12}")
            for name, (sec, wire) in per.items():
                print(f"{name:>12}{sec * 1e3:>10.2f}{sec / base:>9.2f}{_fmt_bytes(wire):>12}")


if __name__ == "__main__":
    main()
