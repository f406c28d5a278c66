"""``BaseModule``: the training loop of MXNet's Module API (``fit``, ``score``, ``predict``).

Subclasses provide ``bind``, ``init_params``, ``init_optimizer``, ``forward``, ``backward``,
``update``, ``update_metric``, ``get_outputs`` and the parameters; this class drives them
epoch by epoch with MXNet's callbacks and logging.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from .. import metric as _metric
from ..base import MXNetError
from ..initializer import Uniform
from ..io import DataBatch
from ..model_files import BatchEndParam

__all__ = ["BaseModule"]


def _as_list(obj: Any) -> list[Any]:
    if obj is None:
        return []
    return list(obj) if isinstance(obj, (list, tuple)) else [obj]


def _unpad(outputs: list[torch.Tensor], pad: int) -> list[torch.Tensor]:
    return [o[: o.shape[0] - pad] for o in outputs] if pad else outputs


class BaseModule:
    """The shared loop of every module; see :class:`mxtorch.module.Module`."""

    def __init__(self, logger: Any = logging) -> None:
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol: Any = None
        self._total_exec_bytes = 0

    # ------------------------------------------------------------------ high level
    def forward_backward(self, data_batch: Any) -> None:
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(
        self,
        eval_data: Any,
        eval_metric: Any,
        num_batch: int | None = None,
        batch_end_callback: Any = None,
        score_end_callback: Any = None,
        reset: bool = True,
        epoch: int = 0,
        sparse_row_id_fn: Any = None,
    ) -> list[tuple[str, float]]:
        """Evaluate ``eval_metric`` over ``eval_data``; ``[(name, value)]``."""
        self._need("score", params=True)
        if reset:
            eval_data.reset()
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)
        eval_metric.reset()
        actual = 0
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.forward(batch, is_train=False)
            self.update_metric(eval_metric, batch.label)
            for cb in _as_list(batch_end_callback):
                cb(BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric, locals=locals()))
            actual = nbatch + 1
        for cb in _as_list(score_end_callback):
            cb(BatchEndParam(epoch=epoch, nbatch=actual, eval_metric=eval_metric, locals=locals()))
        return eval_metric.get_name_value()  # type: ignore[no-any-return]

    def iter_predict(
        self, eval_data: Any, num_batch: int | None = None, reset: bool = True, sparse_row_id_fn: Any = None
    ) -> Iterator[tuple[list[torch.Tensor], int, Any]]:
        """Yield ``(outputs without padding, batch index, batch)`` for each batch."""
        self._need("iter_predict", params=True)
        if reset:
            eval_data.reset()
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.forward(batch, is_train=False)
            yield _unpad(self.get_outputs(), int(getattr(batch, "pad", 0) or 0)), nbatch, batch

    def predict(
        self,
        eval_data: Any,
        num_batch: int | None = None,
        merge_batches: bool = True,
        reset: bool = True,
        always_output_list: bool = False,
        sparse_row_id_fn: Any = None,
    ) -> Any:
        """The outputs over ``eval_data`` (padding removed), concatenated across batches.

        An array instead of an iterator is one batch: its first output is returned (MXNet's rule)."""
        if isinstance(eval_data, (torch.Tensor, np.ndarray)):
            self._need("predict", params=True)
            self.forward(DataBatch([torch.as_tensor(eval_data)]), is_train=False)
            return self.get_outputs()[0]
        outputs = [[o.clone() for o in outs] for outs, _, _ in self.iter_predict(eval_data, num_batch, reset)]
        if not outputs:
            return []
        if not merge_batches:
            return outputs
        n = len(outputs[0])
        for outs in outputs:
            if len(outs) != n:
                raise MXNetError(
                    "predict: batches gave different numbers of outputs; use merge_batches=False"
                )
        merged = [torch.cat([outs[i] for outs in outputs], dim=0) for i in range(n)]
        if n == 1 and not always_output_list:
            return merged[0]
        return merged

    def fit(
        self,
        train_data: Any,
        eval_data: Any = None,
        eval_metric: Any = "acc",
        epoch_end_callback: Any = None,
        batch_end_callback: Any = None,
        kvstore: Any = "local",
        optimizer: Any = "sgd",
        optimizer_params: Any = (("learning_rate", 0.01),),
        eval_end_callback: Any = None,
        eval_batch_end_callback: Any = None,
        initializer: Any = None,
        arg_params: Any = None,
        aux_params: Any = None,
        allow_missing: bool = False,
        force_rebind: bool = False,
        force_init: bool = False,
        begin_epoch: int = 0,
        num_epoch: int | None = None,
        validation_metric: Any = None,
        monitor: Any = None,
        sparse_row_id_fn: Any = None,
    ) -> None:
        """Train for ``num_epoch`` epochs: bind, initialize, create the optimizer, then forward,
        backward, update and the metric per batch, callbacks per batch and epoch, and
        ``score`` on ``eval_data`` after each epoch."""
        if num_epoch is None:
            raise MXNetError("fit: num_epoch is required (the number of epochs to train)")
        if initializer is None:
            initializer = Uniform(0.01)
        self.bind(
            data_shapes=train_data.provide_data,
            label_shapes=train_data.provide_label,
            for_training=True,
            force_rebind=force_rebind,
        )
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(
            initializer=initializer,
            arg_params=arg_params,
            aux_params=aux_params,
            allow_missing=allow_missing,
            force_init=force_init,
        )
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer, optimizer_params=optimizer_params)
        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)
        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            self._begin_epoch(epoch, train_data)
            nbatch = 0
            for batch in train_data:
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(batch)
                self.update()
                self.update_metric(eval_metric, batch.label)
                if monitor is not None:
                    monitor.toc_print()
                for cb in _as_list(batch_end_callback):
                    cb(BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric, locals=locals()))
                nbatch += 1
            for name, val in eval_metric.get_global_name_value():
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, val)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
            arg, aux = self.get_params()
            self.set_params(arg, aux)
            for cb in _as_list(epoch_end_callback):
                cb(epoch, self.symbol, arg, aux)
            if eval_data is not None:
                res = self.score(
                    eval_data,
                    validation_metric,
                    score_end_callback=eval_end_callback,
                    batch_end_callback=eval_batch_end_callback,
                    epoch=epoch,
                )
                for name, val in res:
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)
            train_data.reset()

    # ------------------------------------------------------------------ helpers for subclasses
    def _begin_epoch(self, epoch: int, train_data: Any) -> None:
        """Called by ``fit`` before each epoch's first batch (SVRG computes its full gradients)."""

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Get ready for ``data_batch`` (MXNet: pull the rows of row_sparse parameters it needs
        from the store).  Every parameter here is pulled whole after each update, so there is
        nothing to fetch; ``sparse_row_id_fn`` (batch -> {name: row ids}) is accepted for that API."""
        if sparse_row_id_fn is not None and not callable(sparse_row_id_fn):
            raise TypeError(f"prepare: sparse_row_id_fn must be callable, got {sparse_row_id_fn!r}")

    def _need(self, what: str, params: bool = False, optimizer: bool = False) -> None:
        if not self.binded:
            raise MXNetError(f"{what}: call bind() first (the module has no input shapes yet)")
        if params and not self.params_initialized:
            raise MXNetError(f"{what}: call init_params() (or set_params) first")
        if optimizer and not self.optimizer_initialized:
            raise MXNetError(f"{what}: call init_optimizer() first")

    @property
    def symbol(self) -> Any:
        return self._symbol

    def install_monitor(self, mon: Any) -> None:
        raise MXNetError("install_monitor: monitors are not supported by this module")

    # the interface subclasses implement
    def bind(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def init_params(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def init_optimizer(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        raise NotImplementedError

    def backward(self, out_grads: Any = None) -> None:
        raise NotImplementedError

    def update(self) -> None:
        raise NotImplementedError

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        raise NotImplementedError

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        raise NotImplementedError

    def get_params(self) -> tuple[dict[str, Any], dict[str, Any]]:
        raise NotImplementedError

    def set_params(
        self,
        arg_params: Any,
        aux_params: Any,
        allow_missing: bool = False,
        force_init: bool = True,
        allow_extra: bool = False,
    ) -> None:
        """Set the parameters: ``init_params`` with these values and no initializer; with
        ``allow_missing`` the given ones replace the current ones and the others stay."""
        if not allow_missing:  # init_params without an initializer: every parameter must be given
            self.init_params(None, arg_params, aux_params, False, force_init, allow_extra)
            return
        if self.params_initialized and not force_init:
            warnings.warn(
                "Parameters already initialized and force_init=False; set_params call ignored", stacklevel=2
            )
            return
        self._set_given_params(arg_params, aux_params, allow_extra)
        self.params_initialized = True

    def _set_given_params(self, arg_params: Any, aux_params: Any, allow_extra: bool) -> None:
        """Copy the given parameters in, leaving the others as they are (``set_params`` with
        ``allow_missing``)."""
        raise NotImplementedError
