"""Overlap with backward: gradients copied into buckets as autograd produces them, each bucket's
all-reduce started while the rest of the backward pass runs (as DDP does).

With ``backward_passes_per_step = n`` (the store's; gradient accumulation, a pipeline's
micro-batches) a parameter's gradient is taken at its n-th accumulation of the step, so each
bucket is reduced once per step, after the last pass, as Horovod's ``backward_passes_per_step``
and DDP's ``no_sync`` do; without it the first pass would start every bucket and each later
pass would make them stale, to be reduced again at step time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.distributed as dist

from ...distributed import group
from ...distributed.buckets import backward_order_groups
from ...profiler import horovod_timeline, span
from ..base import Key, KVStoreError
from .collectives import _agree, _Comm, _meta_device


class _HasGrads(Protocol):
    """What a gluon Parameter offers for gradient synchronization (duck-typed)."""

    @property
    def grad_req(self) -> str: ...

    def list_data(self) -> list[torch.nn.Parameter]: ...


GradientSource = torch.Tensor | _HasGrads
"""A gluon ``Parameter`` (all its contexts) or a plain tensor that requires grad."""


# ---- gradient buckets ------------------------------------------------------------------


def _grad_view(p: GradientSource) -> tuple[str, list[torch.Tensor], str]:
    """(grad_req, the tensors holding .grad — one per context, a name) of a Parameter or tensor."""
    if isinstance(p, torch.Tensor):
        return ("write" if p.requires_grad else "null"), [p], f"tensor{tuple(p.shape)}"
    return p.grad_req, list(p.list_data()), str(getattr(p, "name", "parameter"))


@dataclass
class _Bucket:
    index: int
    members: list[int]  # positions in GradientSync.copies
    offsets: list[int]
    total: int
    flat: torch.Tensor  # [grads..., one presence flag per member]
    ready: list[bool] = field(default_factory=list)
    n_ready: int = 0
    work: Any = None
    timed: bool = False  # its ALLREDUCE began on the Horovod timeline and has not ended

    def reset(self) -> None:
        self.ready = [False] * len(self.members)
        self.n_ready = 0
        self.work = None


class GradientSync:
    """Buckets of gradients for one fixed list of parameters; optional autograd hooks.

    Handed what it needs of its store (not the store): ``comm`` its workers' group, ``passes``
    the current ``backward_passes_per_step``, ``on_launch`` called for each bucket all-reduce."""

    def __init__(self, comm: _Comm, num_workers: int, params: list[GradientSource], bucket_bytes: int,
                 hook: bool, passes: Callable[[], int], on_launch: Callable[[], None]) -> None:
        self.comm = comm
        self.num_workers = num_workers
        self.passes = passes
        self.on_launch = on_launch
        self.group = comm.group  # the store's process group (None: the world)
        self.bucket_bytes = bucket_bytes
        self.signature = _signature(params)
        views = [_grad_view(p) for p in params]
        trainable = [(ts, name) for req, ts, name in views if req != "null"]
        self.copies: list[list[torch.Tensor]] = [ts for ts, _ in trainable]
        self.names = [name for _, name in trainable]
        self.hooked = hook and all(req == "write" and len(ts) == 1 for req, ts, _ in views if req != "null")
        self.buckets = self._layout()
        self.owner = {i: (b.index, m) for b in self.buckets for m, i in enumerate(b.members)}
        self.next_launch = 0
        self.stale = False
        self.callback_queued = False
        self.seen = [0] * len(self.copies)  # this step's accumulations of each gradient
        self.final = 0  # gradients at their last accumulation of the step (passes > 1)
        self.lock = threading.Lock()
        self.handles: list[Any] = []
        if num_workers > 1:
            items: list[tuple[Key, tuple[int, ...], torch.dtype]] = [
                (i, tuple(ts[0].shape), ts[0].dtype) for i, ts in enumerate(self.copies)]
            if items:
                _agree("gradient synchronization", items, comm, _meta_device(self.copies[0][0], comm.backend))
        if self.hooked:
            for i, ts in enumerate(self.copies):
                self.handles.append(ts[0].register_post_accumulate_grad_hook(self._make_hook(i)))

    # -- layout --
    def _layout(self) -> list[_Bucket]:
        buckets: list[_Bucket] = []

        def close(members: list[int]) -> None:
            first = self.copies[members[0]][0]
            offsets, total = [], 0
            for i in members:
                offsets.append(total)
                total += self.copies[i][0].numel()
            flat = torch.zeros(total + len(members), dtype=first.dtype, device=first.device)
            b = _Bucket(len(buckets), members, offsets, total, flat)
            b.reset()
            buckets.append(b)

        # backward produces the last parameters first
        order = ((i, self.copies[i][0]) for i in reversed(range(len(self.copies))))
        for members in backward_order_groups(order, self.bucket_bytes):
            close(members)
        return buckets

    def matches(self, params: list[GradientSource]) -> bool:
        return _signature(params) == self.signature

    # -- during backward --
    def _make_hook(self, i: int) -> Callable[[torch.Tensor], None]:
        def hook(param: torch.Tensor) -> None:
            self._on_grad(i, param)
        return hook

    def _on_grad(self, i: int, param: torch.Tensor) -> None:
        with self.lock:
            passes = self.passes()
            if passes > 1:
                self.seen[i] += 1
                if self.seen[i] < passes:
                    return  # more accumulations of this gradient to come this step
                if self.seen[i] == passes:
                    self.final += 1
            bi, m = self.owner[i]
            b = self.buckets[bi]
            if b.ready[m] or b.work is not None:
                self.stale = True  # a second backward before the step: redo everything at step time
                return
            grad = param.grad
            if grad is None:
                return
            with torch.no_grad():
                b.flat.narrow(0, b.offsets[m], grad.numel()).copy_(grad.reshape(-1))
                b.flat[b.total + m] = 1
            b.ready[m] = True
            b.n_ready += 1
            if not self.callback_queued:
                self.callback_queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
            self._launch_ready()

    def _end_of_backward(self) -> None:
        # Start every remaining bucket now, so that whatever collective the user runs next
        # comes after all of them on every rank.
        with self.lock:
            self.callback_queued = False
            passes = self.passes()
            if not self.stale and (passes == 1 or self.final == len(self.copies)):
                self._launch_through(len(self.buckets))

    def _launch_ready(self) -> None:
        while self.next_launch < len(self.buckets):
            b = self.buckets[self.next_launch]
            if b.n_ready < len(b.members):
                return
            self._launch(b)

    def _launch_through(self, end: int) -> None:
        while self.next_launch < end:
            b = self.buckets[self.next_launch]
            self._fill_missing(b)
            self._launch(b)

    def _fill_missing(self, b: _Bucket) -> None:
        with torch.no_grad():
            for m, i in enumerate(b.members):
                if b.ready[m]:
                    continue
                part = b.flat.narrow(0, b.offsets[m], self.copies[i][0].numel())
                grads = [t.grad for t in self.copies[i] if t.grad is not None]
                if grads:
                    part.copy_(grads[0].reshape(-1))
                    for g in grads[1:]:
                        part.add_(g.reshape(-1).to(part.device))
                    b.flat[b.total + m] = 1
                else:
                    part.zero_()
                    b.flat[b.total + m] = 0
                b.ready[m] = True
            b.n_ready = len(b.members)

    def _launch(self, b: _Bucket) -> None:
        tl = horovod_timeline.active()
        if tl:  # a bucket's gradients, fused, from launch to wait
            tl.op_begin([self.names[i] for i in b.members], "ALLREDUCE",
                        horovod_timeline.activity("ALLREDUCE", b.flat), fused=len(b.members) > 1)
            b.timed = True
        if self.num_workers > 1:
            with span("allreduce", bucket=b.index, bytes=b.flat.numel() * b.flat.element_size(),
                      worker=self.comm.rank):
                b.work = dist.all_reduce(b.flat, op=dist.ReduceOp.SUM, group=self.group, async_op=True)
        else:
            b.work = _Done()
        self.next_launch = b.index + 1
        self.on_launch()

    # -- at step time --
    def synchronize(self) -> None:
        with self.lock, span("allreduce.wait", buckets=len(self.buckets)):
            if self.stale:
                self._wait(self.buckets[:self.next_launch])
                for b in self.buckets:
                    b.reset()
                self.next_launch = 0
            self._launch_through(len(self.buckets))
            try:
                self._wait(self.buckets)
                self._write_back()
            finally:
                for b in self.buckets:
                    b.reset()
                self.next_launch = 0
                self.stale = False
                self.seen = [0] * len(self.copies)
                self.final = 0

    def finish_in_flight(self) -> None:
        with self.lock:
            self._wait(self.buckets[:self.next_launch])

    def _wait(self, buckets: list[_Bucket]) -> None:
        for b in buckets:
            if b.work is None:
                continue
            try:
                b.work.wait()
            except RuntimeError as e:
                names = [self.names[i] for i in b.members]
                shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
                comm = self.comm
                raise KVStoreError(
                    f"{comm.where()}: all-reduce of gradient bucket {b.index} ({len(names)} parameters: "
                    f"{shown}) failed: {group.explain(e)}. A peer process died, hangs, or trains different "
                    f"parameters (timeout {comm.timeout_hint()}); check the other ranks' logs"
                ) from e
            b.work = _Done()
            tl = horovod_timeline.active()
            if tl and b.timed:
                b.timed = False
                tl.op_end([self.names[i] for i in b.members], len(b.members) > 1,
                          horovod_timeline.describe([self.copies[i][0] for i in b.members]))

    def _write_back(self) -> None:
        with torch.no_grad():
            for b in self.buckets:
                present = b.flat[b.total:].tolist()
                for m, i in enumerate(b.members):
                    copies = self.copies[i]
                    if present[m] <= 0:
                        for t in copies:  # no worker has a gradient: stale on every rank alike
                            t.grad = None
                        continue
                    part = b.flat.narrow(0, b.offsets[m], copies[0].numel())
                    for t in copies:
                        src = part.view(t.shape).to(t.device, non_blocking=t.device.type != "cpu")
                        if t.grad is None:
                            t.grad = src.clone()
                        else:
                            t.grad.copy_(src)

    def detach(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


class _Done:
    def wait(self) -> bool:
        return True


def _signature(params: Sequence[GradientSource]) -> tuple[tuple[Any, ...], ...]:
    # What the bucket layout depends on; a change (cast, reset_ctx, grad_req) rebuilds it.
    out = []
    for p in params:
        req, ts, _ = _grad_view(p)
        out.append((id(ts[0]), req, len(ts), ts[0].dtype, ts[0].shape))
    return tuple(out)
