"""gluon.Trainer: applies an optimizer to a set of parameters, reducing gradients through a KVStore."""

from __future__ import annotations

from typing import Any

from .. import kvstore as kvs
from .. import optimizer as opt
from ..base import MXNetError
from ..checkpoint_io import atomic_write_bytes
from ..context import Context
from .parameter import Parameter, as_parameters

__all__ = ["Trainer"]


class Trainer:
    """Updates parameters with ``optimizer`` after each backward pass.

    ``step(batch_size)`` reduces each parameter's gradients over its contexts (and workers)
    through the KVStore, rescales them by ``1/batch_size`` and applies the optimizer.  With one
    context and a non-distributed store no KVStore is used at all, as in MXNet.

    ``update_on_kvstore=None`` lets the store decide: stores that declare the ``optimizer``
    capability run the update (once, then copy to every context); others reduce gradients
    and every context updates its own copy.
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
        optimizer_params = dict(optimizer_params or {})
        self._scale = float(optimizer_params.get("rescale_grad", 1.0))
        param_dict = dict(enumerate(self._params))
        if isinstance(optimizer, opt.Optimizer):
            if optimizer_params:
                raise MXNetError("optimizer_params must be empty when optimizer is an Optimizer instance")
            self._optimizer = optimizer
            self._optimizer.param_dict = param_dict
        else:
            self._optimizer = opt.create(optimizer, param_dict=param_dict, **optimizer_params)
        if isinstance(kvstore, str) and not kvs.is_registered(kvstore):
            raise MXNetError(f"unknown kvstore {kvstore!r}: known types are {kvs.registered_names()}")
        if kvstore is not None and not isinstance(kvstore, (str, kvs.KVStoreBase)):
            raise TypeError(f"kvstore must be a name, a KVStore or None, got {type(kvstore).__name__}")
        self._kvstore_spec = kvstore
        self._compression_params = compression_params
        self._update_on_kvstore_arg = update_on_kvstore
        self._kvstore: kvs.KVStoreBase | None = None
        self._update_on_kvstore = False
        self._kv_initialized = False
        self._contexts: list[Context] = []
        self._updaters: list[Any] = []
        self._num_workers = 1
        self._grad_sync: Any = None  # a store that reduces gradients during backward ('overlap')
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

    # ---- set-up ----------------------------------------------------------------------
    def _init_distributed_early(self) -> None:
        # A distributed store must give every worker rank 0's weights before the first forward
        # pass, not at the first step (whose gradients would come from different weights).
        # Parameters whose shape is inferred at the first forward wait for the first step.
        spec = self._kvstore_spec
        store = kvs.create(spec) if isinstance(spec, str) else spec
        if store is not None and store.is_capable(kvs.KVStoreBase.DISTRIBUTED):
            self._kvstore_spec = store
            self._init_kvstore()

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

    def _init_kvstore(self) -> None:
        for p in self._params:
            if p._data is None:
                p._check()  # raises a clear error for uninitialized or deferred parameters
        self._contexts = self._check_contexts()
        spec = self._kvstore_spec
        kv: kvs.KVStoreBase | None = None
        if isinstance(spec, kvs.KVStoreBase):
            kv = spec
        elif isinstance(spec, str):
            # One context in one process has nothing to reduce: skip the store (as MXNet does).
            store = kvs.create(spec)
            if len(self._contexts) > 1 or store.is_capable(kvs.KVStoreBase.DISTRIBUTED):
                kv = store
        if kv is not None and self._compression_params:
            kv.set_gradient_compression(self._compression_params)
        elif self._compression_params:
            raise MXNetError("compression_params need a KVStore that reduces gradients over several "
                             "contexts or workers; this Trainer has one context and no distributed store")
        upd = self._update_on_kvstore_arg
        if kv is None:
            if upd:
                raise MXNetError("update_on_kvstore=True needs a KVStore, but none is used for one context")
            upd = False
        elif upd is None:
            upd = kv.is_capable(kvs.KVStoreBase.OPTIMIZER)
        elif upd and not kv.is_capable(kvs.KVStoreBase.OPTIMIZER):
            raise MXNetError(f"KVStore {kv.type!r} cannot run the optimizer: use update_on_kvstore=False")
        self._kvstore = kv
        self._update_on_kvstore = bool(upd)
        if kv is not None:
            if upd:
                kv.set_optimizer(self._optimizer)
            if kv.is_capable(kvs.KVStoreBase.DISTRIBUTED):
                # Every worker starts from rank 0's values; one call lets the store batch them.
                datas = [p.list_data() for p in self._params]
                kv.broadcast(list(range(len(datas))), [d[0] for d in datas], out=datas)
                self._num_workers = kv.num_workers
            else:
                for i, p in enumerate(self._params):
                    if p.grad_req != "null":
                        kv.init(i, p.list_data()[0])
            if not upd and kv.is_capable("overlap"):
                # The store reduces gradients while backward runs (its hooks), finished at step.
                self._grad_sync = kv
                self._grad_sync.attach_gradient_hooks(self._params)
        n_updaters = 0 if upd else len(self._contexts)
        self._updaters = [opt.get_updater(self._optimizer) for _ in range(n_updaters)]
        self._kv_initialized = True

    # ---- the step --------------------------------------------------------------------
    def step(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """Reduce gradients, rescale them by ``1/batch_size`` and update every parameter."""
        if not self._kv_initialized:
            self._init_kvstore()
        # Gradients are summed over workers: divide by the global batch (MXNet/Horovod).
        self._optimizer.rescale_grad = self._scale / (batch_size * self._num_workers)
        self._allreduce_grads()
        self._update(ignore_stale_grad)

    def allreduce_grads(self) -> None:
        """Reduce gradients over contexts/workers without updating (for clipping in between)."""
        if not self._kv_initialized:
            self._init_kvstore()
        if self._update_on_kvstore:
            raise MXNetError("allreduce_grads() is not available with update_on_kvstore=True: create the "
                             "Trainer with update_on_kvstore=False")
        self._allreduce_grads()

    def update(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """Apply the optimizer to already reduced gradients (after ``allreduce_grads``)."""
        if not self._kv_initialized:
            self._init_kvstore()
        if self._update_on_kvstore:
            raise MXNetError("update() is not available with update_on_kvstore=True: create the "
                             "Trainer with update_on_kvstore=False")
        # Gradients are summed over workers: divide by the global batch (MXNet/Horovod).
        self._optimizer.rescale_grad = self._scale / (batch_size * self._num_workers)
        self._update(ignore_stale_grad)

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
                raise MXNetError(
                    f"gradient of parameter {self._param_names[i]!r} was not computed by backward since "
                    "the last step: it did not take part in the loss. Call step(..., "
                    "ignore_stale_grad=True) to skip such parameters, or set its grad_req to 'null'"
                )
            out.append((i, p))
        return out

    def _allreduce_grads(self) -> None:
        kv = self._kvstore
        if kv is None or self._update_on_kvstore:
            return
        if self._grad_sync is not None:
            self._grad_sync.synchronize_gradients(self._params)
            return
        for i, p in enumerate(self._params):
            if p._grad_req == "null":
                continue
            grads = [d.grad for d in p._data if d.grad is not None]  # type: ignore[union-attr]
            if len(grads) != len(p._data):  # type: ignore[arg-type]
                continue
            kv.pushpull(i, grads, out=grads)

    def _update(self, ignore_stale_grad: bool = False) -> None:
        live = self._live(ignore_stale_grad)
        if self._update_on_kvstore:
            kv = self._kvstore
            assert kv is not None
            for i, p in live:
                data = p._data
                assert data is not None
                kv.push(i, [d.grad for d in data])  # type: ignore[misc]
                kv.pull(i, out=list(data))
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
        """Save optimizer states (momentum, Adam moments, update counts) to ``fname``."""
        if not self._kv_initialized:
            self._init_kvstore()
        if self._update_on_kvstore:
            assert self._kvstore is not None
            self._kvstore.save_optimizer_states(fname, dump_optimizer=True)
        else:
            atomic_write_bytes(fname, self._updaters[0].get_states(dump_optimizer=True))

    def load_states(self, fname: str) -> None:
        """Load optimizer states saved by :meth:`save_states` (never unpickles)."""
        if not self._kv_initialized:
            self._init_kvstore()
        if self._update_on_kvstore:
            assert self._kvstore is not None
            self._kvstore.load_optimizer_states(fname)
            self._optimizer = self._kvstore._optimizer  # type: ignore[attr-defined]
        else:
            with open(fname, "rb") as f:
                blob = f.read()
            for u in self._updaters:
                u.set_states(blob)
            self._optimizer = self._updaters[0].optimizer
        self._optimizer.param_dict = dict(enumerate(self._params))


