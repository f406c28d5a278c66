"""Regression metrics: MAE, MSE, RMSE and PearsonCorrelation."""

from __future__ import annotations

import torch

from .base import (
    Arrays,
    Scalar,
    _acc_float,
    _AveragedMetric,
    _NamedMetric,
    _on_device_of,
    _py,
    alias,
    check_label_shapes,
    register,
)

__all__ = ["MAE", "MSE", "RMSE", "PearsonCorrelation"]


def _difference(label: torch.Tensor, pred: torch.Tensor, what: str) -> torch.Tensor:
    """``label - pred`` in the widest float type, 1-D arrays taken as columns ``(N, 1)``."""
    label = _on_device_of(label, pred)
    lab = label.reshape(-1, 1) if label.dim() <= 1 else label
    prd = pred.reshape(-1, 1) if pred.dim() <= 1 else pred
    if lab.shape[0] != prd.shape[0]:
        raise ValueError(
            f"{what}: labels of shape {tuple(label.shape)} and predictions of shape {tuple(pred.shape)} "
            "have different batch sizes"
        )
    try:
        torch.broadcast_shapes(lab.shape, prd.shape)
    except RuntimeError:
        raise ValueError(
            f"{what}: labels of shape {tuple(label.shape)} do not match "
            f"predictions of shape {tuple(pred.shape)}"
        ) from None
    return _acc_float(lab) - _acc_float(prd)


class _BatchMeanMetric(_NamedMetric):
    """Average over updates of a per-array statistic (each array counts as one instance, as in MXNet)."""

    def _value(self, diff: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def update(self, labels: Arrays, preds: Arrays) -> None:
        labels_l, preds_l = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels_l, preds_l):
            self._accumulate(self._value(_difference(label, pred, type(self).__name__)), 1)


@register
class MAE(_BatchMeanMetric):
    """Mean absolute error, averaged per array then over arrays."""

    _default_name = "mae"

    def _value(self, diff: torch.Tensor) -> torch.Tensor:
        return diff.abs().mean()


@register
class MSE(_BatchMeanMetric):
    """Mean squared error, averaged per array then over arrays."""

    _default_name = "mse"

    def _value(self, diff: torch.Tensor) -> torch.Tensor:
        return diff.square().mean()


@register
class RMSE(_BatchMeanMetric):
    """Root mean squared error of each array, averaged over arrays."""

    _default_name = "rmse"

    def _value(self, diff: torch.Tensor) -> torch.Tensor:
        return diff.square().mean().sqrt()


# streaming moments: (count, tensor[mean_x, mean_y, m2_x, m2_y, c_xy]), or (0, None) when empty
_Moments = tuple[int, torch.Tensor | None]


def _moments(x: torch.Tensor, y: torch.Tensor) -> _Moments:
    mx, my = x.mean(), y.mean()
    dx, dy = x - mx, y - my
    return x.numel(), torch.stack([mx, my, dx.square().sum(), dy.square().sum(), (dx * dy).sum()])


def _merge(a: _Moments, b: _Moments) -> _Moments:
    """Combine two sets of moments (Chan et al.'s parallel update); nothing leaves the device."""
    na, sa = a
    nb, sb = b
    if sa is None or na == 0:
        return b
    if sb is None or nb == 0:
        return a
    sb = sb.to(sa.device)
    n = na + nb
    dx, dy = sb[0] - sa[0], sb[1] - sa[1]
    w = na * nb / n
    merged = torch.stack(
        [
            sa[0] + dx * (nb / n),
            sa[1] + dy * (nb / n),
            sa[2] + sb[2] + dx * dx * w,
            sa[3] + sb[3] + dy * dy * w,
            sa[4] + sb[4] + dx * dy * w,
        ]
    )
    return n, merged


@register
@alias("pearsonr")
class PearsonCorrelation(_AveragedMetric):
    """Pearson correlation coefficient between predictions and labels (of equal shapes).

    ``average='macro'`` averages the coefficient of each array; ``'micro'`` computes one
    coefficient over every value seen.
    """

    _default_name = "pearsonr"

    def reset(self) -> None:
        super().reset()
        self._moments: _Moments = (0, None)
        self._gmoments: _Moments = (0, None)

    def reset_local(self) -> None:
        super().reset_local()
        self._moments = (0, None)

    def update(self, labels: Arrays, preds: Arrays) -> None:
        labels_l, preds_l = check_label_shapes(labels, preds, wrap=True)
        for label, pred in zip(labels_l, preds_l):
            if label.shape != pred.shape:
                raise ValueError(
                    f"PearsonCorrelation: labels of shape {tuple(label.shape)} do not match "
                    f"predictions of shape {tuple(pred.shape)}"
                )
            y = _acc_float(_on_device_of(label, pred)).reshape(-1)
            x = _acc_float(pred).reshape(-1)
            if self.average == "macro":
                xm, ym = x - x.mean(), y - y.mean()
                r = (xm * ym).sum() / (xm.square().sum() * ym.square().sum()).sqrt()
                self._accumulate(r, 1)
            else:
                batch = _moments(x, y)
                self._moments = _merge(self._moments, batch)
                self._gmoments = _merge(self._gmoments, batch)
                self._accumulate(0, 1)

    def _finish(self, sum_metric: Scalar, num_inst: Scalar, local: bool) -> float:
        if self.average == "macro":
            return super()._finish(sum_metric, num_inst, local)
        n, stats = self._moments if local else self._gmoments
        if _py(num_inst) == 0 or n == 0 or stats is None:
            return float("nan")
        return float((stats[4] / (stats[2] * stats[3]).sqrt()).item())
