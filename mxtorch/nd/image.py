"""``mx.nd.image``: MXNet's image operators on ``(H, W, C)`` images / ``(N, H, W, C)`` batches
(``to_tensor``, ``flip_*``, ``crop``, ``resize``) and on ``(C, H, W)`` / ``(N, C, H, W)`` tensors
(``normalize``, ``imrotate``).  A wrong rank is an :class:`ImageShapeError` (an ``MXNetError``
and a ``ValueError``), as MXNet's operators raise ``MXNetError``."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError
from ._ndarray_type import follows_inputs

__all__ = ["ImageShapeError", "image_rank", "to_tensor", "normalize", "flip_left_right", "flip_top_bottom",
           "random_flip_left_right", "random_flip_top_bottom", "crop", "imrotate", "resize", "resize_nhwc",
           "resized_hw", "check_interp", "INTERP_MODES", "OPERATORS"]


# the operators (mx.sym.image.<op>, graph nodes _image_<op>); the rest of __all__ are helpers
OPERATORS = ("to_tensor", "normalize", "flip_left_right", "flip_top_bottom", "random_flip_left_right",
             "random_flip_top_bottom", "crop", "imrotate", "resize")


class ImageShapeError(MXNetError, ValueError):
    """An image operator got an array of the wrong rank or size."""


def image_rank(x: torch.Tensor, who: str, layout: str) -> bool:
    """True for a batch (rank 4), False for one image (rank 3); else an ImageShapeError."""
    if x.dim() == 3:
        return False
    if x.dim() == 4:
        return True
    raise ImageShapeError(f"{who} expects an image of shape ({layout}) or a batch of shape (N, {layout}), "
                          f"got shape {tuple(x.shape)}")


@follows_inputs
def to_tensor(data: torch.Tensor) -> torch.Tensor:
    """``(H, W, C)`` in [0, 255] to float32 ``(C, H, W)`` in [0, 1] (batches ``(N, H, W, C)`` too)."""
    order = (0, 3, 1, 2) if image_rank(data, "to_tensor", "H, W, C") else (2, 0, 1)
    return data.permute(order).to(torch.float32, memory_format=torch.contiguous_format).div_(255.0)


@follows_inputs
def normalize(data: torch.Tensor, mean: float | Sequence[float] = 0.0,
              std: float | Sequence[float] = 1.0) -> torch.Tensor:
    """``(x - mean) / std`` per channel of a float ``(C, H, W)`` image or ``(N, C, H, W)`` batch."""
    batch = image_rank(data, "normalize", "C, H, W")
    c = data.shape[1 if batch else 0]
    m = torch.as_tensor(mean, dtype=data.dtype, device=data.device).reshape(-1)
    s = torch.as_tensor(std, dtype=data.dtype, device=data.device).reshape(-1)
    for name, v in (("mean", m), ("std", s)):
        if v.numel() not in (1, c):
            raise ImageShapeError(f"normalize: {name} has {v.numel()} values for {c} channels")
    return (data - m.expand(c).reshape(c, 1, 1)) / s.expand(c).reshape(c, 1, 1)


@follows_inputs
def flip_left_right(data: torch.Tensor) -> torch.Tensor:
    """Mirror along the width axis of ``(H, W, C)`` / ``(N, H, W, C)``."""
    image_rank(data, "flip_left_right", "H, W, C")
    return data.flip(-2)


@follows_inputs
def flip_top_bottom(data: torch.Tensor) -> torch.Tensor:
    """Mirror along the height axis of ``(H, W, C)`` / ``(N, H, W, C)``."""
    image_rank(data, "flip_top_bottom", "H, W, C")
    return data.flip(-3)


@follows_inputs
def random_flip_left_right(data: torch.Tensor, p: float = 0.5) -> torch.Tensor:
    """``flip_left_right`` with probability ``p``."""
    return flip_left_right(data) if float(torch.rand(())) < p else data


@follows_inputs
def random_flip_top_bottom(data: torch.Tensor, p: float = 0.5) -> torch.Tensor:
    """``flip_top_bottom`` with probability ``p``."""
    return flip_top_bottom(data) if float(torch.rand(())) < p else data


@follows_inputs
def crop(data: torch.Tensor, x: int, y: int, width: int, height: int) -> torch.Tensor:
    """The region ``[y, y + height) x [x, x + width)`` of ``(H, W, C)`` / ``(N, H, W, C)`` images."""
    image_rank(data, "crop", "H, W, C")
    h, w = data.shape[-3], data.shape[-2]
    if width <= 0 or height <= 0:
        raise ImageShapeError(f"crop: width and height must be > 0, got {width}x{height}")
    if x < 0 or y < 0 or x + width > w or y + height > h:
        raise ImageShapeError(f"crop: region x={x}, y={y}, {width}x{height} is outside the {w}x{h} image")
    return data[..., y:y + height, x:x + width, :]


def _rotation_grid(angles: torch.Tensor, h: int, w: int, zoom_in: bool, zoom_out: bool) -> torch.Tensor:
    """Sampling grids (N, H, W, 2) rotating each image counter-clockwise by its angle (degrees)
    about its centre; ``zoom_in`` scales so no empty corner shows, ``zoom_out`` so all the image does."""
    rad = angles.to(torch.float64) * (math.pi / 180.0)
    c, s = rad.cos(), rad.sin()
    span_w = w * c.abs() + h * s.abs()  # the rotated image's bounding box
    span_h = w * s.abs() + h * c.abs()
    scale = torch.ones_like(rad)
    if zoom_in:
        scale = torch.minimum(w / span_w, h / span_h)
    elif zoom_out:
        scale = torch.maximum(span_w / w, span_h / h)
    # source = R(angle) * scale * target, in pixels about the centre; normalized by (w/2, h/2)
    theta = torch.stack([torch.stack([c * scale, -s * scale * h / w, torch.zeros_like(c)], -1),
                         torch.stack([s * scale * w / h, c * scale, torch.zeros_like(c)], -1)], 1)
    return F.affine_grid(theta.to(torch.float32), [len(angles), 1, h, w], align_corners=False)


@follows_inputs
def imrotate(data: torch.Tensor, rotation_degrees: Any, zoom_in: bool = False,
             zoom_out: bool = False) -> torch.Tensor:
    """Rotate float ``(C, H, W)`` / ``(N, C, H, W)`` images counter-clockwise by
    ``rotation_degrees`` (one number, or one per image of a batch), bilinear, zeros outside."""
    batch = image_rank(data, "imrotate", "C, H, W")
    if not data.is_floating_point():
        raise TypeError(f"imrotate expects floating-point images, got {data.dtype}")
    if zoom_in and zoom_out:
        raise ValueError("imrotate: zoom_in and zoom_out cannot both be set")
    xb = data if batch else data.unsqueeze(0)
    angles = torch.as_tensor(rotation_degrees, dtype=torch.float64).reshape(-1).expand(xb.shape[0])
    grid = _rotation_grid(angles, xb.shape[2], xb.shape[3], zoom_in, zoom_out).to(xb.device)
    out = F.grid_sample(xb.to(torch.float32), grid, mode="bilinear", padding_mode="zeros",
                        align_corners=False).to(xb.dtype)
    return out if batch else out[0]


# ---- resizing -------------------------------------------------------------------------------
INTERP_MODES = {0: "nearest", 1: "bilinear", 2: "bicubic", 3: "area"}  # OpenCV's codes -> torch's modes


def check_interp(interpolation: int, who: str) -> int:
    """``interpolation`` if it is one of OpenCV's codes mxtorch resizes with (0-3), 9 (by direction)
    or 10 (random); else an ImageShapeError."""
    if interpolation not in INTERP_MODES and interpolation not in (9, 10):
        raise ImageShapeError(
            f"{who}: interpolation must be 0 (nearest), 1 (bilinear), 2 (bicubic), 3 (area), "
            f"9 (auto) or 10 (random), got {interpolation!r} (4, Lanczos, is not available in mxtorch)"
        )
    return interpolation


def _pick_mode(interpolation: int, src_hw: tuple[int, int], dst_hw: tuple[int, int]) -> str:
    if interpolation == 9:  # bicubic to enlarge, area to shrink, bilinear otherwise
        if dst_hw[0] > src_hw[0] and dst_hw[1] > src_hw[1]:
            return "bicubic"
        if dst_hw[0] < src_hw[0] and dst_hw[1] < src_hw[1]:
            return "area"
        return "bilinear"
    if interpolation == 10:
        return INTERP_MODES[int(torch.randint(0, 4, ()).item())]
    return INTERP_MODES[interpolation]


def resize_nhwc(x: torch.Tensor, h: int, w: int, interpolation: int) -> torch.Tensor:
    """Resize a (N, H, W, C) batch to (N, h, w, C), keeping the dtype: torch's interpolation with
    half-pixel centres and no antialiasing (OpenCV's bilinear/bicubic grid), integers rounded
    and saturated."""
    src_h, src_w = x.shape[1], x.shape[2]
    if (src_h, src_w) == (h, w):
        return x
    mode = _pick_mode(interpolation, (src_h, src_w), (h, w))
    # on the CPU in double, as mx.image.imresize's torch path: the two agree to the last level
    y = x.permute(0, 3, 1, 2)
    y = y.to(torch.float64 if x.device.type == "cpu" or x.dtype == torch.float64 else torch.float32)
    kwargs: dict[str, Any] = {"align_corners": False} if mode in ("bilinear", "bicubic") else {}
    y = F.interpolate(y, size=(h, w), mode=mode, **kwargs)
    y = y.permute(0, 2, 3, 1)
    if not x.is_floating_point():
        info = torch.iinfo(x.dtype)
        y = y.round_().clamp_(info.min, info.max)
    return y.to(x.dtype, memory_format=torch.contiguous_format)


def resized_hw(h: int, w: int, size: Any, keep_ratio: bool, who: str) -> tuple[int, int]:
    """MXNet's target (height, width) of ``resize``: ``size`` an int (a square, or with
    ``keep_ratio`` the shorter side) or ``(width, height)``; sizes must be positive."""
    dims: list[Any] = [size]
    if isinstance(size, (list, tuple)):
        dims = list(size)
    whole = all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in dims)
    if len(dims) not in (1, 2) or not whole:
        raise ImageShapeError(f"{who}: size must be an int or a (width, height) pair of ints, got {size!r}")
    dims = [int(d) for d in dims]
    if any(d <= 0 for d in dims):
        raise ImageShapeError(f"{who}: size must be greater than 0, got {size!r}")
    if len(dims) == 2:
        return dims[1], dims[0]
    if not keep_ratio:
        return dims[0], dims[0]
    if h > w:
        return h * dims[0] // w, dims[0]
    return dims[0], w * dims[0] // h


@follows_inputs
def resize(data: torch.Tensor, size: Any = (), keep_ratio: bool = False, interp: int = 1) -> torch.Tensor:
    """MXNet's ``image.resize`` of ``(H, W, C)`` images / ``(N, H, W, C)`` batches to ``size`` (see
    :func:`resized_hw`) with OpenCV's ``interp`` code (0 nearest, 1 bilinear, 2 bicubic, 3 area)."""
    batch = image_rank(data, "resize", "H, W, C")
    x = data if batch else data.unsqueeze(0)
    h, w = resized_hw(x.shape[1], x.shape[2], size, keep_ratio, "resize")
    out = resize_nhwc(x, h, w, check_interp(interp, "resize"))
    return out if batch else out[0]
