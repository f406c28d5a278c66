"""The worker side of bench/scaling.py's sharded and pipelined layouts: ZeRO 1/2/3 as
:class:`mxtorch.gluon.ZeroTrainer` sends it, PowerSGD through mxtorch's allreduce store, and
pipelines (GPipe / 1F1B microbatches, ``pp`` stages x ``dp`` replicas).

Compute is a sleep of each layer's accelerator seconds x the dilation ``k`` (as in
:mod:`_scaling_replay`); what crosses the links is real, sized by the model's layers ÷ ``scale``:

* ZeRO 1: after the backward, one all-reduce of every gradient, then each owner broadcasts its
  parameters (owners from ZeroTrainer's own rule, ``shard_owners``); ZeRO 2: a reduce onto each
  owner instead of the all-reduce; ZeRO 3: each layer all-gathers its parameters' slices before
  its forward and again before its backward (blocking, as the trainer's hooks do), then the
  trainer's small all-reduce (which parameters have gradients) and one reduce-scatter of all
  the gradients.
* PowerSGD: the gradients with their matrix shapes (each side ÷ sqrt(scale)), pushpulled through
  the store with ``{'type': 'powersgd'}`` after the backward.
* Pipelines: rank ``r`` is stage ``r % pp`` of replica ``r // pp``; every receive of the step is
  posted first (a real runtime's buffers are ready), each microbatch's activation (bf16) goes to
  the next stage and its gradient back with isend, then each stage's gradients are all-reduced
  over its replicas (a ``dp`` group per stage) in buckets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from _scaling_models import (
    ACT_BYTES,
    Replay,
    buckets,
    pipeline_ops,
    pipeline_stages,
    powersgd_shape,
    scaled_sizes,
)

# torch 2.13 renamed the flat collectives (and warns on the old names); older torch has only those
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def _sleep(seconds: float) -> None:
    if seconds > 0:
        time.sleep(seconds)


def powersgd_grads(replay: Replay, scale: int) -> list[list[torch.Tensor]]:
    """Each layer's gradients with their matrix shapes (:func:`_scaling_models.powersgd_shape`)."""
    g = torch.Generator().manual_seed(0)
    return [[torch.randn(powersgd_shape(la, i, scale), generator=g) for i in range(len(la.grads))]
            for la in replay.layers]


# ---- ZeRO ----------------------------------------------------------------------------------------------
def zero_step(replay: Replay, dilation: float, scale: int, stage: int, run_backward: Callable[[], None]
              ) -> Callable[[], None]:
    """One ZeroTrainer step of ``stage`` (1, 2, 3) on the default group; ``run_backward`` is the
    replay's forward and backward (stages 1 and 2: the trainer communicates after it)."""
    from mxtorch.gluon.zero_trainer import shard_owners

    n = dist.get_world_size()
    sizes = scaled_sizes(replay, scale)
    if stage in (1, 2):
        flat = [s for gs in sizes for s in gs]
        owners = shard_owners(flat, n)
        per_owner = [sum(s for s, o in zip(flat, owners) if o == r) for r in range(n)]
        whole = torch.randn(sum(flat))
        mine = [torch.randn(c) for c in per_owner]

        def one() -> None:
            run_backward()
            with torch.profiler.record_function("mxtorch/bench.scaling.zero_reduce"):
                if stage == 1:
                    dist.all_reduce(whole)
                else:
                    for r, t in enumerate(mine):
                        if t.numel():
                            dist.reduce(t, dst=r)
            with torch.profiler.record_function("mxtorch/bench.scaling.zero_broadcast"):
                for r, t in enumerate(mine):
                    if t.numel():
                        dist.broadcast(t, src=r)

        return one
    chunks = [sum(-(-g // n) for g in gs) for gs in sizes]  # this rank's slice of each layer
    slices = [torch.randn(c) if c else None for c in chunks]
    gathered = [torch.empty(c * n) if c else None for c in chunks]
    total = sum(chunks)
    table, reduced = torch.randn(total * n), torch.empty(total)
    have = torch.ones(sum(len(gs) for gs in sizes), dtype=torch.int64)
    fwd = [la.seconds / 2 * dilation for la in replay.layers]
    bwd = [la.seconds * dilation for la in replay.layers]

    def gather(li: int) -> None:
        out, mine_ = gathered[li], slices[li]
        if out is not None and mine_ is not None:
            with torch.profiler.record_function("mxtorch/bench.scaling.zero_gather"):
                _all_gather(out, mine_)

    def one3() -> None:
        for li in reversed(range(len(replay.layers))):  # forward order
            gather(li)
            _sleep(fwd[li])
        for li in range(len(replay.layers)):
            gather(li)
            _sleep(bwd[li])
        with torch.profiler.record_function("mxtorch/bench.scaling.zero_reduce_scatter"):
            dist.all_reduce(have, op=dist.ReduceOp.MAX)
            _reduce_scatter(reduced, table)

    return one3


def _buffers(nbytes: int, count: int) -> list[torch.Tensor]:
    return [torch.empty(nbytes, dtype=torch.uint8) for _ in range(count)] if nbytes else []


# ---- pipelines -----------------------------------------------------------------------------------------
class PipelineStep:
    """One step of a ``pp``-stage pipeline (``schedule`` 'gpipe' or '1f1b', ``micro`` microbatches)
    with ``world // pp`` replicas; every rank builds every stage's group (new_group is collective)."""

    def __init__(self, replay: Replay, dilation: float, scale: int, pp: int, micro: int, schedule: str,
                 bucket_bytes: int) -> None:
        world, rank = dist.get_world_size(), dist.get_rank()
        if world % pp:
            raise ValueError(f"pipeline pp={pp} needs a multiple of {pp} workers, got {world}")
        self.pp, self.dp, self.micro = pp, world // pp, micro
        self.rank, self.stage = rank, rank % pp
        groups = [dist.new_group([d * pp + s for d in range(self.dp)]) if self.dp > 1 else None
                  for s in range(pp)]
        self.group = groups[self.stage]
        stages = pipeline_stages(replay, pp)
        mine = stages[self.stage]
        per = pp / micro
        self.fwd, self.bwd = mine.forward_s * per * dilation, mine.backward_s * per * dilation
        self.out_bytes = max(1, int(mine.act * per * ACT_BYTES) // scale) if self.stage < pp - 1 else 0
        self.in_bytes = (max(1, int(stages[self.stage - 1].act * per * ACT_BYTES) // scale)
                         if self.stage > 0 else 0)
        self.ops = pipeline_ops(schedule, self.stage, pp, micro)
        own = Replay("stage", 0.0, tuple(replay.layers[li] for li in mine.layers), "")
        self.flats = [torch.randn(max(1, sum(max(1, own.layers[li].grads[gi] // scale)
                                             for li, gi in b.members)))
                      for b in buckets(own, bucket_bytes)] if self.dp > 1 else []
        self.sent = torch.zeros(max(self.out_bytes, self.in_bytes, 1), dtype=torch.uint8)
        # one receive buffer per microbatch: every receive of a step is posted at its start
        self.acts = _buffers(self.in_bytes, micro)
        self.grads = _buffers(self.out_bytes, micro)

    def __call__(self) -> None:
        prev, nxt, m = self.rank - 1, self.rank + 1, self.micro
        acts = [dist.irecv(t, src=prev, tag=j) for j, t in enumerate(self.acts)]
        grads = [dist.irecv(t, src=nxt, tag=m + j) for j, t in enumerate(self.grads)]
        sends = []
        for kind, j in self.ops:
            if kind == "F":
                if acts:
                    acts[j].wait()
                _sleep(self.fwd)
                if self.out_bytes:
                    with torch.profiler.record_function("mxtorch/bench.scaling.pipeline_send"):
                        sends.append(dist.isend(self.sent[:self.out_bytes], dst=nxt, tag=j))
            else:
                if grads:
                    grads[j].wait()
                _sleep(self.bwd)
                if self.in_bytes:
                    with torch.profiler.record_function("mxtorch/bench.scaling.pipeline_send"):
                        sends.append(dist.isend(self.sent[:self.in_bytes], dst=prev, tag=m + j))
        for w in sends:
            w.wait()
        if self.flats:
            with torch.profiler.record_function("mxtorch/bench.scaling.pipeline_allreduce"):
                works = [dist.all_reduce(f, group=self.group, async_op=True) for f in self.flats]
                for w in works:
                    w.wait()


def layout_schedule(sched: dict[str, Any], replay: Replay, dilation: float, scale: int,
                    run_backward: Callable[[], None]) -> Callable[[], None]:
    """The step of a 'zero' or 'pipeline' schedule config."""
    if sched["kind"] == "zero":
        return zero_step(replay, dilation, scale, int(sched["stage"]), run_backward)
    return PipelineStep(replay, dilation, scale, int(sched["pp"]), int(sched["micro"]), sched["pipe"],
                        int(sched["bucket_bytes"]))

