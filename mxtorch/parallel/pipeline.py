"""Pipeline-parallel Gluon networks on ``torch.distributed.pipelining``'s schedules.

:func:`parallelize` cuts a network into stages (:mod:`.split`), keeps on each rank only its
stages' parameters, and returns a :class:`PipelineNet`: ``train_step`` runs one batch through
PyTorch's schedule (GPipe, 1F1B, interleaved 1F1B, interleaved zero-bubble) with the loss
*summed* over samples and gradients *not* rescaled by the number of micro-batches, so the
accumulated gradients equal ``loss_fn(net(x), y).backward()`` over the whole local batch and
``trainer.step(global_batch)`` gives the single-process update (MXNet's rule).

What crosses the network: activations and gradients (tensors, by torch's stages), and this
module's own headers as int64 tensors (stage boundary shapes, parameter shapes for
``save_parameters``).  Nothing is pickled: stage metadata is given to ``PipelineStage``
statically (torch then never exchanges pickled metadata).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from .. import autograd
from .._dtype import to_torch_dtype
from ..amp.amp import amp_hook_of
from ..amp.amp import is_initialized as amp_is_initialized
from ..base import MXNetError
from ..distributed import group
from ..gluon.parameter_core import Parameter
from ..gluon.parameter_dict import ParameterDict
from ..gluon.serialization import load_named, load_tensors, save_tensors
from ..kvstore.base import Capability
from .config import Mesh, ParallelConfig
from .split import Unit, chain_units, checkpointed, partition, split_at, unit_costs
from .tensor import ShardInfo, auto_plan, check_plan, gather_full, shard_units

__all__ = ["parallelize", "PipelineNet", "SCHEDULES"]

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zero_bubble")

_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32,
           torch.uint8, torch.int8, torch.bool)
_MAX_DIMS = 8


def _mean_of_copies(p: Parameter) -> torch.Tensor:
    """The value saved for ``p``: the mean of its copies (equal unless updated apart), on the CPU."""
    data = p.list_data()
    if len(data) == 1:
        return data[0].detach().cpu()
    return torch.stack([d.detach().cpu() for d in data]).mean(0).to(data[0].dtype)


class _Stage(torch.nn.Module):
    """A run of consecutive units; its forward feeds each unit's output to the next."""

    def __init__(self, units: Sequence[Unit], checkpoint: bool = False) -> None:
        super().__init__()
        self.paths = [u.path for u in units]
        self.units = torch.nn.ModuleList([u.block for u in units])
        self.checkpoint = checkpoint

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint and torch.is_grad_enabled():
            # activation checkpointing: keep each layer's input only, recompute its inside in backward
            for u in self.units:
                x = checkpointed(u, x)
            return x
        for u in self.units:
            x = u(x)
        return x

    def named_gluon_params(self) -> dict[str, Parameter]:
        from ..gluon.block import params_by_path

        out: dict[str, Parameter] = {}
        for path, u in zip(self.paths, self.units):
            out.update(params_by_path(u, path))
        return out


def _header(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    if len(shape) > _MAX_DIMS:
        raise MXNetError(f"pipeline: a stage boundary tensor has {len(shape)} dimensions "
                         f"(at most {_MAX_DIMS})")
    if dtype not in _DTYPES:
        raise MXNetError(f"pipeline: stage boundary dtype {dtype} is not supported ({_DTYPES})")
    h = torch.zeros(2 + _MAX_DIMS, dtype=torch.int64)
    h[0], h[1] = _DTYPES.index(dtype), len(shape)
    h[2:2 + len(shape)] = torch.tensor(list(shape), dtype=torch.int64)
    return h


def _unheader(h: torch.Tensor) -> tuple[tuple[int, ...], torch.dtype]:
    code, nd = int(h[0]), int(h[1])
    if not (0 <= code < len(_DTYPES) and 0 <= nd <= _MAX_DIMS):
        raise MXNetError(f"pipeline: received a malformed shape header {h.tolist()} "
                         "(do the peers run different code?)")
    return tuple(int(v) for v in h[2:2 + nd]), _DTYPES[code]


def _fingerprint(named: dict[str, Parameter]) -> torch.Tensor:
    """[structure digest, value digest] of a network's parameters (identical on agreeing ranks)."""
    desc = repr([(k, tuple(p.shape or ()), str(p.dtype)) for k, p in named.items()]).encode()
    s = int.from_bytes(hashlib.blake2b(desc, digest_size=7).digest(), "little")
    h = hashlib.blake2b(digest_size=7)
    for p in named.values():
        if p.is_initialized:
            h.update(p.list_data()[0].detach().to("cpu", torch.float64).contiguous().numpy().tobytes())
    v = int.from_bytes(h.digest(), "little")
    return torch.tensor([s, v], dtype=torch.int64)


def _pair_spans(units: Sequence[Unit], plan: dict[str, str]) -> list[tuple[int, int]]:
    """(first, last) unit index of each column -> row tensor-parallel pair."""
    spans = []
    start = None
    for i, u in enumerate(units):
        style = plan.get(u.path)
        if style == "colwise":
            start = i
        elif style == "rowwise" and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _atoms(n: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) runs of units that cannot be cut: each pair span, and every other unit alone."""
    out = []
    i = 0
    for a, b in spans + [(n, n)]:
        while i < a:
            out.append((i, i + 1))
            i += 1
        if a < n:
            out.append((a, b + 1))
            i = b + 1
    return out


class PipelineNet:
    """A network split into pipeline stages across the ranks of a :class:`ParallelConfig` mesh."""

    def __init__(self, net: Any, cfg: ParallelConfig, micro_batches: int, schedule: str,
                 split_points: Sequence[str] | None, stages_per_rank: int, sample_input: torch.Tensor | None,
                 kvstore: Any, tp_plan: Any = "auto", checkpoint_activations: bool = False) -> None:
        if schedule not in SCHEDULES:
            raise MXNetError(f"parallelize: unknown schedule {schedule!r}; use one of {SCHEDULES}")
        if not isinstance(micro_batches, int) or micro_batches < 1:
            raise MXNetError(f"parallelize: micro_batches must be a positive integer, got {micro_batches!r}")
        looped = schedule in ("interleaved", "zero_bubble")
        if not looped and stages_per_rank != 1:
            raise MXNetError(f"parallelize: stages_per_rank={stages_per_rank} needs schedule 'interleaved' "
                             f"or 'zero_bubble' ({schedule!r} runs one stage per rank)")
        if stages_per_rank < 1:
            raise MXNetError(f"parallelize: stages_per_rank must be >= 1, got {stages_per_rank}")
        self.net = net
        self.cfg = cfg
        self.micro_batches = micro_batches
        self.schedule = schedule
        self.mesh = Mesh(cfg)  # checks the world size first: the most basic mistake
        if schedule != "gpipe" and micro_batches < cfg.pp:
            raise MXNetError(f"parallelize: schedule {schedule!r} needs at least as many micro-batches "
                             f"as pipeline ranks (micro_batches={micro_batches}, pp={cfg.pp}); raise "
                             "micro_batches or use schedule='gpipe'")
        pp = cfg.pp
        self.num_stages = pp * stages_per_rank
        self._check_same_model(net)

        units = chain_units(net, sample_input)
        plan = self._tp_plan(units, tp_plan)
        spans = _pair_spans(units, plan)  # a column/row pair stays in one stage
        if split_points is not None:
            starts = split_at(units, list(split_points), self.num_stages)
            for a, b in spans:
                if any(a < st <= b for st in starts):
                    raise MXNetError(f"parallelize: a split point falls inside the tensor-parallel pair "
                                     f"{units[a].path!r}..{units[b].path!r}: split before or after it")
        else:
            costs = self._agreed_costs(units, sample_input)
            atoms = _atoms(len(units), spans)
            cut = partition([sum(costs[i] for i in range(a, b)) for a, b in atoms], self.num_stages)
            starts = [atoms[i][0] for i in cut]
        bounds = list(zip(starts, starts[1:] + [len(units)]))
        self.stage_paths = [[u.path for u in units[a:b]] for a, b in bounds]
        # looped placement: stage s on pipeline rank s % pp (torch's convention)
        self.stages = [s for s in range(self.num_stages) if s % pp == self.mesh.pp_rank]
        self._modules = {s: _Stage(units[bounds[s][0]:bounds[s][1]], checkpoint_activations)
                         for s in self.stages}
        self._own: dict[str, Parameter] = {}
        for s in self.stages:
            self._own.update(self._modules[s].named_gluon_params())
        self._full_meta = self._describe(units, bounds)
        self._check_no_sharing()
        self._release_others(units, bounds)
        first = next(iter(self._own_params().values()), None)
        have = first is not None and first.is_initialized
        self.device = first.data().device if have else torch.device("cpu")  # type: ignore[union-attr]
        self.tp_plan = plan
        self._shards: dict[int, ShardInfo] = {}
        if cfg.tp > 1:
            mine = [u for s in self.stages for u in units[bounds[s][0]:bounds[s][1]]]
            self._shards = shard_units(mine, plan, self.mesh.tp_mesh(self.device.type), cfg.tp,
                                       self.mesh.tp_rank)
        self._runs: dict[Any, Any] = {}
        self._loss_fn: Callable[..., Any] | None = None
        self._loss_scale = 1.0
        # with zero > 0 the stage's ZeroTrainer (``self.trainer``) reduces over the dp group itself
        self._kvstore = self._make_store(kvstore) if not cfg.zero else None
        self._stage_trainer: Any = None

    # ---- description -------------------------------------------------------------------
    @property
    def dp_rank(self) -> int:
        return self.mesh.dp_rank

    @property
    def pp_rank(self) -> int:
        return self.mesh.pp_rank

    @property
    def stage(self) -> int:
        """The (first) pipeline stage this rank runs."""
        return self.stages[0]

    @property
    def kvstore(self) -> Any:
        """The data-parallel group's store (sums gradients over the ranks holding this stage)."""
        if self.cfg.zero and self.cfg.dp > 1:  # a Trainer on no store would not sum over the replicas
            raise MXNetError(f"PipelineNet.kvstore: with zero={self.cfg.zero} the data-parallel ranks reduce "
                             "through their ZeroTrainer, not a store: use pnet.trainer(optimizer, params)")
        return self._kvstore

    def collect_params(self, select: str | None = None) -> ParameterDict:
        """This rank's parameters, under the names the whole ``net.collect_params()`` gives them."""
        own = {id(p) for p in self._own_params().values()}
        out = ParameterDict()
        for name, p in self.net.collect_params(select).items():
            if id(p) in own:
                out[name] = p
        return out

    def param_bytes(self) -> int:
        """Bytes of parameters this rank holds (with zero=3: its slices between steps)."""
        held = sum(d.numel() * d.element_size() for p in self._own_params().values() if p.is_initialized
                   for d in p.list_data())
        slices = getattr(self._stage_trainer, "slice_bytes", None)  # a ZeroTrainer's (zero=3)
        return held + (slices() if slices is not None else 0)

    def trainer(self, optimizer: Any, optimizer_params: dict[str, Any] | None = None,
                compression_params: dict[str, Any] | None = None) -> Any:
        """The Trainer of this rank's parameters: with ``cfg.zero`` a ZeroTrainer sharding them over
        the stage's data-parallel ranks (:meth:`Mesh.trainer`), else a Trainer on :attr:`kvstore`;
        ``compression_params`` go to either."""
        from ..gluon.trainer import Trainer

        if self.cfg.zero:
            self._stage_trainer = self.mesh.trainer(self.collect_params(), optimizer, optimizer_params,
                                                    compression_params, self.micro_batches)
        else:
            self._stage_trainer = Trainer(self.collect_params(), optimizer, optimizer_params,
                                          kvstore=self._kvstore, compression_params=compression_params)
        return self._stage_trainer

    def _whole(self, writeback: bool) -> Any:
        """Every own parameter whole inside (a zero=3 trainer gathers them) for the model's file."""
        import contextlib

        full = getattr(self._stage_trainer, "full_parameters", None)
        return full(writeback) if full is not None else contextlib.nullcontext()

    def __repr__(self) -> str:
        return (f"PipelineNet({type(self.net).__name__}, dp={self.cfg.dp}, pp={self.cfg.pp}, "
                f"schedule={self.schedule!r}, micro_batches={self.micro_batches}, stages={self.stages} of "
                f"{self.num_stages}: {[self.stage_paths[s] for s in self.stages]})")

    # ---- set-up ------------------------------------------------------------------------
    def _check_same_model(self, net: Any) -> None:
        mine = _fingerprint(net._collect_params_with_prefix())
        every = [torch.empty_like(mine) for _ in range(self.cfg.world_size)]
        dist.all_gather(every, mine)
        for r, fp in enumerate(every):
            if int(fp[0]) != int(every[0][0]):
                raise MXNetError(f"parallelize: rank {r}'s network has other layers or shapes than rank 0's: "
                                 "build the same network on every rank")
            if int(fp[1]) != int(every[0][1]):
                raise MXNetError(f"parallelize: rank {r}'s parameters differ from rank 0's: initialize "
                                 "with the same seed (mx.random.seed / torch.manual_seed) on every rank, or "
                                 "load the same parameter file, before parallelize")

    def _tp_plan(self, units: list[Unit], tp_plan: Any) -> dict[str, str]:
        if self.cfg.tp == 1:
            return {}
        if tp_plan is None or tp_plan == "auto":
            plan = auto_plan(units, self.cfg.tp)
            if not plan:
                raise MXNetError(f"parallelize: tp={self.cfg.tp} but the network has nothing to split over "
                                 f"{self.cfg.tp} ranks (a Dense/convolution pair, an Embedding, an "
                                 "RNN/LSTM/GRU layer, each dividing by tp); give tp_plan={name: style} or "
                                 "use tp=1")
        elif isinstance(tp_plan, dict):
            plan = {str(k): str(v) for k, v in tp_plan.items()}
        else:
            raise MXNetError(f"parallelize: tp_plan must be 'auto' or a dict {{layer: style}}, "
                             f"got {tp_plan!r}")
        check_plan(units, plan)
        return plan

    def _agreed_costs(self, units: list[Unit], sample: torch.Tensor | None) -> list[float]:
        """Per-unit costs measured on rank 0 and broadcast, so every rank splits alike."""
        if sample is not None:
            if self.mesh.rank == 0:
                costs = torch.tensor(unit_costs(units, sample), dtype=torch.float64)
            else:
                costs = torch.zeros(len(units), dtype=torch.float64)
            dist.broadcast(costs, src=0)
            return costs.tolist()
        # no sample: parameter counts (a layer without parameters counts as a small one)
        from ..gluon.block import params_by_path

        out = []
        for u in units:
            n = sum(math.prod(p.shape or ()) for p in params_by_path(u.block).values() if p.shape)
            out.append(float(max(n, 1)))
        return out

    def _describe(self, units: list[Unit], bounds: list[tuple[int, int]]) -> list[tuple[int, str, Parameter]]:
        out = []
        for s, (a, b) in enumerate(bounds):
            for name, p in _Stage(units[a:b]).named_gluon_params().items():
                out.append((s, name, p))
        return out

    def _check_no_sharing(self) -> None:
        where: dict[int, tuple[int, str]] = {}
        for s, name, p in self._full_meta:
            if id(p) in where and where[id(p)][0] != s:
                raise MXNetError(f"parallelize: parameter {name!r} is used by stages {where[id(p)][0]} and "
                                 f"{s} ({where[id(p)][1]!r}); pipeline stages cannot share parameters: "
                                 "choose split points that keep its users in one stage")
            where[id(p)] = (s, name)

    def _release_others(self, units: list[Unit], bounds: list[tuple[int, int]]) -> None:
        """Drop the data of other stages' parameters (their shapes stay): the memory is this rank's share."""
        own = {id(p) for p in self._own_params().values()}
        self._shapes = {name: (tuple(p.shape or ()), to_torch_dtype(p.dtype))
                        for _, name, p in self._full_meta}
        for _, _, p in self._full_meta:
            if id(p) not in own and p.is_initialized:
                p.release_data()

    def _own_params(self) -> dict[str, Parameter]:
        """This rank's stages' parameters by attribute path (the same objects for the job's life)."""
        return self._own

    def _make_store(self, kvstore: Any) -> Any:
        if kvstore is None:
            return None
        if kvstore not in ("horovod", "allreduce"):  # the servers' module (and ZeroMQ) only when asked for
            from ..kvstore.ps.worker import STORE_NAMES, DistKVStore

            if isinstance(kvstore, DistKVStore) or kvstore in STORE_NAMES:
                return self._server_store(kvstore)
        if not isinstance(kvstore, str):
            raise MXNetError("parallelize: kvstore must be a store type name ('horovod', 'allreduce', "
                             "'dist_sync', 'dist_async'), the job's dist store, or None")
        from ..kvstore.allreduce.store import AllreduceKVStore

        if kvstore not in ("horovod", "allreduce"):
            raise MXNetError(f"parallelize: kvstore {kvstore!r} is not available for pipelines; use "
                             "'horovod' (allreduce over the stage's data-parallel ranks) or 'dist_sync' "
                             "(parameter servers)")
        store = AllreduceKVStore(kvstore, process_group=self.mesh.dp_group)
        # each micro-batch's backward accumulates into the gradients: the Trainer's hooks reduce
        # them after the last one, once per step (not after the first, to be redone at the step)
        store.backward_passes_per_step = self.micro_batches
        return store

    def _server_store(self, kvstore: Any) -> Any:
        """The parameter servers' store as this stage's data-parallel ranks see it: their own keys
        (``pp<r>/``, ``tp<t>/`` prefixes), sync rounds over these ranks only (a group view)."""
        from ..kvstore import create
        from ..kvstore.ps.worker import DistKVStore

        base = create(kvstore) if isinstance(kvstore, str) else kvstore
        if not isinstance(base, DistKVStore):
            raise MXNetError(f"parallelize: kvstore {kvstore!r} did not give a parameter-server store")
        mine = torch.tensor([base.rank], dtype=torch.int64)
        if self.cfg.dp > 1:
            got = [torch.zeros(1, dtype=torch.int64) for _ in range(self.cfg.dp)]
            dist.all_gather(got, mine, group=self.mesh.dp_group)
            ranks = [int(t) for t in got]
        else:
            ranks = [int(mine)]
        if len(set(ranks)) != len(ranks):
            raise MXNetError(f"parallelize: the data-parallel ranks of stage {self.stage} are the same "
                             f"parameter-server worker(s) {ranks}: start one store worker per process")
        prefix = f"pp{self.mesh.pp_rank}/" + (f"tp{self.mesh.tp_rank}/" if self.cfg.tp > 1 else "")
        return base.group_view(ranks, prefix)

    # ---- the pipeline runs -------------------------------------------------------------
    def _owner(self, stage: int) -> int:
        """Global rank running ``stage`` in this rank's pipeline."""
        return self.mesh.pp_ranks[stage % self.cfg.pp]

    def _relay_shapes(self, mb_shape: tuple[int, ...], dtype: torch.dtype) -> dict[int, Any]:
        """Each stage's input and output (shape, dtype) for one micro-batch; no pickles on the wire.

        The owner of stage s receives its input's header from stage s-1's owner, runs its stage on
        zeros (no gradients, inference behaviour: running statistics stay), and sends its output's
        header on; the last output's header is then broadcast to the whole pipeline.
        """
        metas: dict[int, Any] = {}
        prev: tuple[tuple[int, ...], torch.dtype] = (mb_shape, dtype)
        for s in range(self.num_stages):
            mine = s in self._modules
            if s > 0 and mine and self._owner(s - 1) != self.mesh.rank:
                h = torch.zeros(2 + _MAX_DIMS, dtype=torch.int64)
                dist.recv(h, src=self._owner(s - 1), group=self.mesh.pp_group)
                prev = _unheader(h)
            if mine:
                with torch.no_grad(), autograd.predict_mode():
                    out = self._modules[s](torch.zeros(prev[0], dtype=prev[1], device=self.device))
                if not isinstance(out, torch.Tensor):
                    raise MXNetError(f"pipeline: stage {s} ({self.stage_paths[s]}) returns "
                                     f"{type(out).__name__}, not one tensor; choose other split points")
                metas[s] = (prev, (tuple(out.shape), out.dtype))
                prev = (tuple(out.shape), out.dtype)
                if s + 1 < self.num_stages and self._owner(s + 1) != self.mesh.rank:
                    dist.send(_header(*prev), dst=self._owner(s + 1), group=self.mesh.pp_group)
        last = self.num_stages - 1
        h = _header(*metas[last][1]) if last in metas else torch.zeros(2 + _MAX_DIMS, dtype=torch.int64)
        dist.broadcast(h, src=self._owner(last), group=self.mesh.pp_group)
        self._out_meta = _unheader(h)
        return metas

    def _run(self, x: torch.Tensor, n_micro: int, train: bool) -> Any:
        from torch.distributed.pipelining.schedules import (
            Schedule1F1B,
            ScheduleGPipe,
            ScheduleInterleaved1F1B,
            ScheduleInterleavedZeroBubble,
        )

        from .traced_stage import TracedStage  # torch's stage, its sends and receives spanned

        mb_shape = (x.shape[0] // n_micro, *x.shape[1:])
        key = (mb_shape, x.dtype, n_micro, train)
        if key in self._runs:
            return self._runs[key]
        metas = self._relay_shapes(mb_shape, x.dtype)
        stages: list[Any] = []
        for s in self.stages:
            (ishape, idt), (oshape, odt) = metas[s]
            # torch reads requires_grad from these examples: received activations need gradients
            # (their owner waits for them) except the net's input
            grad_in = train and s > 0 and idt.is_floating_point
            stages.append(TracedStage(
                self._modules[s], s, self.num_stages, self.device,
                input_args=torch.empty(ishape, dtype=idt, device=self.device, requires_grad=grad_in),
                output_args=torch.empty(oshape, dtype=odt, device=self.device,
                                        requires_grad=train and odt.is_floating_point),
                group=self.mesh.pp_group))
        loss = self._loss_sum if train else None
        sched: Any
        if self.schedule == "gpipe":
            sched = ScheduleGPipe(stages[0], n_micro, loss_fn=loss, scale_grads=False)
        elif self.schedule == "1f1b":
            sched = Schedule1F1B(stages[0], n_micro, loss_fn=loss, scale_grads=False)
        elif self.schedule == "interleaved":
            sched = ScheduleInterleaved1F1B(stages, n_micro, loss_fn=loss, scale_grads=False)
        else:
            sched = ScheduleInterleavedZeroBubble(stages, n_micro, loss_fn=loss, scale_grads=False)
        self._runs[key] = sched
        return sched

    def _loss_sum(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        assert self._loss_fn is not None
        loss = self._loss_fn(out, target)
        loss = loss.sum() if loss.dim() else loss
        if self._loss_scale != 1.0:  # AMP: in float32 (a float16 loss times 2**16 overflows by itself)
            loss = loss.float() * self._loss_scale
        return loss

    def _step(self, sched: Any, x: torch.Tensor, y: torch.Tensor | None, train: bool) -> Any:
        first, last = 0 in self.stages, (self.num_stages - 1) in self.stages
        args = (x,) if first else ()
        kw: dict[str, Any] = {}
        losses: list[torch.Tensor] = []
        if last and train:
            kw = {"target": y, "losses": losses}
        try:
            out = sched.step(*args, **kw) if train else sched.eval(*args)
        except (RuntimeError, dist.DistBackendError) as e:
            raise MXNetError(f"pipeline rank {self.mesh.rank} (stage(s) {self.stages}): the schedule failed: "
                             f"{group.explain(e)}") from e
        return out, losses

    def train_step(self, x: torch.Tensor, y: torch.Tensor, loss_fn: Callable[..., Any],
                   trainer: Any = None) -> float:
        """Forward and backward of this rank's share of a batch through the pipeline.

        Gradients accumulate into this rank's parameters (summed over micro-batches, as one
        backward of the whole batch would); returns the mean loss of the global batch (every
        data-parallel replica's share) on every rank: the last stage's replicas all-reduce [loss sum,
        samples] among themselves (two numbers, dp ranks) before broadcasting it to their pipeline;
        the other stages wait on nothing new.  With an asynchronous store (``dist_async``) replicas
        do not step together and each returns its own share's mean.  With AMP
        (``amp.init_trainer(trainer)``) pass ``trainer``: the loss is multiplied by its loss scale,
        and the ranks agree on an overflow, so that every stage skips the same steps and keeps the
        same scale.
        """
        n = self._check_batch(x, y)
        amp_hook = amp_hook_of(trainer) if trainer is not None else None
        if amp_hook is None:
            if amp_is_initialized() and trainer is None:
                raise MXNetError("pipeline: AMP is on: pass the Trainer (train_step(x, y, loss_fn, "
                                 "trainer=trainer)) so that the loss is scaled and stages agree on overflows")
        self._loss_fn = loss_fn
        self._loss_scale = amp_hook.scaler.loss_scale if amp_hook is not None else 1.0
        sched = self._run(x, self.micro_batches, train=True)
        with autograd.record():
            _, losses = self._step(sched, x.to(self.device), y.to(self.device), train=True)
        last = self.num_stages - 1
        # [loss sum, samples, overflowed ranks]
        total = torch.zeros(3, dtype=torch.float64)
        if last in self.stages:
            total[0] = float(sum(float(v.detach()) for v in losses)) / self._loss_scale
            total[1] = n
        if amp_hook is not None:  # every rank of the job skips the step if any rank overflowed
            grads = [d.grad for p in self._own_params().values() if p.is_initialized for d in p.list_data()
                     if d.grad is not None]
            flag = torch.tensor([float(amp_hook.scaler.has_overflow(grads))], dtype=torch.float64)
            dist.all_reduce(flag)
            total[2] = flag[0]
        if last in self.stages and self.cfg.dp > 1 and self._replicas_in_step():
            # the last stage's replicas sum their losses (a small all-reduce among dp ranks only)
            part = total[:2].clone()
            dist.all_reduce(part, group=self.mesh.dp_group)
            total[:2] = part
        dist.broadcast(total, src=self._owner(last), group=self.mesh.pp_group)
        if amp_hook is not None and float(total[2]) > 0:
            amp_hook.force_overflow()
        return float(total[0] / total[1])

    def _replicas_in_step(self) -> bool:
        """Whether the data-parallel replicas step together (so the loss can be their global mean)."""
        if self.cfg.dp == 1:
            return True
        store = self._kvstore
        return store is None or not store.is_capable(Capability.ASYNC)

    def _check_batch(self, x: torch.Tensor, y: torch.Tensor | None) -> int:
        if not isinstance(x, torch.Tensor):
            raise MXNetError(f"pipeline: the input must be one tensor, got {type(x).__name__}")
        n = int(x.shape[0])
        if n % self.micro_batches:
            raise MXNetError(f"pipeline: micro_batches={self.micro_batches} does not divide the local batch "
                             f"of {n} samples: use a batch size that is a multiple of it (or drop the last "
                             "partial batch: DataLoader(last_batch='discard'))")
        if y is not None and int(y.shape[0]) != n:
            raise MXNetError(f"pipeline: {n} inputs but {int(y.shape[0])} labels")
        return n

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Inference through the pipeline; the output is returned on every rank of it."""
        n = int(x.shape[0])
        n_micro = self.micro_batches if n % self.micro_batches == 0 else 1
        sched = self._run(x, n_micro, train=False)
        with torch.no_grad(), autograd.predict_mode():
            out, _ = self._step(sched, x.to(self.device), None, train=False)
        shape, dtype = self._out_meta
        last = self.num_stages - 1
        if last not in self.stages:
            out = torch.empty((n, *shape[1:]), dtype=dtype, device=self.device)
        else:
            out = out.contiguous()
        dist.broadcast(out, src=self._owner(last), group=self.mesh.pp_group)
        return out

    # ---- parameters files --------------------------------------------------------------
    def save_parameters(self, filename: str, format: str | None = None) -> None:
        """Write the whole (unpartitioned) model, as ``net.save_parameters`` would (the same
        ``format`` rule); call on every rank.

        The first rank of each stage sends its parameters to rank 0, which writes the file
        atomically; every rank returns once it is written.
        """
        world = self.mesh.rank
        cfg = self.cfg
        order = sorted(self._full_meta, key=lambda t: (t[0], t[1]))
        whole: dict[str, torch.Tensor] = {}
        with self._whole(writeback=False):  # whole tensors of this rank's stages (tp shards gathered)
            for s, name, p in order:
                if s in self._modules and self.mesh.dp_rank == 0:
                    t = _mean_of_copies(p)
                    info = self._shards.get(id(p))
                    whole[name] = gather_full(t, info, self.mesh.tp_group) if info is not None else t
        if world == 0:
            arrays: dict[str, torch.Tensor] = {}
            for s, name, _p in order:
                src = cfg.rank_of(0, s % cfg.pp, 0)
                if src == 0:
                    arrays[name] = whole[name]
                else:
                    shape, dtype = self._shapes[name]
                    buf = torch.empty(shape, dtype=dtype)
                    dist.recv(buf, src=src)
                    arrays[name] = buf
            save_tensors(os.fspath(filename), arrays, format=format)
        elif self.mesh.dp_rank == 0 and self.mesh.tp_rank == 0:
            for s, name, _p in order:
                if s in self._modules:
                    dist.send(whole[name].contiguous(), dst=0)
        group.barrier()

    def load_parameters(self, filename: str, allow_missing: bool = False, ignore_extra: bool = True) -> None:
        """Read this rank's stages' parameters from a whole-model file (from ``save_parameters`` of a
        pipeline with any ``pp``, or of the plain network)."""
        arrays = load_tensors(os.fspath(filename))
        own = self._own_params()
        for name, p in own.items():  # tensor-parallel layers take their shard of the whole tensor
            info = self._shards.get(id(p))
            if info is not None and name in arrays:
                if tuple(arrays[name].shape) != info.full_shape:
                    raise MXNetError(f"load_parameters: {name!r} in {os.fspath(filename)!r} has shape "
                                     f"{tuple(arrays[name].shape)}, the model's is {info.full_shape}")
                arrays[name] = info.local(arrays[name])
        with self._whole(writeback=True):
            load_named(own, arrays, repr(os.fspath(filename)), allow_missing=allow_missing,
                       ignore_extra=ignore_extra)


def parallelize(net: Any, cfg: ParallelConfig, micro_batches: int | None = None, schedule: str = "1f1b",
                split_points: Sequence[str] | None = None, stages_per_rank: int = 1,
                sample_input: torch.Tensor | None = None, kvstore: Any = "horovod",
                tp_plan: Any = "auto", checkpoint_activations: bool = False) -> PipelineNet:
    """Split ``net`` into ``cfg.pp * stages_per_rank`` pipeline stages over the job's ranks.

    Every rank calls it with the same, identically initialized network (checked).  With
    ``split_points=None`` stages are balanced by the forward+backward time of each layer measured
    on ``sample_input`` (one micro-batch) on rank 0, or by parameter counts without a sample;
    ``split_points`` names the first layer of each stage after the first.  The other stages'
    parameters are released on each rank (``net`` keeps their shapes only: save with
    ``pnet.save_parameters`` and load into a fresh network to use it whole).  ``micro_batches``
    defaults to ``cfg.pp``, the fewest the 1F1B schedules accept.  With ``cfg.tp > 1`` each stage's
    Dense pairs are split over the tensor-parallel ranks (:mod:`.tensor`): ``tp_plan='auto'``
    (Megatron's column -> row pairing, vocab-parallel embeddings, recurrent layers by hidden units)
    or ``{layer path: 'colwise'|'rowwise'|'vocab'|'gates'|'replicate'}``.
    ``checkpoint_activations=True`` keeps only each layer's input for backward and recomputes the
    rest (less memory, one more forward).  With ``cfg.zero`` make the Trainer with
    ``pnet.trainer(optimizer, optimizer_params)``: a ZeroTrainer over each stage's data-parallel
    ranks, which reduces the gradients itself (``kvstore`` is not used); with ``tp > 1`` it shards
    each rank's tensor-parallel shards (plain local tensors) over the data-parallel ranks.
    """
    if micro_batches is None:
        micro_batches = cfg.pp
    return PipelineNet(net, cfg, micro_batches, schedule, split_points, stages_per_rank, sample_input,
                       kvstore, tp_plan, checkpoint_activations)
