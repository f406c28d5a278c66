"""Gluon losses on PyTorch, with MXNet's conventions.

Every loss returns one value per sample: shape ``(batch,)``, the element-wise loss averaged
over every axis except ``batch_axis``.  As in MXNet 1.9, KLDivLoss and TripletLoss sum over
those axes instead, CTCLoss gives one value per sequence, CosineEmbeddingLoss one value per
compared vector pair (shape ``(pairs, 1)``) and PoissonNLLLoss a single mean (shape ``(1,)``).  The
element-wise loss is first multiplied by the optional ``sample_weight`` argument (broadcast)
and by the constructor's scalar ``weight``.  Labels are reshaped to the prediction's shape
(MXNet's ``reshape_like``), so they must have as many elements as the prediction.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError
from ..nd._ctc import CTCLoss as nd_ctc_loss
from ..util import is_np_array
from ._loss_graphs import GRAPHS
from .block import HybridBlock

__all__ = [
    "Loss", "L2Loss", "L1Loss", "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss",
    "SoftmaxCrossEntropyLoss", "SoftmaxCELoss", "KLDivLoss", "CTCLoss", "HuberLoss", "HingeLoss",
    "SquaredHingeLoss", "LogisticLoss", "TripletLoss", "PoissonNLLLoss", "CosineEmbeddingLoss",
    "SDMLLoss",
]

Tensor = torch.Tensor


# ---- helpers ---------------------------------------------------------------------------------
def _as_tensor(x: Any, like: Tensor, name: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (Real, list, tuple)) or hasattr(x, "__array__"):
        return torch.as_tensor(x, dtype=like.dtype, device=like.device)
    raise TypeError(f"{name} must be a tensor or a number, got {type(x).__name__}")


def _reshape_like(x: Any, y: Tensor, name: str = "label") -> Tensor:
    """``x`` reshaped to ``y``'s shape, in ``y``'s floating dtype (MXNet's reshape_like)."""
    x = _as_tensor(x, y, name)
    if x.shape != y.shape:
        if x.numel() != y.numel():
            raise MXNetError(f"{name} of shape {tuple(x.shape)} cannot be reshaped like the prediction of "
                             f"shape {tuple(y.shape)}: they must have the same number of elements")
        x = x.reshape(y.shape)
    if x.dtype != y.dtype and y.is_floating_point():
        x = x.to(y.dtype)
    return x


def _apply_weighting(loss: Tensor, weight: float | None, sample_weight: Any = None) -> Tensor:
    """``loss * sample_weight * weight`` (``sample_weight`` must broadcast to ``loss``)."""
    if sample_weight is not None:
        sw = _as_tensor(sample_weight, loss, "sample_weight")
        if sw.dtype != loss.dtype and loss.is_floating_point():
            sw = sw.to(loss.dtype)
        try:
            torch.broadcast_shapes(loss.shape, sw.shape)
        except RuntimeError:
            raise MXNetError(f"sample_weight of shape {tuple(sw.shape)} does not broadcast to the "
                             f"element-wise loss of shape {tuple(loss.shape)}") from None
        loss = loss * sw
    if weight is not None and weight != 1:
        loss = loss * weight
    return loss


def _norm_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < ndim:
        raise MXNetError(f"{what}={axis} is out of range for a tensor with {ndim} dimension(s)")
    return axis % ndim


def _batch_mean(loss: Tensor, batch_axis: int) -> Tensor:
    """Mean over every axis but ``batch_axis`` (MXNet's ``mean(axis=batch_axis, exclude=True)``)."""
    b = _norm_axis(batch_axis, loss.ndim, "batch_axis") if loss.ndim else 0
    dims = [d for d in range(loss.ndim) if d != b]
    return loss.mean(dim=dims) if dims else loss  # torch reads dim=[] as "all dims": keep the guard


def _class_axis_loss_mean(loss: Tensor, axis: int, batch_axis: int, weight: float | None,
                          sample_weight: Any) -> Tensor:
    """Weight and batch-average a loss computed over the class axis ``axis`` (``loss`` has the
    prediction's shape without ``axis``; ``sample_weight`` broadcasts against the prediction)."""
    if sample_weight is not None:
        return _batch_mean(_apply_weighting(loss.unsqueeze(axis), weight, sample_weight), batch_axis)
    loss = _apply_weighting(loss, weight)
    if batch_axis == axis:
        return loss.mean().reshape(1)
    return _batch_mean(loss, batch_axis - (axis < batch_axis))


def _batch_sum(loss: Tensor, batch_axis: int) -> Tensor:
    """Sum over every axis but ``batch_axis``."""
    b = _norm_axis(batch_axis, loss.ndim, "batch_axis") if loss.ndim else 0
    dims = [d for d in range(loss.ndim) if d != b]
    return loss.sum(dim=dims) if dims else loss


def _check_weight(weight: Any) -> float | None:
    if weight is None:
        return None
    if isinstance(weight, bool) or not isinstance(weight, Real):
        raise TypeError(f"weight must be a number or None, got {weight!r}")
    return float(weight)


# ---- base ------------------------------------------------------------------------------------
class Loss(HybridBlock):
    """Base class of losses: a HybridBlock holding a global scalar ``weight`` and ``batch_axis``."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(batch_axis, bool) or not isinstance(batch_axis, int):
            raise TypeError(f"batch_axis must be an int, got {batch_axis!r}")
        self._weight = _check_weight(weight)
        self._batch_axis = batch_axis

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_axis={self._batch_axis}, w={self._weight})"

    def hybrid_forward(self, F: Any, *args: Any, **kwargs: Any) -> Any:
        """MXNet's graph of this loss with ``F`` = ``mx.sym`` (or ``mx.nd``): what
        ``loss(mx.sym.var('pred'), mx.sym.var('label'))`` builds.  A subclass that defines its own
        ``forward`` is traced through that instead."""
        owner = next(c for c in type(self).__mro__ if "forward" in c.__dict__)
        graph = GRAPHS.get(owner.__name__) if owner.__module__ == __name__ else None
        if graph is None:
            return self.forward(*args, **kwargs)
        return graph(F, self, *args, **kwargs)


# ---- regression ------------------------------------------------------------------------------
class L2Loss(Loss):
    """Half the squared error: ``L = mean_i( 0.5 * (pred_i - label_i)^2 )`` per sample.

    Note the factor 1/2 (MXNet's definition); ``weight`` defaults to 1.
    """

    def __init__(self, weight: float | None = 1.0, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)

    def forward(self, pred: Tensor, label: Tensor, sample_weight: Any = None) -> Tensor:
        label = _reshape_like(label, pred)
        loss = F.mse_loss(pred, label, reduction="none")
        w = 0.5 * (self._weight if self._weight is not None else 1.0)
        return _batch_mean(_apply_weighting(loss, w, sample_weight), self._batch_axis)


class L1Loss(Loss):
    """Absolute error: ``L = mean_i |pred_i - label_i|`` per sample."""

    def forward(self, pred: Tensor, label: Tensor, sample_weight: Any = None) -> Tensor:
        label = _reshape_like(label, pred)
        loss = F.l1_loss(pred, label, reduction="none")
        return _batch_mean(_apply_weighting(loss, self._weight, sample_weight), self._batch_axis)


class HuberLoss(Loss):
    """Smoothed L1: ``d = |pred - label|``; ``L = d^2 / (2 rho)`` if ``d < rho`` else ``d - rho/2``."""

    def __init__(self, rho: float = 1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        if not isinstance(rho, Real) or rho < 0:
            raise ValueError(f"rho must be a non-negative number, got {rho!r}")
        self._rho: float = float(rho)

    def forward(self, pred: Tensor, label: Tensor, sample_weight: Any = None) -> Tensor:
        label = _reshape_like(label, pred)
        loss = F.smooth_l1_loss(pred, label, reduction="none", beta=self._rho)  # same piecewise formula
        return _batch_mean(_apply_weighting(loss, self._weight, sample_weight), self._batch_axis)


class PoissonNLLLoss(Loss):
    """Poisson negative log-likelihood of ``target`` given the predicted rate.

    ``from_logits=True``: ``L = exp(pred) - target * pred`` (pred is the log-rate);
    otherwise ``L = pred - target * log(pred + epsilon)``.  ``compute_full`` adds Stirling's
    approximation of ``log(target!)``, ``target*log(target) - target + 0.5*log(2*pi*target)``,
    where ``target > 1``.  The result is the mean over every element, batch included: one
    value of shape ``(1,)`` (shape ``()`` under ``npx.set_np()``), as MXNet 1.9 returns.
    """

    def __init__(self, weight: float | None = None, from_logits: bool = True, batch_axis: int = 0,
                 compute_full: bool = False, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = bool(from_logits)
        self._compute_full = bool(compute_full)

    def forward(self, pred: Tensor, target: Tensor, sample_weight: Any = None,
                epsilon: float = 1e-08) -> Tensor:
        target = _reshape_like(target, pred, "target")
        if self._from_logits:
            loss = torch.exp(pred) - target * pred
        else:
            loss = pred - target * torch.log(pred + epsilon)
        if self._compute_full:
            big = target > 1
            t = torch.where(big, target, torch.ones_like(target))  # keeps log() finite where masked
            stirling = t * torch.log(t) - t + 0.5 * torch.log(2 * math.pi * t)
            loss = loss + torch.where(big, stirling, torch.zeros_like(stirling))
        loss = _apply_weighting(loss, self._weight, sample_weight).mean()
        return loss if is_np_array() else loss.reshape(1)


# ---- classification --------------------------------------------------------------------------
class SoftmaxCrossEntropyLoss(Loss):
    """Softmax cross-entropy.  (alias: SoftmaxCELoss)

    ``p = log_softmax(pred, axis)`` (or ``p = pred`` when ``from_logits``);
    sparse labels (class indices, int or float): ``L = -p[label]``; dense labels
    (distributions shaped like pred): ``L = -sum_axis(label * p)``.  A sparse label has pred's
    shape without ``axis``; ``sample_weight`` broadcasts against pred's shape with ``axis``
    kept as size 1.  Out-of-range class indices raise an error (MXNet clips them).
    """

    def __init__(self, axis: int = -1, sparse_label: bool = True, from_logits: bool = False,
                 weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"axis must be an int, got {axis!r}")
        self._axis = axis
        self._sparse_label = bool(sparse_label)
        self._from_logits = bool(from_logits)

    def forward(self, pred: Tensor, label: Tensor, sample_weight: Any = None) -> Tensor:
        if pred.ndim < 2:
            pred = pred.reshape(1, -1)  # a lone score vector is one sample
            axis, batch_axis = 1, 0
        else:
            axis = _norm_axis(self._axis, pred.ndim)
            batch_axis = _norm_axis(self._batch_axis, pred.ndim, "batch_axis")
        # torch's fused kernels want classes on dim 1; the other dims keep their order
        p = pred if axis == 1 else pred.movedim(axis, 1)
        if self._sparse_label:
            red_shape = pred.shape[:axis] + pred.shape[axis + 1:]
            label = _as_tensor(label, pred, "label")
            if label.shape != red_shape:
                if label.numel() != math.prod(red_shape):
                    raise MXNetError(
                        f"sparse label of shape {tuple(label.shape)} does not match the prediction of "
                        f"shape {tuple(pred.shape)} with axis {axis} removed {tuple(red_shape)}")
                label = label.reshape(red_shape)
            label = label.long()
            if self._from_logits:
                loss = F.nll_loss(p, label, reduction="none", ignore_index=-(2**62))
            else:
                loss = F.cross_entropy(p, label, reduction="none", ignore_index=-(2**62))
        else:
            label = _reshape_like(label, pred)
            if self._from_logits:
                loss = -(pred * label).sum(dim=axis)
            else:
                loss = F.cross_entropy(p, label if axis == 1 else label.movedim(axis, 1), reduction="none")
        return _class_axis_loss_mean(loss, axis, batch_axis, self._weight, sample_weight)


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy on logits (or probabilities).  (alias: SigmoidBCELoss)

    ``L = -[pos_weight * label * log(sigmoid(pred)) + (1 - label) * log(1 - sigmoid(pred))]``,
    computed stably as ``(1-z)*x + (1 + (pw-1)*z) * (log(1 + exp(-|x|)) + max(-x, 0))``.
    With ``from_sigmoid=True`` pred are probabilities and ``log(pred + 1e-12)`` is used.
    ``pos_weight`` broadcasts against pred (e.g. shape ``(1, classes)``).
    """

    def __init__(self, from_sigmoid: bool = False, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = bool(from_sigmoid)

    def forward(self, pred: Tensor, label: Tensor, sample_weight: Any = None,
                pos_weight: Any = None) -> Tensor:
        label = _reshape_like(label, pred)
        pw = None if pos_weight is None else _as_tensor(pos_weight, pred, "pos_weight")
        if not self._from_sigmoid:
            loss = F.binary_cross_entropy_with_logits(pred, label, reduction="none", pos_weight=pw)
        else:
            eps = 1e-12
            pos = torch.log(pred + eps) * label
            if pw is not None:
                pos = pos * pw
            loss = -(pos + torch.log(1.0 - pred + eps) * (1.0 - label))
        return _batch_mean(_apply_weighting(loss, self._weight, sample_weight), self._batch_axis)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class KLDivLoss(Loss):
    """Kullback-Leibler divergence ``L = sum_i label_i * (log(label_i + 1e-12) - p_i)``.

    The sum runs over every axis but ``batch_axis`` (MXNet 1.9's code sums, although its
    docstring says "averaged"); output shape ``(batch,)``.

    ``p = pred`` (log-probabilities) when ``from_logits`` (default), else
    ``p = log_softmax(pred, axis)``.
    """

    def __init__(self, from_logits: bool = True, axis: int = -1, weight: float | None = None,
                 batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = bool(from_logits)
        self._axis = axis

    def forward(self, pred: Tensor, label: Tensor, sample_weight: Any = None) -> Tensor:
        label = _reshape_like(label, pred)
        if not self._from_logits:
            pred = F.log_softmax(pred, dim=self._axis)
        loss = label * (torch.log(label + 1e-12) - pred)
        return _batch_sum(_apply_weighting(loss, self._weight, sample_weight), self._batch_axis)


class _Hinge(Loss):
    """``max(0, margin - pred * label)``, squared when ``_squared``; labels in {-1, 1}."""

    _squared = False

    def __init__(self, margin: float = 1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def forward(self, pred: Tensor, label: Tensor, sample_weight: Any = None) -> Tensor:
        label = _reshape_like(label, pred)
        loss = torch.relu(self._margin - pred * label)
        if self._squared:
            loss = loss.square()
        return _batch_mean(_apply_weighting(loss, self._weight, sample_weight), self._batch_axis)


class HingeLoss(_Hinge):
    """SVM hinge loss ``L = mean_i max(0, margin - pred_i * label_i)``, labels in {-1, 1}."""


class SquaredHingeLoss(_Hinge):
    """Soft-margin loss ``L = mean_i max(0, margin - pred_i * label_i)^2``, labels in {-1, 1}."""

    _squared = True


class LogisticLoss(Loss):
    """Logistic loss ``L = mean_i log(1 + exp(-pred_i * label_i))`` for labels in {-1, 1}.

    ``label_format='binary'`` takes labels in {0, 1}.  Computed stably as
    ``max(x, 0) - x*z + log(1 + exp(-|x|))`` with ``z`` the {0, 1} label.
    """

    def __init__(self, weight: float | None = None, batch_axis: int = 0, label_format: str = "signed",
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        if label_format not in ("signed", "binary"):
            raise ValueError(f"label_format must be 'signed' or 'binary', got {label_format!r}")
        self._label_format = label_format

    def forward(self, pred: Tensor, label: Tensor, sample_weight: Any = None) -> Tensor:
        label = _reshape_like(label, pred)
        if self._label_format == "signed":
            label = (label + 1.0) / 2.0
        loss = F.binary_cross_entropy_with_logits(pred, label, reduction="none")
        return _batch_mean(_apply_weighting(loss, self._weight, sample_weight), self._batch_axis)


# ---- embeddings ------------------------------------------------------------------------------
class TripletLoss(Loss):
    """Triplet loss ``L = max(sum_i (positive_i - pred_i)^2 - (negative_i - pred_i)^2 + margin, 0)``.

    The sum runs over every non-batch axis; output shape ``(batch,)``.
    """

    def __init__(self, margin: float = 1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def forward(self, pred: Tensor, positive: Tensor, negative: Tensor, sample_weight: Any = None) -> Tensor:
        positive = _reshape_like(positive, pred, "positive")
        negative = _reshape_like(negative, pred, "negative")
        loss = _batch_sum((positive - pred).square() - (negative - pred).square(), self._batch_axis)
        loss = torch.relu(loss + self._margin)
        return _apply_weighting(loss, self._weight, sample_weight)


class CosineEmbeddingLoss(Loss):
    """Cosine embedding loss for pairs labelled 1 (similar) or -1 (dissimilar).

    ``c = cos_sim(input1, input2)`` along the last axis (norm product floored at 1e-12);
    ``L = 1 - c`` where ``label == 1``, ``max(c - margin, 0)`` where ``label == -1`` and 0 for
    any other label.  As in MXNet 1.9 the result has one row per compared vector pair, shape
    ``(pairs, 1)`` with ``pairs = input.size / input.shape[-1]`` (``(batch, 1)`` for 2-D
    inputs); ``label`` holds one value per pair and ``sample_weight`` broadcasts to
    ``(pairs, 1)``.
    """

    def __init__(self, weight: float | None = None, batch_axis: int = 0, margin: float = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def forward(self, input1: Tensor, input2: Tensor, label: Tensor, sample_weight: Any = None) -> Tensor:
        input1 = _reshape_like(input1, input2, "input1")
        dot = (input1 * input2).sum(dim=-1).reshape(-1, 1)
        norms = torch.linalg.vector_norm(input1, dim=-1) * torch.linalg.vector_norm(input2, dim=-1)
        cos = dot / norms.reshape(-1, 1).clamp_min(1e-12)
        label = _as_tensor(label, cos, "label")
        if label.numel() != cos.shape[0]:
            raise MXNetError(f"CosineEmbeddingLoss: label has {label.numel()} element(s) but the inputs "
                             f"hold {cos.shape[0]} vector pair(s) along their last axis")
        label = label.reshape(-1, 1)
        zero = torch.zeros((), dtype=cos.dtype, device=cos.device)
        loss = torch.where(label == 1, 1 - cos, zero) + \
            torch.where(label == -1, (cos - self._margin).clamp_min(0), zero)
        return _apply_weighting(loss, self._weight, sample_weight)


class SDMLLoss(Loss):
    """Batch-wise Smoothed Deep Metric Learning loss (Bonadiman et al., 2019).

    Row ``i`` of ``x1`` pairs with row ``i`` of ``x2``; the other rows act as negatives.
    ``d_ij = ||x1_i - x2_j||^2``; ``L_i = KL(t_i || softmax(-d_i))`` (KLDivLoss convention,
    averaged over j), with targets ``t = (1-s)`` on the diagonal and ``s/(batch-1)`` elsewhere.
    """

    def __init__(self, smoothing_parameter: float = 0.3, weight: float | None = 1.0, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        if not isinstance(smoothing_parameter, Real) or not 0 <= smoothing_parameter < 1:
            raise ValueError(f"smoothing_parameter must be in [0, 1), got {smoothing_parameter!r}")
        self.kl_loss: KLDivLoss = KLDivLoss(from_logits=True)
        self.smoothing_parameter: float = float(smoothing_parameter)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        if x1.ndim != 2 or x1.shape != x2.shape:
            raise MXNetError(f"SDMLLoss expects two (batch, dim) tensors of the same shape, got "
                             f"{tuple(x1.shape)} and {tuple(x2.shape)}")
        n = x1.shape[0]
        s = self.smoothing_parameter
        eye = torch.eye(n, dtype=x1.dtype, device=x1.device)
        off = s / (n - 1) if n > 1 else 0.0
        labels = eye * (1 - s) + (1 - eye) * off
        dist = (x1.unsqueeze(1) - x2.unsqueeze(0)).square().sum(dim=2)
        loss = self.kl_loss(F.log_softmax(-dist, dim=1), labels)
        return _apply_weighting(loss, self._weight)


# ---- sequences -------------------------------------------------------------------------------
class CTCLoss(Loss):
    """Connectionist Temporal Classification loss, ``L = -log p(label | pred)``; shape ``(batch,)``.

    ``pred`` holds unnormalized scores (softmax is applied inside) laid out as ``layout``
    ('NTC' or 'TNC'); the last class, ``alphabet_size - 1``, is the blank, so real labels
    are ``0 .. alphabet_size - 2``.  ``label`` is laid out as ``label_layout`` ('NT' or 'TN')
    and padded with -1; without ``label_lengths`` a sequence ends at its first -1.  Without
    ``pred_lengths`` every sequence uses all time steps.  Infeasible alignments give ``inf``.
    """

    def __init__(self, layout: str = "NTC", label_layout: str = "NT", weight: float | None = None,
                 **kwargs: Any) -> None:
        if layout not in ("NTC", "TNC"):
            raise ValueError(f"layout must be 'NTC' or 'TNC', got {layout!r}")
        if label_layout not in ("NT", "TN"):
            raise ValueError(f"label_layout must be 'NT' or 'TN', got {label_layout!r}")
        super().__init__(weight, label_layout.find("N"), **kwargs)
        self._layout = layout
        self._label_layout = label_layout

    def forward(self, pred: Tensor, label: Tensor, pred_lengths: Any = None, label_lengths: Any = None,
                sample_weight: Any = None) -> Tensor:
        if pred.ndim != 3:
            raise MXNetError(f"CTCLoss expects a 3-D pred ({self._layout}), got shape {tuple(pred.shape)}")
        label = _as_tensor(label, pred, "label")
        if label.ndim != 2:
            raise MXNetError(f"CTCLoss expects a 2-D label ({self._label_layout}), got shape "
                             f"{tuple(label.shape)}")
        if self._layout == "NTC":
            pred = pred.transpose(0, 1)  # -> (T, N, C)
        if self._label_layout == "TN":
            label = label.transpose(0, 1)  # -> (N, S)
        if label.shape[0] != pred.shape[1]:
            raise MXNetError(f"CTCLoss: pred has batch size {pred.shape[1]} but label has {label.shape[0]}")
        loss = nd_ctc_loss(pred, label, pred_lengths, label_lengths,
                              use_data_lengths=pred_lengths is not None,
                              use_label_lengths=label_lengths is not None, blank_label="last")
        return _apply_weighting(loss, self._weight, sample_weight)
