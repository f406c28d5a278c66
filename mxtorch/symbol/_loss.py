"""MXNet's output (loss) operators of symbolic graphs, as torch autograd functions.

Their forward is a prediction (softmax, identity, sigmoid) and their backward ignores the head
gradient and gives the loss gradient directly, as MXNet's ``SoftmaxOutput``,
``LinearRegressionOutput``, ``LogisticRegressionOutput``, ``MAERegressionOutput``, ``SVMOutput``
and ``MakeLoss`` do; ``BlockGrad`` stops gradients.
"""

from __future__ import annotations

from typing import Any

import torch

Tensor = torch.Tensor

__all__ = ["softmax_output", "softmax_output_head", "plain_options", "regression_output", "svm_output",
           "make_loss", "block_grad"]


def _normalizer(normalization: str, batch: int, valid: Tensor | None, op: str) -> Any:
    if normalization == "null":
        return 1.0
    if normalization == "batch":
        return float(batch)
    if normalization == "valid":
        if valid is None:
            return float(batch)
        return valid.sum().clamp(min=1.0)
    raise ValueError(f"{op}: normalization must be 'null', 'batch' or 'valid', got {normalization!r}")


_PLAIN = {"grad_scale", "normalization", "multi_output", "preserve_shape", "use_ignore", "smooth_alpha",
          "ignore_label", "out_grad"}


def _plain(o: dict[str, Any]) -> bool:
    return (float(o.get("grad_scale", 1.0)) == 1.0 and str(o.get("normalization", "null")) == "null"
            and not o.get("multi_output", False) and not o.get("preserve_shape", False)
            and not o.get("use_ignore", False) and float(o.get("smooth_alpha", 0.0)) == 0.0
            and not o.get("out_grad", False))


def plain_options(o: dict[str, Any]) -> bool:
    """Whether SoftmaxOutput's options ``o`` are MXNet's defaults (the classifier head's case)."""
    return not o or set(o) <= _PLAIN and _plain(o)


def _one_label_per_row(data: Tensor, label: Tensor) -> bool:
    return data.dim() == 2 and label.numel() == data.shape[0]


def _plain_grad(prob: Tensor, label: Tensor) -> Tensor:
    """``softmax - onehot(label)``, the plain case's gradient."""
    lab = label.reshape(-1, 1).to(torch.long).clamp(0, prob.shape[1] - 1)
    grad = prob.clone()
    grad.scatter_add_(1, lab, torch.full_like(lab, -1, dtype=prob.dtype))
    return grad


class _SoftmaxOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, data: Tensor, label: Tensor, opts: dict[str, Any]) -> Tensor:
        multi = bool(opts.get("multi_output", False))
        preserve = bool(opts.get("preserve_shape", False))
        if multi:
            x = data.reshape(data.shape[0], data.shape[1], -1)
            prob = torch.softmax(x, dim=1).reshape(data.shape)
        elif preserve:
            prob = torch.softmax(data, dim=-1)
        else:
            prob = torch.softmax(data.reshape(data.shape[0], -1), dim=-1).reshape(data.shape)
        # a sparse label is read by its values (MXNet's storage fallback)
        ctx.save_for_backward(prob, label if label.layout == torch.strided else label.to_dense())
        ctx.opts = opts
        return prob

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> Any:
        prob, label = ctx.saved_tensors
        o = ctx.opts
        if plain_options(o) and _one_label_per_row(prob, label):
            return _plain_grad(prob, label), None, None
        multi = bool(o.get("multi_output", False))
        if multi:
            p = prob.reshape(prob.shape[0], prob.shape[1], -1).movedim(1, -1).reshape(-1, prob.shape[1])
        elif bool(o.get("preserve_shape", False)):
            p = prob.reshape(-1, prob.shape[-1])
        else:
            p = prob.reshape(prob.shape[0], -1)
        if label.shape == prob.shape:
            # a label of the data's shape holds class probabilities: the gradient is prob - label
            # (MXNet's rule; no normalization)
            grad = (p - label.reshape(p.shape).to(p.dtype)) * float(o.get("grad_scale", 1.0))
            return grad.reshape(prob.shape) * (prob if bool(o.get("out_grad", False)) else 1), None, None
        lab = label.reshape(-1).to(torch.long)
        if lab.numel() != p.shape[0]:
            raise ValueError(
                f"SoftmaxOutput: label has {label.numel()} entries for {p.shape[0]} predictions "
                f"(data {tuple(prob.shape)}, label {tuple(label.shape)})"
            )
        smooth = float(o.get("smooth_alpha", 0.0))
        k = p.shape[1]
        target = torch.zeros_like(p)
        target.scatter_(1, lab.clamp(0, k - 1).unsqueeze(1), 1.0 - smooth)
        if smooth:
            target += (smooth / (k - 1)) * (
                1.0 - torch.nn.functional.one_hot(lab.clamp(0, k - 1), k).to(p.dtype)
            )
        grad = p - target
        keep = lab != int(float(o.get("ignore_label", -1.0)))  # MXNet compares int(label)
        if bool(o.get("use_ignore", False)):
            grad = grad * keep.to(p.dtype).unsqueeze(1)
        normalization = str(o.get("normalization", "null"))
        # MXNet: 'batch' divides by the label rows (the batch size for multi_output), 'valid' by
        # the labels other than ignore_label (use_ignore or not); multi_output also divides by
        # the spatial size except for 'valid'
        spatial = p.shape[0] // max(prob.shape[0], 1) if multi else 1
        if normalization == "valid":
            norm: Any = keep.sum().clamp(min=1).to(p.dtype)
        elif normalization in ("batch", "null"):
            rows = (prob.shape[0] if multi else lab.numel()) if normalization == "batch" else 1
            norm = float(rows * spatial)
        else:
            _normalizer(normalization, 1, None, "SoftmaxOutput")  # raises for an unknown one
        grad = grad * (float(o.get("grad_scale", 1.0)) / norm)
        if multi:
            shp = (prob.shape[0], -1, prob.shape[1])
            grad = grad.reshape(shp).movedim(-1, 1).reshape(prob.shape)
        else:
            grad = grad.reshape(prob.shape)
        if bool(o.get("out_grad", False)):
            # out_grad=True scales by the output's gradient buffer; MXNet 1.9.1's executor never
            # fills it for a loss head (it ignores the given head gradients) and it holds the
            # softmax output, so MXNet's gradient is scaled by the prediction itself
            grad = grad * prob
        return grad, None, None


def softmax_output(data: Tensor, label: Tensor, **opts: Any) -> Tensor:
    """Softmax prediction; its gradient is ``(softmax - onehot(label)) * grad_scale / norm``."""
    return _SoftmaxOutput.apply(data, label, opts)  # type: ignore[no-any-return]


def softmax_output_head(data: Tensor, label: Tensor) -> tuple[Tensor, Tensor] | None:
    """For an executor that starts the backward itself, of a SoftmaxOutput whose options are
    MXNet's defaults (:func:`plain_options`): the prediction (outside the autograd graph) and the
    gradient the operator's backward would hand ``data`` (the head gradient ignored, as in MXNet),
    so the backward can start at ``data`` with no Python autograd function in the graph.  None
    unless there is one label per row of 2-D data (the operator's autograd function then)."""
    if not _one_label_per_row(data, label):
        return None
    with torch.no_grad():
        prob = torch.softmax(data, dim=-1)
        return prob, _plain_grad(prob, label)


_FORWARD = {
    "linear": lambda x: x,
    "mae": lambda x: x,
    "logistic": torch.sigmoid,
}


class _Regression(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, data: Tensor, label: Tensor, kind: str, grad_scale: float) -> Tensor:
        out = _FORWARD[kind](data)
        ctx.save_for_backward(out, label)
        ctx.kind, ctx.grad_scale = kind, grad_scale
        return out.clone() if out is data else out

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> Any:
        out, label = ctx.saved_tensors
        lab = label.reshape(out.shape).to(out.dtype)
        num_output = label.numel() // max(label.shape[0], 1) if label.dim() else 1
        diff = out - lab
        if ctx.kind == "mae":
            diff = torch.where(diff > 0, 1.0, -1.0).to(diff.dtype)  # MXNet: -1 where equal
        return diff * (ctx.grad_scale / max(num_output, 1)), None, None, None


def regression_output(data: Tensor, label: Tensor, kind: str, grad_scale: float = 1.0) -> Tensor:
    """``kind`` 'linear' / 'logistic' / 'mae': MXNet's regression outputs (gradient scaled by
    ``grad_scale`` / number of outputs per sample)."""
    return _Regression.apply(data, label, kind, float(grad_scale))  # type: ignore[no-any-return]


class _SVMOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, data: Tensor, label: Tensor, margin: float, coef: float, linear: bool) -> Tensor:
        ctx.save_for_backward(data, label)
        ctx.opts = (margin, coef, linear)
        return data.clone()

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> Any:
        data, label = ctx.saved_tensors
        margin, coef, linear = ctx.opts
        scores = data.reshape(-1, data.shape[-1])
        lab = label.reshape(-1).to(torch.long)
        if lab.numel() != scores.shape[0]:
            raise ValueError(
                f"SVMOutput: label has {label.numel()} entries for {scores.shape[0]} score rows "
                f"(data {tuple(data.shape)}, label {tuple(label.shape)})"
            )
        # one-vs-rest hinge on every class score: the true class wants a score >= margin, the
        # others <= -margin; sign is -1 for the true class, +1 for the others
        # (a label outside [0, classes) marks no class as true, as in MXNet)
        true = torch.arange(scores.shape[1], device=scores.device) == lab.unsqueeze(1)
        sign = 1.0 - 2.0 * true.to(scores.dtype)
        slack = margin + sign * scores  # > 0 where the hinge is active
        active = (slack > 0).to(scores.dtype)
        grad = sign * active if linear else 2.0 * sign * slack * active
        return (coef * grad).reshape(data.shape), None, None, None, None


def svm_output(
    data: Tensor,
    label: Tensor,
    margin: float = 1.0,
    regularization_coefficient: float = 1.0,
    use_linear: bool = False,
) -> Tensor:
    """Identity whose gradient is that of the one-vs-rest hinge loss of the scores in the last axis
    (squared hinge by default, ``use_linear`` for the plain hinge), times ``regularization_coefficient``."""
    return _SVMOutput.apply(  # type: ignore[no-any-return]
        data, label, float(margin), float(regularization_coefficient), bool(use_linear)
    )


class _MakeLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, data: Tensor, grad_scale: float, normalization: str, valid_thresh: float) -> Tensor:
        ctx.save_for_backward(data)
        ctx.opts = (grad_scale, normalization, valid_thresh)
        return data.clone()

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> Any:
        (data,) = ctx.saved_tensors
        grad_scale, normalization, thresh = ctx.opts
        valid = (data > thresh).to(data.dtype) if normalization == "valid" else None
        norm = _normalizer(normalization, data.shape[0] if data.dim() else 1, valid, "MakeLoss")
        return torch.full_like(data, grad_scale) / norm, None, None, None


def make_loss(
    data: Tensor, grad_scale: float = 1.0, valid_thresh: float = 0.0, normalization: str = "null"
) -> Tensor:
    """Identity whose gradient is ``grad_scale`` (divided by the batch size or the count of
    entries above ``valid_thresh`` for normalization 'batch' / 'valid'): a graph head that is a loss."""
    return _MakeLoss.apply(data, float(grad_scale), str(normalization), float(valid_thresh))  # type: ignore


def block_grad(data: Tensor) -> Tensor:
    """Identity that passes no gradient back."""
    return data.detach()
