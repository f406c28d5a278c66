"""What the Estimator does with one batch: split it over the contexts, run the network and the
loss (recording for backward when training).  Subclass and override to change it."""

from __future__ import annotations

from typing import Any

from .... import autograd
from ...utils import split_and_load

__all__ = ["BatchProcessor"]


class BatchProcessor:
    """``fit_batch`` / ``evaluate_batch`` each return ``(data, label, pred, loss)``, lists with one
    entry per context of the estimator (the batch split along ``batch_axis``)."""

    def _get_data_and_label(self, batch: Any, ctx: list[Any],
                            batch_axis: int = 0) -> tuple[list[Any], list[Any]]:
        data = split_and_load(batch[0], ctx_list=ctx, batch_axis=batch_axis)
        label = split_and_load(batch[1], ctx_list=ctx, batch_axis=batch_axis)
        return data, label

    def evaluate_batch(self, estimator: Any, val_batch: Any,
                       batch_axis: int = 0) -> tuple[Any, Any, Any, Any]:
        data, label = self._get_data_and_label(val_batch, estimator.context, batch_axis)
        pred = [estimator.val_net(x) for x in data]
        loss = [estimator.val_loss(y_hat, y) for y_hat, y in zip(pred, label)]
        return data, label, pred, loss

    def fit_batch(self, estimator: Any, train_batch: Any,
                  batch_axis: int = 0) -> tuple[Any, Any, Any, Any]:
        """Forward under ``autograd.record()`` and backward; the optimizer step is the
        GradientUpdateHandler's (so handlers may act between backward and step)."""
        data, label = self._get_data_and_label(train_batch, estimator.context, batch_axis)
        with autograd.record():
            pred = [estimator.net(x) for x in data]
            loss = [estimator.loss(y_hat, y) for y_hat, y in zip(pred, label)]
        for each in loss:
            each.backward()
        return data, label, pred, loss
