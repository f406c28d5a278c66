"""The probe behind the planner's fixed costs (:class:`Overheads`): short runs of real
processes on this machine (gloo over loopback) that measure what no layer's size explains -- the
link's bandwidth and latency, the CPU that collectives, gradient reduction and the optimizer's
update burn, and the per-step and per-slot costs of tiny versions of each layout.  See
:mod:`mxtorch.parallel.planner` for how the plan uses them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .config import ParallelConfig

__all__ = ["Layout", "Overheads", "probe_link"]

Layout = tuple[int, int, int]


@dataclass
class Overheads:
    """Fixed costs of a layout that no layer's size explains, measured by :func:`probe_link` on tiny
    versions of each layout with the job's process count (so they include its contention), and the
    CPU that the job's processes burn besides the layers' compute.

    Wall clock: ``step_s[(dp, pp, tp)]``: per training step (``train_step``'s set-up and loss
    broadcast, the Trainer, the data-parallel all-reduce's latency); ``slot_s[(dp, pp, tp)]``: per
    pipeline slot (one micro-batch through one stage: the schedule's Python, the stage transfer's
    latency, and one tensor-parallel pair); ``pair_s[tp]``: one tensor-parallel pair's forward and
    backward on one sample (DTensor's dispatch and two all-reduce latencies) for every further pair
    of a stage.

    CPU seconds of one process (``time.process_time``: every thread, gloo's included), what the
    ``cores=`` bound adds up over the job: ``cpu_step_s[layout]`` per step and ``cpu_micro_s[layout]``
    per micro-batch of the same tiny runs, ``pair_cpu_s[tp]`` per further pair;
    ``allreduce_cpu_per_byte``: a plain all-reduce (the tensor-parallel collectives), per byte of
    the reduced tensor; ``gradient_cpu_per_byte``: the data-parallel gradient reduction through the
    ``'horovod'`` store (bucket copies in and out and the all-reduce), per byte of gradients (what
    it takes beyond ``allreduce_cpu_per_byte``, the copies, is also on the critical path);
    ``update_cpu_per_byte``: the Trainer's update (SGD with momentum: one state), per byte of
    parameters, on every process at once (the plan scales it by the tensors an update touches,
    ``2 + optimizer_states``, over the probe's 3).
    """

    step_s: dict[Layout, float] = field(default_factory=dict)
    slot_s: dict[Layout, float] = field(default_factory=dict)
    pair_s: dict[int, float] = field(default_factory=dict)
    cpu_step_s: dict[Layout, float] = field(default_factory=dict)
    cpu_micro_s: dict[Layout, float] = field(default_factory=dict)
    pair_cpu_s: dict[int, float] = field(default_factory=dict)
    allreduce_cpu_per_byte: float = 0.0
    gradient_cpu_per_byte: float = 0.0
    update_cpu_per_byte: float = 0.0
    shared_bandwidth: float = 0.0
    """Bytes/s (ring bytes per rank) of an all-reduce among half the processes while the others
    compute; 0: not measured (fewer than 4 processes)."""


def probe_link(world_size: int = 2, layouts: Sequence[Layout] = ()) -> tuple[float, float, Overheads]:
    """(bytes/s, seconds per message, overheads) of ``world_size`` (2 to 8) local processes (gloo,
    loopback): all-reduces of 16 MiB for the bandwidth and of 4 bytes for the latency, and the CPU
    seconds per byte of an all-reduce and of a gradient reduction through the store, every process
    at once; with ``layouts`` (each multiplying to ``world_size``), tiny runs of each for its fixed
    costs (wall clock and CPU)."""
    from ..distributed.testing import run_workers

    n_procs = min(max(world_size, 2), 8)
    todo = [(int(a), int(b), int(c)) for a, b, c in layouts if a * b * c == n_procs]
    results = run_workers(_probe_rank, n_procs, todo, timeout=300)
    big = max(r[0] for r in results)
    small = max(r[1] for r in results)
    n = 16 * 2**20
    mean = len(results)
    over = Overheads(allreduce_cpu_per_byte=sum(r[2] for r in results) / mean / n,
                     gradient_cpu_per_byte=sum(r[3] for r in results) / mean / n,
                     update_cpu_per_byte=sum(r[4] for r in results) / mean / n)
    shared = max(r[5] for r in results)
    if shared > 0:
        half = n_procs // 2
        over.shared_bandwidth = 2 * (half - 1) / half * n / shared
    for j, lay in enumerate(todo):
        fits = [r[6][j] for r in results]
        over.step_s[lay] = max(f[0] for f in fits)
        over.slot_s[lay] = max(f[1] for f in fits)
        # CPU: the job's total is what matters, so the ranks' mean
        over.cpu_step_s[lay] = sum(f[3] for f in fits) / mean
        over.cpu_micro_s[lay] = sum(f[4] for f in fits) / mean
        if lay[2] > 1:
            over.pair_s[lay[2]] = max(over.pair_s.get(lay[2], 0.0), max(f[2] for f in fits))
            over.pair_cpu_s[lay[2]] = max(over.pair_cpu_s.get(lay[2], 0.0), sum(f[5] for f in fits) / mean)
    return (2 * (n_procs - 1) / n_procs * n / max(big - small, 1e-9), small, over)  # ring bytes per rank


def _probe_rank(layouts: Sequence[Layout] = ()) -> tuple[float, float, float, float, float, float,
                                                        list[tuple[float, ...]]]:
    """Wall seconds of a 16 MiB and a 4-byte all-reduce; CPU seconds of a 16 MiB all-reduce, of
    16 MiB of gradients (1 MiB tensors, as a net's layers) summed through the 'horovod' store and of
    the optimizer's update of 16 MiB of parameters; wall seconds of a 16 MiB all-reduce among half
    the ranks while the others compute; each layout's tiny runs."""
    import torch.distributed as dist

    from ..distributed import group
    from ..kvstore.allreduce.store import AllreduceKVStore

    group.init()
    buf, tiny = torch.ones(4 * 2**20), torch.ones(1)
    dist.all_reduce(buf)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(3):
        dist.all_reduce(buf)
    big, big_cpu = (time.perf_counter() - t0) / 3, (time.process_time() - c0) / 3
    for _ in range(5):
        dist.all_reduce(tiny)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(50):
        dist.all_reduce(tiny)
    small, small_cpu = (time.perf_counter() - t0) / 50, (time.process_time() - c0) / 50
    shared = _probe_shared(buf)
    store = AllreduceKVStore("horovod")
    grads = [torch.ones(2**18) for _ in range(16)]
    keys = list(range(len(grads)))
    store.pushpull(keys, grads)
    c0 = time.process_time()
    for _ in range(3):
        store.pushpull(keys, grads)
    grad_cpu = (time.process_time() - c0) / 3
    return (big, small, max(big_cpu - small_cpu, 0.0), max(grad_cpu - small_cpu, 0.0), _probe_update(),
            shared, [_probe_layout(*lay) for lay in layouts])


def _probe_shared(buf: torch.Tensor, busy_s: float = 0.4) -> float:
    """Seconds of an all-reduce of ``buf`` among the first half of the ranks while the others
    compute (matrix products) for ``busy_s``: what a stage's gradient reduction or a tensor-parallel
    group's collective takes while other processes of the job compute; 0 for fewer than 4 ranks."""
    import torch.distributed as dist

    n, rank = dist.get_world_size(), dist.get_rank()
    if n < 4:
        return 0.0
    half = dist.new_group(list(range(n // 2)))  # every rank takes part in creating it
    dist.barrier()
    took = 0.0
    if rank < n // 2:
        dist.all_reduce(buf, group=half)
        t0 = time.perf_counter()
        for _ in range(3):
            dist.all_reduce(buf, group=half)
        took = (time.perf_counter() - t0) / 3
    else:
        a = torch.randn(256, 256)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < busy_s:
            a = torch.tanh(a @ a)
    dist.barrier()
    return took


def _probe_update(repeats: int = 3) -> float:
    """CPU seconds of a Trainer's SGD-momentum update of 16 MiB of parameters (16 tensors of 1 MiB)."""
    from .. import gluon
    from ..gluon import nn

    net = nn.HybridSequential()
    for _ in range(16):
        net.add(nn.Dense(512, in_units=512, use_bias=False))
    net.initialize()
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.0, "momentum": 0.9})
    weights = [d for p in net.collect_params().values() if p.is_initialized for d in p.list_data()]
    took = []
    for _ in range(repeats + 1):
        for w in weights:  # as a backward leaves them (the Trainer drops them after each step)
            w.grad = torch.ones_like(w)
        c0 = time.process_time()
        tr.step(1)
        took.append(time.process_time() - c0)
    return min(took[1:])


def _probe_layout(dp: int, pp: int, tp: int, steps: int = 9) -> tuple[float, ...]:
    """(per step, per slot, per extra pair) wall seconds and (per step, per micro-batch, per extra
    pair) CPU seconds of a tiny net laid out as (dp, pp, tp): one Dense pair of width 8 per stage,
    one sample per micro-batch, GPipe with 1 and 5 micro-batches (``m + pp - 1`` slots each), the
    mean of ``steps`` steps after two warm-up ones (the pair: their median)."""
    from .. import autograd, gluon
    from ..gluon import nn
    from .pipeline import parallelize

    width = 8 * tp
    torch.manual_seed(0)
    net = nn.HybridSequential()
    for _ in range(pp):
        net.add(nn.Dense(width, activation="relu", in_units=width), nn.Dense(width, in_units=width))
    net.initialize()
    pnet = parallelize(net, ParallelConfig(dp=dp, pp=pp, tp=tp), micro_batches=1, schedule="gpipe",
                       kvstore="horovod" if dp > 1 else None, split_points=[str(2 * i) for i in range(1, pp)])
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.0, "momentum": 0.9},
                       kvstore=pnet.kvstore)
    loss_fn = gluon.loss.L2Loss()
    times, cpus = [], []
    for m in (1, 5):
        pnet.micro_batches = m  # the same stages, another schedule (PipelineNet keeps one per count)
        x, y = torch.randn(m, width), torch.zeros(m, width)
        took, cpu = [], []
        for i in range(steps + 2):
            t0, c0 = time.perf_counter(), time.process_time()
            pnet.train_step(x, y, loss_fn)
            tr.step(m * dp)
            if i >= 2:
                took.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
        # the mean step (throughput), not the fastest nor the median: a wait on another process
        # that some steps see (the loss broadcast behind a replica's schedule, a peer's late
        # start) is part of the layout's cost
        times.append(statistics.mean(took))
        cpus.append(statistics.mean(cpu))
    pair = pair_cpu = 0.0
    if tp > 1:  # the stage's pair alone, one sample: every rank of each tensor-parallel group
        stage = pnet._modules[pnet.stage]
        pt, pc = [], []
        for _ in range(steps + 2):
            inp = torch.randn(1, width, requires_grad=True)
            t0, c0 = time.perf_counter(), time.process_time()
            with autograd.record():
                out = stage(inp)
            out.sum().backward()
            pt.append(time.perf_counter() - t0)
            pc.append(time.process_time() - c0)
        pair, pair_cpu = statistics.median(pt[2:]), statistics.median(pc[2:])
    slot = max((times[1] - times[0]) / 4, 0.0)
    micro_cpu = max((cpus[1] - cpus[0]) / 4, 0.0)  # a rank works on its own micro-batches only
    return (max(times[0] - pp * slot, 0.0), slot, pair, max(cpus[0] - micro_cpu, 0.0), micro_cpu, pair_cpu)
