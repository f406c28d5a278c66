"""Horovod's Gluon integration: DistributedTrainer, DistributedOptimizer, broadcast_parameters."""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .. import kvstore as kvs
from .. import optimizer as opt
from ..elastic import inprocess
from ..gluon.parameter import Parameter
from ..gluon.trainer import Trainer
from . import _basics, _ops
from ._compression import Compression, Compressor, NoneCompressor
from ._process_sets import ProcessSet, global_process_set

__all__ = ["DistributedTrainer", "DistributedOptimizer", "broadcast_parameters"]


def _check_predivide(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"gradient_predivide_factor must be a positive number, got {value!r}")
    return float(value)


def _check_num_groups(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"num_groups must be an int >= 0, got {value!r}")
    return value


def _split(items: list[Any], n: int) -> list[list[Any]]:
    """``items`` in ``n`` contiguous, nearly equal groups (fewer when there are fewer items)."""
    n = min(n, len(items))
    base, extra = divmod(len(items), n)
    out, start = [], 0
    for g in range(n):
        end = start + base + (1 if g < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _sum_grads(payloads: list[torch.Tensor], num_groups: int, predivide: float, postscale: float,
               name: str, process_set: ProcessSet) -> None:
    """Sum ``payloads`` over the set's ranks in place (each pre-divided by ``predivide``), in
    ``num_groups`` grouped collectives (0: one group)."""
    groups = _split(payloads, num_groups) if num_groups > 0 else [payloads]
    for g, group in enumerate(groups):
        _ops.grouped_allreduce_(group, name=f"{name}.{g}", op=_ops.Sum, prescale_factor=1.0 / predivide,
                                postscale_factor=postscale, process_set=process_set)


def _set_size(process_set: Any) -> int:
    """The number of ranks of ``process_set`` (an added hvd.ProcessSet), checked up front."""
    if process_set is global_process_set:
        return _basics.size()
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"process_set must be an hvd.ProcessSet, got {type(process_set).__name__}")
    size = process_set.size()
    if size is None:
        raise ValueError(f"{process_set} has not been added: pass it to hvd.init(process_sets=[...]) or "
                         "hvd.add_process_set() first")
    return size


_elastic_trainers: weakref.WeakSet[DistributedTrainer] = weakref.WeakSet()


def _follow_reformed_group() -> None:
    for trainer in list(_elastic_trainers):
        trainer._follow_group()


inprocess.on_reform(_follow_reformed_group)  # after hvd's own hooks (hvd.size(), the process sets)


class DistributedTrainer(Trainer):
    """A :class:`mxtorch.gluon.Trainer` whose ``step`` averages gradients over all Horovod ranks.

    ``step(batch_size)`` takes the *local* batch size: gradients are summed over ranks and the
    optimizer's gradient scale is divided by the number of ranks, so one step equals a step on
    the global batch.

    With the defaults the gradients go through the 'horovod' KVStore
    (:mod:`mxtorch.kvstore.allreduce`), which starts reducing them while backward runs; as with
    every distributed store, creating the Trainer also gives every rank rank 0's initialized
    parameters.  Otherwise the Trainer reduces them itself at ``step``, as Horovod does: each
    rank's gradients are pre-divided by ``gradient_predivide_factor`` (the scale is multiplied
    back), compressed by ``compression`` (``Compression.fp16`` sends fp32 gradients as fp16), and
    summed in ``num_groups`` grouped collectives (0: one per dtype, like Horovod's tensor
    fusion); parameters are then not broadcast here.  Either way, call
    :func:`broadcast_parameters` after initialization, as with Horovod.

    ``process_set``: the gradients are averaged over that set's ranks only (Horovod's rule: ranks
    outside it do not reduce, and every rank divides by the set's size).

    In an in-process elastic job (``hvd.elastic.run``) a trainer on the global set follows each
    re-formed group: it averages over the new ``hvd.size()`` from the next step on.
    """

    def __init__(
        self,
        params: Any,
        optimizer: str | opt.Optimizer,
        optimizer_params: dict[str, Any] | None = None,
        compression: type[Compressor] | Compressor = Compression.none,
        gradient_predivide_factor: float = 1.0,
        prefix: str | None = None,
        num_groups: int = 0,
        process_set: ProcessSet = global_process_set,
    ) -> None:
        _basics.size()  # raises a clear error before hvd.init()
        world = _set_size(process_set)
        self._process_set = process_set
        if isinstance(optimizer, DistributedOptimizer):
            optimizer = optimizer._optimizer  # reducing twice would divide by size() twice
        if prefix is not None and not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str or None, got {type(prefix).__name__}")
        if not (hasattr(compression, "compress") and hasattr(compression, "decompress")):
            raise TypeError(f"compression must have compress() and decompress(), like Compression.fp16; "
                            f"got {compression!r}")
        self._predivide = _check_predivide(gradient_predivide_factor)
        self._num_groups = _check_num_groups(num_groups)
        self._compression = compression
        self._prefix = prefix or ""
        self._plain = (compression is NoneCompressor or isinstance(compression, NoneCompressor)) and \
            self._predivide == 1.0 and self._num_groups == 0 and process_set is global_process_set
        # With Horovod's defaults the 'horovod' KVStore does the work: it reduces gradients while
        # backward runs and the Trainer divides by the global batch.  Compression, pre-division and
        # explicit groups need the reduction below.  In an in-process elastic job the store is there
        # at any size: a joiner runs alone until it is admitted, then steps with the others.
        elastic = inprocess.current() is not None
        store = kvs.create("horovod") if self._plain and (world > 1 or elastic) else None
        self._lost_set: str | None = None
        self._averaging = 1.0
        self._world = world
        self._own_reduction = False
        super().__init__(params, optimizer, optimizer_params, kvstore=store, update_on_kvstore=False)
        self._set_averaging(world)
        if elastic:
            _elastic_trainers.add(self)

    def _set_averaging(self, world: int) -> None:
        """Average over ``world`` ranks from now on: the reduction path and the gradient scale."""
        self._world = world
        self._own_reduction = world > 1 and not self._plain and bool(self._process_set.included())
        # As Horovod: the average over ranks goes into the gradient scale, not into the reduced
        # sums (a plain gluon.Trainer sums, as MXNet does, and divides only by batch_size).  Horovod
        # scales the ranks outside the set the same way.  A ratio keeps a scale the user set since.
        outside = not self._process_set.included()
        averaging = (self._predivide if self._own_reduction or outside else 1.0) / world
        self.gradient_scale *= averaging / self._averaging
        self._averaging = averaging

    def _follow_group(self) -> None:
        """The in-process elastic job re-formed its group (``hvd.size()`` is the new one): average
        over the new size; the 'horovod' store follows the group too.  A trainer on an added process
        set cannot follow (the job's sets are dropped, as in Horovod's elastic mode): its next step
        says so."""
        if self._process_set is not global_process_set:
            self._lost_set = str(self._process_set)
            return
        kv = self.kvstore
        if kv is not None and hasattr(kv, "rejoin"):
            kv.rejoin()
        self._set_averaging(_basics.size())

    def _check_group(self) -> None:
        if self._lost_set is not None:
            raise ValueError(f"hvd.DistributedTrainer: its process set {self._lost_set} was dropped when the "
                             "elastic job re-formed its group; create the trainer again on a set added after "
                             "the change (or on the global set, which follows the job)")

    def step(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        self._check_group()
        super().step(batch_size, ignore_stale_grad)

    def update(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        self._check_group()
        super().update(batch_size, ignore_stale_grad)

    def reduce_gradients(self) -> None:
        self._check_group()
        if not self._own_reduction:
            super().reduce_gradients()
            return
        grads: list[tuple[list[torch.Tensor], torch.Tensor, Any]] = []
        for _, all_copies in self.gradient_copies():
            copies = [g for g in all_copies if g is not None]
            if len(copies) != len(all_copies):
                continue  # not part of this backward on this rank; step() reports it if it matters
            first = copies[0]
            for other in copies[1:]:  # several contexts in one process: sum them locally first
                first.add_(other.to(first.device))
            payload, ctx = self._compression.compress(first)
            grads.append((copies, payload, ctx))
        if not grads:
            return
        _sum_grads([g[1] for g in grads], self._num_groups, self._predivide, 1.0, f"{self._prefix}grads",
                   self._process_set)
        with torch.no_grad():
            for copies, payload, ctx in grads:
                first = copies[0]
                if payload is not first:
                    first.copy_(self._compression.decompress(payload, ctx))
                for other in copies[1:]:
                    other.copy_(first)


class DistributedOptimizer(opt.Optimizer):
    """Wraps an optimizer so that every ``update`` first averages the gradients over all ranks.

    Everything else (learning rate, states, hyper-parameters) is the wrapped optimizer's: reads
    and writes of attributes go through to it.  Use it with a plain ``Trainer`` (no distributed
    KVStore) or with a KVStore updater; :class:`DistributedTrainer` unwraps it.
    """

    _OWN = frozenset({"_optimizer", "_predivide", "_num_groups", "_process_set"})

    def __init__(self, optimizer: opt.Optimizer, gradient_predivide_factor: float = 1.0,
                 num_groups: int = 0, process_set: ProcessSet = global_process_set) -> None:
        if not isinstance(optimizer, opt.Optimizer):
            raise TypeError(
                f"DistributedOptimizer wraps an mxtorch Optimizer, got {type(optimizer).__name__}"
            )
        if isinstance(optimizer, DistributedOptimizer):
            raise TypeError("this optimizer is already a DistributedOptimizer: wrapping it again would "
                            "reduce gradients twice")
        _basics.size()  # raises a clear error before hvd.init()
        _set_size(process_set)
        object.__setattr__(self, "_process_set", process_set)
        object.__setattr__(self, "_optimizer", optimizer)
        object.__setattr__(self, "_predivide", _check_predivide(gradient_predivide_factor))
        object.__setattr__(self, "_num_groups", _check_num_groups(num_groups))

    def __getattr__(self, name: str) -> Any:
        if name in DistributedOptimizer._OWN:
            raise AttributeError(name)  # not set yet (copy/unpickle): avoid infinite recursion
        return getattr(self._optimizer, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in DistributedOptimizer._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self._optimizer, name, value)

    def __repr__(self) -> str:
        return f"DistributedOptimizer({self._optimizer!r})"

    def _average(self, index: Any, grad: Any) -> None:
        world = _set_size(self._process_set)
        if world == 1 or not self._process_set.included():
            return  # Horovod's rule: ranks outside the set update with their own gradients
        grads = list(grad) if isinstance(index, (list, tuple)) else [grad]
        keys = list(index) if isinstance(index, (list, tuple)) else [index]
        for i, g in enumerate(grads):
            if not isinstance(g, torch.Tensor):
                raise TypeError(f"grad of index {keys[i]!r} must be a torch.Tensor, got {type(g).__name__}")
        name = f"DistributedOptimizer.grad.{keys[0]}" + (f"-{keys[-1]}" if len(keys) > 1 else "")
        _sum_grads(grads, self._num_groups, self._predivide, self._predivide / world, name, self._process_set)

    def create_state(self, index: Any, weight: torch.Tensor) -> Any:
        return self._optimizer.create_state(index, weight)

    def create_state_multi_precision(self, index: Any, weight: torch.Tensor) -> Any:
        return self._optimizer.create_state_multi_precision(index, weight)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        self._average(index, grad)
        self._optimizer.update(index, weight, grad, state)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        self._average(index, grad)
        self._optimizer.update_multi_precision(index, weight, grad, state)

    def update_multi(
        self, indices: list[Any], weights: list[Any], grads: list[Any], states: list[Any]
    ) -> None:
        self._average(indices, grads)
        self._optimizer.update_multi(indices, weights, grads, states)

    def set_learning_rate(self, lr: float) -> None:
        self._optimizer.set_learning_rate(lr)

    def set_lr_mult(self, args_lr_mult: dict[Any, float]) -> None:
        self._optimizer.set_lr_mult(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: dict[Any, float]) -> None:
        self._optimizer.set_wd_mult(args_wd_mult)

    def _hyper_params(self) -> dict[str, Any]:
        return self._optimizer._hyper_params()

    def _load_hyper_params(self, blob: Any) -> None:
        self._optimizer._load_hyper_params(blob)


# ---- broadcast_parameters ------------------------------------------------------------------------
def _broadcast_after_init(param: Parameter, root_rank: int, name: str) -> None:
    """Make ``param``'s deferred initialization end with a broadcast from ``root_rank``."""
    param.on_deferred_init(lambda p: _broadcast_copies([p.list_data()], root_rank, name))


def _broadcast_copies(copies: Sequence[Sequence[torch.Tensor]], root_rank: int, name: str) -> None:
    """Broadcast the first tensor of each list from ``root_rank`` and copy it to the rest."""
    firsts = [c[0] for c in copies]
    _ops.grouped_broadcast_(firsts, root_rank, name)
    with torch.no_grad():
        for c in copies:
            for other in c[1:]:
                other.copy_(c[0])


def broadcast_parameters(params: Mapping[str, Any], root_rank: int = 0, prefix: str | None = None) -> None:
    """Overwrite every parameter with ``root_rank``'s value (call after initialization).

    ``params`` maps names to gluon Parameters or tensors (``net.collect_params()``, a
    ``ParameterDict`` or a dict).  They are broadcast in sorted-name order, grouped into one
    collective per dtype.  A parameter whose initialization is deferred until the first forward
    pass is broadcast right after that initialization (every rank runs the forward pass, so every
    rank joins).  ``prefix`` names the collective, so that several calls stay distinguishable.
    """
    if not isinstance(params, Mapping):
        raise TypeError(
            f"broadcast_parameters expects a dict or ParameterDict of parameters (net.collect_params()), "
            f"got {type(params).__name__}"
        )
    if prefix is not None and not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str or None, got {type(prefix).__name__}")
    root = _ops.check_root(root_rank)
    _basics.require_init()
    prefix = prefix or ""
    ready: list[Sequence[torch.Tensor]] = []
    for key in sorted(params, key=str):
        value = params[key]
        name = f"{prefix}{key}"
        if isinstance(value, Parameter):
            if not value.is_initialized:
                if not value.init_deferred:
                    raise ValueError(
                        f"parameter {name!r} is not initialized: call net.initialize() before "
                        "broadcast_parameters"
                    )
                _broadcast_after_init(value, root, f"broadcast_parameters.{name}")
                continue
            ready.append(value.list_data())
        elif isinstance(value, torch.Tensor):
            ready.append([value])
        else:
            raise TypeError(f"parameter {name!r} is a {type(value).__name__}; expected a gluon Parameter "
                            "or a torch.Tensor")
    if ready:
        _broadcast_copies(ready, root, f"broadcast_parameters.{prefix}")
