"""``mx.mod.BucketingModule``: one Module per bucket key (e.g. sequence length), all sharing
the parameters, optimizer and KVStore of the default bucket's module, as in MXNet."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..base import MXNetError
from ..context import cpu
from .base_module import BaseModule
from .module import Module

__all__ = ["BucketingModule"]


class BucketingModule(BaseModule):
    """``sym_gen(bucket_key) -> (symbol, data_names, label_names)``; batches choose their bucket by
    ``batch.bucket_key`` (``default_bucket_key`` when it is None)."""

    def __init__(
        self,
        sym_gen: Callable[[Any], Any],
        default_bucket_key: Any = None,
        logger: Any = logging,
        context: Any = None,
        work_load_list: Any = None,
        fixed_param_names: Any = None,
        state_names: Any = None,
        group2ctxs: Any = None,
        compression_params: Any = None,
    ) -> None:
        super().__init__(logger)
        if default_bucket_key is None:
            raise MXNetError("BucketingModule: default_bucket_key is required (the largest bucket)")
        self._sym_gen = sym_gen
        self._default_bucket_key = default_bucket_key
        self._kwargs = dict(
            logger=logger,
            context=context if context is not None else cpu(),
            work_load_list=work_load_list,
            fixed_param_names=fixed_param_names,
            state_names=state_names,
            group2ctxs=group2ctxs,
            compression_params=compression_params,
        )
        self._buckets: dict[Any, Module] = {}
        self._curr_module: Module | None = None
        self._curr_bucket_key: Any = None
        self._grad_req: Any = "write"
        self._monitor: Any = None
        self._loaded: tuple[dict[str, Any], dict[str, Any]] | None = None  # load()'s, until bind

    def _make(self, key: Any) -> Module:
        out = self._sym_gen(key)
        if not (isinstance(out, tuple) and len(out) == 3):
            raise MXNetError(
                f"BucketingModule: sym_gen({key!r}) must return (symbol, data_names, label_names)"
            )
        symbol, data_names, label_names = out
        return Module(symbol, data_names, label_names, **self._kwargs)

    @property
    def _curr(self) -> Module:
        if self._curr_module is None:
            raise MXNetError("BucketingModule: call bind() first")
        return self._curr_module

    @property
    def symbol(self) -> Any:
        return self._curr.symbol

    @property
    def data_names(self) -> list[str]:
        return self._curr.data_names

    @property
    def output_names(self) -> list[str]:
        return self._curr.output_names

    @property
    def default_bucket_key(self) -> Any:
        return self._default_bucket_key

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
        """Bind the default bucket's module (other buckets bind on first use, sharing its arrays)."""
        if self.params_initialized and not force_rebind:
            arg, aux = self._loaded if self._loaded is not None and not self.binded else self.get_params()
        if force_rebind:
            self.binded = False
            self._buckets = {}
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None:
            raise MXNetError("BucketingModule.bind: shared_module is not supported")
        self.for_training, self.inputs_need_grad, self._grad_req = for_training, inputs_need_grad, grad_req
        module = self._make(self._default_bucket_key)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad, grad_req=grad_req)
        self._buckets = {self._default_bucket_key: module}
        self._curr_module, self._curr_bucket_key = module, self._default_bucket_key
        self.binded = True
        if self.params_initialized:
            module.set_params(arg, aux)
            self._loaded = None

    def switch_bucket(self, bucket_key: Any, data_shapes: Any, label_shapes: Any = None) -> None:
        """Make ``bucket_key``'s module current, creating it (sharing parameters) on first use."""
        self._need("switch_bucket")
        if bucket_key not in self._buckets:
            module = self._make(bucket_key)
            module.bind(
                data_shapes,
                label_shapes,
                self.for_training,
                self.inputs_need_grad,
                shared_module=self._buckets[self._default_bucket_key],
                grad_req=self._grad_req,
            )
            if self.optimizer_initialized:
                module.borrow_optimizer(self._buckets[self._default_bucket_key])
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            self._buckets[bucket_key] = module
        self._curr_module, self._curr_bucket_key = self._buckets[bucket_key], bucket_key

    def init_params(
        self,
        initializer: Any = None,
        arg_params: Any = None,
        aux_params: Any = None,
        allow_missing: bool = False,
        force_init: bool = False,
        allow_extra: bool = False,
    ) -> None:
        if self.params_initialized and not force_init:
            return
        self._need("init_params")
        self._curr.init_params(initializer, arg_params, aux_params, allow_missing, force_init, allow_extra)
        self.params_initialized = True

    def get_params(self) -> tuple[dict[str, Any], dict[str, Any]]:
        self._need("get_params", params=True)
        return self._curr.get_params()

    def _set_given_params(self, arg_params: Any, aux_params: Any, allow_extra: bool) -> None:
        self._curr.set_params(arg_params, aux_params, allow_missing=True, allow_extra=allow_extra)

    def init_optimizer(
        self,
        kvstore: Any = "local",
        optimizer: Any = "sgd",
        optimizer_params: Any = (("learning_rate", 0.01),),
        force_init: bool = False,
    ) -> None:
        self._need("init_optimizer", params=True)
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring init_optimizer")
            return
        self._curr.init_optimizer(kvstore, optimizer, optimizer_params, force_init=force_init)
        for mod in self._buckets.values():
            if mod is not self._curr:
                mod.borrow_optimizer(self._curr)
        self.optimizer_initialized = True

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        self._need("forward", params=True)
        key = getattr(data_batch, "bucket_key", None)
        key = self._default_bucket_key if key is None else key
        self.switch_bucket(key, data_batch.provide_data, getattr(data_batch, "provide_label", None))
        self._curr.forward(data_batch, is_train)

    def backward(self, out_grads: Any = None) -> None:
        self._curr.backward(out_grads)

    def update(self) -> None:
        self._need("update", params=True, optimizer=True)
        self._curr.update()

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        return self._curr.get_outputs(merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list[Any]:
        return self._curr.get_input_grads(merge_multi_context)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        self._curr.update_metric(eval_metric, labels, pre_sliced)

    def save_checkpoint(self, prefix: str, epoch: int, remove_amp_cast: bool = False) -> None:
        """The default bucket's symbol and the shared parameters."""
        self._buckets[self._default_bucket_key].save_checkpoint(prefix, epoch)

    @staticmethod
    def load(prefix: str, epoch: int, sym_gen: Callable[[Any], Any] | None = None,
             default_bucket_key: Any = None, **kwargs: Any) -> BucketingModule:
        """A BucketingModule with the parameters of checkpoint ``prefix``/``epoch`` (written by
        ``save_checkpoint``); ``sym_gen`` and ``default_bucket_key`` as for the constructor,
        other keywords too.  The parameters are set when it is bound."""
        if sym_gen is None or default_bucket_key is None:
            raise MXNetError("BucketingModule.load needs sym_gen and default_bucket_key")
        from ..model_files import load_checkpoint

        _, args, auxs = load_checkpoint(prefix, epoch)
        mod = BucketingModule(sym_gen=sym_gen, default_bucket_key=default_bucket_key, **kwargs)
        mod._loaded = (dict(args), dict(auxs))
        mod.params_initialized = True
        return mod

    def install_monitor(self, mon: Any) -> None:
        self._monitor = mon
        for mod in self._buckets.values():
            mod.install_monitor(mon)
