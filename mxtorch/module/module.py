"""``mx.mod.Module``: train a symbolic graph with an optimizer and a KVStore, MXNet's way.

Parameters live in the executors (one per context); ``update`` reduces the gradients through
the KVStore and applies the optimizer there (``update_on_kvstore``: ``dist_sync``/``dist_async``,
``local`` with several contexts) or on the workers (``horovod``, stores without an optimizer,
one context without a store).  ``rescale_grad`` is ``1/batch_size``, times the number of
workers for a synchronous distributed store, as in MXNet.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .. import initializer as _init
from .. import kvstore as _kvs
from .. import nd as nd_io  # nd.save / nd.load
from .. import optimizer as _opt
from ..base import MXNetError
from ..checkpoint_io import atomic_write_bytes
from ..context import Context, cpu
from ..io.base import DataDesc
from ..kvstore.base import Capability, KVStoreBase, update_on_kvstore_from_env
from ..model_files import load_checkpoint
from ..symbol import Symbol
from .base_module import BaseModule
from .executor_group import DataParallelExecutorGroup, as_descs


def _with_batch(desc: DataDesc, batch: int) -> tuple[int, ...]:
    """``desc``'s shape with ``batch`` on its layout's batch axis."""
    axis = max(DataDesc.get_batch_axis(desc.layout), 0)
    return (*desc.shape[:axis], batch, *desc.shape[axis + 1:])

__all__ = ["Module"]

# a variable's __storage_type__ attribute (MXNet's codes) -> the stype its parameter has
_STYPES = {"1": "row_sparse", "2": "csr", "row_sparse": "row_sparse", "csr": "csr"}


def _names(names: Any) -> list[str]:
    if names is None:
        return []
    if isinstance(names, str):
        return [names]
    return list(names)


def _create_kvstore(
    kvstore: Any, num_device: int, arg_params: Mapping[str, torch.Tensor]
) -> tuple[KVStoreBase | None, bool]:
    update_on_kvstore = update_on_kvstore_from_env()
    kv: KVStoreBase | None
    if kvstore is None:
        kv = None
    elif isinstance(kvstore, KVStoreBase):
        kv = kvstore
    elif isinstance(kvstore, str):
        if num_device == 1 and "dist" not in kvstore and kvstore != "horovod":
            kv = None  # one context in one process: nothing to reduce
        else:
            kv = _kvs.create(kvstore)
            if kvstore == "local" and arg_params:
                if max(int(np.prod(p.shape)) for p in arg_params.values()) > 1024 * 1024 * 16:
                    update_on_kvstore = False
    else:
        raise TypeError(f"kvstore must be a name, a KVStore or None, got {type(kvstore).__name__}")
    if kv is None:
        return None, False
    return kv, update_on_kvstore and kv.is_capable(Capability.OPTIMIZER)


class Module(BaseModule):
    """A symbol with data and label inputs, trained on one or several contexts.

    ``symbol``'s arguments other than ``data_names``, ``label_names`` and ``state_names`` are its
    parameters (``fixed_param_names`` are not updated); its auxiliary states are the moving
    statistics.  ``context`` is one context or a list (data parallelism, ``work_load_list``
    weighting each one's share of the batch).
    """

    def __init__(
        self,
        symbol: Any,
        data_names: Any = ("data",),
        label_names: Any = ("softmax_label",),
        logger: Any = logging,
        context: Any = None,
        work_load_list: Sequence[float] | None = None,
        fixed_param_names: Any = None,
        state_names: Any = None,
        group2ctxs: Any = None,
        compression_params: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(logger)
        if not isinstance(symbol, Symbol):
            raise TypeError(f"Module needs an mx.sym.Symbol, got {type(symbol).__name__}")
        context = cpu() if context is None else context
        self._context: list[Any] = list(context) if isinstance(context, (list, tuple)) else [context]
        for c in self._context:
            if not isinstance(c, Context):
                raise TypeError(f"Module: context must be mx.cpu()/mx.gpu() or a list of them, got {c!r}")
        self._work_load_list = list(work_load_list) if work_load_list else [1.0] * len(self._context)
        if len(self._work_load_list) != len(self._context):
            raise MXNetError(
                f"Module: work_load_list has {len(self._work_load_list)} entries for "
                f"{len(self._context)} contexts"
            )
        if isinstance(group2ctxs, Mapping):
            group2ctxs = [group2ctxs] * len(self._context)
        self._group2ctxs = group2ctxs
        self._symbol = symbol
        self._data_names = _names(data_names)
        self._label_names = _names(label_names)
        self._state_names = _names(state_names)
        self._fixed_param_names = _names(fixed_param_names)
        arg_names = symbol.list_arguments()
        for kind, names, must in (
            ("data", self._data_names, True),
            ("state", self._state_names, True),
            ("label", self._label_names, False),
        ):
            for n in names:
                if n not in arg_names:
                    msg = (
                        f"Module: {kind} name {n!r} is not an argument of the symbol; its arguments are "
                        f"{arg_names}"
                    )
                    if must:
                        raise ValueError(msg)
                    warnings.warn(msg, stacklevel=2)
        inputs = set(self._data_names) | set(self._label_names) | set(self._state_names)
        self._param_names = [n for n in arg_names if n not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()
        self._compression_params = dict(compression_params) if compression_params else None
        self._arg_params: dict[str, torch.Tensor] | None = None
        self._aux_params: dict[str, torch.Tensor] | None = None
        self._params_dirty = False
        self._exec_group: DataParallelExecutorGroup | None = None
        self._optimizer: Any = None
        self._kvstore: KVStoreBase | None = None
        self._update_on_kvstore = False
        self._updater: Any = None
        self._update_plan: Any = None  # (param arrays, grad arrays, indices, weights, grads) of update()
        self._preload_opt_states: str | None = None
        self._data_shapes: list[DataDesc] = []
        self._label_shapes: list[DataDesc] = []

    # ------------------------------------------------------------------ names / shapes
    @property
    def data_names(self) -> list[str]:
        return self._data_names

    @property
    def label_names(self) -> list[str]:
        return self._label_names

    @property
    def output_names(self) -> list[str]:
        return self._output_names

    @property
    def data_shapes(self) -> list[DataDesc]:
        self._need("data_shapes")
        return self._data_shapes

    @property
    def label_shapes(self) -> list[DataDesc]:
        self._need("label_shapes")
        return self._label_shapes

    @property
    def kvstore(self) -> KVStoreBase | None:
        """The store ``update`` reduces through (``init_optimizer``'s; None without one)."""
        return self._kvstore

    @property
    def output_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        self._need("output_shapes")
        _, out, _ = self._symbol.infer_shape(**dict(self._data_shapes + self._label_shapes))
        return list(zip(self._output_names, out, strict=True))

    # ------------------------------------------------------------------ binding
    def bind(
        self,
        data_shapes: Any,
        label_shapes: Any = None,
        for_training: bool = True,
        inputs_need_grad: bool = False,
        force_rebind: bool = False,
        shared_module: Any = None,
        grad_req: Any = "write",
    ) -> None:
        """Allocate the executors for inputs of these shapes (``[('data', (batch, ...))]``)."""
        if force_rebind:
            self.binded = False
            self._exec_group = None
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req  # what bind was asked for (MXNet code reads it)
        data = as_descs(data_shapes, "bind: data_shapes")
        labels = as_descs(label_shapes, "bind: label_shapes")
        names = [n for n, _ in data]
        if sorted(names) != sorted(self._data_names):
            raise MXNetError(
                f"bind: data_shapes name {names}, the module's data names are {self._data_names}"
            )
        if labels and self._label_names and sorted(n for n, _ in labels) != sorted(self._label_names):
            raise MXNetError(
                f"bind: label_shapes name {[n for n, _ in labels]}, the module's label names are "
                f"{self._label_names}"
            )
        self._data_shapes, self._label_shapes = data, labels
        shared = shared_module._exec_group if shared_module is not None else None
        self._exec_group = DataParallelExecutorGroup(
            self._symbol,
            self._context,
            self._work_load_list,
            data,
            labels,
            self._param_names,
            for_training,
            inputs_need_grad,
            fixed_param_names=self._fixed_param_names,
            grad_req=grad_req,
            state_names=self._state_names,
            group2ctxs=self._group2ctxs,
        )
        self.binded = True
        if shared is not None:  # the shared module's arrays are the parameters: nothing to copy
            self._share_params(shared_module)
        elif self.params_initialized:
            self._exec_group.set_params(self._arg_params or {}, self._aux_params or {})

    def _share_params(self, other: Module) -> None:
        assert self._exec_group is not None and other._exec_group is not None
        for mine, theirs in zip(self._exec_group.execs, other._exec_group.execs, strict=True):
            for n in self._param_names:
                if n in theirs.arg_dict:
                    i = mine._arg_names.index(n)
                    mine.arg_arrays[i] = theirs.arg_dict[n]
                    mine.grad_arrays[i] = theirs.grad_dict[n]
            for j, n in enumerate(mine._aux_names):
                if n in theirs.aux_dict:
                    mine.aux_arrays[j] = theirs.aux_dict[n]
        self._exec_group.bind_exec(self._data_shapes, self._label_shapes)
        self.params_initialized = other.params_initialized
        self._arg_params, self._aux_params = other._arg_params, other._aux_params

    def reshape(self, data_shapes: Any, label_shapes: Any = None) -> None:
        """Bind the executors for new input shapes (parameters are kept)."""
        self._need("reshape")
        assert self._exec_group is not None
        self._data_shapes = as_descs(data_shapes, "reshape: data_shapes")
        self._label_shapes = as_descs(label_shapes, "reshape: label_shapes")
        self._exec_group.bind_exec(self._data_shapes, self._label_shapes)

    # ------------------------------------------------------------------ parameters
    def init_params(
        self,
        initializer: Any = None,
        arg_params: Mapping[str, Any] | None = None,
        aux_params: Mapping[str, Any] | None = None,
        allow_missing: bool = False,
        force_init: bool = False,
        allow_extra: bool = False,
    ) -> None:
        """Give every parameter its value: from ``arg_params``/``aux_params`` where present, else
        from ``initializer`` (``Uniform(0.01)`` by default; a variable's ``__init__`` attribute wins)."""
        if self.params_initialized and not force_init:
            warnings.warn(
                "Parameters already initialized and force_init=False; init_params call ignored", stacklevel=2
            )
            return
        self._need("init_params")
        assert self._exec_group is not None
        if initializer is None and arg_params is None:
            initializer = _init.Uniform(0.01)
        elif isinstance(initializer, str):
            initializer = _init.create(initializer)
        attrs = self._symbol.attr_dict()
        if self._arg_params is None:
            self._arg_params = {
                n: torch.zeros(block[0].shape, dtype=block[0].dtype)
                for n, block in zip(self._param_names, self._exec_group.param_arrays, strict=True)
            }
        if self._aux_params is None:
            self._aux_params = {
                n: torch.zeros(block[0].shape, dtype=block[0].dtype)
                for n, block in zip(self._aux_names, self._exec_group.aux_arrays, strict=True)
            }

        def fill(name: str, arr: torch.Tensor, given: Mapping[str, Any] | None, what: str) -> None:
            if given is not None and name in given:
                src = given[name]
                src = src if isinstance(src, torch.Tensor) else torch.as_tensor(np.asarray(src))
                if tuple(src.shape) != tuple(arr.shape):
                    raise MXNetError(
                        f"init_params: {what}[{name!r}] has shape {tuple(src.shape)}, the module "
                        f"needs {tuple(arr.shape)}"
                    )
                with torch.no_grad():
                    arr.copy_(src.to(arr.dtype))
                return
            if given is not None and not allow_missing:
                raise MXNetError(
                    f"init_params: {what} lacks {name!r}; pass allow_missing=True to initialize "
                    "it with the initializer"
                )
            if initializer is not None:
                initializer(_init.InitDesc(name, attrs.get(name, {})), arr)

        for name, arr in self._arg_params.items():
            fill(name, arr, arg_params, "arg_params")
        for name, arr in self._aux_params.items():
            fill(name, arr, aux_params, "aux_params")
        self.params_initialized = True
        self._params_dirty = False
        self._exec_group.set_params(self._arg_params, self._aux_params, allow_extra=allow_extra)
        # a variable declared stype='row_sparse'/'csr' is handed out in that storage, as MXNet's
        # arg_params are (the executors compute on dense copies)
        for name in self._param_names:
            stype = _STYPES.get(str(attrs.get(name, {}).get("__storage_type__", "0")))
            if stype is not None and getattr(self._arg_params[name], "stype", "default") != stype:
                self._arg_params[name] = nd_io.cast_storage(self._arg_params[name], stype)

    def _set_given_params(self, arg_params: Any, aux_params: Any, allow_extra: bool) -> None:
        assert self._exec_group is not None
        self._exec_group.set_params(arg_params, aux_params, allow_extra=allow_extra)
        self._params_dirty = True

    def get_params(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """``(arg_params, aux_params)``: CPU copies, averaged across contexts."""
        self._need("get_params", params=True)
        assert self._exec_group is not None
        self._arg_params = self._arg_params if self._arg_params is not None else {}
        self._aux_params = self._aux_params if self._aux_params is not None else {}
        self._exec_group.get_params(self._arg_params, self._aux_params)
        self._params_dirty = False
        return self._arg_params, self._aux_params

    # ------------------------------------------------------------------ optimizer
    def init_optimizer(
        self,
        kvstore: Any = "local",
        optimizer: Any = "sgd",
        optimizer_params: Any = (("learning_rate", 0.01),),
        force_init: bool = False,
    ) -> None:
        """Create the optimizer (``rescale_grad`` = 1/batch size) and the KVStore, and put the
        parameters into the store."""
        self._need("init_optimizer", params=True)
        assert self._exec_group is not None
        if self.optimizer_initialized and not force_init:
            warnings.warn("optimizer already initialized, ignoring init_optimizer", stacklevel=2)
            return
        if self._params_dirty:
            self.get_params()
        kv, update_on_kvstore, rescale_grad, idx2name = self._optimizer_layout(kvstore)
        if isinstance(optimizer, str):
            params = dict(optimizer_params)
            params.setdefault("rescale_grad", rescale_grad)
            optimizer = _opt.create(optimizer, sym=self._symbol, param_idx2name=idx2name, **params)
        elif isinstance(optimizer, _opt.Optimizer):
            if optimizer.rescale_grad != rescale_grad:
                warnings.warn(
                    f"optimizer.rescale_grad is {optimizer.rescale_grad}, not 1/batch_size = "
                    f"{rescale_grad}; is that intended?",
                    stacklevel=2,
                )
            if not optimizer.idx2name:
                optimizer.idx2name = idx2name.copy()
        else:
            raise TypeError(
                f"optimizer must be a name or an mx.optimizer.Optimizer, got {type(optimizer).__name__}"
            )
        self._optimizer = optimizer
        self._kvstore = kv
        self._update_on_kvstore = update_on_kvstore
        self._updater = None
        if kv is not None:
            if self._compression_params:
                kv.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kv.set_optimizer(optimizer)
            arg = self._arg_params or {}
            for idx, (name, block) in enumerate(
                zip(self._param_names, self._exec_group.param_arrays, strict=True)
            ):
                kv.broadcast(name, arg[name], out=block, priority=-idx)
        if not update_on_kvstore:
            self._updater = _opt.get_updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def _optimizer_layout(self, kvstore: Any) -> tuple[KVStoreBase | None, bool, float, dict[int, str]]:
        """``(store, update_on_kvstore, rescale_grad, idx2name)`` that ``init_optimizer(kvstore)``
        uses: the gradient scale 1/batch size (times the workers of a synchronous store) and the
        optimizer's index of each parameter (one per parameter on the store, else one per
        parameter and context)."""
        assert self._exec_group is not None
        kv, update_on_kvstore = _create_kvstore(kvstore, len(self._context), self._arg_params or {})
        batch_size = self._exec_group.batch_size
        if kv is not None and "dist" in kv.type and "_sync" in kv.type:
            batch_size *= kv.num_workers
        elif kv is not None and kv.type == "horovod":
            batch_size *= kv.num_workers
        ndev = len(self._context)
        if update_on_kvstore:
            idx2name = dict(enumerate(self._param_names))
        else:
            idx2name = {i * ndev + k: n for i, n in enumerate(self._param_names) for k in range(ndev)}
        return kv, update_on_kvstore, 1.0 / batch_size, idx2name

    def borrow_optimizer(self, shared_module: Module) -> None:
        """Use ``shared_module``'s optimizer, store and updater (BucketingModule's buckets)."""
        if not shared_module.optimizer_initialized:
            raise MXNetError("borrow_optimizer: the shared module has no optimizer yet")
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self.optimizer_initialized = True

    # ------------------------------------------------------------------ computation
    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Run the executors on a batch (a smaller or larger batch rebinds them for its shape)."""
        self._need("forward", params=True)
        assert self._exec_group is not None
        shapes = getattr(data_batch, "provide_data", None)
        data = data_batch.data if isinstance(data_batch.data, (list, tuple)) else [data_batch.data]
        group = self._exec_group
        bound = [tuple(d.shape) for d in group.data_shapes]
        if [tuple(d.shape) for d in data] != bound[:len(data)] or (
            shapes and as_descs(shapes, "batch.provide_data") != group.data_shapes
        ):  # another batch shape: rebind, each input keeping its dtype and layout
            old = {d.name: d for d in group.data_shapes + group.label_shapes}

            def desc(name: str, shape: tuple[int, ...]) -> DataDesc:
                o = old.get(name)
                return DataDesc(name, shape) if o is None else DataDesc(name, shape, o.dtype, o.layout)

            dshapes = [desc(n, tuple(d.shape)) for n, d in zip(self._data_names, data, strict=False)]
            labels = getattr(data_batch, "label", None) or []
            labels = labels if isinstance(labels, (list, tuple)) else [labels]
            lshapes = [desc(n, tuple(lb.shape)) for n, lb in zip(self._label_names, labels, strict=False)]
            if not lshapes and self._label_shapes and dshapes:
                first = dshapes[0]
                new_batch = first.shape[max(DataDesc.get_batch_axis(first.layout), 0)]
                lshapes = [desc(d.name, _with_batch(d, new_batch)) for d in self._label_shapes]
            group.bind_exec(dshapes, lshapes)
        self._exec_group.forward(data_batch, is_train)

    def backward(self, out_grads: Any = None) -> None:
        self._need("backward", params=True)
        assert self._exec_group is not None
        self._exec_group.backward(out_grads)

    def update(self) -> None:
        """Apply the optimizer to the gradients of the last backward (through the KVStore)."""
        self._need("update", params=True, optimizer=True)
        assert self._exec_group is not None
        self._params_dirty = True
        kv = self._kvstore
        group = self._exec_group
        if self._update_on_kvstore:
            assert kv is not None
            for idx, (name, weights, grads) in enumerate(
                zip(self._param_names, group.param_arrays, group.grad_arrays, strict=True)
            ):
                if grads[0] is None:
                    continue
                kv.pushpull(name, grads, out=weights, priority=-idx)
            return
        # the updater's (index, weight, gradient) lists: the same arrays every step until the
        # executors are bound again (new array lists), so they are built once per binding
        plan = self._update_plan
        if plan is None or plan[0] is not group.param_arrays or plan[1] is not group.grad_arrays:
            ndev = len(self._context)
            indices: list[int] = []
            ws: list[torch.Tensor] = []
            gs: list[torch.Tensor] = []
            for idx, (weights, grads) in enumerate(zip(group.param_arrays, group.grad_arrays, strict=True)):
                if grads[0] is None:
                    continue
                for k, (w, g) in enumerate(zip(weights, grads, strict=True)):
                    indices.append(idx * ndev + k)
                    ws.append(w)
                    gs.append(g)
            plan = self._update_plan = (group.param_arrays, group.grad_arrays, indices, ws, gs)
        if kv is not None:
            for idx, (name, grads) in enumerate(zip(self._param_names, group.grad_arrays, strict=True)):
                if grads[0] is not None:
                    kv.pushpull(name, grads, out=grads, priority=-idx)
        if plan[2]:  # the Updater copies the lists it is given; these stay as they are
            self._updater(plan[2], plan[4], plan[3])

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        self._need("get_outputs", params=True)
        assert self._exec_group is not None
        return self._exec_group.get_outputs(merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list[Any]:
        self._need("get_input_grads", params=True)
        assert self._exec_group is not None
        return self._exec_group.get_input_grads(merge_multi_context)

    def get_states(self, merge_multi_context: bool = True) -> list[Any]:
        """The arrays of the ``state_names`` inputs (merged across contexts unless asked not to)."""
        self._need("get_states", params=True)
        assert self._exec_group is not None
        return self._exec_group.get_states(merge_multi_context)

    def set_states(self, states: Any = None, value: Any = None) -> None:
        """Set the ``state_names`` inputs from ``states`` (one array, or one per context, per
        state: what ``get_outputs(merge_multi_context=False)`` returns) or to the number ``value``."""
        self._need("set_states", params=True)
        assert self._exec_group is not None
        self._exec_group.set_states(states, value)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        assert self._exec_group is not None
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    # ------------------------------------------------------------------ files
    def save_params(self, fname: str, format: str | None = None) -> None:
        """Write ``arg:NAME`` / ``aux:NAME`` arrays in MXNet's format (``format='safetensors'`` or a
        ``.safetensors`` name: safetensors); MXNet's and mxtorch's ``mx.nd.load`` read it."""
        arg, aux = self.get_params()
        data = {f"arg:{k}": v for k, v in arg.items()}
        data.update({f"aux:{k}": v for k, v in aux.items()})
        nd_io.save(fname, data, format=format)

    def load_params(self, fname: str) -> None:
        loaded = nd_io.load(fname)
        if not isinstance(loaded, dict):
            raise MXNetError(f"load_params: {fname!r} holds a list of arrays; a parameter file maps names")
        arg, aux = {}, {}
        for k, v in loaded.items():
            kind, _, name = k.partition(":")
            if kind == "arg":
                arg[name] = v
            elif kind == "aux":
                aux[name] = v
            else:
                raise MXNetError(f"load_params: {fname!r} has key {k!r}; expected 'arg:NAME' or 'aux:NAME'")
        self.set_params(arg, aux)

    def save_checkpoint(
        self, prefix: str, epoch: int, save_optimizer_states: bool = False, remove_amp_cast: bool = True
    ) -> None:
        """``prefix-symbol.json``, ``prefix-%04d.params`` and with ``save_optimizer_states``
        ``prefix-%04d.states``."""
        self._symbol.save(f"{prefix}-symbol.json")
        self.save_params(f"{prefix}-{epoch:04d}.params")
        self.logger.info('Saved checkpoint to "%s-%04d.params"', prefix, epoch)
        if save_optimizer_states:
            self.save_optimizer_states(f"{prefix}-{epoch:04d}.states")

    @staticmethod
    def load(prefix: str, epoch: int, load_optimizer_states: bool = False, **kwargs: Any) -> Module:
        """A Module of the checkpoint ``prefix``/``epoch`` (bind it before use)."""
        sym, args, auxs = load_checkpoint(prefix, epoch)
        mod = Module(symbol=sym, **kwargs)
        mod._arg_params, mod._aux_params = args, auxs
        mod.params_initialized = True
        if load_optimizer_states:
            mod._preload_opt_states = f"{prefix}-{epoch:04d}.states"
        return mod

    def save_optimizer_states(self, fname: str) -> None:
        self._need("save_optimizer_states", optimizer=True)
        if self._update_on_kvstore:
            assert self._kvstore is not None
            self._kvstore.save_optimizer_states(fname)
        else:
            atomic_write_bytes(fname, self._updater.get_states())

    def load_optimizer_states(self, fname: str) -> None:
        self._need("load_optimizer_states", optimizer=True)
        if self._update_on_kvstore:
            assert self._kvstore is not None
            self._kvstore.load_optimizer_states(fname)
        else:
            if not os.path.isfile(fname):
                raise MXNetError(f"load_optimizer_states: {fname!r} does not exist")
            with open(fname, "rb") as f:
                self._updater.set_states(f.read())

    def install_monitor(self, mon: Any) -> None:
        self._need("install_monitor")
        assert self._exec_group is not None
        for ex in self._exec_group.execs:
            mon.install(ex)
