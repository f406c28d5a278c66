"""``CTCLoss`` (alias ``ctc_loss``): MXNet's connectionist temporal classification operator."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError

Tensor = torch.Tensor

__all__ = ["CTCLoss", "ctc_loss"]


def CTCLoss(data: Tensor, label: Tensor, data_lengths: Tensor | None = None,
            label_lengths: Tensor | None = None,
            use_data_lengths: bool = False, use_label_lengths: bool = False,
            blank_label: str = "first") -> Tensor:
    """``-log p(label | data)`` per sequence, shape ``(batch,)``.

    ``data`` is ``(T, batch, classes)`` unnormalized scores (softmax is applied inside);
    ``label`` is ``(batch, S)``.  ``blank_label='first'``: class 0 is the blank, labels are
    ``1..classes-1`` and padded with 0; ``'last'``: the last class is the blank, labels are
    ``0..classes-2`` padded with -1.  Without ``use_label_lengths`` a label ends at its first
    padding value; without ``use_data_lengths`` every sequence uses all ``T`` steps.
    """
    if blank_label not in ("first", "last"):
        raise MXNetError(f"CTCLoss: blank_label must be 'first' or 'last', got {blank_label!r}")
    if data.dim() != 3 or label.dim() != 2 or label.shape[0] != data.shape[1]:
        raise MXNetError(f"CTCLoss: expected data (T, batch, classes) and label (batch, S), got "
                         f"{tuple(data.shape)} and {tuple(label.shape)}")
    t, n, c = data.shape
    dev = data.device
    label = label.to(device=dev, dtype=torch.long)
    blank, pad = (0, 0) if blank_label == "first" else (c - 1, -1)
    if use_label_lengths:
        if label_lengths is None:
            raise MXNetError("CTCLoss: use_label_lengths=True needs label_lengths")
        lengths = torch.as_tensor(label_lengths, device=dev).reshape(-1).long()
    else:
        s = label.shape[1]
        idx = torch.arange(s, device=dev).expand_as(label)
        lengths = torch.where(label == pad, idx, torch.full_like(idx, s)).amin(dim=1) if s else \
            torch.zeros(n, dtype=torch.long, device=dev)
    if use_data_lengths:
        if data_lengths is None:
            raise MXNetError("CTCLoss: use_data_lengths=True needs data_lengths")
        steps = torch.as_tensor(data_lengths, device=dev).reshape(-1).long()
    else:
        steps = torch.full((n,), t, dtype=torch.long, device=dev)
    work = data if data.dtype in (torch.float32, torch.float64) else data.float()
    loss = F.ctc_loss(F.log_softmax(work, dim=-1), label.clamp_min(0), steps, lengths, blank=blank,
                      reduction="none", zero_infinity=False)
    return loss.to(data.dtype)


def ctc_loss(*args: Any, **kwargs: Any) -> Tensor:
    """:func:`CTCLoss` (MXNet's lower-case alias)."""
    return CTCLoss(*args, **kwargs)
