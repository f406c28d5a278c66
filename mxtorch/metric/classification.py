"""Classification metrics: Accuracy, TopKAccuracy, F1 and MCC."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from .base import (
    Arrays,
    EvalMetric,
    Scalar,
    _add,
    _AveragedMetric,
    _on_device_of,
    _py,
    alias,
    check_label_shapes,
    register,
)

__all__ = ["Accuracy", "TopKAccuracy", "F1", "MCC", "PCC"]


def _check_axis(axis: int, ndim: int, what: str) -> None:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what}: axis {axis} is out of range for predictions with {ndim} dimensions")


@register
@alias("acc")
class Accuracy(EvalMetric):
    """Fraction of predictions equal to the labels.

    Predictions with the labels' shape are taken as class ids; otherwise the class is the argmax
    of the predictions along ``axis``.
    """

    _keeps_global_stats = True

    def __init__(
        self,
        axis: int = 1,
        name: str = "accuracy",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names)
        self.axis = axis

    def update(self, labels: Arrays, preds: Arrays) -> None:
        labels_l, preds_l = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels_l, preds_l):
            label = _on_device_of(label, pred)
            pred_label = pred
            if pred.shape != label.shape:
                _check_axis(self.axis, pred.dim(), type(self).__name__)
                pred_label = pred.argmax(dim=self.axis)
            pred_flat = pred_label.reshape(-1).to(torch.int64)
            label_flat = label.reshape(-1).to(torch.int64)
            if pred_flat.numel() != label_flat.numel():
                raise ValueError(
                    f"{type(self).__name__}: labels of shape {tuple(label.shape)} do not match "
                    f"predictions of shape {tuple(pred.shape)} (axis={self.axis})"
                )
            self._accumulate((pred_flat == label_flat).sum(), pred_flat.numel())


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """Fraction of samples whose label is among the ``top_k`` highest-scored classes.

    Unlike MXNet, ``top_k=1`` is accepted (it equals ``Accuracy``).  The name gets ``_<top_k>``
    appended, as in MXNet.
    """

    _keeps_global_stats = True

    def __init__(
        self,
        top_k: int = 1,
        name: str = "top_k_accuracy",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}")
        super().__init__(name, top_k=top_k, output_names=output_names, label_names=label_names)
        self.top_k = top_k
        self.name += f"_{top_k}"

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        suffix = f"_{self.top_k}"
        if config["name"].endswith(suffix):
            config["name"] = config["name"][: -len(suffix)]
        return config

    def update(self, labels: Arrays, preds: Arrays) -> None:
        labels_l, preds_l = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels_l, preds_l):
            if pred.dim() > 2:
                raise ValueError(
                    f"TopKAccuracy: predictions must have at most 2 dimensions, got shape {tuple(pred.shape)}"
                )
            label = _on_device_of(label, pred).reshape(-1).to(torch.int64)
            num_samples = pred.shape[0] if pred.dim() > 0 else 1
            if label.numel() != num_samples:
                raise ValueError(
                    f"TopKAccuracy: labels of shape {tuple(label.shape)} do not match "
                    f"predictions of shape {tuple(pred.shape)}"
                )
            if pred.dim() < 2:
                correct = (pred.reshape(-1).to(torch.int64) == label).sum()
            else:
                k = min(self.top_k, pred.shape[1])
                top = pred.topk(k, dim=1).indices
                correct = (top == label.unsqueeze(1)).any(dim=1).sum()
            self._accumulate(correct, num_samples)


def _fscore(counts: torch.Tensor) -> torch.Tensor:
    tp, fp, fn, _ = _as_float(counts).unbind()
    zero = torch.zeros_like(tp)
    precision = torch.where(tp + fp > 0, tp / (tp + fp), zero)
    recall = torch.where(tp + fn > 0, tp / (tp + fn), zero)
    total = precision + recall
    return torch.where(total > 0, 2 * precision * recall / total, zero)


def _matthewscc(counts: torch.Tensor) -> torch.Tensor:
    tp, fp, fn, tn = _as_float(counts).unbind()
    terms = torch.stack([tp + fp, tp + fn, tn + fp, tn + fn])
    denom = torch.where(terms != 0, terms, torch.ones_like(terms)).prod()
    return (tp * tn - fp * fn) / denom.sqrt()


def _as_float(counts: torch.Tensor) -> torch.Tensor:
    return counts.to(torch.float32 if counts.device.type == "mps" else torch.float64)


class _BinaryClassificationMetric(_AveragedMetric):
    """Shared confusion-matrix bookkeeping of F1 and MCC (labels 0/1, positive class 1)."""

    _score: Callable[[torch.Tensor], torch.Tensor]  # the score of a confusion count vector

    def reset(self) -> None:
        super().reset()
        self._counts: Scalar = 0
        self._gcounts: Scalar = 0
        self._bad: torch.Tensor | None = None

    def reset_local(self) -> None:
        super().reset_local()
        self._counts = 0

    def _batch_counts(self, label: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        label = _on_device_of(label, pred)
        if pred.shape == label.shape:
            pred_label = pred
        elif pred.dim() == 2:
            pred_label = pred.argmax(dim=1)
        else:
            raise ValueError(
                f"{type(self).__name__}: predictions of shape {tuple(pred.shape)} must be class scores "
                f"(N, 2) or class ids shaped like the labels {tuple(label.shape)}"
            )
        pred_flat, label_flat = pred_label.reshape(-1), label.reshape(-1)
        if pred_flat.numel() != label_flat.numel():
            raise ValueError(
                f"{type(self).__name__}: labels of shape {tuple(label.shape)} do not match "
                f"predictions of shape {tuple(pred.shape)}"
            )
        if label_flat.numel() > 0:
            # three or more distinct values <=> some value lies strictly between min and max
            bad = ((label_flat != label_flat.min()) & (label_flat != label_flat.max())).any()
            if label_flat.device.type == "cpu":
                if bool(bad):
                    self._raise_not_binary(torch.unique(label_flat).tolist())
            else:
                self._bad = bad if self._bad is None else self._bad | bad.to(self._bad.device)
        pred_true = pred_flat == 1
        label_true = label_flat == 1
        return torch.stack(
            [
                (pred_true & label_true).sum(),
                (pred_true & ~label_true).sum(),
                (~pred_true & label_true).sum(),
                (~pred_true & ~label_true).sum(),
            ]
        )

    def _raise_not_binary(self, values: Any) -> None:
        raise ValueError(
            f"{type(self).__name__} supports binary classification only: labels hold more than two "
            f"distinct values ({values})"
        )

    def update(self, labels: Arrays, preds: Arrays) -> None:
        labels_l, preds_l = check_label_shapes(labels, preds, wrap=True)
        if not labels_l:
            return
        batch: Scalar = 0
        count = 0
        for label, pred in zip(labels_l, preds_l):
            batch = _add(batch, self._batch_counts(label, pred))
            count += label.numel()
        if self.average == "macro":
            self._accumulate(self._score(cast(torch.Tensor, batch)), 1)
        else:
            self._counts = _add(self._counts, batch)
            self._gcounts = _add(self._gcounts, batch)
            self._accumulate(0, count)

    def _finish(self, sum_metric: Scalar, num_inst: Scalar, local: bool) -> float:
        if self._bad is not None and bool(self._bad):
            self._raise_not_binary("seen in an earlier update")
        if self.average == "macro":
            return super()._finish(sum_metric, num_inst, local)
        counts = self._counts if local else self._gcounts
        if not isinstance(counts, torch.Tensor) or _py(num_inst) == 0:
            return float("nan")
        return float(self._score(counts).item())


@register
class F1(_BinaryClassificationMetric):
    """F1 score of a binary classification (positive class 1).

    ``average='macro'`` averages the per-update F1 scores; ``'micro'`` computes one F1 from the
    counts of all updates.  Predictions are class scores ``(N, 2)`` or class ids.
    """

    _default_name = "f1"
    _score = staticmethod(_fscore)


@register
class MCC(_BinaryClassificationMetric):
    """Matthews correlation coefficient of a binary classification (positive class 1).

    ``average`` works as in ``F1``.  Zero factors of the denominator are taken as 1, as MXNet does.
    """

    _default_name = "mcc"
    _score = staticmethod(_matthewscc)


@register
class PCC(EvalMetric):
    """Pearson correlation of a K x K confusion matrix: MCC generalised to many classes.

    With ``C`` the confusion matrix (rows: predicted class, columns: label), ``n = sum C``,
    ``x`` its row sums and ``y`` its column sums::

        PCC = sum_k (C_kk n - x_k y_k) / sqrt(sum_k x_k (n - x_k) * sum_k y_k (n - y_k))

    ``nan`` when either factor under the root is zero.  ``K`` starts at 2 and grows with the
    largest class id seen (reading that id back is the one host sync of an update).
    Predictions are class ids shaped like the labels, or class scores ``(N, K)`` (argmax on
    axis 1).  One ``update`` counts as one instance; the value is the PCC of every update's
    counts pooled together.
    """

    _keeps_global_stats = True

    def __init__(
        self,
        name: str = "pcc",
        output_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        has_global_stats: bool = True,
    ) -> None:
        self.k = 2
        super().__init__(
            name, output_names=output_names, label_names=label_names, has_global_stats=has_global_stats
        )

    def reset(self) -> None:
        super().reset()
        self._gcm: torch.Tensor | None = None
        self.reset_local()

    def reset_local(self) -> None:
        super().reset_local()
        self._lcm: torch.Tensor | None = None

    @staticmethod
    def _grown(cm: torch.Tensor | None, k: int) -> torch.Tensor | None:
        if cm is None or cm.shape[0] == k:
            return cm
        return torch.nn.functional.pad(cm, (0, k - cm.shape[1], 0, k - cm.shape[0]))

    def update(self, labels: Arrays, preds: Arrays) -> None:
        labels_l, preds_l = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels_l, preds_l):
            label = _on_device_of(label, pred).reshape(-1).to(torch.int64)
            if pred.shape != label.shape and pred.dim() == 2:
                pred_label = pred.argmax(dim=1)
            else:
                pred_label = pred.reshape(-1).to(torch.int64)
            if pred_label.numel() != label.numel():
                raise ValueError(
                    f"PCC: labels of shape {tuple(label.shape)} do not match predictions of shape "
                    f"{tuple(pred.shape)}"
                )
            if label.numel() == 0:
                continue
            lo, hi = torch.stack([torch.minimum(pred_label.min(), label.min()),
                                  torch.maximum(pred_label.max(), label.max())]).tolist()
            if lo < 0:
                raise ValueError(f"PCC: class ids must be >= 0, got {lo}")
            self.k = max(self.k, int(hi) + 1)
            k = self.k
            batch = torch.bincount(pred_label * k + label, minlength=k * k).reshape(k, k)
            self._lcm = self._grown(self._lcm, k)
            self._gcm = self._grown(self._gcm, k)
            self._lcm = batch if self._lcm is None else self._lcm + batch.to(self._lcm.device)
            self._gcm = batch if self._gcm is None else self._gcm + batch.to(self._gcm.device)
        self._accumulate(0, 1)

    @staticmethod
    def _calc_mcc(cm: torch.Tensor | None) -> float:
        if cm is None:
            return float("nan")
        c = _as_float(cm)
        n = c.sum()
        x, y = c.sum(dim=1), c.sum(dim=0)
        cov_xx, cov_yy = (x * (n - x)).sum(), (y * (n - y)).sum()
        cov_xy = (c.diagonal() * n - x * y).sum()
        if float(cov_xx) == 0 or float(cov_yy) == 0:
            return float("nan")
        return float(cov_xy / (cov_xx * cov_yy).sqrt())

    @property  # type: ignore[override]
    def sum_metric(self) -> float | int:
        """``PCC * num_inst`` of the local counts (derived, as in MXNet)."""
        return self._calc_mcc(self._lcm) * self.num_inst

    @sum_metric.setter
    def sum_metric(self, value: Scalar) -> None:
        raise AttributeError("PCC's sum_metric is derived from its confusion matrix; call reset() instead")

    @property  # type: ignore[override]
    def global_sum_metric(self) -> float | int:
        """``PCC * global_num_inst`` of the global counts."""
        return self._calc_mcc(self._gcm) * self.global_num_inst

    @global_sum_metric.setter
    def global_sum_metric(self, value: Scalar) -> None:
        raise AttributeError("PCC's global_sum_metric is derived from its confusion matrix; use reset()")

    def _finish(self, sum_metric: Scalar, num_inst: Scalar, local: bool) -> float:
        if _py(num_inst) == 0:
            return float("nan")
        return self._calc_mcc(self._lcm if local else self._gcm)
