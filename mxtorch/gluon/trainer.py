"""gluon.Trainer: applies an optimizer to a set of parameters, reducing gradients through a KVStore."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

import torch

from .. import kvstore as kvs
from .. import optimizer as opt
from ..base import MXNetError
from ..checkpoint_io import atomic_write_bytes
from ..context import Context
from ..kvstore.base import update_on_kvstore_from_env
from ..profiler import span
from . import _trainer_states as states_io
from .parameter import Parameter, as_parameters
from .update_hooks import UpdateHook, UpdateHooks

__all__ = ["Trainer", "UpdateHook", "TrainerConfigError", "TrainerUsageError", "StaleGradientError"]


class TrainerConfigError(MXNetError, ValueError):
    """The Trainer's store and ``update_on_kvstore`` do not fit together (a ``ValueError``, as in MXNet)."""


class TrainerUsageError(MXNetError, AssertionError):
    """A Trainer method called in a mode that does not allow it (``update()`` while the store
    updates; MXNet asserted, so this is also an ``AssertionError``)."""


class StaleGradientError(MXNetError, UserWarning):
    """``step`` found a parameter whose gradient backward did not compute (MXNet raised a
    ``UserWarning`` as an exception; this is one too)."""


_BIG_LOCAL_PARAM = 1024 * 1024 * 16
"""MXNet: a 'local' store with a parameter above this many elements updates on the contexts."""


def _row_sparse_grad(p: Parameter, d: torch.Tensor) -> torch.Tensor:
    """The gradient of copy ``d`` of a grad_stype='row_sparse' parameter as a row_sparse tensor: a
    dense one (from ops without sparse gradients, ``w + 1``) is converted, a missing one is empty."""
    g = d.grad
    if g is None:
        return p._zero_grad_like(d)
    if g.layout == torch.strided:
        from ..nd import sparse

        return sparse.tostype(g, "row_sparse")
    return g


class Trainer:
    """Updates parameters with ``optimizer`` after each backward pass.

    ``step(batch_size)`` reduces each parameter's gradients over its contexts (and workers)
    through the KVStore -- stores *sum* -- and applies the optimizer with
    ``rescale_grad = scale / batch_size``.  A distributed script therefore passes the global
    batch (the sum of every worker's batch) to get the single-process result, as in MXNet;
    only ``mxtorch.horovod.DistributedTrainer`` averages over workers itself.  With one context
    and a non-distributed store no KVStore is used at all, as in MXNet.

    ``update_on_kvstore`` follows MXNet: ``None`` lets the store decide (stores that declare the
    ``optimizer`` capability run the update unless ``MXNET_UPDATE_ON_KVSTORE=0``; dist_async
    always does; row-sparse weights need it); ``True`` on a store that cannot, or ``False``
    where the store must, raise :class:`TrainerConfigError`.  Without a store,
    ``_update_on_kvstore`` is ``None``.
    """

    def __init__(
        self,
        params: Any,
        optimizer: str | opt.Optimizer,
        optimizer_params: dict[str, Any] | None = None,
        kvstore: str | kvs.KVStoreBase | None = "device",
        compression_params: dict[str, Any] | None = None,
        update_on_kvstore: bool | None = None,
    ) -> None:
        named = as_parameters(params)
        self._param_names = [n for n, _ in named]
        self._params: list[Parameter] = [p for _, p in named]
        self._param2idx = {id(p): i for i, p in enumerate(self._params)}
        self._contains_sparse_weight = any(p.stype != "default" for p in self._params)
        self._contains_sparse_grad = any(p.grad_stype != "default" for p in self._params)
        for p in self._params:
            p._set_trainer(self)  # Parameter.row_sparse_data pulls rows through this trainer
        optimizer_params = dict(optimizer_params or {})
        param_dict = dict(enumerate(self._params))
        if isinstance(optimizer, opt.Optimizer):
            if optimizer_params:
                raise MXNetError("optimizer_params must be empty when optimizer is an Optimizer instance")
            self._optimizer = optimizer
            self._optimizer.param_dict = param_dict  # not a copy: later lr_mult changes take effect
        else:
            self._optimizer = opt.create(optimizer, param_dict=param_dict, **optimizer_params)
        self._scale = float(self._optimizer.rescale_grad)
        if isinstance(kvstore, str) and not kvs.is_registered(kvstore):
            raise MXNetError(f"unknown kvstore {kvstore!r}: known types are {kvs.registered_names()}")
        if kvstore is not None and not isinstance(kvstore, (str, kvs.KVStoreBase)):
            raise TypeError(f"kvstore must be a name, a KVStore or None, got {type(kvstore).__name__}")
        if update_on_kvstore not in (None, True, False):
            raise TypeError(f"update_on_kvstore must be None, True or False, got {update_on_kvstore!r}")
        self._kvstore_params: dict[str, Any] = {"kvstore": kvstore, "update_on_kvstore": update_on_kvstore}
        self._compression_params = compression_params
        self._kvstore: kvs.KVStoreBase | None = None
        self._update_on_kvstore: bool | None = None
        self._distributed: bool | None = None
        self._kv_initialized = False
        self._params_to_init: list[Parameter] = list(self._params)
        self._contexts: list[Context] = []
        self._updaters: list[Any] = []
        self._grad_sync: kvs.KVStoreBase | None = None  # a store that reduces gradients during backward
        self._update_hooks = UpdateHooks()
        if all(p._data is not None for p in self._params):
            self._init_distributed_early()

    # ---- properties ------------------------------------------------------------------
    @property
    def optimizer(self) -> opt.Optimizer:
        return self._optimizer

    @property
    def learning_rate(self) -> float:
        return float(self._optimizer.learning_rate)

    def set_learning_rate(self, lr: float) -> None:
        """Set the learning rate (an attached lr_scheduler forbids this, as in MXNet)."""
        self._optimizer.set_learning_rate(lr)

    @property
    def update_hook(self) -> UpdateHook | None:
        """The first :class:`UpdateHook` (``amp.init_trainer`` adds one), or None."""
        return next(iter(self._update_hooks), None)

    @property
    def update_hooks(self) -> tuple[UpdateHook, ...]:
        """The :class:`UpdateHook` s, in the order they run (see :mod:`.update_hooks`)."""
        return tuple(self._update_hooks)

    def update_hook_named(self, name: str) -> UpdateHook | None:
        """The update hook called ``name`` (``'amp'``, ``'pruning'``, ...), or None."""
        return self._update_hooks.named(name)

    def add_update_hook(self, hook: UpdateHook) -> None:
        """Run ``hook`` in every ``step``/``update`` (see :class:`UpdateHook`), after those added
        before it; a name is taken once."""
        self._update_hooks.add(hook)

    def remove_update_hook(self, hook: UpdateHook | str) -> None:
        """Stop running ``hook`` (or the hook of that name)."""
        self._update_hooks.remove(hook)

    def set_update_hook(self, hook: UpdateHook | None) -> None:
        """Add ``hook`` (:meth:`add_update_hook`); ``None`` removes every hook."""
        if hook is None:
            self._update_hooks.clear()
        else:
            self._update_hooks.add(hook)

    # MXNet scripts read these attributes of an AMP trainer: views of the update hook named 'amp'
    @property
    def _amp_loss_scaler(self) -> Any:
        return getattr(self._update_hooks.named("amp"), "scaler", None)

    @property
    def _amp_last_overflow(self) -> bool:
        return bool(getattr(self._update_hooks.named("amp"), "last_overflow", False))

    @property
    def kvstore(self) -> kvs.KVStoreBase | None:
        """The KVStore this Trainer reduces through, or None: none chosen yet (a store is set up at
        creation for a distributed store whose parameters are initialized, else at the first
        ``step``/``update``/``allreduce_grads``), or none used (one context in one process)."""
        return self._kvstore

    @property
    def update_on_kvstore(self) -> bool | None:
        """Whether the store runs the optimizer (MXNet's ``update_on_kvstore``, as decided by the
        rules in the class docstring); None until the store is set up and when no store is used."""
        return self._update_on_kvstore

    @property
    def gradient_scale(self) -> float:
        """The factor ``step`` multiplies ``1/batch_size`` by to get the optimizer's ``rescale_grad``
        (the optimizer's ``rescale_grad`` when the Trainer was created); settable, e.g. by
        ``horovod.DistributedTrainer``, which averages over workers through it."""
        return self._scale

    @gradient_scale.setter
    def gradient_scale(self, scale: float) -> None:
        self._scale = float(scale)

    def gradient_copies(self) -> list[tuple[Parameter, list[torch.Tensor | None]]]:
        """This worker's gradients: for each initialized parameter the Trainer updates (``grad_req``
        not 'null'), its gradient on each of its contexts, None where backward computed none."""
        return [(p, [d.grad for d in p._data]) for p in self._params
                if p._grad_req != "null" and p._data is not None]

    def updated_in_store(self, param: Parameter) -> bool:
        """Whether the KVStore holds ``param``'s weight and applies the optimizer to it (so a new
        local value would be overwritten by the next pull)."""
        return bool(self._kv_initialized and self._update_on_kvstore
                    and not any(param is q for q in self._params_to_init))

    def optimizer_state(self, param: Parameter) -> list[Any]:
        """The optimizer's state of ``param`` on each of its contexts (momentum, Adam's moments;
        None before the first update or for stateless optimizers), the objects the optimizer
        updates: changing them in place changes the next update.  Empty while the KVStore runs the
        optimizer (its states are the store's: ``save_states`` reaches them)."""
        idx = self._param2idx.get(id(param))
        if idx is None:
            raise MXNetError(f"parameter {getattr(param, 'name', param)!r} is not updated by this Trainer")
        return [u.states.get(idx) for u in self._updaters]

    # ---- set-up ----------------------------------------------------------------------
    def _init_distributed_early(self) -> None:
        # A distributed store must give every worker rank 0's weights before the first forward
        # pass, not at the first step (whose gradients would come from different weights).
        # Parameters whose shape is inferred at the first forward wait for the first step.
        spec = self._kvstore_params["kvstore"]
        store = kvs.create(spec) if isinstance(spec, str) else spec
        if store is not None and kvs.capable(store, kvs.Capability.DISTRIBUTED):
            self._kvstore_params["kvstore"] = store
            try:
                self._init_kvstore()
            except TrainerConfigError:
                return  # raised again, as in MXNet, where the store is set up: the first step
            self._init_params()

    def _check_contexts(self) -> list[Context]:
        ctxs: list[Context] | None = None
        for name, p in zip(self._param_names, self._params):
            c = p.list_ctx()
            if ctxs is None:
                ctxs = c
            elif c != ctxs:
                raise MXNetError(
                    f"all parameters of a Trainer must live on the same contexts: {name!r} is on {c}, "
                    f"others on {ctxs}; call net.reset_ctx() or initialize them with the same ctx"
                )
        return ctxs or []

    def _dense_store(self, spec: Any) -> kvs.KVStoreBase | None:
        """MXNet's choice for dense weights: no store for one context in one process."""
        if isinstance(spec, kvs.KVStoreBase):
            return spec
        if spec is None:
            return None
        store = kvs.create(spec)
        if len(self._contexts) > 1 or kvs.capable(store, kvs.Capability.DISTRIBUTED):
            return store
        return None

    def _init_kvstore(self) -> None:
        """Choose the store and ``update_on_kvstore`` by MXNet's rules (see the class docstring)."""
        # Parameters whose shape waits for the first forward pass join the store later (_init_params).
        self._contexts = self._check_contexts()
        spec = self._kvstore_params["kvstore"]
        arg = self._kvstore_params["update_on_kvstore"]
        cap = kvs.Capability
        kv: kvs.KVStoreBase | None
        if self._contains_sparse_weight:
            # Row-sparse weights live in the store: workers pull the rows they need.
            if spec is None:
                raise TrainerConfigError("parameters with stype='row_sparse' need a KVStore to hold them: "
                                         "pass kvstore='local' (or 'device', or a distributed store)")
            kv = spec if isinstance(spec, kvs.KVStoreBase) else kvs.create(spec)
            if arg is False:
                raise TrainerConfigError("update_on_kvstore=False is not possible with row-sparse weights "
                                         "(stype='row_sparse'): the store holds and updates them")
            upd = True
        elif self._contains_sparse_grad:
            kv = self._dense_store(spec)
            # Across processes a parameter server takes row-sparse gradients and sends back dense
            # weights (MXNet has no pull of summed row-sparse gradients from its servers).
            server = kv is not None and kvs.capable(kv, cap.DISTRIBUTED) and kvs.capable(kv, cap.OPTIMIZER)
            upd = server
            if arg is not None:
                if arg is False and server:
                    raise TrainerConfigError("update_on_kvstore=False is not possible with row-sparse "
                                             f"gradients on the parameter-server store {kv.type!r}: "  # type: ignore
                                             "the servers update; pass True or None")
                upd = arg
        else:
            kv = self._dense_store(spec)
            upd = kv is not None and update_on_kvstore_from_env() and kvs.capable(kv, cap.OPTIMIZER)
            if kv is not None and spec == "local" and upd:
                biggest = max((p._check()[0].numel() for p in self._params if p._data is not None),
                              default=0)
                upd = biggest <= _BIG_LOCAL_PARAM  # the CPU would be the bottleneck: update on the devices
            if kv is not None and kvs.capable(kv, cap.DISTRIBUTED) and kvs.capable(kv, cap.ASYNC):
                if arg is False:
                    raise TrainerConfigError(f"update_on_kvstore=False is not possible with {kv.type!r}: "
                                             "asynchronous updates happen on the servers; pass True or None")
                upd = True
            if arg is not None:
                upd = arg
        if kv is not None and upd and not kvs.capable(kv, cap.OPTIMIZER):
            if arg:
                raise TrainerConfigError(f"KVStore {kv.type!r} cannot run the optimizer: create the Trainer "
                                         "with update_on_kvstore=False (or None)")
            upd = False
        if kv is None:
            if self._compression_params:
                raise MXNetError("compression_params need a KVStore that reduces gradients over several "
                                 "contexts or workers; this Trainer has one context and no distributed store")
            if arg:
                raise TrainerConfigError("update_on_kvstore=True needs a KVStore, but none is used for one "
                                         "context in one process: leave update_on_kvstore=None")
            self._kvstore, self._update_on_kvstore, self._distributed = None, None, False
        else:
            if self._compression_params:
                kv.set_gradient_compression(self._compression_params)
            if upd:
                kv.set_optimizer(self._optimizer)
            self._kvstore, self._update_on_kvstore = kv, bool(upd)
            self._distributed = kvs.capable(kv, cap.DISTRIBUTED)
        n_updaters = 0 if self._update_on_kvstore else len(self._contexts)
        self._updaters = [opt.get_updater(self._optimizer) for _ in range(n_updaters)]
        if kv is not None and not upd and kvs.capable(kv, cap.OVERLAP) and self._grad_sync is not kv:
            # The store reduces gradients while backward runs (its hooks), finished at step.
            self._grad_sync = kv
            self._grad_sync.attach_gradient_hooks(self._dense_grad_params())
        self._kv_initialized = True

    def _init_params(self, only: list[Parameter] | None = None) -> None:
        """Give the store every initialized parameter not given yet (deferred ones wait; with
        ``only``, just those): dense weights by ``broadcast`` (all contexts, and all workers,
        start from one value), row-sparse weights by ``init``."""
        kv = self._kvstore
        if kv is None:
            self._params_to_init = []
            return
        waiting: list[Parameter] = []
        dense_keys: list[int] = []
        dense_vals: list[torch.Tensor] = []
        dense_outs: list[Any] = []
        for p in self._params_to_init:
            if p._data is None or (only is not None and not any(p is q for q in only)):
                waiting.append(p)
                continue
            idx = self._param2idx[id(p)]
            datas = p._check()
            if p.stype != "default":
                with torch.no_grad():
                    kv.init(idx, datas[0])
            else:
                dense_keys.append(idx)
                dense_vals.append(datas[0])
                dense_outs.append(datas)
        if dense_keys:  # one call for every key: a distributed store batches them
            with torch.no_grad():  # stores write into parameters (MXNet stores write `out[:] = v`)
                kv.broadcast(dense_keys, dense_vals, out=dense_outs)
        self._params_to_init = waiting

    def _reset_kvstore(self) -> None:
        """Forget the store (new parameter values were loaded): the next step sets it up again."""
        if self._kvstore is not None and self._distributed:
            raise MXNetError(f"cannot reset the distributed KVStore {self._kvstore.type!r}: load parameters "
                             "before creating the Trainer, or on every worker before the first step")
        self._kv_initialized = False
        self._kvstore = None
        self._distributed = None
        self._update_on_kvstore = None
        self._params_to_init = list(self._params)

    def _ensure_kvstore(self) -> None:
        if not self._kv_initialized:
            self._init_kvstore()
        if self._params_to_init:
            self._init_params()

    # ---- the step --------------------------------------------------------------------
    def step(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """Reduce gradients (summed over contexts and workers), then update every parameter with
        ``rescale_grad = scale / batch_size``; distributed scripts pass the global batch."""
        with span("trainer.step", batch_size=batch_size):
            self._optimizer.rescale_grad = self._scale / batch_size
            self._ensure_kvstore()
            if not self._update_hooks or self._hook_allows_reduce():
                self.reduce_gradients()
            self._update_with_hooks(ignore_stale_grad)

    def allreduce_grads(self) -> None:
        """Reduce gradients over contexts/workers without updating (for clipping in between)."""
        self._ensure_kvstore()
        if self._kvstore is not None and self._update_on_kvstore:
            raise TrainerUsageError("allreduce_grads() is not available while the KVStore updates the "
                                    "parameters: create the Trainer with update_on_kvstore=False")
        if not self._update_hooks or self._hook_allows_reduce():
            self.reduce_gradients()

    def update(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """Apply the optimizer to already reduced gradients (after ``allreduce_grads``)."""
        self._ensure_kvstore()
        if self._kvstore is not None and self._update_on_kvstore:
            raise TrainerUsageError("update() is not available while the KVStore updates the parameters: "
                                    "create the Trainer with update_on_kvstore=False")
        self._optimizer.rescale_grad = self._scale / batch_size
        self._update_with_hooks(ignore_stale_grad)

    def _update_with_hooks(self, ignore_stale_grad: bool) -> None:
        updated = not self._update_hooks or self._run_update_hook(ignore_stale_grad)
        if updated:
            self._update(ignore_stale_grad)
        if self._update_hooks:
            self._update_hooks.after_step(self, updated)

    def _hook_allows_reduce(self) -> bool:
        grads = [g for _, gs in self.gradient_copies() for g in gs if g is not None]
        return self._update_hooks.before_reduce(self, grads)

    def _run_update_hook(self, ignore_stale_grad: bool) -> bool:
        """Ask the update hooks about this step; False: skipped (the gradients are discarded)."""
        live = self._live(ignore_stale_grad)
        grads = [d.grad for _, p in live for d in p._data if d.grad is not None]  # type: ignore[union-attr]
        factor = self._update_hooks.before_update(self, grads)
        if factor is None:
            for _, p in live:
                for d in p._data:  # type: ignore[union-attr]
                    if d.grad is None:
                        continue
                    if p._grad_req == "write":
                        d.grad = None
                    else:  # 'add': what was accumulated belongs to the skipped step
                        d.grad.zero_()
            return False
        self._optimizer.rescale_grad *= float(factor)
        return True

    def _live(self, ignore_stale_grad: bool) -> list[tuple[int, Parameter]]:
        out = []
        for i, p in enumerate(self._params):
            if p._grad_req == "null":
                continue
            data = p._data
            if data is None:
                p._check()
            if data[0].grad is None:  # type: ignore[index]
                if ignore_stale_grad:
                    continue
                raise StaleGradientError(
                    f"gradient of parameter {self._param_names[i]!r} was not computed by backward since "
                    "the last step: it did not take part in the loss. Call step(..., "
                    "ignore_stale_grad=True) to skip such parameters, or set its grad_req to 'null'"
                )
            out.append((i, p))
        return out

    def reduce_gradients(self) -> None:
        """Sum this worker's gradients over its contexts and the workers through the KVStore (none
        without a store or while the store updates): the reduction ``step`` and ``allreduce_grads``
        run after the update hook's ``before_reduce``.  Subclasses that reduce another way
        (``horovod.DistributedTrainer``) override it."""
        kv = self._kvstore
        if kv is None or self._update_on_kvstore:
            return
        if self._grad_sync is not None:
            self._grad_sync.synchronize_gradients(self._dense_grad_params())
            self._pushpull_sparse_grads(kv)
            return
        keys: list[int] = []
        grad_lists: list[list[torch.Tensor]] = []
        for i, p in enumerate(self._params):
            if p._grad_req == "null" or p.grad_stype == "row_sparse":
                continue
            grads = [d.grad for d in p._data if d.grad is not None]  # type: ignore[union-attr]
            if len(grads) != len(p._data):  # type: ignore[arg-type]
                continue
            keys.append(i)
            grad_lists.append(grads)
        if keys:  # one call for every key: a distributed store pipelines them
            kv.pushpull(keys, grad_lists, out=grad_lists)
        self._pushpull_sparse_grads(kv)

    # ---- row-sparse gradients and weights ----------------------------------------------
    def _dense_grad_params(self) -> list[Parameter]:
        """Parameters whose gradients the store's backward hooks reduce (row-sparse ones are not)."""
        return [p for p in self._params if p.grad_stype != "row_sparse"]

    def _pushpull_sparse_grads(self, kv: kvs.KVStoreBase) -> None:
        # Row-sparse gradients are reduced by rows. A worker whose batch did not touch the
        # parameter joins with no rows; if no worker has rows, the gradient stays None (stale).
        keys: list[int] = []
        grads: list[list[torch.Tensor]] = []
        for i, p in enumerate(self._params):
            if p.grad_stype == "row_sparse" and p._grad_req != "null":
                keys.append(i)
                grads.append([_row_sparse_grad(p, d) for d in p._check()])
        if not keys:
            return
        kv.pushpull(keys, grads, out=grads)  # one call: the store batches the keys' collectives
        for i, gs in zip(keys, grads):
            for d, g in zip(self._params[i]._check(), gs):
                if d.grad is not g and (d.grad is not None or g._nnz() > 0):
                    d.grad = g

    def _row_sparse_pull(self, param: Parameter, out: list[torch.Tensor], row_ids: torch.Tensor) -> None:
        """Pull rows ``row_ids`` of ``param`` into ``out`` when the KVStore holds the weights."""
        if not self._kv_initialized:
            self._init_kvstore()
        if any(param is q for q in self._params_to_init):
            # Only this weight joins the store now: writing the others (a broadcast) would change
            # arrays a forward pass of this iteration may already have read.
            self._init_params(only=[param])
        if not self._kv_initialized or not self._update_on_kvstore or self._kvstore is None:
            return  # the local copies are the weights
        idx = self._param2idx[id(param)]
        from ..context import context_of
        from ..nd import sparse

        # Stores give rows into row_sparse arrays; the local copy is dense: write the rows into it.
        rows = [sparse.zeros("row_sparse", tuple(o.shape), ctx=context_of(o), dtype=o.dtype) for o in out]
        self._kvstore.row_sparse_pull(idx, out=rows, row_ids=[row_ids] * len(out), priority=-idx)
        with torch.no_grad():
            for o, r in zip(out, rows):
                ids, vals = sparse.row_sparse_parts(r)
                ids, vals = ids.to(o.device), vals.to(device=o.device, dtype=o.dtype)
                # Rows already current are not rewritten: a write would invalidate the autograd graph
                # of a forward pass that read this copy before (several reads in one iteration).
                if not torch.equal(o.index_select(0, ids), vals):
                    o.index_copy_(0, ids, vals)

    def _update(self, ignore_stale_grad: bool = False) -> None:
        live = self._live(ignore_stale_grad)
        if self._update_on_kvstore:
            kv = self._kvstore
            assert kv is not None
            # Weights read by rows (stype 'row_sparse') are pulled by row_sparse_data: push only.
            by_rows = [(i, [_row_sparse_grad(p, d) if p.grad_stype == "row_sparse" else d.grad
                            for d in p._check()]) for i, p in live if p.stype == "row_sparse"]
            if by_rows:
                kv.push([i for i, _ in by_rows], [g for _, g in by_rows])  # type: ignore[misc]
            whole = [(i, p) for i, p in live if p.stype != "row_sparse"]
            keys = [i for i, _ in whole]
            datas = [list(p._data) for _, p in whole]  # type: ignore[arg-type]
            if keys:  # push every gradient, pull every weight: one pipelined call
                with torch.no_grad():
                    kv.pushpull(keys, [[d.grad for d in data] for data in datas], out=datas)  # type: ignore[misc]
        else:
            indices = [i for i, _ in live]
            opt_ = self._optimizer
            counts = (dict(opt_._index_update_count), opt_.num_update)
            for c, updater in enumerate(self._updaters):
                if c > 0:  # every context applies the same step: count it once
                    opt_._index_update_count.clear()
                    opt_._index_update_count.update(counts[0])
                    opt_.num_update = counts[1]
                weights = [p._data[c] for _, p in live]  # type: ignore[index]
                updater(indices, [w.grad for w in weights], weights)
        for _, p in live:
            if p._grad_req == "write":
                for d in p._data:  # type: ignore[union-attr]
                    d.grad = None

    # ---- states ----------------------------------------------------------------------
    def save_states(self, fname: str) -> None:
        """Save the trainer's states to ``fname``: the optimizer's (momentum, Adam moments, update
        counts), this worker's gradient-compression residuals, and the update hook's (AMP's loss
        scale and clean-step count).

        The file is a versioned container (:mod:`mxtorch.gluon._trainer_states`) that
        ``torch.load(fname, weights_only=True)`` reads.  Residuals belong to the worker that
        compressed: to resume a compressed multi-worker job exactly, every worker saves its own
        file (e.g. ``f"trainer.states.{kv.rank}"``).  Not collective: rank 0 alone may call it.
        """
        atomic_write_bytes(fname, self._dump_states())

    def _dump_states(self) -> bytes:
        return states_io.encode(self._states())

    def state_dict(self) -> dict[str, Any]:
        """The trainer's states as a state dict (tensors and plain values; what :meth:`save_states`
        writes with ``torch.save``): the optimizer's, this worker's compression residuals and the
        update hook's.  Not collective."""
        return states_io.to_state_dict(self._states())

    def _states(self) -> states_io.TrainerStates:
        self._ensure_kvstore()
        if self._update_on_kvstore:
            assert self._kvstore is not None
            blob = self._store_optimizer_states(self._kvstore)
        else:
            blob = self._updaters[0].get_states(dump_optimizer=True)
        compressor = self._compressor()
        return states_io.TrainerStates(
            optimizer=blob,
            compression=None if compressor is None else states_io.compression_section(
                compressor, *self._compression_worker()),
            hooks=self._update_hooks.state_dicts())

    def load_states(self, fname: str, strict: bool = True) -> None:
        """Load states saved by :meth:`save_states` (never unpickles; older files holding only the
        optimizer states load too).

        Compression residuals are restored when this Trainer compresses with the same type on
        the worker rank that wrote the file; AMP's loss scaler when ``amp.init_trainer`` was
        called first.  State the file holds but this Trainer cannot take (no or another
        compressor, another rank, no AMP) raises :class:`MXNetError` before anything changes;
        with ``strict=False`` it is left out (residuals then start empty).  Parts the file has
        no section for are left as they are.
        """
        self._ensure_kvstore()
        with open(fname, "rb") as f:
            raw = f.read()
        self._apply_states(states_io.decode(raw, fname), repr(fname), strict, worker_local=True)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        worker_local: bool = True) -> None:
        """Load a :meth:`state_dict` (the rules of :meth:`load_states`).  ``worker_local=False``
        (a job resumed with another number of workers) leaves out what belongs to one worker:
        compression residuals start empty."""
        self._apply_states(states_io.from_state_dict(state_dict, "the trainer state dict"),
                           "the trainer state dict", strict, worker_local)

    def _apply_states(self, states: states_io.TrainerStates, source: str, strict: bool,
                      worker_local: bool) -> None:
        self._ensure_kvstore()
        compressor = self._compressor()
        if not worker_local:
            states.compression = None
        hooks = self._update_hooks.by_name()
        kv = self._kvstore
        restore_comp, restore_hooks = states_io.check_restorable(
            states, compressor, hooks, self._compression_worker()[0], strict, source)
        if self._update_on_kvstore:
            assert kv is not None
            self._store_optimizer_states(kv, states.optimizer)  # into the optimizer the store was given
        else:
            for u in self._updaters:
                u.set_states(states.optimizer)
            self._optimizer = self._updaters[0].optimizer
        self._optimizer.param_dict = dict(enumerate(self._params))
        if compressor is not None and (states.compression is not None or not worker_local):
            if restore_comp:
                compressor.load_state_dict(states.compression["state"])  # type: ignore[index]
            else:  # strict=False: another worker's (or compressor's) residuals are not this one's
                compressor.reset()
        for name in restore_hooks:
            hooks[name].load_state_dict(states.hooks[name])

    def _compressor(self) -> Any:
        """The gradient compressor of this trainer's KVStore, or None."""
        return self._kvstore.compressor if self._kvstore is not None else None

    def _compression_worker(self) -> tuple[int, int]:
        """(rank, workers) of the compressing worker: whose residuals this trainer's states hold."""
        kv = self._kvstore
        return (kv.rank, kv.num_workers) if kv is not None else (0, 1)

    @staticmethod
    def _store_optimizer_states(kv: kvs.KVStoreBase, blob: bytes | None = None) -> bytes:
        """The optimizer states of a store that updates (``blob`` given: load them into it); stores
        exchange them as files, so they pass through a temporary one."""
        with tempfile.TemporaryDirectory(prefix="mxtorch-states-") as tmp:
            path = os.path.join(tmp, "optimizer.states")
            if blob is None:
                kv.save_optimizer_states(path, dump_optimizer=True)
                with open(path, "rb") as f:
                    return f.read()
            atomic_write_bytes(path, blob)
            kv.load_optimizer_states(path)
            return blob


