"""The losses as MXNet graphs: each loss's formula written once for ``F`` = ``mx.sym`` (or
``mx.nd``), as MXNet's ``hybrid_forward`` computes it.

``loss(mx.sym.var('pred'), mx.sym.var('label'))`` builds a Symbol from these (a Module can train
it); the tensor path stays in :mod:`.loss`, written on torch's fused kernels.  A test checks that
both give the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["GRAPHS"]


def _weighted(F: Any, loss: Any, weight: float | None, sample_weight: Any) -> Any:
    if sample_weight is not None:
        loss = F.broadcast_mul(loss, sample_weight)
    if weight is not None:
        loss = loss * weight
    return loss


def _batch_mean(F: Any, b: Any, loss: Any, sample_weight: Any, weight: Any = "own") -> Any:
    loss = _weighted(F, loss, b._weight if weight == "own" else weight, sample_weight)
    return F.mean(loss, axis=b._batch_axis, exclude=True)


def _softrelu(F: Any, x: Any) -> Any:
    return F.Activation(x, act_type="softrelu")


def _l2(F: Any, b: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
    label = F.reshape_like(label, pred)
    w = 0.5 * (b._weight if b._weight is not None else 1.0)
    return _batch_mean(F, b, F.square(label - pred), sample_weight, w)


def _l1(F: Any, b: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
    label = F.reshape_like(label, pred)
    return _batch_mean(F, b, F.abs(label - pred), sample_weight)


def _sigmoid_bce(F: Any, b: Any, pred: Any, label: Any, sample_weight: Any = None,
                 pos_weight: Any = None) -> Any:
    label = F.reshape_like(label, pred)
    if not b._from_sigmoid:
        if pos_weight is None:
            # max(x, 0) - x*z + log(1 + exp(-|x|)): stable for any logit
            loss = F.relu(pred) - pred * label + _softrelu(F, -F.abs(pred))
        else:
            scale = 1 + F.broadcast_mul(pos_weight - 1, label)
            loss = pred - pred * label + scale * (_softrelu(F, -F.abs(pred)) + F.relu(-pred))
    else:
        eps = 1e-12
        pos = F.log(pred + eps) * label
        if pos_weight is not None:
            pos = F.broadcast_mul(pos, pos_weight)
        loss = -(pos + F.log(1.0 - pred + eps) * (1.0 - label))
    return _batch_mean(F, b, loss, sample_weight)


def _softmax_ce(F: Any, b: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
    if not b._from_logits:
        pred = F.log_softmax(pred, axis=b._axis)
    if b._sparse_label:
        loss = -F.pick(pred, label, axis=b._axis, keepdims=True)
    else:
        label = F.reshape_like(label, pred)
        loss = -F.sum(pred * label, axis=b._axis, keepdims=True)
    return _batch_mean(F, b, loss, sample_weight)


def _kl_div(F: Any, b: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
    if not b._from_logits:
        pred = F.log_softmax(pred, axis=b._axis)
    loss = label * (F.log(label + 1e-12) - pred)
    loss = _weighted(F, loss, b._weight, sample_weight)
    return F.sum(loss, axis=b._batch_axis, exclude=True)


def _huber(F: Any, b: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
    label = F.reshape_like(label, pred)
    d = F.abs(label - pred)
    loss = F.where(d > b._rho, d - 0.5 * b._rho, (0.5 / b._rho) * F.square(d))
    return _batch_mean(F, b, loss, sample_weight)


def _hinge(F: Any, b: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
    label = F.reshape_like(label, pred)
    loss = F.relu(b._margin - pred * label)
    if b._squared:
        loss = F.square(loss)
    return _batch_mean(F, b, loss, sample_weight)


def _logistic(F: Any, b: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
    label = F.reshape_like(label, pred)
    if b._label_format == "signed":
        label = (label + 1.0) / 2.0
    loss = F.relu(pred) - pred * label + _softrelu(F, -F.abs(pred))
    return _batch_mean(F, b, loss, sample_weight)


def _triplet(F: Any, b: Any, pred: Any, positive: Any, negative: Any, sample_weight: Any = None) -> Any:
    positive = F.reshape_like(positive, pred)
    negative = F.reshape_like(negative, pred)
    loss = F.sum(F.square(positive - pred) - F.square(negative - pred), axis=b._batch_axis, exclude=True)
    loss = F.relu(loss + b._margin)
    return _weighted(F, loss, b._weight, sample_weight)


def _poisson_nll(F: Any, b: Any, pred: Any, target: Any, sample_weight: Any = None,
                 epsilon: float = 1e-08) -> Any:
    target = F.reshape_like(target, pred)
    if b._from_logits:
        loss = F.exp(pred) - target * pred
    else:
        loss = pred - target * F.log(pred + epsilon)
    if b._compute_full:
        big = target > 1
        # where() keeps log() finite at the targets the mask drops (MXNet multiplies a NaN by 0)
        t = F.where(big, target, F.ones_like(target))
        stirling = t * F.log(t) - t + 0.5 * F.log(2 * math.pi * t)
        loss = loss + stirling * big
    return F.mean(_weighted(F, loss, b._weight, sample_weight))


def _cosine_embedding(F: Any, b: Any, input1: Any, input2: Any, label: Any, sample_weight: Any = None) -> Any:
    input1 = F.reshape_like(input1, input2)
    label = F.reshape(label, shape=(-1, 1))
    dot = F.reshape(F.sum(input1 * input2, axis=-1), shape=(-1, 1))
    norms = F.reshape(F.norm(input1, axis=-1) * F.norm(input2, axis=-1), shape=(-1, 1))
    cos = dot / F.maximum(norms, 1e-12)
    loss = (1 - cos) * (label == 1) + F.relu((cos - b._margin) * (label == -1))
    return _weighted(F, loss, b._weight, sample_weight)


def _ctc(F: Any, b: Any, pred: Any, label: Any, pred_lengths: Any = None, label_lengths: Any = None,
         sample_weight: Any = None) -> Any:
    if b._layout == "NTC":
        pred = F.swapaxes(pred, dim1=0, dim2=1)
    if b._label_layout == "TN":
        label = F.swapaxes(label, dim1=0, dim2=1)
    given = (("data_lengths", pred_lengths), ("label_lengths", label_lengths))
    lengths = {k: v for k, v in given if v is not None}
    loss = F.CTCLoss(pred, label, use_data_lengths=pred_lengths is not None,
                     use_label_lengths=label_lengths is not None, blank_label="last", **lengths)
    return _weighted(F, loss, b._weight, sample_weight)


# keyed by the loss class's name in mxtorch.gluon.loss (a class defining its own forward gets
# the graph of the nearest class listed here only when it is that class)
GRAPHS: dict[str, Callable[..., Any]] = {
    "L2Loss": _l2,
    "L1Loss": _l1,
    "SigmoidBinaryCrossEntropyLoss": _sigmoid_bce,
    "SoftmaxCrossEntropyLoss": _softmax_ce,
    "KLDivLoss": _kl_div,
    "HuberLoss": _huber,
    "_Hinge": _hinge,
    "LogisticLoss": _logistic,
    "TripletLoss": _triplet,
    "PoissonNLLLoss": _poisson_nll,
    "CosineEmbeddingLoss": _cosine_embedding,
    "CTCLoss": _ctc,
}
