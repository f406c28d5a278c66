"""MXNet's ``mx.image.imrotate`` / ``random_rotate``: rotate float32 CHW images (or NCHW batches)
about their centre, bilinear sampling, zeros outside the source (MXNet's BilinearSampler)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch

__all__ = ["imrotate", "random_rotate"]


def _angles(rotation_degrees: Any, n: int, single: bool, device: torch.device) -> torch.Tensor:
    if isinstance(rotation_degrees, numbers.Number):
        return torch.full((n,), float(rotation_degrees), dtype=torch.float64, device=device)  # type: ignore[arg-type]
    if single:
        raise TypeError("imrotate: a single (C, H, W) image takes a scalar rotation_degrees, "
                        f"got {type(rotation_degrees).__name__}")
    deg = torch.as_tensor(rotation_degrees, dtype=torch.float64, device=device).reshape(-1)
    if deg.numel() != n:
        raise ValueError(f"imrotate: {n} images but {deg.numel()} rotation angles: give one angle per image")
    return deg


def imrotate(src: torch.Tensor, rotation_degrees: Any, zoom_in: bool = False,
             zoom_out: bool = False) -> torch.Tensor:
    """``src`` rotated counter-clockwise by ``rotation_degrees`` (a scalar, or one per image).

    ``zoom_in`` scales so that no padding shows; ``zoom_out`` so that the whole source stays in
    view (not both).  Output pixel ``(y, x)``, taken about the centre ``((H-1)/2, (W-1)/2)``,
    samples the source at the point rotated by the angle.
    """
    if zoom_in and zoom_out:
        raise ValueError("imrotate: zoom_in and zoom_out cannot both be True")
    if src.dtype != torch.float32:
        raise TypeError(f"imrotate: only float32 images are supported, got {src.dtype}")
    if src.dim() not in (3, 4):
        raise ValueError(f"imrotate: expected a (C, H, W) image or an (N, C, H, W) batch, got shape "
                         f"{tuple(src.shape)}")
    single = src.dim() == 3
    batch = src[None] if single else src
    n, _, h, w = batch.shape
    rad = _angles(rotation_degrees, n, single, batch.device) * (math.pi / 180.0)
    cos, sin = torch.cos(rad)[:, None, None], torch.sin(rad)[:, None, None]
    ys = torch.arange(h, dtype=torch.float64, device=batch.device)[:, None] - (h - 1) / 2
    xs = torch.arange(w, dtype=torch.float64, device=batch.device)[None, :] - (w - 1) / 2
    # rotate the centred grid first, normalise after, so the aspect ratio is kept
    gx = (xs * cos - ys * sin) / ((w - 1) / 2)
    gy = (xs * sin + ys * cos) / ((h - 1) / 2)
    if zoom_in or zoom_out:
        ac, as_ = cos.abs(), sin.abs()
        box_w, box_h = w * ac + h * as_, h * ac + w * as_  # the rotated image's bounding box
        if zoom_out:
            scale = torch.maximum(box_w / w, box_h / h)
        else:
            scale = torch.minimum(w / box_w, h / box_h)
        gx, gy = gx * scale, gy * scale
    grid = torch.stack([gx, gy], dim=-1).to(batch.dtype)
    out = torch.nn.functional.grid_sample(batch, grid, mode="bilinear", padding_mode="zeros",
                                          align_corners=True)
    return out[0] if single else out


def random_rotate(src: torch.Tensor, angle_limits: tuple[float, float], zoom_in: bool = False,
                  zoom_out: bool = False) -> torch.Tensor:
    """:func:`imrotate` by angles drawn uniformly from ``angle_limits`` (numpy's RNG, as MXNet):
    one for a single image, one per image for a batch."""
    if src.dim() == 3:
        degrees: Any = float(np.random.uniform(*angle_limits))
    else:
        degrees = torch.from_numpy(np.random.uniform(*angle_limits, size=src.shape[0]))
    return imrotate(src, degrees, zoom_in=zoom_in, zoom_out=zoom_out)
