"""MXNet's ``mx.image`` functions: decode, resize and crop ``(H, W, C)`` uint8 tensors.

Images are torch tensors laid out as MXNet's (height, width, channels); the pixel work is
OpenCV's (``interp`` codes are OpenCV's: 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos,
and MXNet's 9 (chosen by the resize direction) and 10 (random)).  Random choices draw from
Python's ``random`` module, as MXNet's do.
"""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch

from .codec import ImageArgumentError, ImageDecodeError, decode_bgr, resize_hwc

__all__ = ["imdecode", "imread", "imresize", "scale_down", "resize_short", "fixed_crop", "center_crop",
           "random_crop", "random_size_crop", "color_normalize"]

Box = tuple[int, int, int, int]  # a crop: (x0, y0, w, h)


def _pixels(src: Any, who: str) -> np.ndarray:
    arr = src.detach().cpu().numpy() if isinstance(src, torch.Tensor) else np.asarray(src)
    if arr.ndim not in (2, 3):
        raise ValueError(f"{who}: expected an (H, W, C) image, got shape {tuple(arr.shape)}")
    return arr


def imdecode(buf: Any, flag: int = 1, to_rgb: bool = True, out: Any = None) -> torch.Tensor:
    """Decodes JPEG/PNG/... bytes to a uint8 ``(H, W, 3)`` tensor (``flag=1``, RGB unless
    ``to_rgb=False``) or ``(H, W, 1)`` (``flag=0``, gray)."""
    if isinstance(buf, torch.Tensor):
        buf = buf.detach().cpu().numpy().astype(np.uint8, copy=False).tobytes()
    elif isinstance(buf, np.ndarray):
        buf = buf.astype(np.uint8, copy=False).tobytes()
    img = decode_bgr(bytes(buf), 1 if flag else 0)
    if img.ndim == 2:
        img = img[:, :, None]
    elif to_rgb:
        img = img[:, :, ::-1]
    result = torch.from_numpy(np.ascontiguousarray(img))
    if out is not None:
        out.copy_(result)
        return out
    return result


def imread(filename: str | os.PathLike[str], flag: int = 1, to_rgb: bool = True,
           out: Any = None) -> torch.Tensor:
    """Reads and decodes an image file (as :func:`imdecode`)."""
    try:
        with open(filename, "rb") as f:
            buf = f.read()
    except OSError as e:  # MXNet's imread raises MXNetError for a missing or unreadable file
        raise ImageDecodeError(f"imread: cannot read {os.fspath(filename)!r}: {e.strerror}") from e
    return imdecode(buf, flag, to_rgb, out)


def _interp(interp: int, sizes: tuple[int, int, int, int] | None = None) -> int:
    if interp == 9:
        if sizes:
            oh, ow, nh, nw = sizes
            if nh > oh and nw > ow:
                return 2
            if nh < oh and nw < ow:
                return 3
            return 1
        return 2
    if interp == 10:
        return random.randint(0, 4)
    if interp not in (0, 1, 2, 3, 4):
        raise ImageArgumentError(f"interp must be 0-4, 9 (by direction) or 10 (random), got {interp!r}")
    return interp


def imresize(src: Any, w: int, h: int, interp: int = 1, out: Any = None) -> torch.Tensor:
    """Resizes to width ``w`` and height ``h`` (OpenCV's resize, ``interp`` as OpenCV's codes)."""
    if int(w) <= 0 or int(h) <= 0:
        raise ImageArgumentError(f"imresize: width and height must be positive, got w={w}, h={h}")
    arr = _pixels(src, "imresize")
    oh, ow = arr.shape[:2]
    res = resize_hwc(arr, int(w), int(h), _interp(interp, (oh, ow, int(h), int(w))))
    if res.ndim == 2 and arr.ndim == 3:
        res = res[:, :, None]
    result = torch.from_numpy(np.ascontiguousarray(res))
    if out is not None:
        out.copy_(result)
        return out
    return result


def scale_down(src_size: tuple[int, int], size: tuple[int, int]) -> tuple[int, int]:
    """Shrinks crop ``size`` (w, h), keeping its aspect ratio, until it fits ``src_size`` (w, h)."""
    w, h = float(size[0]), float(size[1])
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def resize_short(src: Any, size: int, interp: int = 2) -> torch.Tensor:
    """Resizes so that the shorter side is ``size``, keeping the aspect ratio."""
    h, w = _pixels(src, "resize_short").shape[:2]
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    return imresize(src, new_w, new_h, interp=_interp(interp, (h, w, new_h, new_w)))


def fixed_crop(src: Any, x0: int, y0: int, w: int, h: int, size: tuple[int, int] | None = None,
               interp: int = 2) -> torch.Tensor:
    """The ``w`` x ``h`` region at ``(x0, y0)``, resized to ``size`` (w, h) when given."""
    img = src if isinstance(src, torch.Tensor) else torch.from_numpy(np.asarray(src))
    out = img[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        out = imresize(out, size[0], size[1], interp=_interp(interp, (h, w, size[1], size[0])))
    return out


def center_crop(src: Any, size: tuple[int, int], interp: int = 2) -> tuple[torch.Tensor, Box]:
    """The central crop of ``size`` (w, h) (scaled down to fit first): ``(image, (x0, y0, w, h))``."""
    h, w = _pixels(src, "center_crop").shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0, y0 = int((w - new_w) / 2), int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def random_crop(src: Any, size: tuple[int, int], interp: int = 2) -> tuple[torch.Tensor, Box]:
    """A crop of ``size`` (w, h) at a random place: ``(image, (x0, y0, w, h))``."""
    h, w = _pixels(src, "random_crop").shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0, y0 = random.randint(0, w - new_w), random.randint(0, h - new_h)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def random_size_crop(src: Any, size: tuple[int, int], area: float | tuple[float, float],
                     ratio: tuple[float, float], interp: int = 2,
                     **kwargs: Any) -> tuple[torch.Tensor, Box]:
    """A crop covering a random fraction ``area`` of the image with aspect ratio in ``ratio``
    (log-uniform), resized to ``size``; falls back to :func:`center_crop` after 10 tries."""
    h, w = _pixels(src, "random_size_crop").shape[:2]
    src_area = h * w
    if "min_area" in kwargs:  # MXNet's old name for the lower bound
        area = kwargs.pop("min_area")
    lo, hi = (area, 1.0) if isinstance(area, (int, float)) else area
    for _ in range(10):
        target_area = random.uniform(lo, hi) * src_area
        log_ratio = (np.log(ratio[0]), np.log(ratio[1]))
        new_ratio = np.exp(random.uniform(*log_ratio))
        new_w = int(round(np.sqrt(target_area * new_ratio)))
        new_h = int(round(np.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0, y0 = random.randint(0, w - new_w), random.randint(0, h - new_h)
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)


def color_normalize(src: torch.Tensor, mean: Any, std: Any = None) -> torch.Tensor:
    """``(src - mean) / std`` (either may be None), broadcast over the channels."""
    if mean is not None:
        src = src - torch.as_tensor(mean, dtype=src.dtype)
    if std is not None:
        src = src / torch.as_tensor(std, dtype=src.dtype)
    return src
