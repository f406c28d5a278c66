"""Probability and loss metrics: CrossEntropy, NegativeLogLikelihood, Perplexity, Loss (Torch, Caffe)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .base import (
    Arrays,
    EvalMetric,
    Scalar,
    _as_list,
    _batch_sum,
    _NamedMetric,
    _on_device_of,
    _py,
    alias,
    check_label_shapes,
    register,
)

__all__ = ["CrossEntropy", "NegativeLogLikelihood", "Perplexity", "Loss", "Torch", "Caffe"]


def _in_float(prob: torch.Tensor) -> torch.Tensor:
    # MXNet takes logs in the predictions' own float dtype (float32 mostly): the per-batch loss
    # then rounds as MXNet's does; integer predictions become float32, MXNet's default dtype
    return prob if prob.is_floating_point() else prob.to(torch.float32)


def _picked_probabilities(label: torch.Tensor, pred: torch.Tensor, what: str) -> torch.Tensor:
    """``pred[i, label[i]]`` for class-probability rows ``pred`` (extra leading dims are flattened)."""
    label = _on_device_of(label, pred).reshape(-1)
    if pred.dim() == 0:
        raise ValueError(f"{what}: predictions must be class probabilities (N, C), got a scalar")
    rows = pred.reshape(-1, pred.shape[-1])
    if rows.shape[0] != label.numel():
        raise ValueError(
            f"{what}: labels of shape {tuple(label.shape)} do not match "
            f"predictions of shape {tuple(pred.shape)}"
        )
    return rows.gather(1, label.to(torch.int64).unsqueeze(1)).squeeze(1)


@register
@alias("ce", "cross-entropy")
class CrossEntropy(EvalMetric):
    """Mean of ``-log(p[label] + eps)`` over samples; predictions are probabilities, labels class ids."""

    _keeps_global_stats = True
    _default_name = "cross-entropy"

    def __init__(
        self,
        eps: float = 1e-12,
        name: str | None = None,
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        name = self._default_name if name is None else name
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names)
        self.eps = eps

    def update(self, labels: Arrays, preds: Arrays) -> None:
        labels_l, preds_l = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels_l, preds_l):
            prob = _in_float(_picked_probabilities(label, pred, type(self).__name__))
            self._accumulate(_batch_sum(-torch.log(prob + self.eps)), prob.numel())


@register
@alias("nll_loss", "nll-loss")
class NegativeLogLikelihood(CrossEntropy):
    """Negative log-likelihood: the same computation as ``CrossEntropy``, named ``'nll-loss'``."""

    _default_name = "nll-loss"


@register
class Perplexity(EvalMetric):
    """``exp`` of the mean negative log-probability of the labels.

    ``axis`` is the class axis of the predictions; entries whose label equals ``ignore_label``
    are left out of both the sum and the count.  Out-of-range labels are clipped, as MXNet's
    ``pick`` does.
    """

    _keeps_global_stats = True

    def __init__(
        self,
        ignore_label: int | None = None,
        axis: int = -1,
        name: str = "perplexity",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            name, ignore_label=ignore_label, axis=axis, output_names=output_names, label_names=label_names
        )
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels: Arrays, preds: Arrays) -> None:
        labels_l, preds_l = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels_l, preds_l):
            if pred.dim() == 0 or not -pred.dim() <= self.axis < pred.dim():
                raise ValueError(
                    f"Perplexity: axis {self.axis} is out of range for predictions "
                    f"of shape {tuple(pred.shape)}"
                )
            rows = pred.movedim(self.axis, -1)
            classes = rows.shape[-1]
            if label.numel() * classes != pred.numel():
                raise ValueError(
                    f"Perplexity: labels of shape {tuple(label.shape)} do not match predictions of shape "
                    f"{tuple(pred.shape)} (class axis {self.axis})"
                )
            flat_label = _on_device_of(label, pred).reshape(-1)
            index = flat_label.to(torch.int64).clamp(0, max(classes - 1, 0))
            prob = _in_float(rows.reshape(-1, classes).gather(1, index.unsqueeze(1)).squeeze(1))
            count: Scalar = prob.numel()
            if self.ignore_label is not None:
                ignore = flat_label == self.ignore_label
                count = prob.numel() - ignore.sum()
                prob = torch.where(ignore, torch.ones_like(prob), prob)
            self._accumulate(-_batch_sum(torch.log(prob.clamp_min(1e-10))), count)

    def _finish(self, sum_metric: Scalar, num_inst: Scalar, local: bool) -> float:
        num = _py(num_inst)
        if num == 0:
            return float("nan")
        return math.exp(float(_py(sum_metric)) / num)


@register
class Loss(_NamedMetric):
    """Mean of the values given as predictions (e.g. per-sample losses); labels are ignored."""

    _default_name = "loss"

    def update(self, _: Any, preds: Arrays) -> None:
        for pred in _as_list(preds):
            self._accumulate(pred.sum(), pred.numel())


@register
class Torch(Loss):
    """``Loss`` named ``'torch'`` (MXNet's dummy metric for torch criterions)."""

    _default_name = "torch"


@register
class Caffe(Loss):
    """``Loss`` named ``'caffe'`` (MXNet's dummy metric for caffe criterions)."""

    _default_name = "caffe"
