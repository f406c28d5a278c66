"""Pipeline parallelism: bubble fraction, throughput and memory per rank, in one run.

For each number of stages p (default 2 and 4) and schedule (GPipe, 1F1B), p real processes
(gloo, 127.0.0.1, one thread each) train a chain of equal Dense layers (and a small classifier
head) with m micro-batches
(default 1, 4, 8, 16) of a fixed micro-batch size, and each rank reports:

* the schedule time (median over the timed steps of ``train_step``: the pipelined forward and
  backward of every micro-batch, the pipeline's flush included) and the step time (that plus
  ``trainer.step``, the optimizer, which runs after the flush on every stage in parallel, as it
  does after the backward of one process: it is no part of the pipeline's bubble),
* its busy time, two ways: (alone) m times the forward+backward time of its stage on one
  micro-batch, measured alone on that rank before the run; (in run) the time the rank spent
  inside its stage's forward and backward chunks during the timed steps (torch's
  ``forward_one_chunk``/``backward_one_chunk``, timed by wrapping them).  The bubble fractions
  ``1 - busy / schedule`` of the busiest stage (the critical path) are printed next to the
  theoretical ``(p-1)/(m+p-1)``, which assumes equal stages; a lighter stage idles more than
  that by the imbalance, printed apart as ``1 - least busy / most busy`` (in run).  The chain's
  equal layers split evenly, but every stage after the first also computes its input's
  gradient (the first stage's input is data), so later stages carry a little more.  "alone"
  charges to the bubble everything that slows the run: the schedule's per-micro-batch work
  (sends, receives, waits, Python, gradient accumulation) *and* compute slowed by processes
  sharing cores; "in run" charges only the time outside compute (idle, transfers, the
  schedule's own Python), so their difference is contention, and the "in run" excess over
  theory is the per-micro-batch overhead (printed per micro-batch as ``ovh/mb``);
* the peak bytes of activations saved for backward (``torch.autograd.graph.saved_tensors_hooks``
  counts every tensor autograd keeps, and when it is released) and the parameter bytes it holds.

The reference is one process (one thread) training the whole chain on the same global batch
(m micro-batches' worth of samples), measured in the same run: samples/s ratio, parameter and
activation bytes.  On a machine with fewer cores than p, processes share cores and the measured
bubble and speed-up include that contention.

    python bench/pipeline.py [--stages 2,4] [--micro 1,4,8,16] [--layers 8] [--width 1024]
                             [--micro-batch 32] [--steps 5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(layers: int, width: int) -> Any:
    import mxtorch as mx
    from mxtorch.gluon import nn

    torch.manual_seed(0)
    net = nn.HybridSequential()
    for _ in range(layers):  # equal stages for p dividing layers: the theory assumes them
        net.add(nn.Dense(width, activation="relu", in_units=width))
    net.add(nn.Dense(10, in_units=width))  # the classifier head (~1 % of a layer) joins the last stage
    net.initialize(mx.init.Xavier())
    return net


class SavedBytes:
    """Live and peak bytes of the activations autograd saves for backward.

    A storage saved several times counts once; parameters (saved by every layer that uses them)
    are not activations and do not count.
    """

    def __init__(self, params: Any = ()) -> None:
        self.live = 0
        self.peak = 0
        self.skip = {p.untyped_storage().data_ptr() for p in params}
        self.refs: dict[int, int] = {}

    def pack(self, t: torch.Tensor) -> Any:
        local = getattr(t, "_local_tensor", t)  # a DTensor (tensor parallelism): count its local shard
        ptr = local.untyped_storage().data_ptr()
        if ptr in self.skip:
            return _Held(t, None, ptr, 0)
        if ptr not in self.refs:
            self.refs[ptr] = 0
            self.live += local.untyped_storage().nbytes()
            self.peak = max(self.peak, self.live)
        self.refs[ptr] += 1
        return _Held(t, self, ptr, local.untyped_storage().nbytes())

    def unpack(self, h: Any) -> torch.Tensor:
        return h.t

    def release(self, ptr: int, nbytes: int) -> None:
        self.refs[ptr] -= 1
        if self.refs[ptr] == 0:
            del self.refs[ptr]
            self.live -= nbytes


class _Held:
    def __init__(self, t: torch.Tensor, meter: SavedBytes | None, ptr: int, nbytes: int) -> None:
        self.t, self.meter, self.ptr, self.nbytes = t, meter, ptr, nbytes

    def __del__(self) -> None:
        if self.meter is not None:
            self.meter.release(self.ptr, self.nbytes)


def _fwd_bwd_seconds(module: torch.nn.Module, x: torch.Tensor, repeats: int = 5) -> float:
    from mxtorch import autograd

    times = []
    for _ in range(repeats + 1):
        inp = x.detach().requires_grad_(True)
        t0 = time.perf_counter()
        with autograd.record():
            out = module(inp)
        out.backward(torch.ones_like(out))
        times.append(time.perf_counter() - t0)
    for p in module.parameters():
        p.grad = None
    return statistics.median(times[1:])


class ChunkTimer:
    """Seconds spent inside torch's pipeline stages' forward/backward chunks (this process)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> ChunkTimer:
        from torch.distributed.pipelining import stage as st

        cls = st._PipelineStageBase
        for name in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
            orig = getattr(cls, name)
            self._saved.append((cls, name, orig))
            setattr(cls, name, self._timed(orig))
        return self

    def _timed(self, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
        return wrapper

    def __exit__(self, *exc: Any) -> None:
        for cls, name, orig in reversed(self._saved):
            setattr(cls, name, orig)
        self._saved = []


def median_step(pnet: Any, trainer: Any, x: torch.Tensor, y: torch.Tensor, loss_fn: Any, batch: int,
                steps: int, timer: ChunkTimer, stat: Any = statistics.median) -> tuple[float, float, float]:
    """Medians (or ``stat``) over ``steps`` pipelined training steps (after two warm-up ones) of
    the schedule (``train_step``), the whole step (schedule + ``trainer.step``) and the seconds
    spent inside the stage's chunks (``timer``, entered by the caller)."""
    sched, whole, inside = [], [], []
    for i in range(steps + 2):
        c0 = timer.seconds
        t0 = time.perf_counter()
        pnet.train_step(x, y, loss_fn)
        t1 = time.perf_counter()
        trainer.step(batch)
        if i >= 2:
            sched.append(t1 - t0)
            whole.append(time.perf_counter() - t0)
            inside.append(timer.seconds - c0)
    return stat(sched), stat(whole), stat(inside)


def activation_peak(pnet: Any, trainer: Any, x: torch.Tensor, y: torch.Tensor, loss_fn: Any,
                    batch: int) -> int:
    """Peak bytes of activations saved for backward during one (untimed) training step."""
    meter = SavedBytes([p.data() for p in pnet.collect_params().values()])
    with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
        pnet.train_step(x, y, loss_fn)
    trainer.step(batch)  # a whole step: gradient all-reduces the backward started are finished
    return meter.peak


def rank_run(p: int, schedule: str, ms: list[int], layers: int, width: int, mb: int,
             steps: int) -> list[dict]:
    from mxtorch import gluon, parallel

    net = build(layers, width)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    results = []
    for m in ms:
        if schedule != "gpipe" and m < p:
            results.append({})  # torch's 1F1B needs at least as many micro-batches as stages
            continue
        pnet = parallel.parallelize(build(layers, width), parallel.ParallelConfig(pp=p), micro_batches=m,
                                    schedule=schedule, kvstore=None)
        stage = pnet._modules[pnet.stage]
        # the input of this stage for one micro-batch (equal widths: every boundary is (mb, width))
        busy = _fwd_bwd_seconds(stage, torch.randn(mb, width)) * m
        g = torch.Generator().manual_seed(1)
        x = torch.randn(m * mb, width, generator=g)
        y = torch.randint(0, 10, (m * mb,), generator=g).float()
        tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.01})
        with ChunkTimer() as timer:
            sched, step, inside = median_step(pnet, tr, x, y, loss_fn, m * mb, steps, timer)
        act_peak = activation_peak(pnet, tr, x, y, loss_fn, m * mb)
        results.append({"m": m, "sched": sched, "step": step, "busy": busy, "inside": inside,
                        "act_peak": act_peak, "param_bytes": pnet.param_bytes()})
    del net
    return results


def single(ms: list[int], layers: int, width: int, mb: int, steps: int) -> dict[int, dict]:
    from mxtorch import autograd, gluon

    torch.set_num_threads(1)
    out = {}
    for m in ms:
        net = build(layers, width)
        tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        g = torch.Generator().manual_seed(1)
        x = torch.randn(m * mb, width, generator=g)
        y = torch.randint(0, 10, (m * mb,), generator=g).float()
        meter = SavedBytes([p.data() for p in net.collect_params().values()])
        times = []
        for i in range(steps + 3):
            hooks = (torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack) if i == steps + 2
                     else contextlib.nullcontext())  # the last step (untimed) counts activations
            t0 = time.perf_counter()
            with hooks:
                with autograd.record():
                    loss = loss_fn(net(x), y)
                loss.backward()
            tr.step(m * mb)
            if 2 <= i < steps + 2:
                times.append(time.perf_counter() - t0)
        params = sum(p.data().numel() * 4 for p in net.collect_params().values())
        out[m] = {"step": statistics.median(times), "act_peak": meter.peak, "param_bytes": params}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stages", default="2,4")
    ap.add_argument("--micro", default="1,4,8,16")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--micro-batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--schedules", default="gpipe,1f1b")
    args = ap.parse_args()
    from mxtorch.distributed.testing import run_workers

    ms = [int(v) for v in args.micro.split(",")]
    mb = args.micro_batch
    print(f"torch {torch.__version__}, {os.cpu_count()} cores; chain of {args.layers} Dense({args.width}), "
          f"micro-batch {mb}, {args.steps} timed steps; reference: one process, one thread, same global "
          "batch")
    ref = single(ms, args.layers, args.width, mb, args.steps)
    head = (f"{'p':>2} {'schedule':<8} {'m':>3} {'bubble':>7} {'in run':>7} {'theory':>7} {'imbal.':>7} "
            f"{'ovh/mb':>7} "
            f"{'samples/s':>10} "
            f"{'x 1 proc':>9} {'params/rank':>12} {'act peak/rank':>14} {'act 1 proc':>11}")
    print(head)
    for p in [int(v) for v in args.stages.split(",")]:
        for schedule in args.schedules.split(","):
            per_rank = run_workers(rank_run, p, p, schedule, ms, args.layers, args.width, mb, args.steps,
                                   timeout=1800)
            for i, m in enumerate(ms):
                rows = [r[i] for r in per_rank]
                if not rows[0]:
                    print(f"{p:>2} {schedule:<8} {m:>3}   (torch's {schedule} needs m >= p)")
                    continue
                step = max(r["step"] for r in rows)
                sched = max(r["sched"] for r in rows)
                busiest = max(rows, key=lambda r: r["inside"])
                bubble = max(0.0, 1 - max(r["busy"] for r in rows) / sched)
                in_run = max(0.0, 1 - busiest["inside"] / sched)
                imbalance = 1 - min(r["inside"] for r in rows) / busiest["inside"]
                theory = (p - 1) / (m + p - 1)
                # the busiest stage's time outside compute beyond the ideal schedule's idle time,
                # per micro-batch
                ovh = (sched - busiest["inside"] * (m + p - 1) / m) / m
                sps = m * mb / step
                ratio = ref[m]["step"] / step
                params = max(r["param_bytes"] for r in rows) / ref[m]["param_bytes"]
                act = max(r["act_peak"] for r in rows)
                print(f"{p:>2} {schedule:<8} {m:>3} {bubble:>7.3f} {in_run:>7.3f} {theory:>7.3f} "
                      f"{imbalance:>7.3f} "
                      f"{ovh * 1e3:>5.1f}ms {sps:>10.0f} {ratio:>9.2f} "
                      f"{params:>11.1%} {act / 2**20:>12.1f}MB {ref[m]['act_peak'] / 2**20:>9.1f}MB")


if __name__ == "__main__":
    main()
