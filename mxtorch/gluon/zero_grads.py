"""ZeRO stage 2's gradients, reduced onto their owners while backward runs.

The trainable parameters are laid out in buckets of about ``bucket_bytes`` (per dtype, in reverse
order: backward produces the last parameters' gradients first).  A hook on each parameter
(``register_post_accumulate_grad_hook``) copies its gradient into its bucket, into one flat buffer
per owning rank (the gradients, then one presence flag per parameter), and drops the parameter's
``.grad``.  When every gradient of a bucket has arrived, the bucket is started: one asynchronous
``reduce`` onto each owner of its parameters (the sum, MXNet's rule).  Before a new bucket's
buffers are made, the buckets started before the latest one are waited for; then the non-owners
free their buffers and each owner's parameters take views of the reduced sums as their ``.grad``.
So besides its own reduced gradients a rank holds at most two buckets, one being reduced and one
being filled (its members' ``.grad`` are set to views of its buffers when it is made, so autograd
adds them there in place); a bucket's reduction runs while backward computes the whole next bucket,
as DDP's and the 'allreduce' store's buckets overlap the backward.

When backward ends (a callback queued on autograd's engine) every bucket not started yet is
started, those of parameters that took no part with zeros and a zero flag, so every rank runs the
same reductions in the same order.  A second backward before the step (accumulation, with
``grad_req`` 'write' or 'add', pipeline micro-batches) first finishes the previous round: a
reduction is linear, so the owner's gradient, which autograd accumulates into, carries the earlier
rounds' sum and the non-owners start again from none.  ``finish()`` (at the step) starts what is
left and waits for everything.

With a cast compressor (``wire``: 'fp16', 'bf16') each owner's buffer is encoded by it when its
bucket starts and reduced in the narrow dtype, as the 'allreduce' store sums such payloads (summed in
that dtype on the wire); the non-owners keep only that copy, the owner casts the sum back into its
buffer.  The presence flags (0 or 1, summed over at most a few thousand ranks) stay exact in either
dtype.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ..base import MXNetError
from ..compression import CastCompressor
from ..distributed import group as dgroup
from ..distributed.buckets import backward_order_groups
from ..profiler import span
from .parameter import Parameter

__all__ = ["GradientBuckets", "DEFAULT_BUCKET_BYTES", "unhook"]

DEFAULT_BUCKET_BYTES = 25 << 20
"""The default bucket size (as the 'allreduce' store's and DDP's): fewer, larger reductions hold more
memory outside a rank's shard (one bucket) and start later."""


IN_FLIGHT = 1
"""Buckets whose reduction may still run while the next bucket fills: with 1 a rank holds at most
two buckets beside its own gradients, and each reduction overlaps the next bucket's backward."""


_HOOKED: weakref.WeakKeyDictionary[Parameter, GradientBuckets] = weakref.WeakKeyDictionary()
"""The live GradientBuckets whose hooks are on each parameter."""


def unhook(params: list[Parameter]) -> None:
    """Remove the gradient hooks an earlier zero=2 trainer put on ``params`` (a new trainer of
    them reduces their gradients now)."""
    for old in dict.fromkeys(_HOOKED[p] for p in params if p in _HOOKED):
        old.remove_hooks()


@dataclass
class _Bucket:
    index: int
    members: list[int]  # parameter indices
    owner_of: list[int]  # the owning rank of each member
    offsets: list[int]  # each member's offset in its owner's buffer
    slots: list[int]  # each member's presence flag: its place among its owner's flags
    totals: dict[int, int]  # owner -> elements of its members
    dtype: torch.dtype
    device: torch.device
    ready: list[bool] = field(default_factory=list)
    preset: list[bool] = field(default_factory=list)  # .grad set to a zero view of the buffer
    n_ready: int = 0
    flats: dict[int, torch.Tensor] = field(default_factory=dict)  # owner -> [grads..., flags]
    wire: torch.Tensor | None = None  # this rank's buffer as reduced (in a cast compressor's dtype)
    works: list[Any] = field(default_factory=list)
    started: bool = False

    def reset(self) -> None:
        self.ready = [False] * len(self.members)
        self.preset = [False] * len(self.members)
        self.n_ready = 0
        self.flats = {}
        self.wire = None
        self.works = []
        self.started = False


class GradientBuckets:
    """Buckets of ``params`` (index -> Parameter, one context each) reduced onto ``owners`` (index
    -> rank in ``group``, ``rank`` this one) during backward; ``to_global`` maps a group rank to
    the job's.  ``measure``: record the most gradient bytes held, inside the hooks.  ``wire``: the
    cast compressor the buckets are reduced in (None: their own dtype)."""

    def __init__(self, params: dict[int, Parameter], owners: dict[int, int], group: Any, rank: int,
                 to_global: Callable[[int], int], bucket_bytes: int, measure: bool = False,
                 wire: CastCompressor | None = None) -> None:
        self._params = params
        self._wire = wire
        self._owners = owners
        self._group = group
        self._rank = rank
        self._to_global = to_global
        self.buckets = self._layout(bucket_bytes)
        self._where = {i: (b, m) for b in self.buckets for m, i in enumerate(b.members)}
        self._next = 0  # the next bucket to start (buckets start in order on every rank)
        self._waited = 0  # buckets before this one are reduced and written back
        self._callback_queued = False
        self._lock = threading.Lock()
        self.measure = measure
        self.peak_bytes = 0
        # reduced: buckets started; overlapped: buckets left reducing while the next one filled
        self.stats = {"reduced": 0, "overlapped": 0}
        self._handles = [self._tensor(i).register_post_accumulate_grad_hook(
            lambda _t, i=i: self._on_grad(i)) for i in params]
        for p in params.values():
            _HOOKED[p] = self

    def _tensor(self, i: int) -> torch.Tensor:
        return self._params[i]._data[0]  # type: ignore[index]

    def _layout(self, bucket_bytes: int) -> list[_Bucket]:
        buckets: list[_Bucket] = []

        def close(members: list[int]) -> None:
            first = self._tensor(members[0])
            owner_of = [self._owners[i] for i in members]
            totals: dict[int, int] = {}
            offsets: list[int] = []
            slots: list[int] = []
            for i, r in zip(members, owner_of):
                offsets.append(totals.get(r, 0))
                slots.append(owner_of[:len(slots)].count(r))
                totals[r] = totals.get(r, 0) + self._tensor(i).numel()
            b = _Bucket(len(buckets), members, owner_of, offsets, slots, totals, first.dtype, first.device)
            b.reset()
            buckets.append(b)

        # backward produces the last parameters first
        order = ((i, self._tensor(i)) for i in sorted(self._params, reverse=True))
        for members in backward_order_groups(order, bucket_bytes):
            close(members)
        return buckets

    # ---- during backward ---------------------------------------------------------------
    def _on_grad(self, i: int) -> None:
        with self._lock, torch.no_grad():
            if self._next == len(self.buckets):  # a new backward after a finished one: new round
                self._wait_started()
                self._new_round()
            b, m = self._where[i]
            if b.started or b.ready[m]:  # only a reentrant backward inside this one reaches here
                raise MXNetError(
                    f"ZeroTrainer(zero=2): parameter {self._params[i].name!r} got a second gradient in one "
                    "backward pass, after its bucket was reduced (a reentrant backward, e.g. "
                    "checkpoint(use_reentrant=True)): use use_reentrant=False, or zero=1")
            grad = self._tensor(i).grad
            if grad is None:
                return
            self._copy_in(b, m, grad)
            if not self._callback_queued:
                self._callback_queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
            while self._next < len(self.buckets) and self._filled(self.buckets[self._next]):
                self._start(self.buckets[self._next])

    @staticmethod
    def _filled(b: _Bucket) -> bool:
        return b.n_ready == len(b.members)

    def _copy_in(self, b: _Bucket, m: int, grad: torch.Tensor | None) -> None:
        """Member ``m``'s gradient (None: zeros, flag 0) into its owner's buffer; its .grad dropped."""
        if not b.flats:  # a new bucket's buffers: what was started before the latest is reduced first
            self._wait_started(keep=IN_FLIGHT)
            self.stats["overlapped"] += self._next - self._waited
            reused = self._reused(b) if self._rank in b.totals else None
            b.flats = {r: torch.zeros(n + b.owner_of.count(r), dtype=b.dtype, device=b.device)
                       if reused is None or r != self._rank else reused for r, n in b.totals.items()}
            for k, i in enumerate(b.members):  # autograd adds the bucket's other gradients in place
                t = self._tensor(i)
                if k != m and t.grad is None:
                    t.grad = b.flats[b.owner_of[k]].narrow(0, b.offsets[k], t.numel()).view(t.shape)
                    b.preset[k] = True
        r, i = b.owner_of[m], b.members[m]
        flat, t = b.flats[r], self._tensor(i)
        if grad is not None:
            part = flat.narrow(0, b.offsets[m], t.numel())
            if part.data_ptr() != grad.data_ptr():  # not the reused buffer's own view
                part.copy_(grad.reshape(-1))
            flat[b.totals[r] + b.slots[m]] = 1
        if self.measure:
            self._record()  # the most: the gradient and the bucket's buffers both held
        t.grad = None
        b.ready[m] = True
        b.n_ready += 1

    def _reused(self, b: _Bucket) -> torch.Tensor | None:
        """This rank's buffer of ``b`` from the previous round, when its own parameters' gradients
        are still views of it (accumulation: autograd added the new pass into them in place), so
        that it is not held twice; None: make a new one."""
        me, base = self._rank, None
        for m, i in enumerate(b.members):
            g = self._tensor(i).grad
            if b.owner_of[m] != me or g is None:
                continue
            root = g._base
            if (root is None or (base is not None and root is not base) or root.dtype != b.dtype
                    or root.numel() != b.totals[me] + b.owner_of.count(me)
                    or g.data_ptr() != root.data_ptr() + b.offsets[m] * root.element_size()):
                return None
            base = root
        if base is not None:
            for m, i in enumerate(b.members):  # a parameter without a gradient adds nothing
                if b.owner_of[m] == me and self._tensor(i).grad is None:
                    base.narrow(0, b.offsets[m], self._tensor(i).numel()).zero_()
            base[b.totals[me]:].zero_()  # the flags of this round
        return base

    def _end_of_backward(self) -> None:
        with self._lock, torch.no_grad():
            self._callback_queued = False
            self._start_rest()

    def _start_rest(self) -> None:
        """Start every bucket not started yet, with the gradients there are now (zeros and a zero
        flag for a parameter this rank has none of)."""
        while self._next < len(self.buckets):
            b = self.buckets[self._next]
            for m, i in enumerate(b.members):
                if not b.ready[m]:  # a zero view this rank set: no gradient of its own
                    self._copy_in(b, m, None if b.preset[m] else self._tensor(i).grad)
            self._start(b)

    def _start(self, b: _Bucket) -> None:
        with span("zero.reduce_bucket", bucket=b.index,
                  bytes=sum(f.numel() * f.element_size() for f in b.flats.values())):
            for r in sorted(b.flats):
                flat = b.flats[r]
                if self._wire is not None:  # this rank's part of the sum, in the narrow dtype
                    flat = self._wire.cast(flat, key=f"zero2.bucket{b.index}.rank{r}")
                    if r == self._rank:
                        b.wire = flat  # the owner casts the sum back into its buffer
                    else:
                        b.flats[r] = flat  # the full-width copy is not needed any more
                dst = self._to_global(r)
                b.works.append(dist.reduce(flat, dst=dst, group=self._group, async_op=True))
        b.started = True
        self._next = b.index + 1
        self.stats["reduced"] += 1

    def _wait_started(self, keep: int = 0) -> None:
        """Wait for the started buckets but the latest ``keep``; owners take views of the sums, the
        others free theirs."""
        while self._waited < self._next - keep:
            b = self.buckets[self._waited]
            try:
                for w in b.works:
                    w.wait()
            except RuntimeError as e:
                names = [self._params[i].name for i in b.members]
                raise MXNetError(
                    f"ZeroTrainer(zero=2): reduce of gradient bucket {b.index} ({', '.join(names[:6])}"
                    f"{', ...' if len(names) > 6 else ''}) failed: {dgroup.explain(e)}. A peer process died, "
                    "hangs, or trains different parameters; check the other ranks' logs") from e
            mine = b.flats.get(self._rank)
            if mine is not None:
                if b.wire is not None:
                    mine.copy_(b.wire)  # the cast compressor's decompression, into the buffer itself
                flags = mine[b.totals[self._rank]:].tolist()
                k = 0
                for m, i in enumerate(b.members):
                    if b.owner_of[m] != self._rank:
                        continue
                    if flags[k] > 0:  # some rank had a gradient: the sum is this parameter's
                        t = self._tensor(i)
                        total = mine.narrow(0, b.offsets[m], t.numel()).view(t.shape)
                        if t.grad is not None:  # the next backward's, arrived meanwhile: added
                            total.add_(t.grad)
                        t.grad = total
                    k += 1
            b.flats = {}
            b.wire = None
            b.works = []
            self._waited += 1

    def _new_round(self) -> None:
        for b in self.buckets:
            b.reset()
        self._next = 0
        self._waited = 0

    # ---- at the step -------------------------------------------------------------------
    def finish(self) -> None:
        """Start what backward left (or everything: gradients set without a backward), wait for it
        all; afterwards each owner's parameters hold the summed gradients, the others none."""
        with self._lock, torch.no_grad(), span("zero.reduce_gradients", stage=2):
            self._start_rest()
            self._wait_started()
            self._new_round()

    def held_bytes(self) -> int:
        """Bytes of gradient storage this rank holds now: the parameters' gradients (a reduced
        one is a view of its bucket's buffer, counted once) and the buffers of the buckets."""
        seen: dict[int, int] = {}
        tensors = [g for i in self._params for g in [self._tensor(i).grad] if g is not None]
        tensors += [f for b in self.buckets for f in [*b.flats.values(), b.wire] if f is not None]
        for t in tensors:
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
        return sum(seen.values())

    def _record(self) -> None:
        self.peak_bytes = max(self.peak_bytes, self.held_bytes())

    def remove_hooks(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        for p in self._params.values():
            if _HOOKED.get(p) is self:
                del _HOOKED[p]
