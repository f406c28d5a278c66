"""Scaling benchmark on an emulated cluster: N worker hosts joined by 10 Gbit/s or 1 Gbit/s links.

For every host count (default 2 and 4) and link rate (default 10gbit and 1gbit) it makes a
cluster of network namespaces (``mxtorch.cluster``: veth links shaped with tc in both
directions), starts one worker per host (1 torch thread each) and times a training step of
a wide MLP (~24M parameters, ~97 MB of fp32 gradients, so that a 1 Gbit/s link matters) for:

* PyTorch ``DistributedDataParallel`` (the reference, measured in the same run),
* mxtorch's Gluon ``Trainer`` with ``kvstore='horovod'``, plain and with each gradient
  compressor (``2bit``, ``1bit``, ``fp16``, ``bf16``, ``topk``, ``powersgd``),
* ``dist_sync`` and ``dist_async`` (parameter server), where this mxtorch has one.

Scaling efficiency = throughput of N hosts / (N x throughput of one host), where one host
is the same training step in one process with no communication (plain torch for DDP,
mxtorch without a KVStore for the rest), timed in the same run.  It prints the table and
draws it as a PNG (``--plot``; needs matplotlib: ``pip install -e ".[bench]"``).

    sudo .venv/bin/python bench/cluster.py [--hosts 2,4] [--rates 10gbit,1gbit] [--steps 3]

Needs root (network namespaces).  On a machine with fewer cores than workers, the workers
share the CPU: the table's "CPU cap" row is the best efficiency the cores allow (cores / N),
and numbers near it are bound by the CPU, not by the link.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from typing import Any

import torch

PARAM_LAYERS = (784, 4096, 4096, 1024, 10)
COMPRESSORS: dict[str, dict[str, Any]] = {
    "2bit": {"type": "2bit", "threshold": 0.5}, "1bit": {"type": "1bit", "threshold": 0.0},
    "fp16": {"type": "fp16"}, "bf16": {"type": "bf16"}, "topk": {"type": "topk", "ratio": 0.01},
    "powersgd": {"type": "powersgd", "rank": 4},
}
METHODS = ("ddp", "horovod", *(f"horovod+{c}" for c in COMPRESSORS), "dist_sync", "dist_async")
PS_METHODS = ("dist_sync", "dist_async")
_RESULT = "RESULT "


# ---- worker side (runs inside a namespace host) ----------------------------------------------------
def _torch_mlp() -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(PARAM_LAYERS, PARAM_LAYERS[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(PARAM_LAYERS) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def _mx_mlp() -> Any:
    from mxtorch.gluon import nn

    net = nn.HybridSequential()
    for i, (a, b) in enumerate(zip(PARAM_LAYERS, PARAM_LAYERS[1:])):
        last = i == len(PARAM_LAYERS) - 2
        net.add(nn.Dense(b, in_units=a, activation=None if last else "relu"))
    return net


def _step_fn(method: str, x: torch.Tensor, y: torch.Tensor) -> tuple[Any, list[Any]]:
    """A closure doing one training step of ``method``, and the objects to release afterwards."""
    import torch.nn.functional as F

    if method in ("ddp", "torch"):  # 'torch': the one-host reference, no communication
        net = _torch_mlp()
        model = torch.nn.parallel.DistributedDataParallel(net) if method == "ddp" else net
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def torch_step() -> None:
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return torch_step, [model, opt]
    import mxtorch as mx
    from mxtorch import autograd, gluon

    net = _mx_mlp()
    net.initialize(mx.init.Xavier())
    kvstore: Any = None  # 'mxtorch': the one-host reference
    compression = None
    if method.startswith("horovod"):
        kvstore = "horovod"
        compression = COMPRESSORS.get(method.partition("+")[2])
    elif method in PS_METHODS:
        kvstore = method
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9},
                            kvstore=kvstore, compression_params=compression)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    # the global batch: stores sum over workers (MXNet's rule)
    batch = x.shape[0] * (trainer._kvstore.num_workers if trainer._kvstore is not None else 1)

    def mx_step() -> None:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)

    return mx_step, [net, trainer]


def worker(config: dict[str, Any]) -> None:
    """Time each method of ``config`` in this process; print the median step time per method.

    A parameter-server method runs alone in its job (one store mode per job): its Trainer is
    built once and timed ``rounds`` times; the others are rebuilt each round, in alternating order.
    """
    import mxtorch as mx
    from mxtorch.distributed import group

    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    methods = config["methods"]
    ps_mode = methods[0] if methods[0] in PS_METHODS else None
    collective = world > 1 and ps_mode is None
    if collective:
        group.init("gloo")
    rank = int(os.environ.get("RANK", "0"))
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(config["batch"], PARAM_LAYERS[0], generator=g)
    y = torch.randint(0, PARAM_LAYERS[-1], (config["batch"],), generator=g)

    def barrier() -> None:
        if collective:
            group.barrier()
        elif ps_mode is not None:
            mx.kv.create(ps_mode).barrier()  # the job's one open store

    times: dict[str, list[float]] = {m: [] for m in methods}
    built = _step_fn(ps_mode, x, y) if ps_mode is not None else None
    for r in range(config["rounds"]):
        for method in (methods if r % 2 == 0 else list(reversed(methods))):
            step, keep = built if built is not None else _step_fn(method, x, y)
            for _ in range(config["warmup"] if built is None or r == 0 else 0):
                step()
            barrier()
            t0 = time.perf_counter()
            for _ in range(config["steps"]):
                step()
            times[method].append((time.perf_counter() - t0) / config["steps"])
            barrier()
            del step, keep  # DDP holds the process group: release it before the next method and at exit
    del built
    # every rank reports: dist_async workers run at their own pace
    emit_result({m: statistics.median(t) for m, t in times.items()})
    if collective:
        group.shutdown()


def emit_result(result: dict[str, Any]) -> None:
    """Print this rank's result as the one line :func:`rank_results` reads back (JSON)."""
    print(_RESULT + json.dumps(result), flush=True)


# ---- driver side -------------------------------------------------------------------------------
def rank_results(results: list[tuple[int, str, str]], what: str) -> list[dict[str, Any]]:
    """The :func:`emit_result` line of every rank of a finished :class:`HostJob`, in rank order.

    ``results`` is :meth:`HostJob.wait`'s answer; a rank that failed ends the benchmark with
    its exit code and the end of its stderr, ``what`` saying which run it was.
    """
    for r, (code, _, err) in enumerate(results):
        if code != 0:
            raise SystemExit(f"{what}: rank {r} failed (exit code {code}):\n{err[-4000:]}")
    per_rank = []
    for r, (_, out, err) in enumerate(results):
        line = next((ln for ln in out.splitlines() if ln.startswith(_RESULT)), None)
        if line is None:
            raise SystemExit(f"{what}: rank {r} exited without printing its result line:\n{err[-4000:]}")
        per_rank.append(json.loads(line[len(_RESULT):]))
    return per_rank


def _run_on_cluster(workers: int, rate: str | None, methods: list[str],
                    args: argparse.Namespace) -> dict[str, list[float]]:
    """Step times of each method on each of ``workers`` worker hosts (plus server hosts for a PS method)."""
    from mxtorch.cluster import Cluster
    from mxtorch.cluster.testing import HostJob, ParameterServerNodes

    config = {"methods": methods, "batch": args.batch, "steps": args.steps, "warmup": args.warmup,
              "rounds": args.rounds}
    servers = workers if methods[0] in PS_METHODS else 0  # as many servers as workers, on hosts of their own
    env = {"MXTORCH_DIST_TIMEOUT": str(args.dist_timeout)}
    argv = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(config)]
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(Cluster.up(workers + servers, rate, owned=True))
        if servers:
            nodes = stack.enter_context(ParameterServerNodes(
                cluster, workers, servers, scheduler_host=workers,
                server_hosts=list(range(workers, workers + servers)), env=env))
            env.update(nodes.worker_env())
        job = stack.enter_context(HostJob(cluster, argv, workers, hosts=list(range(workers)), env=env))
        results = job.wait(args.job_timeout)
    per_rank = rank_results(results, f"{', '.join(methods)} on {workers} hosts at {rate}")
    return {m: [float(p[m]) for p in per_rank] for m in methods}


def _ps_available() -> bool:
    try:
        import mxtorch.kvstore.ps.worker  # noqa: F401
    except ImportError:
        return False
    return True


def _label(method: str) -> str:
    if method == "ddp":
        return "PyTorch DDP"
    return method.replace("+", " + ")


def _draw(path: str, columns: list[tuple[int, str]], methods: list[str],
          eff: dict[tuple[str, int, str], float], cores: int, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"\n(no plot: matplotlib is not installed; `.venv/bin/pip install -e \".[bench]\"` "
              f"-c constraints-cpu.txt` adds it, then run again to get {path})")
        return
    fig, ax = plt.subplots(figsize=(max(9.0, 1.6 * len(columns) + 0.35 * len(methods)), 6.0))
    width = 0.8 / len(methods)
    colors = plt.get_cmap("tab10")
    for i, m in enumerate(methods):
        xs = [c + (i - (len(methods) - 1) / 2) * width for c in range(len(columns))]
        ys = [eff[(m, n, rate)] for n, rate in columns]
        ddp = m == "ddp"
        ax.bar(xs, ys, width, label=_label(m), color=colors(i % 10), edgecolor="black" if ddp else None,
               hatch="//" if ddp else None)
    for c, (n, _) in enumerate(columns):
        cap = min(1.0, cores / n)
        ax.hlines(cap, c - 0.45, c + 0.45, colors="gray", linestyles="dashed",
                  label="CPU cap (cores / hosts)" if c == 0 else None)
    ax.set_xticks(range(len(columns)), [f"{n} hosts\n{rate}" for n, rate in columns])
    ax.set_ylabel("scaling efficiency  (N-host throughput / N x one host)")
    ax.set_ylim(0, 1.1)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, ncol=min(5, len(methods) + 1), loc="upper center", bbox_to_anchor=(0.5, -0.12))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"\nplot: {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", default="2,4", help="worker host counts (default 2,4)")
    ap.add_argument("--rates", default="10gbit,1gbit", help="link rates (default 10gbit,1gbit)")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"any of {','.join(METHODS)}")
    ap.add_argument("--batch", type=int, default=32, help="samples per worker and step (default 32)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per method and round (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, in alternating order; median (default 2)")
    ap.add_argument("--plot", default="runs/bench/cluster.png", help="PNG of the table ('' for none)")
    ap.add_argument("--dist-timeout", type=float, default=600.0, help="MXTORCH_DIST_TIMEOUT of the workers")
    ap.add_argument("--job-timeout", type=float, default=1800.0, help="seconds one cluster run may take")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        worker(json.loads(args.worker))
        return

    from mxtorch.cluster import parse_rate, support_problem

    problem = support_problem()
    if problem is not None:
        raise SystemExit(f"bench/cluster.py needs network namespaces: {problem}")
    host_counts = [int(h) for h in args.hosts.split(",")]
    rates = args.rates.split(",")
    for rate in rates:
        parse_rate(rate)  # refuse a bad rate before minutes of work
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}: choose from {', '.join(METHODS)}")
    skipped = [m for m in methods if m in PS_METHODS and not _ps_available()]
    methods = [m for m in methods if m not in skipped]
    cores = os.cpu_count() or 1
    n_params = sum(a * b + b for a, b in zip(PARAM_LAYERS, PARAM_LAYERS[1:]))
    started = time.monotonic()

    refs = sorted({"torch" if m == "ddp" else "mxtorch" for m in methods})
    single = {m: t[0] for m, t in _run_on_cluster(1, None, refs, args).items()}
    step_s: dict[tuple[str, int, str], float] = {}  # median over ranks
    thr: dict[tuple[str, int, str], float] = {}  # samples/s of the whole job
    groups = [[m for m in methods if m not in PS_METHODS]] + [[m] for m in methods if m in PS_METHODS]
    for n in host_counts:
        for rate in rates:
            for group in (g for g in groups if g):
                print(f"... {n} hosts at {rate}: {', '.join(group)}", file=sys.stderr, flush=True)
                for m, per_rank in _run_on_cluster(n, rate, group, args).items():
                    step_s[(m, n, rate)] = statistics.median(per_rank)
                    thr[(m, n, rate)] = sum(args.batch / t for t in per_rank)
    eff = {(m, n, rate): v / (n * args.batch / single["torch" if m == "ddp" else "mxtorch"])
           for (m, n, rate), v in thr.items()}

    arch = "-".join(map(str, PARAM_LAYERS))
    title = (f"wide MLP {arch} ({n_params / 1e6:.1f}M params), batch {args.batch}/worker, 1 thread/worker, "
             f"gloo over tc-shaped namespace links, {cores} CPU cores")
    plot_title = title.replace(", gloo", ",\ngloo")
    print(f"bench/cluster.py: {title}")
    print(f"torch {torch.__version__}; {args.steps} timed steps x {args.rounds} rounds per method (median), "
          f"{args.warmup} warm-up steps; total {time.monotonic() - started:.0f} s")
    print("one host, no communication: " + ", ".join(
        f"{k} {v * 1e3:.1f} ms/step ({args.batch / v:.0f} samples/s)" for k, v in sorted(single.items())))
    columns = [(n, rate) for n in host_counts for rate in rates]
    head = [f"{n} hosts {rate}" for n, rate in columns]
    print("\nscaling efficiency = throughput of N hosts / (N x one host)   [step ms | samples/s of the job]")
    print(f"{'method':<18}" + "".join(f"{h:>26}" for h in head))
    for m in methods:
        cells = [f"{eff[(m, n, r)]:.2f} [{step_s[(m, n, r)] * 1e3:7.0f} | {thr[(m, n, r)]:5.0f}]"
                 for n, r in columns]
        print(f"{_label(m):<18}" + "".join(f"{c:>26}" for c in cells))
    print(f"{'CPU cap':<18}" + "".join(f"{min(1.0, cores / n):>26.2f}" for n, _ in columns))
    if any(n > cores for n in host_counts):
        print(f"\nnote: the hosts are namespaces of one {cores}-core machine: with more worker hosts than "
              "cores the workers share the CPU, so those columns are bound by the CPU (at most the CPU cap), "
              "not only by the link; compare methods within a column and with DDP.")
    if any(m in PS_METHODS for m in methods):
        print("\ndist_sync / dist_async: N parameter servers on N more hosts (the scheduler beside server "
              "0); keys above 1M elements are split over all servers. The servers' summing and SGD updates "
              "share the same cores.")
    if skipped:
        print(f"\nnot measured: {', '.join(skipped)} (this mxtorch has no parameter server: "
              "mxtorch.kvstore.ps.worker is missing)")
    if args.plot:
        _draw(args.plot, columns, methods, eff, cores, plot_title)


if __name__ == "__main__":
    main()
