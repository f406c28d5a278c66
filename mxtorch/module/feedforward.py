"""``mx.model.FeedForward``: MXNet's legacy model API, a thin layer over :class:`Module`."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from ..base import MXNetError
from ..context import cpu
from ..initializer import Uniform
from ..model_files import load_checkpoint, save_checkpoint
from .module import Module

__all__ = ["FeedForward"]


def _label_names(symbol: Any) -> list[str]:
    return [n for n in symbol.list_arguments() if n.endswith("_label")]


class FeedForward:
    """``FeedForward(symbol, ctx, num_epoch, optimizer, initializer, numpy_batch_size, arg_params,
    aux_params, begin_epoch, **optimizer_params)``: ``fit``, ``predict``, ``score``, ``save``,
    ``load`` and ``create`` as in MXNet 0.x/1.x seed code.  Arrays are fed through ``NDArrayIter``."""

    def __init__(
        self,
        symbol: Any,
        ctx: Any = None,
        num_epoch: int | None = None,
        epoch_size: int | None = None,
        optimizer: Any = "sgd",
        initializer: Any = None,
        numpy_batch_size: int = 128,
        arg_params: dict[str, Any] | None = None,
        aux_params: dict[str, Any] | None = None,
        allow_extra_params: bool = False,
        begin_epoch: int = 0,
        **kwargs: Any,
    ) -> None:
        self.symbol = symbol
        self.ctx = ctx if ctx is not None else [cpu()]
        self.num_epoch = num_epoch
        self.epoch_size = epoch_size
        self.optimizer = optimizer
        self.initializer = initializer if initializer is not None else Uniform(0.01)
        self.numpy_batch_size = numpy_batch_size
        self.arg_params = arg_params
        self.aux_params = aux_params
        self.allow_extra_params = allow_extra_params
        self.begin_epoch = begin_epoch
        self.kwargs = dict(kwargs)
        self._module: Module | None = None

    def _iter(self, X: Any, y: Any, is_train: bool) -> Any:
        from ..io import DataIter, NDArrayIter

        if isinstance(X, DataIter):
            return X
        if isinstance(X, (np.ndarray, torch.Tensor)):
            n = int(X.shape[0])
            if y is None:
                if is_train:
                    raise MXNetError("FeedForward.fit: y is required when X is an array")
                y = np.zeros(n, dtype="float32")
            label = _label_names(self.symbol)
            return NDArrayIter(
                X,
                y,
                batch_size=min(n, self.numpy_batch_size),
                shuffle=is_train,
                last_batch_handle="roll_over" if is_train else "pad",
                label_name=label[0] if label else "softmax_label",
            )
        raise TypeError(
            f"FeedForward: X must be a numpy array, an NDArray or a DataIter, got {type(X).__name__}"
        )

    def _module_for(self, data: Any) -> Module:
        names = [d[0] if isinstance(d, tuple) else d.name for d in data.provide_data]
        labels = [d[0] if isinstance(d, tuple) else d.name for d in (data.provide_label or [])]
        return Module(self.symbol, data_names=names, label_names=labels, context=self.ctx)

    def fit(
        self,
        X: Any,
        y: Any = None,
        eval_data: Any = None,
        eval_metric: Any = "acc",
        epoch_end_callback: Any = None,
        batch_end_callback: Any = None,
        kvstore: Any = "local",
        logger: Any = None,
        work_load_list: Any = None,
        monitor: Any = None,
        eval_end_callback: Any = None,
        eval_batch_end_callback: Any = None,
    ) -> None:
        if self.num_epoch is None:
            raise MXNetError("FeedForward.fit: num_epoch was not given to FeedForward")
        data = self._iter(X, y, True)
        if isinstance(eval_data, tuple):
            eval_data = self._iter(eval_data[0], eval_data[1], False)
        mod = self._module_for(data)
        if logger is not None:
            mod.logger = logger
        params = dict(self.kwargs)
        if isinstance(self.optimizer, str):
            params.setdefault("learning_rate", 0.01)
        mod.fit(
            data,
            eval_data=eval_data,
            eval_metric=eval_metric,
            epoch_end_callback=epoch_end_callback,
            batch_end_callback=batch_end_callback,
            kvstore=kvstore,
            optimizer=self.optimizer,
            optimizer_params=params,
            initializer=self.initializer,
            arg_params=self.arg_params,
            aux_params=self.aux_params,
            allow_missing=True,
            begin_epoch=self.begin_epoch,
            num_epoch=self.num_epoch,
            monitor=monitor,
            eval_end_callback=eval_end_callback,
            eval_batch_end_callback=eval_batch_end_callback,
        )
        self._module = mod
        self.arg_params, self.aux_params = mod.get_params()

    def _bound(self, data: Any) -> Module:
        if self.arg_params is None:
            raise MXNetError("FeedForward: the model has no parameters yet; fit() or load() it first")
        mod = self._module_for(data)
        mod.bind(data.provide_data, data.provide_label or None, for_training=False)
        mod.set_params(self.arg_params, self.aux_params or {}, allow_extra=self.allow_extra_params)
        return mod

    def predict(
        self, X: Any, num_batch: int | None = None, return_data: bool = False, reset: bool = True
    ) -> Any:
        data = self._iter(X, None, False)
        out = self._bound(data).predict(data, num_batch=num_batch, reset=reset)
        if return_data:
            raise MXNetError(
                "FeedForward.predict: return_data=True is not supported; iterate the data yourself"
            )
        return out.numpy() if isinstance(out, torch.Tensor) else [o.numpy() for o in out]

    def score(
        self,
        X: Any,
        eval_metric: Any = "acc",
        num_batch: int | None = None,
        batch_end_callback: Any = None,
        reset: bool = True,
    ) -> float:
        data = self._iter(X, None, False)
        res = self._bound(data).score(
            data, eval_metric, num_batch=num_batch, batch_end_callback=batch_end_callback, reset=reset
        )
        return float(res[0][1])

    def save(self, prefix: str, epoch: int | None = None) -> None:
        epoch = self.num_epoch if epoch is None else epoch
        if epoch is None or self.arg_params is None:
            raise MXNetError("FeedForward.save: nothing to save (fit() first) or no epoch number")
        save_checkpoint(prefix, epoch, self.symbol, self.arg_params, self.aux_params or {})

    @staticmethod
    def load(prefix: str, epoch: int, ctx: Any = None, **kwargs: Any) -> FeedForward:
        symbol, arg, aux = load_checkpoint(prefix, epoch)
        return FeedForward(symbol, ctx=ctx, arg_params=arg, aux_params=aux, begin_epoch=epoch, **kwargs)

    @staticmethod
    def create(
        symbol: Any,
        X: Any,
        y: Any = None,
        ctx: Any = None,
        num_epoch: int | None = None,
        epoch_size: int | None = None,
        optimizer: Any = "sgd",
        initializer: Any = None,
        eval_data: Any = None,
        eval_metric: Any = "acc",
        epoch_end_callback: Any = None,
        batch_end_callback: Any = None,
        kvstore: Any = "local",
        logger: Any = None,
        work_load_list: Any = None,
        eval_end_callback: Any = None,
        eval_batch_end_callback: Any = None,
        **kwargs: Any,
    ) -> FeedForward:
        model = FeedForward(
            symbol,
            ctx=ctx,
            num_epoch=num_epoch,
            epoch_size=epoch_size,
            optimizer=optimizer,
            initializer=initializer,
            **kwargs,
        )
        model.fit(
            X,
            y,
            eval_data=eval_data,
            eval_metric=eval_metric,
            epoch_end_callback=epoch_end_callback,
            batch_end_callback=batch_end_callback,
            kvstore=kvstore,
            logger=logger or logging,
            work_load_list=work_load_list,
            eval_end_callback=eval_end_callback,
            eval_batch_end_callback=eval_batch_end_callback,
        )
        return model
