"""MXNet's small contrib operators (``mx.nd.contrib.<op>``, and ``mx.sym.contrib.<op>`` as
``_contrib_<op>`` graph nodes): gradient scaling, transformer rescaling,
index arrays, row copies and adaptive average pooling, each as MXNet's API reference defines it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..base import MXNetError
from ._common import mx_operator
from ._ndarray_type import is_ndarray, new_ndarray

Tensor = torch.Tensor

__all__ = ["gradientmultiplier", "div_sqrt_dim", "index_array", "index_copy",
           "AdaptiveAvgPooling2D", "MultiBoxPrior"]


@mx_operator
def gradientmultiplier(data: Tensor, scalar: float = 1.0, is_int: bool = True) -> Tensor:
    """``data`` unchanged; the gradient passing back through it is multiplied by ``scalar``."""
    frozen = data.detach()
    return frozen + (data - frozen) * float(scalar)  # value: data exactly; d/d data: scalar


@mx_operator
def div_sqrt_dim(data: Tensor) -> Tensor:
    """``data / sqrt(data.shape[-1])`` (the attention scores' rescaling)."""
    return data / float(data.shape[-1]) ** 0.5


@mx_operator
def index_array(data: Tensor, axes: tuple[int, ...] | int | None = None) -> Tensor:
    """int64 array of shape ``data.shape + (m,)`` whose last axis holds each element's index, or its
    entries on ``axes`` (m of them; every axis when None)."""
    n = data.dim()
    chosen = range(n) if axes is None else ([axes] if isinstance(axes, int) else list(axes))
    picked = []
    for ax in chosen:
        if not -n <= int(ax) < n:
            raise MXNetError(f"index_array: axis {ax} is out of range for data of {n} dimensions")
        picked.append(int(ax) % n)
    if not picked:  # a 0-d array (or axes=()): no index entries
        return torch.zeros((*data.shape, 0), dtype=torch.int64, device=data.device)
    grids = torch.meshgrid(*(torch.arange(s, device=data.device) for s in data.shape), indexing="ij")
    return torch.stack([grids[ax] for ax in picked], dim=-1)


@mx_operator
def index_copy(old_tensor: Tensor, index_vector: Tensor, new_tensor: Tensor) -> Tensor:
    """A copy of ``old_tensor`` whose row ``index_vector[i]`` is ``new_tensor``'s row ``i``."""
    index = index_vector.reshape(-1).to(torch.int64)
    if index.numel() != new_tensor.shape[0] or new_tensor.shape[1:] != old_tensor.shape[1:]:
        raise MXNetError(
            f"index_copy: new_tensor {tuple(new_tensor.shape)} must have one row per index "
            f"({index.numel()}) and the rows of old_tensor {tuple(old_tensor.shape)}"
        )
    return old_tensor.index_copy(0, index, new_tensor.to(old_tensor.dtype))


@mx_operator
def AdaptiveAvgPooling2D(data: Tensor, output_size: int | tuple[int, ...] = ()) -> Tensor:  # noqa: N802
    """Average pooling of NCHW data to ``output_size`` (h, or (h, w); () gives 1 x 1), each output
    cell averaging input rows floor(i*H/h) .. ceil((i+1)*H/h)."""
    size = (output_size,) if isinstance(output_size, int) else tuple(int(s) for s in output_size)
    if len(size) > 2:
        raise MXNetError(f"AdaptiveAvgPooling2D: output_size has at most 2 entries, got {output_size!r}")
    hw = (1, 1) if not size else (size[0], size[-1])
    return F.adaptive_avg_pool2d(data, hw)


@mx_operator
def MultiBoxPrior(data: Tensor, sizes: tuple[float, ...] = (1.0,), ratios: tuple[float, ...] = (1.0,),  # noqa: N802
                  clip: bool = False, steps: tuple[float, ...] = (-1.0, -1.0),
                  offsets: tuple[float, ...] = (0.5, 0.5)) -> Tensor:
    """SSD anchor boxes for the (H, W) grid of NCHW ``data``: (1, H * W * A, 4) float32 corners
    (xmin, ymin, xmax, ymax), A = len(sizes) + len(ratios) - 1 per cell, in row-major cell order:
    every size with ratios[0], then sizes[0] with each other ratio.  A box of size s and ratio r is
    s * sqrt(r) * H / W wide and s / sqrt(r) high, centred at ((col + offset_x) * step_x,
    (row + offset_y) * step_y); steps of -1 are 1/W and 1/H; ``clip`` clamps to [0, 1]."""
    sizes_t, ratios_t = tuple(float(v) for v in sizes), tuple(float(v) for v in ratios)
    if data.dim() != 4 or not sizes_t or not ratios_t or len(steps) != 2 or len(offsets) != 2:
        raise MXNetError(f"MultiBoxPrior: needs NCHW data, sizes, ratios and two steps/offsets; got data "
                         f"{tuple(data.shape)}, sizes {sizes}, ratios {ratios}, steps {steps}, "
                         f"offsets {offsets}")
    h, w = int(data.shape[2]), int(data.shape[3])
    step_y = float(steps[0]) if float(steps[0]) > 0 else 1.0 / h
    step_x = float(steps[1]) if float(steps[1]) > 0 else 1.0 / w
    shapes = [(s, ratios_t[0]) for s in sizes_t] + [(sizes_t[0], r) for r in ratios_t[1:]]
    half = torch.tensor([[s * h / w * r ** 0.5 / 2, s / r ** 0.5 / 2] for s, r in shapes],
                        dtype=torch.float64, device=data.device)  # (A, 2): half width, half height
    cy = (torch.arange(h, dtype=torch.float64, device=data.device) + float(offsets[0])) * step_y
    cx = (torch.arange(w, dtype=torch.float64, device=data.device) + float(offsets[1])) * step_x
    centre = torch.stack(torch.meshgrid(cx, cy, indexing="xy"), dim=-1).reshape(-1, 1, 2)  # (H*W, 1, [x, y])
    boxes = torch.cat([centre - half, centre + half], dim=-1).reshape(1, -1, 4).to(torch.float32)
    boxes = boxes.clamp(0.0, 1.0) if clip else boxes
    return new_ndarray(boxes) if is_ndarray(data) else boxes  # made here: an NDArray for NDArray data
