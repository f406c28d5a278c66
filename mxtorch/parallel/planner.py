"""Choose a parallel layout: enumerate (dp, pp, tp, micro-batches, schedule, activation
checkpointing), predict each one's memory per device and step time, drop what does not fit, rank
the rest.

The cost model, and where its numbers come from:

* **per layer, measured once on this machine** (:func:`profile_layers`): forward and backward
  seconds on ``sample_input`` (scaled linearly to a micro-batch), the bytes autograd saves for
  backward (activations), the output bytes (what crosses a stage boundary), the parameter bytes.
* **memory per device** = the stage's parameters, gradients and optimizer states (divided by tp for
  the layers tensor parallelism splits; the states by dp for a ZeRO stage, :mod:`.zero`; with
  ``zero=2`` the gradients too, plus two buckets (one being reduced, one being filled); with
  ``zero=3`` also the parameters, plus the two largest layers gathered whole) + the
  activations of the micro-batches in flight: all m for GPipe, at most pp for 1F1B; with
  activation checkpointing only each micro-batch's stage input stays, plus one micro-batch's
  activations while it is recomputed.
* **step time** = the pipeline's ``(m + pp - 1)`` slots of the slowest stage's forward+backward
  per micro-batch (a recomputed forward with checkpointing), + tensor-parallel collectives
  (all-reduces: two per pair per micro-batch, one per vocab-parallel embedding, ring cost
  ``2 (tp-1)/tp`` of the activation; a recurrent layer split by ``"gates"`` costs
  ``2 * num_layers`` collectives per time step, an all-gather of ``h`` forward and a
  reduce-scatter backward per layer, each of latency half a measured pair, plus its input
  gradient's all-reduce) + stage-boundary transfers + the data-parallel all-reduce of the stage's
  gradients (``2 (dp-1)/dp`` of them), at ``bandwidth`` bytes/s (given, or measured by a short
  all-reduce probe with the job's process count); ZeRO 1 and 2 add the all-gather of the updated
  parameters (``(dp-1)/dp``), ZeRO 3 instead all-gathers the stage's parameters before every
  micro-batch's forward and backward and reduce-scatters the gradients once (``(2m + 1)(dp-1)/dp``
  of them, a latency per layer and gather).
* **fixed costs, measured by the probe** (:class:`Overheads`): what no layer's size explains but
  dominates small steps: the pipeline schedule's Python and point-to-point latency per slot,
  DTensor's dispatch and the all-reduce latencies of each tensor-parallel pair, the step's own
  set-up, the Trainer and the data-parallel all-reduce's latency.  The probe runs every layout
  on a tiny net (one Dense pair of width 8 per stage, one sample per micro-batch) with 1 and 5
  micro-batches and fits ``step = fixed + (m + pp - 1) * per_slot``; the plan adds the fixed
  part once, the per-slot part to every slot, and the pair cost for each further pair of a stage.
  The probe takes the mean of its steps, not the fastest nor the median: a wait on another
  process that some steps see belongs to the layout (measured here: with dp=2 x pp=2 the loss
  broadcast that ends the schedule waits 1-7 ms on about half the steps), and the plan predicts
  throughput, the time of many steps over their number; a median of such a two-valued step
  time jumps between its values from run to run.
* **optimizer update**: the slowest stage's parameters at the probe's CPU seconds per byte of a
  Trainer update (scaled by the tensors an update touches, ``2 + optimizer_states``).
* **shared cores** (``cores=``, a job of more processes than cores on one machine).  Measured
  here: gloo's collectives are CPU work (a 16 MiB all-reduce costs each of 4 processes about as
  much CPU as its wall time on 2 cores; the store's bucket copies add more), the gradient hooks
  that hide the data-parallel reduction behind backward only hide it when a core is free, and a
  collective among some processes runs slower while the others compute than when every process
  takes part in it.  So, with more processes than cores:

  - every process's CPU work is added up (:func:`_cpu_work`): its layers, its tensor-parallel
    collectives and its data-parallel gradient reduction at the probe's CPU seconds per byte
    (measured with every process reducing at once), its optimizer update, and the CPU of the
    tiny runs' fixed costs; the step is at least the measured fixed costs (wall clock: they hold
    the idle waits for messages) plus the rest of that work spread over the cores (the work law
    of a schedule on ``cores`` processors), and at least the critical path above (computed as if
    each process had its own core); ``breakdown["shared cores"]`` is what the first adds to the
    second, and ``explain()`` prints the work by kind;
  - a pipeline slot whose working processes outnumber the cores takes ``working / cores`` times
    its work (:func:`_slot_stretch`): a slot's stages times ``dp * tp``, and in the backward slots
    also the stages already reducing their gradients (the hooks start that reduction while earlier
    stages still run their backward: on shared cores it is not hidden);
  - a collective that runs while other processes compute (a stage's gradient reduction when
    ``pp > 1``, a tensor-parallel group's all-reduces when ``dp * pp > 1``) moves its bytes at
    the rate the probe measured for half the processes all-reducing while the other half
    compute (``Overheads.shared_bandwidth``), not the rate of all of them reducing together.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..base import MXNetError
from .config import ParallelConfig
from .probe import Layout, Overheads, probe_link
from .split import Unit, chain_units, checkpointed, partition
from .tensor import auto_plan
from .tp_rnn import collectives_per_step, is_recurrent, step_collectives
from .zero import DEFAULT_BUCKET_BYTES, check_zero_stage

__all__ = ["Plan", "LayerCost", "Overheads", "plan", "profile_layers", "parse_bytes", "parse_bandwidth",
           "usable_cores"]

_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 2**10, "m": 1e6, "mb": 1e6, "mib": 2**20, "g": 1e9,
          "gb": 1e9, "gib": 2**30, "t": 1e12, "tb": 1e12, "tib": 2**40}


def parse_bytes(value: Any) -> int:
    """``'2GiB'``, ``'512MB'``, ``1e9`` -> bytes."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", str(value))
    if not m or m.group(2).lower() not in _UNITS:
        raise MXNetError(f"plan: cannot read the size {value!r}: write e.g. '16GiB', '512MB' or a number "
                         "of bytes")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_bandwidth(value: Any) -> float:
    """``'10Gbit'`` / ``'1.25GB'`` (per second) / a number of bytes per second -> bytes/s."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*?)(bit|b|B)?(/s|ps)?\s*", str(value))
    if not m:
        raise MXNetError(f"plan: cannot read the bandwidth {value!r}: write e.g. '10Gbit', '1.25GB' or "
                         "bytes/s")
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2**10, "mi": 2**20, "gi": 2**30}
    prefix = m.group(2).lower()
    if prefix not in scale:
        raise MXNetError(f"plan: unknown unit prefix in bandwidth {value!r}")
    n = float(m.group(1)) * scale[prefix]
    return n / 8 if m.group(3) == "bit" else n


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask: what a container or ``taskset`` leaves
    it, not the machine's count): the ``cores`` of a job whose processes all run here."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity masks on this platform
        return os.cpu_count() or 1


@dataclass
class LayerCost:
    """One unit of the chain: per-sample costs, and a per-call overhead."""

    path: str
    fwd_s: float
    bwd_s: float
    act_bytes: float
    out_bytes: float
    param_bytes: int
    fixed_s: float = 0.0
    """Seconds per forward+backward call whatever the batch (kernel launches, Python)."""
    ckpt_fixed_s: float = 0.0
    """What activation checkpointing adds per call beyond the recomputed forward (its hooks)."""
    seq_steps: int = 0
    """A recurrent layer's time steps (each one a collective per layer when split by ``"gates"``)."""


@dataclass
class Plan:
    config: ParallelConfig
    micro_batches: int
    schedule: str
    checkpointing: bool
    predicted_step_s: float
    predicted_memory_bytes: int
    split_points: list[str]
    breakdown: dict[str, float] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """What the tensor-parallel layers cost in messages (recurrent layers: per time step), and the
    job's CPU work against its cores."""
    cpu_work: dict[str, float] = field(default_factory=dict)
    """CPU seconds of one step summed over every process, by kind (the ``cores=`` bound)."""
    _runner_up: Plan | None = None

    def explain(self) -> str:
        c = self.config
        b, m = self.breakdown, self.memory
        lines = [
            f"dp={c.dp} pp={c.pp} tp={c.tp}{f' zero={c.zero}' if c.zero else ''}, "
            f"{self.micro_batches} micro-batches, {self.schedule}"
            f"{', activation checkpointing' if self.checkpointing else ''}: predicted step "
            f"{self.predicted_step_s * 1e3:.1f} ms, {self.predicted_memory_bytes / 2**20:.1f} MiB per device",
            "  step: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in b.items() if v > 0),
            "  memory: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in m.items() if v > 0),
        ]
        if self.split_points:
            lines.append(f"  stages start at {self.split_points}")
        lines.extend(f"  {n}" for n in self.notes)
        r = self._runner_up
        if r is not None:
            rc = r.config
            keys = set(self.breakdown) | set(r.breakdown)
            why = max(((k, r.breakdown.get(k, 0.0) - self.breakdown.get(k, 0.0)) for k in keys),
                      key=lambda t: t[1])
            ratio = r.predicted_step_s / self.predicted_step_s
            lines.append(f"  it beats the next best (dp={rc.dp} pp={rc.pp} tp={rc.tp}"
                         f"{f' zero={rc.zero}' if rc.zero else ''}, {r.micro_batches} "
                         f"micro-batches, {r.schedule}{', checkpointing' if r.checkpointing else ''}: "
                         f"{r.predicted_step_s * 1e3:.1f} ms) by {ratio:.2f}x, mostly in {why[0]} "
                         f"({why[1] * 1e3:+.1f} ms there)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        c = self.config
        return (f"Plan(dp={c.dp}, pp={c.pp}, tp={c.tp}{f', zero={c.zero}' if c.zero else ''}, "
                f"m={self.micro_batches}, {self.schedule}, "
                f"ckpt={self.checkpointing}, {self.predicted_step_s * 1e3:.1f} ms, "
                f"{self.predicted_memory_bytes / 2**20:.1f} MiB)")


class _Saved:
    def __init__(self, skip: set[int]) -> None:
        self.total = 0
        self.seen: set[int] = set()
        self.skip = skip

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        local = getattr(t, "_local_tensor", t)  # a DTensor: its local shard
        ptr = local.untyped_storage().data_ptr()
        if ptr not in self.skip and ptr not in self.seen:
            self.seen.add(ptr)
            self.total += local.untyped_storage().nbytes()
        return t


def _time_unit(block: Any, x: torch.Tensor, repeats: int, saved: _Saved | None,
               ckpt: bool = False) -> tuple[float, float, Any]:
    """The fastest forward and backward seconds of ``block`` on ``x`` (and its output); with
    ``ckpt`` run as activation checkpointing runs it (the backward recomputes the forward)."""
    from .. import autograd

    fwd, bwd = [], []
    y: Any = None
    params = list(block.parameters())
    for r in range(repeats):
        for p in params:  # the Trainer drops the gradients after each step: backward allocates them anew
            p.grad = None
        inp = x.detach().requires_grad_(x.is_floating_point())
        t0 = time.perf_counter()
        if r == 0 and saved is not None:
            with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t), autograd.record():
                y = block(inp)
        elif ckpt:
            with autograd.record():
                y = checkpointed(block, inp)
        else:
            with autograd.record():
                y = block(inp)
        t1 = time.perf_counter()
        if y.requires_grad:
            y.backward(torch.ones_like(y))
        t2 = time.perf_counter()
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
    for p in params:
        p.grad = None
    return min(fwd), min(bwd), y


def profile_layers(units: Sequence[Unit], sample: torch.Tensor, repeats: int = 5) -> list[LayerCost]:
    """Per-call and per-sample forward+backward seconds of each layer, its saved activation, output and
    parameter bytes.  Times are the fastest of ``repeats`` (the least disturbed by other work), on
    the whole sample and on a quarter of it: the difference gives the per-sample cost, the rest is
    the per-call overhead that a small micro-batch still pays."""
    from ..gluon.block import params_by_path

    n = max(int(sample.shape[0]), 1)
    small = max(n // 4, 1)
    out: list[LayerCost] = []
    x = sample
    for u in units:
        params = [p for p in params_by_path(u.block).values() if p.is_initialized]
        skip = {d.untyped_storage().data_ptr() for p in params for d in p.list_data()}
        saved = _Saved(skip)
        f, b, y = _time_unit(u.block, x, repeats, saved)
        fixed = 0.0
        per_f, per_b = f / n, b / n
        fs, bs = f, b
        if small < n:
            fs, bs, _ = _time_unit(u.block, x[:small], repeats, None)
            per_f = max((f - fs) / (n - small), f / n * 0.05)
            per_b = max((b - bs) / (n - small), b / n * 0.05)
            fixed = max(0.0, f + b - (per_f + per_b) * n)
        # checkpointing's own cost per call: checkpointed minus plain minus the recomputed forward
        cf, cb, _ = _time_unit(u.block, x[:small], repeats, None, ckpt=True)
        ckpt_fixed = max(0.0, cf + cb - fs - bs - fs)
        pbytes = sum(d.numel() * d.element_size() for p in params for d in p.list_data()[:1])
        seq = int(x.shape[0 if u.block._layout == "TNC" else 1]) if is_recurrent(u.block) else 0
        out.append(LayerCost(u.path, per_f, per_b, saved.total / n, y.numel() * y.element_size() / n,
                             int(pbytes), fixed, ckpt_fixed, seq))
        x = y.detach()
    return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def plan(net: Any, sample_input: torch.Tensor, world_size: int, memory_per_device: Any, batch_size: int,
         bandwidth: Any = None, optimizer_states: int = 1, micro_batches: Sequence[int] = (1, 2, 4, 8, 16),
         costs: Sequence[LayerCost] | None = None, latency_s: float | None = None,
         compute_scale: float = 1.0, cores: int | None = None,
         overheads: Overheads | bool | None = None, zero_stages: Sequence[int] = (0, 1, 2, 3)) -> list[Plan]:
    """Every layout of ``world_size`` devices that fits ``memory_per_device``, best first.

    ``sample_input``: a few samples of the input (their per-sample costs are measured on this
    machine); ``batch_size``: the global batch; ``optimizer_states``: tensors of optimizer state
    per parameter (SGD momentum 1, Adam 2); ``latency_s``: the fixed cost of one message
    (with ``bandwidth=None`` both are measured by a short two-process probe; else 50 us);
    ``costs``: per-layer costs measured before (:func:`profile_layers`) instead of measuring now;
    ``compute_scale``: how much slower a device of the job computes than this process did while
    profiling; ``cores``: the job's processes share this many cores (a job on one machine: pass
    :func:`usable_cores` when it runs here; None, the default, gives each process its own): a plan
    with more processes than cores takes at least its measured fixed costs plus the CPU work of
    all its processes (layers, collectives, updates) over ``cores``, and its collectives that run
    beside computing processes move bytes at the probe's shared rate (module docstring); ignored
    when ``sample_input`` is on an accelerator (each process computes on its own device there);
    ``overheads``: the per-step and per-slot fixed costs of each layout and the CPU rates
    (:class:`Overheads`), measured with the link probe by default (``bandwidth=None``; tiny runs of
    every layout), ``True`` to measure them even with a given bandwidth, ``False`` to leave them out.
    ``zero_stages``: the ZeRO stages (:mod:`.zero`) ranked for every layout with ``dp > 1`` (each
    stage sharded over its data-parallel ranks): stages 1 and 2 hold ``1/dp`` of the optimizer
    states (gradients are whole during backward, so 2 saves no peak memory over 1 here) and add the
    broadcast of each rank's updated parameters (``(dp-1)/dp`` of them); stage 3 also holds
    ``1/dp`` of the parameters plus the two largest layers gathered, and all-gathers the
    parameters per micro-batch forward and backward; ``(0,)`` plans plain replicas only.
    Raises MXNetError when nothing fits, naming the memory the smallest layout would need.
    """
    if world_size < 1 or batch_size < 1:
        raise MXNetError(f"plan: world_size and batch_size must be >= 1, got {world_size}, {batch_size}")
    mem = parse_bytes(memory_per_device)
    zeros = tuple(dict.fromkeys(check_zero_stage(z, "plan") for z in zero_stages)) or (0,)
    if cores is not None and cores < 1:
        raise MXNetError(f"plan: cores must be >= 1 (or None: a core per process), got {cores}")
    if sample_input.device.type != "cpu":
        cores = None  # the layers run on each process's accelerator, not on the shared CPUs
    units = chain_units(net, sample_input)
    if costs is None:
        costs = profile_layers(units, sample_input)
    if compute_scale != 1.0:
        k = compute_scale
        costs = [dataclasses.replace(c, fwd_s=c.fwd_s * k, bwd_s=c.bwd_s * k, fixed_s=c.fixed_s * k,
                                     ckpt_fixed_s=c.ckpt_fixed_s * k) for c in costs]
    layouts = [(world_size // (tp * pp), pp, tp) for tp in _divisors(world_size)
               if tp == 1 or auto_plan(units, tp) for pp in _divisors(world_size // tp)
               if pp <= len(units) and batch_size % (world_size // (tp * pp)) == 0]
    over = overheads if isinstance(overheads, Overheads) else None
    if bandwidth is None:
        want = layouts if overheads is None or overheads is True else []
        bw, probed, measured = probe_link(world_size, want)
        lat = probed if latency_s is None else latency_s
        over = over or measured
    else:
        bw, lat = parse_bandwidth(bandwidth), (5e-5 if latency_s is None else latency_s)
        if overheads is True:
            over = probe_link(world_size, layouts)[2]
    plans: list[Plan] = []
    for dp, pp, tp in layouts:
        pairs = auto_plan(units, tp) if tp > 1 else {}
        local = batch_size // dp
        for m in micro_batches:
            if local % m or (pp == 1 and m > 1):
                continue
            for schedule in (("gpipe", "1f1b") if pp > 1 else ("none",)):
                if schedule == "1f1b" and m < pp:
                    continue
                stages = zeros if dp > 1 else (0,)
                for ckpt, zero in itertools.product((False, True), stages):
                    cfg = ParallelConfig(dp=dp, pp=pp, tp=tp, zero=zero)
                    # stages balanced by time, and (when memory is what limits) by memory
                    for starts in _splits(units, costs, pairs, pp, tp):
                        plans.append(_predict(units, costs, pairs, cfg, m, schedule, ckpt, local,
                                              (bw, lat), optimizer_states, starts, over, cores))
    unique: dict[Any, Plan] = {}
    for p in plans:  # the two splits often agree
        key = (p.config, p.micro_batches, p.schedule, p.checkpointing, tuple(p.split_points))
        unique.setdefault(key, p)
    plans = list(unique.values())
    fits = [p for p in plans if p.predicted_memory_bytes <= mem]
    if not fits:
        need = min(plans, key=lambda p: p.predicted_memory_bytes)
        raise MXNetError(f"plan: no layout of {world_size} devices fits {mem / 2**20:.1f} MiB per device; "
                         f"the smallest ({need!r}) needs {need.predicted_memory_bytes / 2**20:.1f} MiB: give "
                         "more memory per device, more devices, or a smaller batch")
    fits.sort(key=lambda p: (p.predicted_step_s, p.predicted_memory_bytes))
    if len(fits) > 1:
        fits[0]._runner_up = next((p for p in fits[1:] if (p.config, p.micro_batches, p.schedule) !=
                                   (fits[0].config, fits[0].micro_batches, fits[0].schedule)), fits[1])
    return fits


def _cut(values: Sequence[float], pp: int, spans: list[tuple[int, int]]) -> list[int]:
    """Stage starts balancing ``values``, never inside a tensor-parallel pair (as parallelize does)."""
    from .pipeline import _atoms

    atoms = _atoms(len(values), spans)
    cut = partition([sum(values[a:b]) for a, b in atoms], pp)
    return [atoms[i][0] for i in cut]


def _splits(units: Sequence[Unit], costs: Sequence[LayerCost], pairs: dict[str, str], pp: int,
            tp: int) -> list[list[int] | None]:
    """None (balance by time, done per plan) and the split balancing parameter bytes."""
    from .pipeline import _pair_spans

    if pp == 1:
        return [None]
    spans = _pair_spans(units, pairs)
    return [None, _cut([c.param_bytes / (tp if c.path in pairs else 1) + 1.0 for c in costs], pp, spans)]


def _predict(units: Sequence[Unit], costs: Sequence[LayerCost], pairs: dict[str, str], cfg: ParallelConfig,
             m: int, schedule: str, ckpt: bool, local: int, link: tuple[float, float], opt_states: int,
             starts: list[int] | None = None, over: Overheads | None = None,
             cores: int | None = None) -> Plan:
    bw, lat = link
    tp, pp, dp = cfg.tp, cfg.pp, cfg.dp
    mb = local / m  # samples per micro-batch
    split = {c.path for c in costs if c.path in pairs}

    def share(c: LayerCost, v: float) -> float:
        return v / tp if c.path in split else v

    per_unit = [share(c, c.fwd_s + c.bwd_s + (c.fwd_s if ckpt else 0.0)) * mb + c.fixed_s
                + (c.ckpt_fixed_s if ckpt else 0.0) for c in costs]
    if starts is None:
        from .pipeline import _pair_spans

        starts = _cut(per_unit, pp, _pair_spans(units, pairs)) if pp > 1 else [0]
    bounds = list(zip(starts, starts[1:] + [len(costs)]))
    stage_t = [sum(per_unit[a:b]) for a, b in bounds]
    ring = 2 * (tp - 1) / tp

    def tp_bytes(a: int, b: int) -> float:
        """Per sample: each row layer's output (forward), each column layer's input gradient
        (backward; none for the network's own input); a 'gates' layer all-gathers every layer's
        output forward and reduce-scatters it backward (together ``ring`` times it, like an
        all-reduce; with a projection it all-reduces the partial projections both ways, twice
        that) and all-reduces its input gradient."""
        total = 0.0
        for i in range(a, b):
            style = pairs.get(costs[i].path)
            if style in ("rowwise", "vocab"):  # the all-reduce of the layer's partial outputs
                total += costs[i].out_bytes
            elif style == "colwise" and i > 0:
                total += costs[i - 1].out_bytes
            elif style == "gates":
                total += gate_volume[i] * costs[i].out_bytes + (costs[i - 1].out_bytes if i > 0 else 0.0)
        return total

    def tp_count(a: int, b: int) -> int:
        return sum(1 for i in range(a, b) if pairs.get(costs[i].path) in ("rowwise", "vocab")
                   or (pairs.get(costs[i].path) in ("colwise", "gates") and i > 0))

    def gate_messages(a: int, b: int) -> int:
        """The per-time-step collectives of a stage's 'gates' layers, forward and backward."""
        return sum(2 * gate_layers[i] * max(costs[i].seq_steps, 1) for i in range(a, b)
                   if pairs.get(costs[i].path) == "gates")

    gate_layers = [collectives_per_step(u.block)[0] if pairs.get(u.path) == "gates" else 0 for u in units]
    # a projected LSTM all-reduces both ways (twice an all-gather + reduce-scatter's bytes)
    gate_volume = [n * (2 if n and step_collectives(u.block)[0] == "all-reduce" else 1)
                   for n, u in zip(gate_layers, units, strict=True)]

    layout = (dp, pp, tp)
    measured = over is not None and layout in over.slot_s
    slot_over = step_over = 0.0
    if measured:  # the messages' latencies are inside the measured fixed costs
        assert over is not None
        pair_s = over.pair_s.get(tp, 0.0)
        slot_over, step_over = over.slot_s[layout], over.step_s[layout]
        n_pairs = [sum(1 for i in range(a, b) if pairs.get(costs[i].path) in ("rowwise", "vocab"))
                   for a, b in bounds]
        tp_fixed = [max(0, n - 1) * pair_s for n in n_pairs]  # the tiny runs had one pair per stage
        # a pair is two collectives (and DTensor's dispatch): half of it per recurrent step's message
        tp_fixed = [f + gate_messages(a, b) * pair_s / 2 for f, (a, b) in zip(tp_fixed, bounds)]
        lat = 0.0
    else:
        tp_fixed = [(tp_count(a, b) + gate_messages(a, b)) * lat for a, b in bounds]
    # more processes than cores: a collective runs while other processes compute (another pipeline
    # stage, another tensor-parallel group) at the rate the probe measured so
    shared_bw = over.shared_bandwidth if over is not None and cores and dp * pp * tp > cores else 0.0
    tp_bw = shared_bw if shared_bw > 0 and dp * pp > 1 else bw
    dp_bw = shared_bw if shared_bw > 0 and pp > 1 else bw
    tp_comm = [ring * tp_bytes(a, b) * mb / tp_bw + f if tp > 1 else 0.0
               for (a, b), f in zip(bounds, tp_fixed)]
    work_slot = max(t + c for t, c in zip(stage_t, tp_comm))
    compute = sum(stage_t) / len(stage_t) * m if pp > 1 else stage_t[0] * m
    pipeline = (m + pp - 1) * (work_slot + slot_over)  # each process on its own core
    stretched = pipeline
    if cores:  # a slot where more processes work than there are cores takes that much longer
        fwd = sum(share(c, c.fwd_s) * mb for c in costs)
        fwd_frac = fwd / max(sum(per_unit), 1e-30)
        f_sum, b_sum = _slot_stretch(m, pp, dp * tp, cores, dp > 1)
        stretched = work_slot * (fwd_frac * f_sum + (1 - fwd_frac) * b_sum) + (m + pp - 1) * slot_over
    boundary = max((costs[b - 1].out_bytes * mb for a, b in bounds[:-1]), default=0.0)
    pp_comm = (m + pp - 2) * 2 * (boundary / bw + lat) if pp > 1 else 0.0
    stage_params = [sum(share(c, c.param_bytes) for c in costs[a:b]) for a, b in bounds]
    # the store copies each gradient into its bucket and back out around the all-reduce: the CPU
    # the probe measured for a reduction through the store beyond a bare all-reduce, per byte
    copies = max(0.0, over.gradient_cpu_per_byte - over.allreduce_cpu_per_byte) if over is not None else 0.0
    dp_comm = (2 * (dp - 1) / dp / dp_bw + copies) * max(stage_params) + lat if dp > 1 else 0.0
    layers = [[share(c, c.param_bytes) for c in costs[a:b] if c.param_bytes > 0] for a, b in bounds]
    if cfg.zero == 3:  # an all-gather per micro-batch forward and backward, a reduce-scatter at the step
        gathers = 2 * m * max(len(ls) for ls in layers) + 1
        dp_comm = (2 * m + 1) * (dp - 1) / dp / dp_bw * max(stage_params) + gathers * lat
    elif cfg.zero:  # each owner broadcasts its updated parameters: every rank receives (dp-1)/dp of them
        dp_comm += (dp - 1) / dp / dp_bw * max(stage_params) + lat
    fixed = step_over + (m + pp - 1) * slot_over
    # the optimizer's update of each stage's parameters (memory-bound: param, gradient and states)
    per_byte = (over.update_cpu_per_byte if over is not None else 0.0) * (2 + opt_states) / 3
    update = [params * per_byte / (dp if cfg.zero else 1) for params in stage_params]
    step = stretched + pp_comm + dp_comm + step_over + max(update)  # the critical path
    tp_time = max(tp_comm) * m if tp > 1 else 0.0
    bubble = max(0.0, pipeline - compute - tp_time - (m + pp - 1) * slot_over)
    cpu = _cpu_work(costs, pairs, bounds, stage_t, stage_params, tp_bytes, gate_messages, layout, m, mb, over)
    cpu["optimizer update"] = dp * tp * sum(update)
    shared = stretched - pipeline
    crit = step
    if cores:  # the job's processes share ``cores``: the measured fixed costs (their idle waits
        # included) plus the rest of every process's CPU work spread over the cores
        busy = fixed + sum(v for k, v in cpu.items() if k != "fixed") / cores
        shared += max(0.0, busy - step)
        step = max(step, busy)
    breakdown = {"compute": compute, "bubble": bubble, "tensor-parallel collectives": tp_time,
                 "stage transfers": pp_comm, "data-parallel all-reduce": dp_comm,
                 "fixed costs (measured)": fixed, "optimizer update": max(update), "shared cores": shared}
    # memory of the busiest stage (the first: in 1F1B it holds the most micro-batches)
    mem_best = 0.0
    memory: dict[str, float] = {}
    for i, (a, b) in enumerate(bounds):
        params = stage_params[i]
        in_flight = m if schedule in ("gpipe", "none") else min(m, pp - i)
        acts = sum(share(c, c.act_bytes) for c in costs[a:b]) * mb
        inp = (costs[a - 1].out_bytes if a > 0 else 0.0) * mb
        act_mem = in_flight * inp + acts if ckpt else in_flight * acts
        states = params * opt_states / (dp if cfg.zero else 1)  # ZeRO: this rank's share
        held = params  # zero=3: this rank's slices and (at most) two layers gathered whole at once
        if cfg.zero == 3:
            held = min(params, params / dp + sum(sorted(layers[i])[-2:]))
        grads = params  # zero=2: its owned share, the bucket being reduced and the one being filled
        if cfg.zero == 2:  # (a bucket closes at the first gradient past the size: up to a layer more)
            grads = min(params, params / dp + 2 * (DEFAULT_BUCKET_BYTES + max(layers[i], default=0.0)))
        total = held + grads + states + act_mem
        if total > mem_best:
            mem_best = total
            memory = {"parameters": held, "gradients": grads, "optimizer state": states,
                      "activations": act_mem}
    notes = []
    for i, u in enumerate(units):
        if pairs.get(u.path) == "gates":
            n_l, steps = gate_layers[i], max(costs[i].seq_steps, 1)
            f_kind, b_kind = step_collectives(u.block)
            what = "hidden state" if f_kind == "all-gather" else "partial projections"
            notes.append(f"{u.path} ({type(u.block).__name__}, split by gates): {n_l} {f_kind}(s) of the "
                         f"{what} per time step forward (one per layer, both directions together) and "
                         f"{n_l} {b_kind}(s) backward: {2 * n_l * steps}{' + 1' if i > 0 else ''} "
                         f"collectives per micro-batch over {steps} steps")
    if cores:
        total = sum(cpu.values())
        notes.append(f"CPU work of the {dp * pp * tp} processes: " + ", ".join(
            f"{k} {v * 1e3:.1f} ms" for k, v in cpu.items() if v > 0) + f"; over {cores} cores "
            f"{total / cores * 1e3:.1f} ms; the measured fixed costs and the rest over the cores "
            f"{(fixed + (total - cpu.get('fixed', 0.0)) / cores) * 1e3:.1f} ms against a critical path of "
            f"{crit * 1e3:.1f} ms ({(stretched - pipeline) * 1e3:.1f} ms of it for slots where more "
            "processes work than there are cores)" + (": the cores bound the step" if crit < step else ""))
    return Plan(cfg, m, schedule, ckpt, step, int(math.ceil(mem_best)),
                [costs[a].path for a, _ in bounds[1:]], breakdown, memory, notes, cpu_work=cpu)


def _slot_stretch(m: int, pp: int, per_stage: int, cores: int, reducing: bool) -> tuple[float, float]:
    """Sums over the ``m + pp - 1`` forward and backward slots of a pipeline of how much longer each
    slot's work takes when its working processes outnumber ``cores``: ``max(1, working / cores)``.
    A forward slot ``k`` has the stages ``k - m < s <= k`` working, a backward slot those in reverse
    order; with ``reducing`` (data parallelism), a stage whose backward is done reduces its gradients
    during the later backward slots (the gradient hooks start it there), so it works too."""
    n = m + pp - 1
    f_sum = b_sum = 0.0
    for k in range(n):
        active = sum(1 for s in range(pp) if 0 <= k - s < m)
        f_sum += max(1.0, active * per_stage / cores)
        done = sum(1 for s in range(pp) if k > (pp - 1 - s) + m - 1) if reducing else 0
        b_sum += max(1.0, (active + done) * per_stage / cores)
    return f_sum, b_sum


def _cpu_work(costs: Sequence[LayerCost], pairs: dict[str, str], bounds: list[tuple[int, int]],
              stage_t: list[float], stage_params: list[float], tp_bytes: Any, gate_messages: Any,
              layout: Layout, m: int, mb: float, over: Overheads | None) -> dict[str, float]:
    """CPU seconds of one step summed over the job's ``dp * pp * tp`` processes: each rank's layers
    (its stage, its share of split layers, ``m`` micro-batches), its collectives' CPU (gloo reduces
    and copies on the CPU: the tensor-parallel all-reduces and the data-parallel gradient
    reduction, at the probe's CPU seconds per byte) and the measured fixed CPU of the layout."""
    dp, _, tp = layout
    o = over or Overheads()
    fixed = o.cpu_step_s.get(layout, 0.0) + m * o.cpu_micro_s.get(layout, 0.0)
    work = {"compute": 0.0, "tensor-parallel collectives": 0.0, "data-parallel reduction": 0.0,
            "fixed": 0.0}
    for (a, b), t, params in zip(bounds, stage_t, stage_params):
        ranks = dp * tp
        work["compute"] += ranks * t * m
        if tp > 1:
            n_pairs = sum(1 for i in range(a, b) if pairs.get(costs[i].path) in ("rowwise", "vocab"))
            extra = max(0, n_pairs - 1) + gate_messages(a, b) / 2  # as the critical path counts them
            work["tensor-parallel collectives"] += ranks * m * (
                tp_bytes(a, b) * mb * o.allreduce_cpu_per_byte + extra * o.pair_cpu_s.get(tp, 0.0))
        if dp > 1:
            work["data-parallel reduction"] += ranks * params * o.gradient_cpu_per_byte
        work["fixed"] += ranks * fixed
    return work
