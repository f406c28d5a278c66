"""ZeRO stage 3: each data-parallel rank keeps ``1/dp`` of every trainable parameter between steps.

A parameter of ``n`` elements is flattened, padded to ``dp * c`` (``c = ceil(n / dp)``), and rank
``r`` keeps elements ``[r*c, (r+1)*c)`` (its *shard*).  Between steps the parameter's tensor holds
an empty placeholder (``tensor.data`` is swapped, as FairScale's FSDP did, so the
``torch.nn.Parameter`` and the autograd graphs that saved it stay the same objects; a stray read
sees a 0-element tensor, not freed memory).  The blocks that own parameters gather them:

* before a block's forward (a forward pre-hook) its parameters are all-gathered from the shards,
  and after it (a forward hook) they are freed again;
* when the gradient of a block's output arrives in backward (a hook on that output) they are
  gathered again for the block's backward, and each is freed once its gradient has accumulated
  (``register_post_accumulate_grad_hook``);
* at the step the whole gradients are reduce-scattered (summed, MXNet's rule) into each rank's
  shard of them, and the optimizer updates the shards (elementwise optimizers only); with a cast
  compressor ('fp16', 'bf16') the gradients travel and are summed in its dtype.

The gathers are prefetched: the blocks' order in the first forward pass is recorded, and from then
on gathering a block for its forward starts the next block's all-gather (``async_op=True``), and
gathering one for its backward starts the all-gather of the block before it (backward runs the
blocks in reverse); the next hook waits for it.  So a gather runs while the current block computes,
and at most two blocks' parameters are whole at once.  Every rank runs the same model, so every rank
starts the same gathers in the same order; one never used (a block skipped) is waited for and freed
at the step.

PyTorch's FSDP2 (``fully_shard``) was not used: it replaces a module's parameters with DTensors,
which Gluon's :class:`Parameter` (it owns its ``torch.nn.Parameter`` per context and hands it to
``hybrid_forward``, the Trainer and the parameter files) cannot hold; see docs/parallelism.md.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from ..compression import CastCompressor
from ..profiler import span
from .parameter import Parameter

__all__ = ["ParameterShards", "unshard"]

_SHARDED: weakref.WeakKeyDictionary[Parameter, ParameterShards] = weakref.WeakKeyDictionary()
"""The live ParameterShards of each sliced parameter."""


def unshard(params: list[Parameter]) -> None:
    """Give ``params`` their whole values back from a ParameterShards that sliced them (an earlier
    zero=3 trainer of the same parameters) and remove its hooks; a collective over its group."""
    for old in dict.fromkeys(_SHARDED[p] for p in params if p in _SHARDED):
        old.gather(list(old._params))
        old.remove_hooks()
        for p in old._params.values():
            _SHARDED.pop(p, None)

# torch 2.13 renamed the flat collectives (and warns on the old names); older torch has only those
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


class ParameterShards:
    """This rank's shards of ``params`` (index -> Parameter, one context each) over ``group``
    (``dp`` ranks, this one ``rank``); hooks on the blocks that own them gather them per layer.
    ``wire``: the cast compressor the gradients are reduce-scattered in (None: their own dtype)."""

    def __init__(self, params: dict[int, Parameter], group: Any, dp: int, rank: int,
                 wire: CastCompressor | None = None) -> None:
        self._params = params
        self._wire = wire
        self._group = group
        self._dp = dp
        self._rank = rank
        self._full: set[int] = set()  # gathered now
        self._pending: dict[int, _Gather] = {}  # a prefetch under way, per parameter
        self._order: list[tuple[int, ...]] = []  # the blocks (their parameters) in forward order
        self._position: dict[tuple[int, ...], int] = {}  # a block's place in _order
        self._recorded = False  # _order is complete (a block came round again)
        self.stats = {"gathers": 0, "prefetched": 0, "unused": 0}  # all-gathers started, by kind
        self.shards: dict[int, torch.Tensor] = {}
        self._chunk: dict[int, int] = {}
        self._shape: dict[int, tuple[int, ...]] = {}
        self._handles: list[Any] = []
        with torch.no_grad():
            for i, p in params.items():
                w = p._data[0]  # type: ignore[index]
                c = -(-w.numel() // dp)
                self._shape[i] = tuple(w.shape)
                self._chunk[i] = c
                self.shards[i] = self._padded(w.detach(), i)[rank].clone()
        self._full = set(params)
        self.free(list(params))
        self._hook_blocks()
        for p in params.values():
            _SHARDED[p] = self

    # ---- layout ----------------------------------------------------------------------
    def _padded(self, t: torch.Tensor, i: int) -> torch.Tensor:
        """``t`` (a whole parameter or gradient) flat, zero-padded, as ``(dp, chunk)``."""
        c = self._chunk[i]
        flat = t.reshape(-1)
        pad = c * self._dp - flat.numel()
        if pad:
            flat = torch.cat([flat, flat.new_zeros(pad)])
        return flat.view(self._dp, c)

    def _by_dtype(self, indices: list[int]) -> list[list[int]]:
        out: dict[torch.dtype, list[int]] = {}
        for i in sorted(indices):
            out.setdefault(self.shards[i].dtype, []).append(i)
        return list(out.values())

    def held_bytes(self) -> int:
        """Bytes of the shards this rank keeps."""
        return sum(s.numel() * s.element_size() for s in self.shards.values())

    def in_flight_bytes(self) -> int:
        """Bytes of the all-gathers under way (a prefetched block's whole values, not yet taken)."""
        return sum(g.table.numel() * g.table.element_size() for g in dict.fromkeys(self._pending.values()))

    # ---- gather and free ---------------------------------------------------------------
    def gather(self, indices: list[int]) -> None:
        """Make ``indices`` whole: wait for their prefetch, all-gather the rest (one flat collective
        per dtype).  Every rank calls it for the same indices."""
        for g in dict.fromkeys(self._pending[i] for i in indices if i in self._pending):
            self._finish(g)
        todo = [i for i in indices if i not in self._full]
        if todo:
            for g in self._start(todo, prefetch=False):
                self._finish(g)

    def prefetch(self, indices: list[int] | tuple[int, ...]) -> None:
        """Start the all-gather of ``indices`` (those neither whole nor under way) without waiting."""
        todo = [i for i in indices if i not in self._full and i not in self._pending]
        if todo:
            for g in self._start(todo, prefetch=True):
                for i in g.indices:
                    self._pending[i] = g

    def _start(self, todo: list[int], prefetch: bool) -> list[_Gather]:
        out = []
        self.stats["prefetched" if prefetch else "gathers"] += 1
        name = "zero.prefetch_parameters" if prefetch else "zero.gather_parameters"
        with torch.no_grad(), span(name, count=len(todo)):
            for same in self._by_dtype(todo):
                mine = torch.cat([self.shards[i] for i in same])
                table = mine.new_empty(self._dp * mine.numel())
                work = _all_gather(table, mine, group=self._group, async_op=True)
                out.append(_Gather(same, table, work))
        return out

    def _finish(self, g: _Gather) -> None:
        """Wait for ``g`` and give its parameters their whole values."""
        with torch.no_grad(), span("zero.gather_wait", count=len(g.indices)):
            g.work.wait()
            table = g.table.view(self._dp, -1)
            col = 0
            for i in g.indices:
                c = self._chunk[i]
                w = self._params[i]._data[0]  # type: ignore[index]
                n = self._shape[i]
                w.data = table[:, col:col + c].reshape(-1)[:_numel(n)].view(n).clone()
                col += c
                self._pending.pop(i, None)
            self._full.update(g.indices)

    def _neighbour(self, indices: list[int], forward: bool) -> tuple[int, ...] | None:
        """The block run after the one of ``indices`` (in forward order, or backward's reverse);
        records the forward order until a block comes round again."""
        key = tuple(indices)
        if not self._recorded:
            if not forward:
                return None
            if key not in self._position:
                self._position[key] = len(self._order)
                self._order.append(key)
                return None
            self._recorded = True
        k = self._position.get(key)
        if k is None:
            return None
        k += 1 if forward else -1
        return self._order[k] if 0 <= k < len(self._order) else None

    def _gather_block(self, indices: list[int], forward: bool) -> None:
        """A block's hook: its parameters whole, and the next block's gather started."""
        nxt = self._neighbour(indices, forward)
        self.gather(indices)
        if nxt is not None:
            self.prefetch(nxt)

    def free(self, indices: list[int]) -> None:
        """Drop the whole values of ``indices`` (the shards stay)."""
        for i in indices:
            if i in self._full:
                w = self._params[i]._data[0]  # type: ignore[index]
                w.data = w.data.new_empty(0)
                self._full.discard(i)

    def free_all(self) -> None:
        """Drop every whole value, after waiting for any prefetch still under way."""
        for g in dict.fromkeys(self._pending.values()):
            self.stats["unused"] += 1
            self._finish(g)
        self.free(list(self._full))

    @contextlib.contextmanager
    def whole(self, writeback: bool = True) -> Iterator[None]:
        """Every parameter whole inside (a collective: every rank enters); on leaving, with
        ``writeback``, each rank takes its shard of the (possibly changed) values, then frees."""
        self.gather(list(self._params))
        try:
            yield
        finally:
            if writeback:
                with torch.no_grad():
                    for i, p in self._params.items():
                        self.shards[i].copy_(self._padded(p._data[0].detach(), i)[self._rank])  # type: ignore[index]
            self.free_all()

    # ---- gradients ---------------------------------------------------------------------
    def reduce_scatter_grads(self) -> dict[int, torch.Tensor]:
        """Sum every parameter's whole gradient over the ranks into this rank's shard of it, drop
        the whole gradients; a parameter no rank has a gradient for is left out (stale)."""
        order = sorted(self._params)
        have = torch.tensor([int(self._params[i]._data[0].grad is not None) for i in order],  # type: ignore[index]
                            dtype=torch.int64)
        dist.all_reduce(have, op=dist.ReduceOp.MAX, group=self._group)  # every rank joins alike
        live = [i for i, h in zip(order, have.tolist()) if h]
        out: dict[int, torch.Tensor] = {}
        with torch.no_grad(), span("zero.reduce_scatter_gradients", count=len(live)):
            for group in self._by_dtype(live):
                cols = []
                for i in group:
                    w = self._params[i]._data[0]  # type: ignore[index]
                    g = w.grad if w.grad is not None else self.shards[i].new_zeros(self._shape[i])
                    cols.append(self._padded(g, i))
                    w.grad = None
                table = torch.cat(cols, dim=1).contiguous()
                if self._wire is None:
                    mine = table.new_empty(table.shape[1])
                    _reduce_scatter(mine, table.view(-1), group=self._group)
                else:  # summed in the cast compressor's dtype (as the store sums its payloads), cast back
                    sent = self._wire.cast(table.view(-1), key=f"zero3.{table.dtype}")
                    got = sent.new_empty(table.shape[1])
                    _reduce_scatter(got, sent, group=self._group)
                    mine = got.to(cols[0].dtype)
                col = 0
                for i in group:
                    out[i] = mine[col:col + self._chunk[i]]
                    col += self._chunk[i]
        return out

    # ---- hooks -------------------------------------------------------------------------
    def _hook_blocks(self) -> None:
        """Forward (pre-)hooks on every block that owns some of the parameters, and a
        post-accumulate-grad hook on each parameter (frees it once backward is done with it)."""
        blocks: dict[int, tuple[Any, list[int]]] = {}
        for i, p in self._params.items():
            for ref, _attr in p._owners:
                block = ref()
                if block is not None:
                    blocks.setdefault(id(block), (block, []))[1].append(i)
            self._handles.append(p._data[0].register_post_accumulate_grad_hook(  # type: ignore[index]
                lambda _t, i=i: self.free([i])))
        for block, indices in blocks.values():
            self._handles.append(block.register_forward_pre_hook(
                lambda _b, _a, ix=indices: self._gather_block(ix, forward=True)))
            self._handles.append(block.register_forward_hook(
                lambda _b, _a, out, ix=indices: self._after_forward(ix, out)))

    def _after_forward(self, indices: list[int], output: Any) -> None:
        if torch.is_grad_enabled():
            for t in _tensors(output):
                if t.requires_grad:  # its gradient arrives right before this block's backward
                    t.register_hook(lambda g, ix=indices: self._gather_block(ix, forward=False))
        self.free(indices)

    def remove_hooks(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []


class _Gather:
    """An all-gather under way: the parameters (one dtype), the table it fills, its work."""

    def __init__(self, indices: list[int], table: torch.Tensor, work: Any) -> None:
        self.indices = indices
        self.table = table
        self.work = work


def _numel(shape: Any) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _tensors(x: Any) -> Iterator[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)
