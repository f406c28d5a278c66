"""Gradient-compression benchmark: what each compressor costs and what it saves.

Prints, measured in one run:

(a) compress + decompress throughput of every compressor on a gradient-like fp32 tensor
    (normal values, shaped as a 1024-column matrix so that PowerSGD has a matrix to factor;
    1, 16, 64, 100 MiB), in GB/s of fp32 input, next to ``tensor.clone()`` of the same tensor
    timed in the same interleaved rounds, with the same torch thread count (ratio = compressor
    GB/s / copy GB/s).  Both allocate their outputs afresh each call, as their callers need
    (above glibc's mmap threshold, 32 MiB at most, each such allocation pays page faults: at
    100 MiB the copy is slower per byte than at 16 MiB, and so is decompression);
(b) payload bytes one worker sends per training step for whole models (every trainable
    parameter's gradient compressed once), against fp32;
(c) training step time of a Gluon ``Trainer`` on the 'horovod' KVStore in 2 processes (gloo,
    127.0.0.1), without and with each compressor, interleaved rounds, medians; the KVStore's
    own count of payload bytes sent per step is printed beside it;
(d) time to accuracy over an emulated 1 Gbit/s link: 2 worker hosts of an emulated cluster
    (network namespaces joined by tc-shaped veth links, ``mxtorch.cluster``; the machinery of
    ``bench/cluster.py``), one torch thread each, train an MLP 784-2048-2048-10 (5.8M
    parameters, 22 MiB of fp32 gradients: ~0.2 s a step on the link) on Fashion-MNIST, each
    worker its half of the training set, Gluon ``Trainer`` on 'horovod' (gloo), uncompressed
    and with each compressor, same seed and hyper-parameters.  Every 10 steps the training
    clock stops and rank 0 measures accuracy on the first 2000 test images; a run ends at the
    target accuracy or after its budget.  Printed per compressor: time and steps to the target
    (``> x s`` when not reached), mean step time, last accuracy, evaluation time (not on the
    clock), payload bytes per step, and none/this = time to target uncompressed / compressed
    (> 1: compression wins); then the same as one JSON line (``(d) json {...}``, with every
    evaluation).  Skipped with a one-line note where network namespaces cannot be made (not
    root, no iproute2, a container that forbids them); ``--tta-compressors ''`` skips it.

    python bench/compression.py [--sizes 1,16,64,100] [--compressors 2bit,1bit,fp16,bf16,topk,powersgd]
                                [--wire-models lenet_bn,mlp,resnet18] [--train-models lenet] [--rounds 3]
                                [--tta-compressors 2bit,...] [--tta-rate 1gbit] [--tta-target 0.82]
                                [--tta-budget 60] [--tta-hosts 2]

On one 2-core machine the two workers share the cores and "the network" is a memory copy, so
(c) shows the compute overhead of compression, not the bandwidth it saves on a real network.
(d) puts a real bottleneck between the workers, but the machine has no core to spare: each
worker has one, compressing and decompressing add to its step one for one (one thread, as on
a host with one core), and gloo's I/O threads and the kernel's work of moving packets through
veth, bridge and tc take time from those same two cores, in proportion to the bytes sent (work
a real host does on spare cores or in its NIC).  A compressor wins when the time it saves on
the link outweighs both its compute and the extra steps its coarser gradients need: read the
step time (what the link and the compute cost) and the steps to the target (what compression
cost in convergence) separately.  Near the target the accuracy moves by about a point between
evaluations, so ratios within about 20 % of 1 are a draw.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
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
        trainer.step(x.shape[0] * trainer._kvstore.num_workers)  # the global batch (MXNet's rule)

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


# ---- (d) time-to-accuracy over an emulated link ---------------------------------------------
TTA_LAYERS = (784, 2048, 2048, 10)
TTA_MOMENTUM = 0.9
TTA_WD = 1e-4
EvalPoint = tuple[float, int, float]
"""One evaluation: (training seconds so far, steps so far, held-out accuracy)."""


@dataclass(frozen=True)
class TTARun:
    """What one method of (d) did: its evaluation log and its totals (rank 0's clock)."""

    method: str  # 'none' or a compressor's name
    log: list[EvalPoint]
    steps: int
    train_s: float  # the training clock: steps only, evaluations excluded
    eval_s: float  # rank 0's evaluations (and the stop decision sent with them), not on the clock
    wire_per_step: float  # payload bytes one worker sent per step

    @property
    def step_s(self) -> float:
        return self.train_s / self.steps if self.steps else float("nan")

    @property
    def final_accuracy(self) -> float:
        return self.log[-1][2] if self.log else float("nan")

    def hit(self, target: float) -> tuple[float, int] | None:
        """(seconds, steps) at the first evaluation with accuracy >= ``target``; None if none reached it."""
        return time_to_target(self.log, target)


def time_to_target(log: list[EvalPoint], target: float) -> tuple[float, int] | None:
    """(training seconds, steps) of the first point of ``log`` whose accuracy is >= ``target``, else None.

    Evaluations are E steps apart, so this is the time of the first *evaluation* at or above
    the target: it may be up to E steps later than the step that got there.
    """
    for seconds, steps, accuracy in log:
        if accuracy >= target:
            return seconds, steps
    return None


def tta_speedup(base: TTARun, other: TTARun, target: float) -> tuple[str, float | None]:
    """time-to-target(base) / time-to-target(other), as text for the table and as a number (or None).

    A run that missed the target bounds the ratio by the time it trained: ``'<0.45'`` when
    only ``other`` missed it, ``'>1.50'`` when only ``base`` did, ``'n/a'`` when both did.
    """
    b, o = base.hit(target), other.hit(target)
    if b is not None and o is not None:
        return f"{b[0] / o[0]:.2f}", b[0] / o[0]
    if b is not None and other.train_s > 0:
        return f"<{b[0] / other.train_s:.2f}", None
    if o is not None and o[0] > 0:
        return f">{base.train_s / o[0]:.2f}", None
    return "n/a", None


def tta_rows(runs: list[TTARun], target: float) -> list[dict[str, Any]]:
    """One dict per run (the JSON line and the table are made from these); the first run is the baseline."""
    rows = []
    for run in runs:
        hit = run.hit(target)
        text, ratio = tta_speedup(runs[0], run, target)
        rows.append({"method": run.method, "reached": hit is not None,
                     "time_to_target_s": None if hit is None else round(hit[0], 3),
                     "steps_to_target": None if hit is None else hit[1],
                     "steps": run.steps, "train_s": round(run.train_s, 3), "eval_s": round(run.eval_s, 3),
                     "step_ms": round(run.step_s * 1e3, 2), "final_accuracy": round(run.final_accuracy, 4),
                     "wire_bytes_per_step": round(run.wire_per_step), "speedup": text, "speedup_value": ratio,
                     "log": [[round(t, 3), n, round(a, 4)] for t, n, a in run.log]})
    return rows


def format_tta_table(rows: list[dict[str, Any]], target: float) -> list[str]:
    """The lines of (d)'s table (see :func:`tta_rows`)."""
    head = f"time to {target:g}"
    lines = [f"{'compressor':>10}{head:>16}{'steps':>8}{'ms/step':>9}{'final acc':>11}{'eval s':>8}"
             f"{'wire/step':>12}{'none/this':>11}"]
    for r in rows:
        if r["reached"]:
            tta, steps = f"{r['time_to_target_s']:.1f} s", str(r["steps_to_target"])
        else:
            tta, steps = f"> {r['train_s']:.1f} s", f">{r['steps']}"
        lines.append(f"{r['method']:>10}{tta:>16}{steps:>8}{r['step_ms']:>9.1f}{r['final_accuracy']:>11.4f}"
                     f"{r['eval_s']:>8.1f}{_fmt_bytes(r['wire_bytes_per_step']):>12}{r['speedup']:>11}")
    return lines


def check_tta_args(args: argparse.Namespace) -> list[str]:
    """(d)'s compressors, after checking (d)'s options; raises ValueError saying what to change."""
    from mxtorch.cluster import MAX_HOSTS, ClusterError, parse_rate

    names = [c for c in args.tta_compressors.split(",") if c]
    unknown = sorted(set(names) - set(COMPRESSORS))
    if unknown:
        raise ValueError(f"--tta-compressors: unknown {unknown}; choose from {','.join(COMPRESSORS)} "
                         "(uncompressed always runs; '' skips part (d))")
    if len(set(names)) != len(names):
        raise ValueError(f"--tta-compressors {args.tta_compressors!r} names a compressor twice")
    try:
        parse_rate(args.tta_rate)
    except ClusterError as e:
        raise ValueError(f"--tta-rate: {e}") from None
    if not 0.0 < args.tta_target <= 1.0:
        raise ValueError(f"--tta-target {args.tta_target} is an accuracy: give a number in (0, 1], e.g. 0.8")
    if not 2 <= args.tta_hosts <= MAX_HOSTS:
        raise ValueError(f"--tta-hosts {args.tta_hosts}: give 2..{MAX_HOSTS} (one worker per host; "
                         "time-to-accuracy over a link needs at least two)")
    if args.tta_budget <= 0 and args.tta_max_steps <= 0:
        raise ValueError("give each run a limit: --tta-budget (seconds of training) or --tta-max-steps, > 0")
    for opt in ("tta_eval_every", "tta_eval_size", "tta_batch"):
        if getattr(args, opt) < 1:
            raise ValueError(f"--{opt.replace('_', '-')} must be >= 1, got {getattr(args, opt)}")
    if args.tta_lr <= 0:
        raise ValueError(f"--tta-lr must be > 0, got {args.tta_lr}")
    return names


def _tta_net() -> Any:
    from mxtorch.gluon import nn

    net = nn.HybridSequential()
    for i, (a, b) in enumerate(zip(TTA_LAYERS, TTA_LAYERS[1:])):
        net.add(nn.Dense(b, in_units=a, activation=None if i == len(TTA_LAYERS) - 2 else "relu"))
    return net


def _fashion_mnist() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, str]:
    """Fashion-MNIST as ``mxtorch train`` finds it (full set, else the embedded subset), as uint8 tensors."""
    from mxtorch.cli.train import TrainConfig, load_datasets
    from mxtorch.gluon.data import DataLoader

    train, test, desc = load_datasets(TrainConfig())
    x, y = next(iter(DataLoader(train, batch_size=len(train))))
    xt, yt = next(iter(DataLoader(test, batch_size=len(test))))
    return x.reshape(len(train), -1), y.long(), xt.reshape(len(test), -1), yt.long(), desc


def tta_worker(config: dict[str, Any]) -> None:
    """One rank of (d): train until rank 0's held-out accuracy reaches the target or the budget ends.

    Every ``eval_every`` steps the clock stops, rank 0 evaluates and sends the decision to go on
    (one broadcast); rank 0 prints the evaluation log and its totals (:func:`cluster.emit_result`).
    """
    import torch.distributed as dist
    from cluster import emit_result

    import mxtorch as mx
    from mxtorch import autograd, gluon
    from mxtorch.gluon.data import SplitSampler

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    x_train, y_train, x_test, y_test, desc = _fashion_mnist()
    x_eval = x_test[:config["eval_size"]].float().div_(255)
    y_eval = y_test[:config["eval_size"]]
    sampler = SplitSampler(len(y_train), world, rank, even_size=True, seed=config["seed"])

    mx.random.seed(config["seed"])
    torch.manual_seed(config["seed"])
    net = _tta_net()
    net.initialize(mx.init.Xavier())
    params = config["compression"]
    # building the Trainer joins the job and broadcasts rank 0's weights; the clock starts after
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": config["lr"], "momentum": TTA_MOMENTUM, "wd": TTA_WD},
                            kvstore="horovod", compression_params=params)
    kv = trainer._kvstore
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    batch, every = config["batch"], config["eval_every"]
    max_steps = config["max_steps"] or None
    budget = config["budget"] or None

    def batches() -> Any:
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            idx = torch.as_tensor(list(sampler))
            for i in range(0, len(idx) - batch + 1, batch):
                b = idx[i:i + batch]
                yield x_train[b].float().div_(255), y_train[b]
            epoch += 1

    data = batches()
    log: list[EvalPoint] = []
    steps, train_s, eval_s = 0, 0.0, 0.0
    sent0 = kv.wire_bytes_sent
    go_on = torch.ones(1, dtype=torch.int32)
    dist.barrier()
    while True:
        t0 = time.perf_counter()
        for _ in range(every if max_steps is None else min(every, max_steps - steps)):
            x, y = next(data)
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(batch * world)  # the global batch: the store sums (MXNet's rule)
            steps += 1
        train_s += time.perf_counter() - t0
        t1 = time.perf_counter()
        if rank == 0:
            with torch.no_grad(), autograd.predict_mode():
                accuracy = float((net(x_eval).argmax(1) == y_eval).float().mean())
            log.append((train_s, steps, accuracy))
            done = (accuracy >= config["target"] or (budget is not None and train_s >= budget)
                    or (max_steps is not None and steps >= max_steps))
            go_on.fill_(0 if done else 1)
        dist.broadcast(go_on, src=0)
        eval_s += time.perf_counter() - t1
        if not int(go_on):
            break
    wire = (kv.wire_bytes_sent - sent0) / steps
    if params is None:  # uncompressed the store all-reduces fp32 gradients: a ring sends 2(N-1)/N of them
        wire = sum(p.data().numel() * 4 for p in net.collect_params().values()) * 2 * (world - 1) / world
    emit_result({"method": config["method"], "log": log, "steps": steps, "train_s": train_s, "eval_s": eval_s,
                 "wire_per_step": wire, "data": desc})


def bench_tta(args: argparse.Namespace) -> tuple[list[TTARun], str] | None:
    """Run (d); None (after printing why) where this machine cannot make network namespaces."""
    from cluster import rank_results

    from mxtorch.cluster import Cluster, ClusterUnavailable, format_rate, parse_rate, support_problem
    from mxtorch.cluster.testing import HostJob

    names = check_tta_args(args)
    problem = support_problem()
    if problem is not None:
        print(f"\n(d) time-to-accuracy skipped: the emulated cluster needs network namespaces: {problem}")
        return None
    rate = format_rate(parse_rate(args.tta_rate))
    budget = args.tta_budget
    job_timeout = 120 + 3 * (budget if budget > 0 else args.tta_max_steps * 5)
    env = {"MXTORCH_DIST_TIMEOUT": "300"}
    runs: list[TTARun] = []
    desc = ""
    try:
        with Cluster.up(args.tta_hosts, args.tta_rate, owned=True) as cluster:
            for method in ["none", *names]:
                print(f"... (d) {method} on {args.tta_hosts} hosts at {rate}", file=sys.stderr, flush=True)
                params = None if method == "none" else _params_for(method, args)
                config = {"method": method, "compression": params,
                          "seed": args.tta_seed, "lr": args.tta_lr, "batch": args.tta_batch,
                          "eval_every": args.tta_eval_every, "eval_size": args.tta_eval_size,
                          "target": args.tta_target, "budget": budget, "max_steps": args.tta_max_steps}
                argv = [sys.executable, os.path.abspath(__file__), "--tta-worker", json.dumps(config)]
                with HostJob(cluster, argv, args.tta_hosts, env=env) as job:
                    res = rank_results(job.wait(job_timeout), f"(d) {method} at {rate}")[0]
                runs.append(TTARun(method, [(float(t), int(n), float(a)) for t, n, a in res["log"]],
                                   int(res["steps"]), float(res["train_s"]), float(res["eval_s"]),
                                   float(res["wire_per_step"])))
                desc = res["data"]
    except ClusterUnavailable as e:
        print(f"\n(d) time-to-accuracy skipped: {e}")
        return None
    return runs, desc


def _fmt_bytes(n: float) -> str:
    for unit, size in (("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def build_parser() -> argparse.ArgumentParser:
    """The command line (every part's options)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,16,64,100", help="(a) tensor sizes in MiB; empty to skip")
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
    ap.add_argument("--tta-compressors", default=",".join(COMPRESSORS),
                    help="(d) compressors raced against uncompressed (which always runs); empty to skip (d)")
    ap.add_argument("--tta-rate", default="1gbit", help="(d) link rate of every host ('none': unshaped)")
    ap.add_argument("--tta-hosts", type=int, default=2, help="(d) worker hosts, one worker each")
    ap.add_argument("--tta-target", type=float, default=0.82, help="(d) held-out accuracy to reach")
    ap.add_argument("--tta-budget", type=float, default=60.0,
                    help="(d) training seconds per method before giving up (checked at evaluations; 0: none)")
    ap.add_argument("--tta-max-steps", type=int, default=0,
                    help="(d) steps per method before giving up (0: none)")
    ap.add_argument("--tta-eval-every", type=int, default=10, help="(d) steps between evaluations")
    ap.add_argument("--tta-eval-size", type=int, default=2000,
                    help="(d) held-out images (the first N test images)")
    ap.add_argument("--tta-batch", type=int, default=64, help="(d) samples per worker and step")
    ap.add_argument("--tta-lr", type=float, default=0.05,
                    help="(d) SGD learning rate (momentum 0.9, wd 1e-4)")
    ap.add_argument("--tta-seed", type=int, default=42, help="(d) seed of the weights and the data order")
    ap.add_argument("--tta-worker", default=None, help=argparse.SUPPRESS)
    return ap


def main() -> None:
    ap = build_parser()
    args = ap.parse_args()
    if args.tta_worker is not None:
        tta_worker(json.loads(args.tta_worker))
        return
    if args.tta_compressors:
        try:
            check_tta_args(args)  # before minutes of (a)-(c)
        except ValueError as e:
            ap.error(str(e))
    print(f"torch {torch.__version__}, {args.threads} thread(s); compressors: 2bit threshold "
          f"{args.threshold} residual_limit {args.residual_limit or 'none'}, topk ratio {args.ratio}, "
          f"powersgd rank {args.rank}")

    if args.sizes:
        torch.set_num_threads(args.threads)
        print(f"\n(a) compress + decompress, GB/s of fp32 input (median of rounds); copy = tensor.clone(); "
              f"both on {torch.get_num_threads()} torch thread(s)")
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

    if args.tta_compressors:
        print_tta(args)


def print_tta(args: argparse.Namespace) -> None:
    """Run (d) and print its table and its JSON line (or the line saying why it was skipped)."""
    started = time.monotonic()
    done = bench_tta(args)
    if done is None:
        return
    runs, data = done
    rows = tta_rows(runs, args.tta_target)
    n_params = sum(a * b + b for a, b in zip(TTA_LAYERS, TTA_LAYERS[1:]))
    arch = "-".join(map(str, TTA_LAYERS))
    limit = " and ".join(x for x in (f"{args.tta_budget:g} s" if args.tta_budget > 0 else "",
                                     f"{args.tta_max_steps} steps" if args.tta_max_steps > 0 else "") if x)
    print(f"\n(d) time to {args.tta_target:g} held-out accuracy, {args.tta_hosts} hosts x 1 thread joined by "
          f"{args.tta_rate} links (network namespaces, tc), 'horovod' KVStore (gloo); MLP {arch} "
          f"({n_params / 1e6:.1f}M params, {_fmt_bytes(n_params * 4)} of fp32 gradients), {data}, batch "
          f"{args.tta_batch} per worker, SGD lr {args.tta_lr:g} momentum {TTA_MOMENTUM:g} wd {TTA_WD:g}, "
          f"seed {args.tta_seed}; rank 0 evaluates the first {args.tta_eval_size} test images every "
          f"{args.tta_eval_every} steps, off the training clock (eval s); limit {limit} per method; "
          f"total {time.monotonic() - started:.0f} s")
    for line in format_tta_table(rows, args.tta_target):
        print(line)
    print("none/this = time to target uncompressed / with this compressor (>1: compression wins; '<x' or "
          "'>x' where one of the two missed the target: the missed run's training time bounds it); wire/step "
          "= payload bytes one worker sent per step (none: the ring all-reduce's 2(N-1)/N of the fp32 "
          "gradients)")
    print("(d) json " + json.dumps({
        "rate": args.tta_rate, "hosts": args.tta_hosts, "target": args.tta_target,
        "budget_s": args.tta_budget, "max_steps": args.tta_max_steps, "eval_every": args.tta_eval_every,
        "eval_size": args.tta_eval_size,
        "batch_per_worker": args.tta_batch, "lr": args.tta_lr, "seed": args.tta_seed, "model": arch,
        "data": data, "runs": rows}))


if __name__ == "__main__":
    main()
