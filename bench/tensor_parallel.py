"""Tensor parallelism: step time with tp=2 against one process, and the all-reduce traffic per step.

Two processes (gloo, 127.0.0.1, one thread each) train a chain of Dense layers split column ->
row in pairs (``ParallelConfig(tp=2)``, ``tp_plan='auto'``); one process (one thread) trains the
same chain on the same batch in the same run.  A dispatch mode on every rank records each
collective that DTensor issues (forward and backward) and the bytes it carries; the theory for
Megatron's pairing is two all-reduces per pair per step: the row layer's output forward and the
column layer's input gradient backward, ``4 * batch * (out_row + in_col)`` bytes in float32 (the
first pair reads the network's input, which needs no gradient: one all-reduce fewer).

``--model lstm``: a ``--pairs``-layer bidirectional LSTM of ``--width`` hidden units over ``--seq``
time steps, then a Dense, split by ``"gates"`` (:mod:`mxtorch.parallel.tp_rnn`): the theory is one
all-gather of the hidden state (both directions) per layer and time step forward,
``4 * batch * 2 * width / tp`` bytes from each rank, and one reduce-scatter of its gradient
(``4 * batch * 2 * width`` bytes in) backward; the network's input needs no gradient, so no
all-reduce.

    python bench/tensor_parallel.py [--width 2048] [--pairs 2] [--batch 64] [--steps 10]
    python bench/tensor_parallel.py --model lstm --width 256 --pairs 2 --seq 16 --batch 32
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


class CollectiveBytes(TorchDispatchMode):
    """Counts the collectives run under it and the bytes of their first tensor argument."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, list[int]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        from torch.distributed.tensor import DTensor

        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented  # let DTensor turn itself into plain ops and collectives first
        name = str(func._overloadpacket)
        if any(c in name for c in _COLLECTIVES) and args and isinstance(args[0], torch.Tensor):
            self.ops.setdefault(name.split(".")[-1], []).append(args[0].numel() * args[0].element_size())
        return func(*args, **(kwargs or {}))


def build(width: int, pairs: int, seq: int = 0) -> Any:
    """``seq`` = 0: the Dense pairs; else a ``pairs``-layer bidirectional LSTM over ``seq`` steps."""
    import mxtorch as mx
    from mxtorch.gluon import nn, rnn

    torch.manual_seed(0)
    net = nn.HybridSequential()
    if seq:
        net.add(rnn.LSTM(width, num_layers=pairs, layout="NTC", bidirectional=True, input_size=width),
                nn.Dense(10, in_units=seq * 2 * width))
    else:
        for _ in range(pairs):
            net.add(nn.Dense(width, activation="relu", in_units=width), nn.Dense(width, in_units=width))
        net.add(nn.Dense(10, in_units=width))
    net.initialize(mx.init.Xavier())
    return net


def data(batch: int, width: int, seq: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, seq, width, generator=g) if seq else torch.randn(batch, width, generator=g)
    return x, torch.randint(0, 10, (batch,), generator=g).float()


def rank_run(width: int, pairs: int, batch: int, steps: int, seq: int = 0) -> dict[str, Any]:
    from mxtorch import gluon, parallel

    pnet = parallel.parallelize(build(width, pairs, seq), parallel.ParallelConfig(tp=2), micro_batches=1,
                                schedule="gpipe", kvstore=None)
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.01})
    x, y = data(batch, width, seq)
    from pipeline import ChunkTimer, median_step

    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with ChunkTimer() as timer:
        _, step, _ = median_step(pnet, tr, x, y, loss_fn, batch, steps, timer)
    meter = CollectiveBytes()
    with meter:
        pnet.train_step(x, y, loss_fn)
    tr.step(batch)
    return {"step": step, "ops": meter.ops, "param_bytes": pnet.param_bytes(),
            "plan": pnet.tp_plan}


def single(width: int, pairs: int, batch: int, steps: int, seq: int = 0) -> dict[str, float]:
    from mxtorch import autograd, gluon

    torch.set_num_threads(1)
    net = build(width, pairs, seq)
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    x, y = data(batch, width, seq)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    times = []
    for i in range(steps + 2):
        t0 = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        tr.step(batch)
        if i >= 2:
            times.append(time.perf_counter() - t0)
    params = sum(p.data().numel() * 4 for p in net.collect_params().values())
    return {"step": statistics.median(times), "param_bytes": params}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--model", choices=("dense", "lstm"), default="dense")
    ap.add_argument("--seq", type=int, default=16, help="time steps (--model lstm)")
    args = ap.parse_args()
    from mxtorch.distributed.testing import run_workers

    seq = args.seq if args.model == "lstm" else 0
    what = (f"a {args.pairs}-layer bidirectional LSTM({args.width}) over {seq} steps" if seq
            else f"{args.pairs} pairs of Dense({args.width})")
    print(f"torch {torch.__version__}, {os.cpu_count()} cores; {what} + Dense(10), batch {args.batch}, "
          f"{args.steps} timed steps, one thread per process")
    ref = single(args.width, args.pairs, args.batch, args.steps, seq)
    ranks = run_workers(rank_run, 2, args.width, args.pairs, args.batch, args.steps, seq, timeout=1800)
    step = max(r["step"] for r in ranks)
    # two per pair; the first pair reads the net's input, which needs no gradient: no backward one
    theory_n = 2 * args.pairs - 1
    theory_b = theory_n * 4 * args.batch * args.width
    theory = {"all_reduce": f"{theory_n} all-reduces, {theory_b:,} bytes"}
    if seq:  # per layer and time step: an all-gather of h (both directions) and its reduce-scatter
        n = args.pairs * seq
        h = 4 * args.batch * 2 * args.width
        theory = {"all_gather_into_tensor": f"{n} all-gathers, {n * h // 2:,} bytes sent",
                  "reduce_scatter_tensor": f"{n} reduce-scatters, {n * h:,} bytes in"}
    print(f"plan: {ranks[0]['plan']}")
    print(f"{'':<28}{'1 process':>12}{'tp=2':>12}{'ratio':>8}")
    print(f"{'step time (ms)':<28}{ref['step'] * 1e3:>12.2f}{step * 1e3:>12.2f}{ref['step'] / step:>8.2f}")
    print(f"{'parameter bytes per rank':<28}{ref['param_bytes']:>12,}{ranks[0]['param_bytes']:>12,}"
          f"{ranks[0]['param_bytes'] / ref['param_bytes']:>8.1%}")
    for r, res in enumerate(ranks):
        for op, sizes in sorted(res["ops"].items()):
            print(f"rank {r}: {op}: {len(sizes)} per step, {sum(sizes):,} bytes "
                  f"(theory: {theory.get(op, 'none')})")


if __name__ == "__main__":
    main()
