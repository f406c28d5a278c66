"""``mx.nd.im2col`` / ``col2im``: the sliding-window patches of NCHW images as columns, and back
(patches summed where they overlap), with MXNet's ``kernel``/``stride``/``dilate``/``pad``."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError

Tensor = torch.Tensor

__all__ = ["im2col", "col2im"]


def _pair(op: str, what: str, value: Any, default: int) -> tuple[int, int]:
    v = (value,) if isinstance(value, int) else tuple(int(x) for x in value)
    if not v:
        return (default, default)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2:
        raise MXNetError(f"{op}: mxtorch supports 2-d windows (images); {what} has {len(v)} entries: "
                         f"{value!r}")
    return (v[0], v[1])


def im2col(data: Tensor, kernel: Any, stride: Any = (), dilate: Any = (), pad: Any = ()) -> Tensor:
    """(N, C * kh * kw, L): each column one window of ``data`` (N, C, H, W), channel-major."""
    if data.dim() != 4:
        raise MXNetError(f"im2col: data must be (N, C, H, W), got shape {tuple(data.shape)}")
    return F.unfold(data, _pair("im2col", "kernel", kernel, 1), dilation=_pair("im2col", "dilate", dilate, 1),
                    padding=_pair("im2col", "pad", pad, 0), stride=_pair("im2col", "stride", stride, 1))


def col2im(data: Tensor, output_size: Any, kernel: Any, stride: Any = (), dilate: Any = (),
           pad: Any = ()) -> Tensor:
    """The image (N, C, *output_size) whose windows are the columns of ``data``; overlaps add up."""
    if data.dim() != 3:
        raise MXNetError(f"col2im: data must be (N, C * kh * kw, L), got shape {tuple(data.shape)}")
    return F.fold(data, _pair("col2im", "output_size", output_size, 1), _pair("col2im", "kernel", kernel, 1),
                  dilation=_pair("col2im", "dilate", dilate, 1), padding=_pair("col2im", "pad", pad, 0),
                  stride=_pair("col2im", "stride", stride, 1))
