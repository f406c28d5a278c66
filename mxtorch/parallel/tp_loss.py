"""Softmax cross-entropy on logits split over the vocabulary (a column-parallel output layer).

Megatron-LM's vocab-parallel cross-entropy: each tensor-parallel rank holds classes
``[r*V/tp, (r+1)*V/tp)`` of the logits; per position the ranks all-reduce the maximum, then the
sum of ``exp(z - max)`` and the target's shifted logit (taken on the rank that owns the target
class, zero elsewhere; one all-reduce carries both), so ``loss = log(sum) - (z_target - max)``
without any rank building the full logits.  The gradient is local: ``softmax - onehot`` on the
rank's own classes.

Why not ``torch.distributed.tensor.parallel.loss_parallel``: it computes the same thing on a
DTensor sharded over the class dimension, but its backward must run inside the same context
manager (outside it ``aten.nll_loss_backward`` fails on the mixed DTensor/plain tensors); a
pipeline's backward is run by torch's schedule after the loss function has returned, so the
context cannot span it, and ``loss.backward()`` in user code would have to be wrapped too.
This one is an ordinary autograd function (two all-reduces forward, none backward), usable with
``PipelineNet.train_step``, a Trainer and ``autograd.record()`` as any Gluon loss.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist

from ..base import MXNetError
from ..gluon.loss import Loss, _as_tensor, _class_axis_loss_mean, _norm_axis

__all__ = ["ParallelSoftmaxCrossEntropyLoss", "vocab_parallel_cross_entropy"]


def _tp_group(group: Any) -> Any:
    """A process group from a PipelineNet, a parallel Mesh, a DeviceMesh or a ProcessGroup (None: world)."""
    if group is None:
        return dist.group.WORLD
    mesh = getattr(group, "mesh", None)
    if mesh is not None and hasattr(mesh, "tp_group"):  # a PipelineNet
        return mesh.tp_group
    if hasattr(group, "tp_group"):  # a parallel.Mesh
        return group.tp_group
    if hasattr(group, "get_group"):  # a DeviceMesh
        return group.get_group()
    return group


class _VocabParallelCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, label: torch.Tensor, start: int,  # type: ignore[override]
                group: Any) -> torch.Tensor:
        z = logits.detach()
        zmax = z.amax(dim=1)
        dist.all_reduce(zmax, op=dist.ReduceOp.MAX, group=group)
        shifted = z - zmax.unsqueeze(1)
        ex = shifted.exp()
        local = label - start
        mine = (local >= 0) & (local < z.shape[1])
        idx = local.clamp(0, z.shape[1] - 1)
        target = shifted.gather(1, idx.unsqueeze(1)).squeeze(1) * mine
        both = torch.stack([ex.sum(dim=1), target])
        dist.all_reduce(both, group=group)  # the sum of exp and the target's logit, in one message
        ctx.save_for_backward(ex.div_(both[0].unsqueeze(1)), idx, mine)
        return both[0].log() - both[1]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        soft, idx, mine = ctx.saved_tensors
        g = soft.clone()
        g.scatter_add_(1, idx.unsqueeze(1), -mine.to(g.dtype).unsqueeze(1))
        return g * grad.unsqueeze(1), None, None, None


def vocab_parallel_cross_entropy(logits: torch.Tensor, label: torch.Tensor,
                                 group: Any = None) -> torch.Tensor:
    """Per-row cross-entropy of ``logits`` (rows, V/tp): this rank's classes of each row; ``label``
    (rows,) holds class indices of the whole vocabulary.  Every rank of ``group`` calls it."""
    group = _tp_group(group)
    tp, rank = dist.get_world_size(group), dist.get_rank(group)
    v_local = int(logits.shape[1])
    label = label.long()
    if label.device.type == "cpu" and label.numel():
        lo, hi = int(label.min()), int(label.max())
        if lo < 0 or hi >= v_local * tp:
            raise MXNetError(f"ParallelSoftmaxCrossEntropyLoss: label {lo if lo < 0 else hi} is out of range "
                             f"for {v_local * tp} classes ({v_local} on each of {tp} ranks)")
    return _VocabParallelCE.apply(logits, label, rank * v_local, group)  # type: ignore[no-any-return]


class ParallelSoftmaxCrossEntropyLoss(Loss):
    """:class:`~mxtorch.gluon.loss.SoftmaxCrossEntropyLoss` on vocab-split logits.

    ``pred`` is this rank's share of the classes along ``axis`` (the output of a network whose last
    Dense is ``"colwise"`` in ``tp_plan``); ``label`` holds class indices of the whole vocabulary
    (sparse labels), the same on every rank of the tensor-parallel ``group`` (a ``PipelineNet``, its
    ``mesh``, a DeviceMesh or a ProcessGroup; None: the whole job).  The result, per sample, equals
    the ordinary loss on the full logits on every rank; ``weight``, ``sample_weight`` and
    ``batch_axis`` mean what they mean there.  Example::

        pnet = parallel.parallelize(net, parallel.ParallelConfig(tp=2),
                                    tp_plan={"embed": "vocab", "out": "colwise"})
        loss_fn = parallel.ParallelSoftmaxCrossEntropyLoss(pnet)
        pnet.train_step(x, y, loss_fn)
    """

    def __init__(self, group: Any = None, axis: int = -1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"axis must be an int, got {axis!r}")
        self._axis = axis
        object.__setattr__(self, "_group", group)  # not a child block, even when it is a PipelineNet

    def forward(self, pred: torch.Tensor, label: Any, sample_weight: Any = None) -> torch.Tensor:
        if pred.ndim < 2:
            pred = pred.reshape(1, -1)
            axis, batch_axis = 1, 0
        else:
            axis = _norm_axis(self._axis, pred.ndim)
            batch_axis = _norm_axis(self._batch_axis, pred.ndim, "batch_axis")
        p = pred.movedim(axis, -1)
        red_shape = p.shape[:-1]
        label = _as_tensor(label, pred, "label")
        if label.shape != red_shape:
            if label.numel() != math.prod(red_shape):
                raise MXNetError(f"sparse label of shape {tuple(label.shape)} does not match the prediction "
                                 f"of shape {tuple(pred.shape)} with axis {axis} removed {tuple(red_shape)}")
        loss = vocab_parallel_cross_entropy(p.reshape(-1, p.shape[-1]), label.reshape(-1),
                                            self._group).reshape(red_shape)
        return _class_axis_loss_mean(loss, axis, batch_axis, self._weight, sample_weight)

    def __repr__(self) -> str:
        return (f"ParallelSoftmaxCrossEntropyLoss(axis={self._axis}, batch_axis={self._batch_axis}, "
                f"w={self._weight})")
