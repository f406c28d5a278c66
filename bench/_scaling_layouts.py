"""The worker side of bench/scaling.py's sharded and pipelined layouts: ZeRO 1/2/3 as
:class:`mxtorch.gluon.ZeroTrainer` sends it, PowerSGD through mxtorch's allreduce store, and
pipelines (GPipe / 1F1B microbatches, ``pp`` stages x ``dp`` replicas).

Compute is a sleep of each layer's accelerator seconds x the dilation ``k`` (as in
:mod:`_scaling_replay`); what crosses the links is real, sized by the model's layers ÷ ``scale``:

* ZeRO 1: the trainer's 'allreduce' store: each bucket all-reduced once its last gradient is
  ready (overlap), then one all-gather of each rank's updated parameters padded to the largest
  share (owners from ZeroTrainer's own rule,
  ``shard_owners``); ZeRO 2: the trainer's gradient buckets, each reduced onto its owners (one
  reduce per owner) once filled, the backward waiting at a bucket's first gradient for every
  bucket started before the latest (one left in flight), then the all-gather; ZeRO 3: each layer
  all-gathers its parameters' slices before its forward and again before its backward, the next
  layer's gather started (prefetched) once the current one is done, then the trainer's small
  all-reduce (which parameters have gradients) and one reduce-scatter of all the gradients.
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
    FP32,
    Replay,
    buckets,
    pipeline_ops,
    pipeline_stages,
    powersgd_shape,
    scaled_sizes,
    zero_buckets,
    zero_owner_bytes,
    zero_owners,
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


def bucket_allreduces(step: Any, replay: Replay, scale: int, layout: list[list[tuple[int, int]]],
                      overlap: bool) -> Callable[[], None]:
    """gloo all-reduces of flat buckets of ``layout`` ((layer, gradient) members, scaled sizes),
    each launched as its last layer is done (``overlap``) or all after the backward."""
    sizes = scaled_sizes(replay, scale)
    flats = [torch.randn(sum(sizes[li][gi] for li, gi in b)) for b in layout]
    closing: dict[int, list[int]] = {}
    for j, b in enumerate(layout):
        closing.setdefault(max(li for li, _ in b), []).append(j)

    def one() -> None:
        works: list[Any] = []

        def on_layer(li: int) -> None:
            for j in closing.get(li, ()) if overlap else ():
                with torch.profiler.record_function("mxtorch/bench.scaling.bucket"):
                    works.append(dist.all_reduce(flats[j], async_op=True))

        step.run(on_layer)
        if not overlap:
            works.extend(dist.all_reduce(f, async_op=True) for f in flats)
        for w in works:
            w.wait()

    return one


# ---- ZeRO ----------------------------------------------------------------------------------------------
def zero_step(replay: Replay, dilation: float, scale: int, stage: int, step: Any) -> Callable[[], None]:
    """One ZeroTrainer step of ``stage`` (1, 2, 3) on the default group; ``step`` runs the replay's
    forward and backward (``step.run(on_layer, hooks_block)``, :class:`_scaling_replay.Step`)."""
    n = dist.get_world_size()
    sizes = scaled_sizes(replay, scale)
    if stage in (1, 2):
        width = max(zero_owner_bytes(replay, n, scale)) // (FP32 * scale)  # the padded share
        send, table = torch.randn(width), torch.empty(width * n)

        def gather_updated() -> None:
            with torch.profiler.record_function("mxtorch/bench.scaling.zero_gather_parameters"):
                _all_gather(table, send)

        if stage == 1:  # the 'allreduce' store's hooks: a bucket's all-reduce starts once it is full
            from mxtorch.gluon.zero_grads import DEFAULT_BUCKET_BYTES

            layout = zero_buckets(replay, scale, DEFAULT_BUCKET_BYTES)
            reduce = bucket_allreduces(step, replay, scale, layout, True)

            def one() -> None:
                reduce()
                gather_updated()

            return one
        return _Zero2(step, replay, scale, zero_owners(replay, n, scale), gather_updated)
    chunks = [sum(-(-g // n) for g in gs) for gs in sizes]  # this rank's slice of each layer
    slices = [torch.randn(c) if c else None for c in chunks]
    gathered = [torch.empty(c * n) if c else None for c in chunks]
    total = sum(chunks)
    table3, reduced = torch.randn(total * n), torch.empty(total)
    have = torch.ones(sum(len(gs) for gs in sizes), dtype=torch.int64)
    fwd = [la.seconds / 2 * dilation for la in replay.layers]
    bwd = [la.seconds * dilation for la in replay.layers]

    def start(li: int) -> Any:
        out, mine_ = gathered[li], slices[li]
        if out is None or mine_ is None:
            return None
        with torch.profiler.record_function("mxtorch/bench.scaling.zero_gather"):
            return _all_gather(out, mine_, async_op=True)

    def run_pass(order: list[int], seconds: list[float]) -> None:
        """The trainer's block hooks: wait for this block's gather (or start it), start the next
        block's (the prefetch), compute."""
        pending = {order[0]: start(order[0])}
        for j, li in enumerate(order):
            work = pending.pop(li)
            if work is not None:
                work.wait()
            if j + 1 < len(order):
                pending[order[j + 1]] = start(order[j + 1])
            _sleep(seconds[li])

    def one3() -> None:
        run_pass(list(reversed(range(len(replay.layers)))), fwd)  # forward order
        run_pass(list(range(len(replay.layers))), bwd)
        with torch.profiler.record_function("mxtorch/bench.scaling.zero_reduce_scatter"):
            dist.all_reduce(have, op=dist.ReduceOp.MAX)
            _reduce_scatter(reduced, table3)

    return one3


class _Zero2:
    """zero=2 as ZeroTrainer's gradient hooks send it (:mod:`mxtorch.gluon.zero_grads`): a bucket's
    reduces (one per owner) start when it is filled; when a bucket's first gradient arrives, every
    bucket started before the latest is waited for, on the backward's thread."""

    def __init__(self, step: Any, replay: Replay, scale: int, owner: dict[tuple[int, int], int],
                 gather_updated: Callable[[], None]) -> None:
        from mxtorch.gluon.zero_grads import DEFAULT_BUCKET_BYTES, IN_FLIGHT

        self.step, self.gather_updated, self.keep = step, gather_updated, IN_FLIGHT
        sizes = scaled_sizes(replay, scale)
        self.buckets = zero_buckets(replay, scale, DEFAULT_BUCKET_BYTES)
        self.where = {m: (b, k) for b, members in enumerate(self.buckets) for k, m in enumerate(members)}
        self.flats: list[list[tuple[int, torch.Tensor]]] = []
        for members in self.buckets:
            per: dict[int, int] = {}
            for m in members:
                per[owner[m]] = per.get(owner[m], 0) + sizes[m[0]][m[1]]
            self.flats.append([(r, torch.randn(c + 1)) for r, c in sorted(per.items())])
        self.grads_of = [len(la.grads) for la in replay.layers]
        self.works: list[list[Any]] = []

    def _wait(self, keep: int) -> None:
        while len(self.works) > keep:
            for w in self.works.pop(0):
                w.wait()

    def _on_layer(self, li: int) -> None:
        for gi in range(self.grads_of[li]):
            b, k = self.where[(li, gi)]
            if k == 0:  # the bucket's buffers are made: what was started before the latest is done
                self._wait(self.keep)
            if k == len(self.buckets[b]) - 1:
                with torch.profiler.record_function("mxtorch/bench.scaling.zero_reduce_bucket"):
                    self.works.append([dist.reduce(f, dst=r, async_op=True) for r, f in self.flats[b]])

    def __call__(self) -> None:
        self.step.run(self._on_layer, hooks_block=True)
        self._wait(0)
        self.gather_updated()


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


def layout_schedule(sched: dict[str, Any], replay: Replay, dilation: float, scale: int, step: Any
                    ) -> Callable[[], None]:
    """The step of a 'zero' or 'pipeline' schedule config (``step``: the replay's compute)."""
    if sched["kind"] == "zero":
        return zero_step(replay, dilation, scale, int(sched["stage"]), step)
    return PipelineStep(replay, dilation, scale, int(sched["pp"]), int(sched["micro"]), sched["pipe"],
                        int(sched["bucket_bytes"]))

