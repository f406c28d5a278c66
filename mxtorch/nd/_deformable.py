"""Deformable 2-D convolution (MXNet's ``contrib.DeformableConvolution`` and
``contrib.ModulatedDeformableConvolution``): each kernel tap reads the input at its regular
position plus a learned (dy, dx) offset, bilinearly interpolated; the modulated variant also
scales each tap's sample by a mask.

Offsets have ``2 * num_deformable_group * kh * kw`` channels: for deformable group ``g`` and tap
``k = i * kw + j``, channel ``2 * (g * kh * kw + k)`` holds dy and the next one dx (MXNet's
layout); the input channels split into ``num_deformable_group`` equal groups, each moved by its
own offsets.  Built from gathers and one grouped matrix product, so torch differentiates it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..base import MXNetError

__all__ = ["deformable_conv2d"]

Tensor = torch.Tensor


def _sample(x: Tensor, h: Tensor, w: Tensor, v1_border: bool) -> Tensor:
    """Bilinear samples of ``x`` (N, G, C, H, W) at float positions ``h``, ``w`` (N, G, P): (N, G, C, P);
    corners outside the input count as zero.  ``v1_border``: MXNet's DeformableConvolution rule
    instead -- a position outside ``[0, H) x [0, W)`` gives zero, one past the last row or column
    reads that row or column."""
    n, g, c, hh, ww = x.shape
    flat = x.reshape(n, g, c, hh * ww)
    inside_all = None
    if v1_border:
        inside_all = ((h >= 0) & (h < hh) & (w >= 0) & (w < ww)).unsqueeze(2)
        h = torch.where(h.floor() >= hh - 1, torch.full_like(h, hh - 1), h)
        w = torch.where(w.floor() >= ww - 1, torch.full_like(w, ww - 1), w)
    h0, w0 = h.floor(), w.floor()
    lh, lw = h - h0, w - w0
    out = x.new_zeros(n, g, c, h.shape[-1])
    for dy, dx, weight in ((0, 0, (1 - lh) * (1 - lw)), (0, 1, (1 - lh) * lw), (1, 0, lh * (1 - lw)),
                           (1, 1, lh * lw)):
        y, xx = h0 + dy, w0 + dx
        inside = (y >= 0) & (y < hh) & (xx >= 0) & (xx < ww)
        idx = (y.clamp(0, hh - 1) * ww + xx.clamp(0, ww - 1)).long()
        picked = flat.gather(3, idx.unsqueeze(2).expand(n, g, c, idx.shape[-1]))
        out = out + picked * (weight * inside).unsqueeze(2)
    return out if inside_all is None else out * inside_all


def deformable_conv2d(x: Tensor, offset: Tensor, weight: Tensor, bias: Tensor | None = None,
                      stride: Sequence[int] = (1, 1), pad: Sequence[int] = (0, 0),
                      dilate: Sequence[int] = (1, 1), num_group: int = 1, num_deformable_group: int = 1,
                      mask: Tensor | None = None) -> Tensor:
    """The deformable convolution of ``x`` (N, C, H, W) with ``weight`` (O, C / num_group, kh, kw),
    tap offsets ``offset`` (N, 2 * G * kh * kw, Ho, Wo) and, for the modulated variant, ``mask``
    (N, G * kh * kw, Ho, Wo), ``G = num_deformable_group``.  As MXNet's two operators, the plain
    one (no mask) and the modulated one treat the border differently (see :func:`_sample`)."""
    n, c, hh, ww = x.shape
    o, cg, kh, kw = weight.shape
    g = int(num_deformable_group)
    ho = (hh + 2 * pad[0] - dilate[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (ww + 2 * pad[1] - dilate[1] * (kw - 1) - 1) // stride[1] + 1
    k = kh * kw
    if c % g or c != cg * num_group or o % num_group:
        raise MXNetError(f"deformable convolution: {c} input channels do not fit weight "
                         f"{tuple(weight.shape)} with num_group={num_group}, num_deformable_group={g}")
    if tuple(offset.shape) != (n, 2 * g * k, ho, wo):
        raise MXNetError(f"deformable convolution: offset has shape {tuple(offset.shape)}, expected "
                         f"{(n, 2 * g * k, ho, wo)}")
    dev = x.device
    taps_h = (torch.arange(kh, device=dev) * dilate[0]).repeat_interleave(kw)  # (k,)
    taps_w = (torch.arange(kw, device=dev) * dilate[1]).repeat(kh)
    rows = torch.arange(ho, device=dev) * stride[0] - pad[0]
    cols = torch.arange(wo, device=dev) * stride[1] - pad[1]
    off = offset.reshape(n, g, k, 2, ho, wo).to(x.dtype)
    h = (taps_h[:, None, None] + rows[None, :, None]).to(x.dtype) + off[:, :, :, 0]  # (n, g, k, ho, wo)
    w = (taps_w[:, None, None] + cols[None, None, :]).to(x.dtype) + off[:, :, :, 1]
    samples = _sample(x.reshape(n, g, c // g, hh, ww), h.reshape(n, g, -1), w.reshape(n, g, -1), mask is None)
    if mask is not None:
        samples = samples * mask.reshape(n, g, 1, k * ho * wo).to(x.dtype)
    columns = samples.reshape(n, num_group, cg * k, ho * wo)  # channel-major, then tap: weight's order
    out = torch.einsum("gok,ngkl->ngol", weight.reshape(num_group, o // num_group, cg * k), columns)
    out = out.reshape(n, o, ho, wo)
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)
