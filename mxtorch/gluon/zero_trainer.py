"""Sharded data parallelism (ZeRO stages 1, 2 and 3) for a Gluon :class:`~mxtorch.gluon.Trainer`
(here, beside the Trainer whose internals it extends; :mod:`mxtorch.parallel.zero` offers it).

Stages 1 and 2: each data-parallel rank *owns* a share of the trainable parameters (whole
parameters, balanced by size: largest first to the least-loaded rank, the same on every rank).  A
rank keeps optimizer states only for the parameters it owns and updates only those; after the
update the ranks all-gather their updated parameters (one all-gather per dtype of each rank's
share, flat and padded to the largest share), so every rank holds the whole model between steps
(the model's file is saved and loaded as usual).

* ``zero=1``: gradients are summed over the ranks by an 'allreduce' store on the group, in buckets
  all-reduced while backward runs (the store's hooks, as a plain Trainer's), optimizer states are
  sharded;
* ``zero=2``: each parameter's gradient is summed onto its owner only (a reduce per owner: a
  reduce-scatter of whole parameters) while backward runs, bucket by bucket, and the other ranks
  drop theirs as soon as it is reduced (:mod:`.zero_grads`): a rank holds its own reduced
  gradients plus about two buckets, not the whole gradients.
* ``zero=3``: every rank keeps ``1/dp`` of each parameter's flat data (and its optimizer states
  for that slice) between steps; the blocks gather their parameters for forward and backward
  (the next block's gather started while one computes) and free them after
  (:mod:`.zero_shards`); gradients are reduce-scattered into the slices and the optimizer
  updates the slices, so it must be elementwise (not LAMB/LARS/LBSGD, whose norms
  span a whole parameter).  Read or write the whole parameters inside
  ``with trainer.full_parameters():`` (every rank; e.g. to save or load the model's file).

MXNet's step rule holds: the store-like reduction *sums*, and ``step(batch_size)`` divides by the
batch size, so scripts pass the global batch.  The optimizer runs per parameter, as a Trainer's
does, so every optimizer works with stages 1 and 2 (LAMB/LARS norms are per parameter, which
whole-parameter shards keep intact).  Update hooks (AMP's loss scaling) see this rank's share of
the reduced gradients; an inf or nan on any rank's share skips the step on every rank.
``save_states``/``load_states`` hold this rank's shard: save one file per rank.

Gradient compression (``compression_params``, as a Trainer's): with ``zero=1`` the gradients are
summed through an internal 'allreduce' store on the data-parallel group with that compressor (its
pushpull: the same payload exchange, error feedback and values as a plain Trainer with
``kvstore='allreduce'``); with ``zero=2`` and ``zero=3`` the cast compressors ('fp16', 'bf16') apply:
the gradient buckets (the reduce-scatter) travel and are summed in the narrow dtype.  Other
compressors' payloads (packed bits, indices, factors) do not add up on the way to an owner and are
refused there.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from .. import compression
from .. import optimizer as opt
from ..base import MXNetError
from ..compression import CastCompressor, Compressor
from ..distributed import group
from ..kvstore.allreduce import AllreduceKVStore
from ..profiler import span
from .parameter import Parameter
from .trainer import StaleGradientError, Trainer
from .zero_grads import DEFAULT_BUCKET_BYTES, GradientBuckets, unhook
from .zero_shards import ParameterShards, _all_gather, unshard

__all__ = ["ZeroTrainer", "ZERO_STAGES", "shard_owners", "optimizer_state_bytes", "parameter_bytes"]

ZERO_STAGES = (0, 1, 2, 3)
"""The ZeRO stages: 0 (a plain replica), 1 (optimizer states), 2 (+ gradients), 3 (+ parameters)."""

LAYERWISE_OPTIMIZERS = ("lamb", "lars", "lbsgd")
"""Optimizers whose step reads a whole parameter's norm: zero=3 (slices of parameters) refuses them."""


def check_zero_stage(zero: Any, where: str) -> int:
    """``zero`` as a stage number, or a one-line error naming the stages there are."""
    if isinstance(zero, bool) or not isinstance(zero, int) or zero not in ZERO_STAGES:
        raise ValueError(f"{where}: zero must be one of {ZERO_STAGES}, got {zero!r}")
    return zero


def check_compression(params: Any, zero: int, where: str) -> Compressor | None:
    """The compressor of ``params`` (None: no compression), refused where stage ``zero`` cannot
    apply it; the errors of :func:`mxtorch.compression.create` (the store's) for bad params."""
    if params is None or (not isinstance(params, Compressor) and isinstance(params, dict) and not params):
        return None  # as a Trainer's: no (or empty) compression_params, no compression
    comp = compression.create(params)
    if zero >= 2 and not isinstance(comp, CastCompressor):
        raise MXNetError(f"{where}: compression {comp.name!r} sends payloads (packed bits, indices or "
                         f"factors) that do not add up on the way to a gradient's owner; with zero={zero} "
                         "use 'fp16' or 'bf16', or zero=1 for any compressor")
    return comp


def shard_owners(sizes: list[int], ranks: int) -> list[int]:
    """The owning rank of each parameter of ``sizes`` elements: largest first, each to the rank
    with the fewest elements so far (ties: the lower rank, then the earlier parameter)."""
    load = [0] * ranks
    owners = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda j: (-sizes[j], j)):
        r = min(range(ranks), key=lambda k: (load[k], k))
        owners[i] = r
        load[r] += sizes[i]
    return owners


def optimizer_state_bytes(trainer: Trainer) -> int:
    """Bytes of the optimizer-state tensors this process holds for ``trainer`` (every context)."""

    def size(x: Any) -> int:
        if isinstance(x, torch.Tensor):
            return x.numel() * x.element_size()
        if isinstance(x, (list, tuple)):
            return sum(size(v) for v in x)
        if isinstance(x, dict):
            return sum(size(v) for v in x.values())
        return 0

    return sum(size(u.states) for u in trainer._updaters)


def parameter_bytes(trainer: Trainer) -> int:
    """Bytes of parameter data this process holds for ``trainer`` now: the tensors of its
    parameters (a zero=3 trainer's are empty between steps), a zero=3 trainer's slices and the
    whole values its prefetches are gathering."""
    held = sum(d.numel() * d.element_size() for p in trainer._params if p._data is not None for d in p._data)
    shards = getattr(trainer, "_shards", None)
    return held + (shards.held_bytes() + shards.in_flight_bytes() if shards is not None else 0)


_STORE_HOOKED: weakref.WeakKeyDictionary[Parameter, AllreduceKVStore] = weakref.WeakKeyDictionary()
"""The zero=1 store whose gradient hooks are on each parameter (a new trainer of it removes them)."""


class ZeroTrainer(Trainer):
    """A Trainer whose data-parallel ranks shard the optimizer states (``zero=1``), the reduced
    gradients (``zero=2``) and the parameters (``zero=3``); see the module docstring.

    ``process_group``: the data-parallel ranks (e.g. ``parallel.Mesh(cfg).dp_group``); None: the whole job.
    Every rank of the group creates it with the same parameters; it gives every rank the group's
    first rank's initial values.  One context per process.  ``bucket_bytes`` (zero 1 and 2): the
    size of the gradient buckets reduced during backward.  ``backward_passes_per_step`` (zero=1): the
    backward passes accumulated before each step (a pipeline's micro-batches), so that the buckets
    are reduced once, after the last (as the allreduce store's).  ``measure_gradient_bytes``
    (zero=2): record the most gradient bytes held during backward (:attr:`peak_gradient_bytes`;
    costs a scan per hook).
    ``compression_params``: gradient compression (see the module docstring): any compressor with
    zero=1, 'fp16'/'bf16' with zero 2 and 3.
    """

    def __init__(self, params: Any, optimizer: str | opt.Optimizer,
                 optimizer_params: dict[str, Any] | None = None, zero: int = 1,
                 process_group: Any = None, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                 measure_gradient_bytes: bool = False,
                 compression_params: dict[str, Any] | Compressor | None = None,
                 backward_passes_per_step: int = 1) -> None:
        self._zero = check_zero_stage(zero, "ZeroTrainer")
        if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes <= 0:
            raise ValueError(f"ZeroTrainer: bucket_bytes must be a positive int, got {bucket_bytes!r}")
        self._compression = check_compression(compression_params, self._zero, f"ZeroTrainer(zero={zero})")
        self._bucket_bytes = bucket_bytes
        self._measure = measure_gradient_bytes
        self._grad_buckets: GradientBuckets | None = None  # zero=2: reduced during backward
        group.init()
        self._pg = process_group
        self._dp = dist.get_world_size(process_group)
        self._dp_rank = dist.get_rank(process_group)
        self._owners: dict[int, int] | None = None  # parameter index -> owning rank in the group
        self._shards: ParameterShards | None = None  # zero=3: this rank's slices
        self._grad_shards: dict[int, torch.Tensor] = {}  # zero=3: reduced slices of the gradients
        # zero=1: the gradients are summed by an allreduce store on the group: uncompressed in buckets
        # started during backward (its hooks, as a plain Trainer's), compressed by its pushpull
        self._grad_store: AllreduceKVStore | None = None
        self._store_stats = {"reduced": 0, "overlapped": 0}  # zero=1's buckets, as reduce_stats says
        self._store_seen = 0
        if self._zero == 1:
            self._grad_store = AllreduceKVStore(process_group=process_group)
            self._grad_store.backward_passes_per_step = backward_passes_per_step
            if self._compression is not None:
                self._grad_store.set_gradient_compression(self._compression)
        super().__init__(params, optimizer, optimizer_params, kvstore=None, update_on_kvstore=False)
        name = type(self._optimizer).__name__.lower()
        if self._zero == 3 and name in LAYERWISE_OPTIMIZERS:
            raise MXNetError(f"ZeroTrainer(zero=3): optimizer {name!r} scales each step by a whole "
                             "parameter's norm, but each rank updates a slice: use zero=2, or an "
                             "elementwise optimizer (sgd, adam, ...)")
        if all(p._data is not None for p in self._params):
            self._plan()  # now, before the first forward: every rank starts from the same weights

    @property
    def compression(self) -> Compressor | None:
        """The gradient compressor (None: the gradients are reduced uncompressed)."""
        return self._compression

    @property
    def kvstore(self) -> AllreduceKVStore | None:  # type: ignore[override]
        """None (the ranks reduce with their own collectives), or with zero=1 and compression the
        'allreduce' store on the data-parallel group that sums the gradients: AMP's loss scaling
        finds its compressor there and unscales and checks the gradients before they are compressed."""
        return self._grad_store if self._compression is not None else None

    @property
    def zero(self) -> int:
        """The ZeRO stage (1: optimizer states sharded; 2: + gradients; 3: + parameters)."""
        return self._zero

    def slice_bytes(self) -> int:
        """Bytes of parameter slices this rank holds between steps (zero=3; 0 for the other stages,
        whose parameters stay whole on every rank)."""
        return self._shards.held_bytes() if self._shards is not None else 0

    def gradient_bytes(self) -> int:
        """Bytes of gradients this rank holds now (zero=2: its reduced ones and the buckets being
        filled or reduced; zero=3: also its reduced slices)."""
        if self._grad_buckets is not None:
            return self._grad_buckets.held_bytes()
        whole = [d.grad for p in self._params if p._data is not None for d in p._data if d.grad is not None]
        return sum(g.numel() * g.element_size() for g in whole + list(self._grad_shards.values()))

    def gather_stats(self) -> dict[str, int] | None:
        """zero=3: the parameter all-gathers started so far: ``gathers`` (waited for at once),
        ``prefetched`` (started a block ahead, in forward and backward order) and ``unused``
        (prefetched for a block that did not run; freed at the step); None for the other stages."""
        return dict(self._shards.stats) if self._shards is not None else None

    def reduce_stats(self) -> dict[str, int] | None:
        """The gradient buckets ``reduced`` so far and how many of them ``overlapped`` the backward:
        zero=2, still reducing while backward filled the next bucket; zero=1 (uncompressed), started
        before the step (by the store's hooks, or when backward ended).  None for zero=3 and for a
        compressing zero=1 (its store pushpulls at the step)."""
        if self._grad_buckets is not None:
            return dict(self._grad_buckets.stats)
        return dict(self._store_stats) if self._zero == 1 and self._compression is None else None

    @property
    def peak_gradient_bytes(self) -> int | None:
        """The most :meth:`gradient_bytes` seen inside the gradient hooks (zero=2 created with
        ``measure_gradient_bytes=True``; None otherwise)."""
        b = self._grad_buckets
        return b.peak_bytes if b is not None and b.measure else None

    def owner(self, param: Parameter) -> int:
        """The rank (in the data-parallel group) that updates ``param`` (zero 1 and 2; with
        zero=3 every rank updates its slice of every parameter)."""
        if self._zero == 3:
            raise MXNetError("ZeroTrainer.owner: with zero=3 every rank owns a slice of every parameter")
        return self._plan()[self._param2idx[id(param)]]

    @contextlib.contextmanager
    def full_parameters(self, writeback: bool = True) -> Iterator[None]:
        """The whole parameters inside (zero=3 gathers them: every rank of the group enters;
        with ``writeback`` changes made inside, e.g. ``net.load_parameters``, are kept)."""
        self._plan()
        if self._shards is None:
            yield
            return
        with self._shards.whole(writeback):
            yield

    def _global(self, r: int) -> int:
        return r if self._pg is None else dist.get_global_rank(self._pg, r)

    def _plan(self) -> dict[int, int]:
        """Owners of the trainable parameters; made once their shapes are known, when the initial
        values are also made the same on every rank."""
        if self._owners is None:
            trainable = [(i, p) for i, p in enumerate(self._params) if p._grad_req != "null"]
            for _, p in trainable:
                if p._data is None:
                    p._check()  # the parameter's own error: not initialized
                if len(p._data) != 1:  # type: ignore[arg-type]
                    raise MXNetError(f"ZeroTrainer: parameter {p.name!r} lives on {len(p._data)} "  # type: ignore[arg-type]
                                     "contexts; sharded data parallelism takes one context per process")
                if self._zero == 3 and p._grad_req == "add":
                    raise MXNetError(f"ZeroTrainer(zero=3): parameter {p.name!r} has grad_req='add', but "
                                     "zero=3 keeps only a slice of each reduced gradient: use 'write', "
                                     "or zero=2 to accumulate gradients over several backward passes")
            unshard([p for _, p in trainable])  # an earlier zero=3 trainer's slices: whole again
            unhook([p for _, p in trainable])  # an earlier zero=2 trainer's gradient hooks
            for old in dict.fromkeys(_STORE_HOOKED.pop(p) for _, p in trainable if p in _STORE_HOOKED):
                old.close()  # an earlier zero=1 trainer's store's hooks
            owners = shard_owners([p._data[0].numel() for _, p in trainable], self._dp)  # type: ignore[index]
            self._owners = {i: r for (i, _), r in zip(trainable, owners)}
            with torch.no_grad(), span("zero.broadcast_initial"):
                self._broadcast({i: 0 for i in range(len(self._params)) if self._params[i]._data is not None})
            wire = self._compression if isinstance(self._compression, CastCompressor) else None
            if self._zero == 3:
                self._shards = ParameterShards(dict(trainable), self._pg, self._dp, self._dp_rank,
                                               wire=wire)
            elif self._zero == 1 and trainable and self._compression is None:
                assert self._grad_store is not None
                self._grad_store.attach_gradient_hooks([p for _, p in trainable], self._bucket_bytes)
                for _, p in trainable:
                    _STORE_HOOKED[p] = self._grad_store
            elif self._zero == 2 and trainable:
                self._grad_buckets = GradientBuckets(dict(trainable), self._owners, self._pg, self._dp_rank,
                                                     self._global, self._bucket_bytes, self._measure,
                                                     wire=wire)
        return self._owners

    def _buckets(self, indices: dict[int, int]) -> list[tuple[int, list[torch.Tensor]]]:
        """``indices`` (parameter -> rank) grouped by rank and dtype, in order: (rank, weights)."""
        out: dict[tuple[int, torch.dtype], list[torch.Tensor]] = {}
        for i in sorted(indices):
            w = self._params[i]._data[0]  # type: ignore[index]
            out.setdefault((indices[i], w.dtype), []).append(w)
        return [(r, ws) for (r, _), ws in out.items()]

    def _broadcast(self, indices: dict[int, int]) -> None:
        """Give every rank the weights of ``indices`` from the rank each maps to (flat per bucket)."""
        for r, ws in self._buckets(indices):
            flat = torch.cat([w.detach().reshape(-1) for w in ws])
            dist.broadcast(flat, src=self._global(r), group=self._pg)
            if r != self._dp_rank:
                _unflatten_into(flat, ws)

    def _gather_updated(self) -> None:
        """Give every rank every owner's updated parameters: per dtype, one all-gather of each
        rank's parameters (flat, in index order) padded to the largest rank's share.  (One
        broadcast per owner would send each share ceil(log2 dp) times from its owner; the ring
        all-gather sends each rank's padded share once per link.)"""
        per_dtype: dict[torch.dtype, list[list[torch.Tensor]]] = {}
        for i, r in sorted(self._plan().items()):
            w = self._params[i]._data[0]  # type: ignore[index]
            per_dtype.setdefault(w.dtype, [[] for _ in range(self._dp)])[r].append(w)
        for dtype, per_rank in per_dtype.items():  # the same order on every rank
            sizes = [sum(w.numel() for w in ws) for ws in per_rank]
            width = max(sizes)
            mine = per_rank[self._dp_rank]
            device = next(w.device for ws in per_rank for w in ws)
            send = torch.zeros(width, dtype=dtype, device=device)
            if mine:
                torch.cat([w.detach().reshape(-1) for w in mine], out=send[:sizes[self._dp_rank]])
            table = torch.empty(width * self._dp, dtype=dtype, device=device)
            _all_gather(table, send, group=self._pg)
            for r, ws in enumerate(per_rank):
                if r != self._dp_rank and ws:
                    _unflatten_into(table[r * width:r * width + sizes[r]], ws)

    # ---- the step --------------------------------------------------------------------
    def reduce_gradients(self) -> None:
        owners = self._plan()
        if self._shards is not None:
            self._shards.free_all()  # backward is over: what a block left gathered goes
            self._grad_shards = self._shards.reduce_scatter_grads()
            if self._update_hooks:
                self._agree_on_overflow(list(self._grad_shards.values()))
            return
        if self._grad_buckets is not None:  # zero=2: started during backward; the rest now
            self._grad_buckets.finish()
        elif self._compression is not None:
            self._reduce_compressed()
        else:
            self._reduce_overlapped()
        if self._update_hooks:  # the hooks see this rank's own gradients only
            self._agree_on_overflow([g for i, r in owners.items() if r == self._dp_rank
                                     for g in [self._params[i]._data[0].grad] if g is not None])  # type: ignore[index]

    def _reduce_overlapped(self) -> None:
        """zero=1: every rank gets the sums, from the store's buckets (started during backward)."""
        store = self._grad_store
        assert store is not None
        with torch.no_grad(), span("zero.reduce_gradients", stage=self._zero):
            during = store.gradient_allreduces
            store.synchronize_gradients(self._trainable())
            self._store_stats["overlapped"] += during - self._store_seen
            self._store_stats["reduced"] += store.gradient_allreduces - self._store_seen
            self._store_seen = store.gradient_allreduces

    def _trainable(self) -> list[Parameter]:
        return [self._params[i] for i in sorted(self._plan())]

    def _reduce_compressed(self) -> None:
        """zero=1 with compression: every rank gets the sums through the store's compressed pushpull
        (keys: the parameters' indices, as a Trainer's; the residuals are kept per key)."""
        assert self._grad_store is not None and self._compression is not None
        grads = [(i, g) for i in sorted(self._plan()) for g in [self._params[i]._data[0].grad]  # type: ignore[index]
                 if g is not None]
        keys = [i for i, _ in grads]
        values = [[g] for _, g in grads]
        with torch.no_grad(), span("zero.reduce_gradients", stage=self._zero,
                                   compressor=self._compression.name):
            if keys:
                self._grad_store.pushpull(keys, values, out=values)

    def _compressor(self) -> Any:
        return self._compression

    def _compression_worker(self) -> tuple[int, int]:
        return self._dp_rank, self._dp

    def _agree_on_overflow(self, mine: list[torch.Tensor]) -> None:
        """Update hooks (AMP's loss scaling) see only this rank's share of the gradients, but every
        rank must skip or take the step alike: where another rank's share holds an inf or a nan,
        one of this rank's gradients is set to nan (the step is skipped, its gradients discarded)."""
        local = any(not bool(torch.isfinite(g).all()) for g in mine)
        flag = torch.tensor([int(local)], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._pg)
        if flag.item() and not local and mine:
            mine[0].fill_(float("nan"))

    def _live(self, ignore_stale_grad: bool) -> list[tuple[int, Parameter]]:
        """The parameters this rank updates: its own (zero=3: all, by slices), with their reduced
        gradients."""
        owners = self._plan()
        out = []
        for i, r in sorted(owners.items()):
            if r != self._dp_rank and self._shards is None:
                continue
            p = self._params[i]
            if (i not in self._grad_shards if self._shards is not None else p._data[0].grad is None):  # type: ignore[index]
                if ignore_stale_grad:
                    continue
                raise StaleGradientError(
                    f"gradient of parameter {self._param_names[i]!r} was not computed by backward since "
                    "the last step: it did not take part in the loss. Call step(..., "
                    "ignore_stale_grad=True) to skip such parameters, or set its grad_req to 'null'")
            out.append((i, p))
        return out

    def _run_update_hook(self, ignore_stale_grad: bool) -> bool:
        if self._shards is not None:
            self._live(ignore_stale_grad)  # the stale-gradient error first, as a Trainer's
            factor = self._update_hooks.before_update(self, list(self._grad_shards.values()))
            if factor is None:
                self._grad_shards = {}  # skipped: this step's gradients are discarded
                return False
            self._optimizer.rescale_grad *= float(factor)
            return True
        updated = super()._run_update_hook(ignore_stale_grad)
        if not updated:  # skipped: the other ranks' gradients are discarded too
            self._drop_others_grads(zero_add=True)
        return updated

    def _update(self, ignore_stale_grad: bool = False) -> None:
        if self._shards is not None:
            live = [i for i, _ in self._live(ignore_stale_grad)]
            shards = self._shards.shards
            with torch.no_grad(), span("zero.update_slices", stage=3):
                self._updaters[0](live, [self._grad_shards[i] for i in live], [shards[i] for i in live])
            self._grad_shards = {}
            return
        super()._update(ignore_stale_grad)
        with torch.no_grad(), span("zero.gather_parameters", stage=self._zero):
            self._gather_updated()
        self._drop_others_grads(zero_add=False)  # 'write': used up by this step

    def _drop_others_grads(self, zero_add: bool) -> None:
        """Clear ('write') the gradients of the parameters other ranks own, or zero them
        ('add', when a step was skipped)."""
        for i, r in self._plan().items():
            g = self._params[i]._data[0].grad  # type: ignore[index]
            if r == self._dp_rank or g is None:
                continue
            if self._params[i]._grad_req == "write":
                self._params[i]._data[0].grad = None  # type: ignore[index]
            elif zero_add:
                g.zero_()


def _unflatten_into(flat: torch.Tensor, tensors: list[torch.Tensor]) -> None:
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset:offset + n].view_as(t))
        offset += n
