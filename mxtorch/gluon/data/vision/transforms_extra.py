"""The rest of MXNet's Gluon image transforms: CropResize, Rotate and RandomRotation (geometry),
RandomSaturation, RandomHue, RandomColorJitter and RandomLighting (colour), RandomApply.
Re-exported by :mod:`.transforms`; the layouts and dtype rules are those documented there."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ....base import MXNetError
from ....nd import image as nd_image
from ....nd.image import check_interp, resize_nhwc
from ._transforms_core import (
    _LUMA,
    Compose,
    RandomBrightness,
    RandomContrast,
    _as_tensor,
    _is_batch,
    _RandomFactor,
    _size_wh,
    _Transform,
)

__all__ = ["CropResize", "Rotate", "RandomRotation", "RandomSaturation", "RandomHue", "RandomColorJitter",
           "RandomLighting", "RandomApply"]


class CropResize(_Transform):
    """The region ``(x, y, width, height)`` of ``(H, W, C)`` images, resized to ``size`` (an int
    or ``(width, height)``) when given, with ``interpolation`` (MXNet's codes, default bilinear)."""

    def __init__(self, x: int, y: int, width: int, height: int, size: int | tuple[int, int] | None = None,
                 interpolation: int | None = None) -> None:
        self._box = (int(x), int(y), int(width), int(height))
        self._size = size
        self._interp = check_interp(1 if interpolation is None else interpolation, "CropResize")

    def __call__(self, img: Any) -> torch.Tensor:
        img = _as_tensor(img, "CropResize")
        batch = _is_batch(img, "CropResize", "H, W, C")
        out = nd_image.crop(img, *self._box)
        if self._size is None:
            return out
        w, h = self._size if isinstance(self._size, (tuple, list)) else (self._size, self._size)
        if int(w) <= 0 or int(h) <= 0:
            raise nd_image.ImageShapeError(f"CropResize: size must be positive, got {self._size!r}")
        w, h = _size_wh((int(w), int(h)), "CropResize")
        xb = out if batch else out.unsqueeze(0)
        res = resize_nhwc(xb, h, w, self._interp)
        return res if batch else res[0]

    def __repr__(self) -> str:
        return f"CropResize(box={self._box}, size={self._size})"


def _check_float(x: torch.Tensor, who: str) -> None:
    if not x.is_floating_point():
        raise TypeError(f"{who} expects floating-point (C, H, W) images (apply ToTensor first), "
                        f"got {x.dtype}")


class Rotate(_Transform):
    """Rotates float ``(C, H, W)`` images / ``(N, C, H, W)`` batches counter-clockwise by
    ``rotation_degrees``; ``zoom_in`` hides the empty corners, ``zoom_out`` shows the whole image."""

    def __init__(self, rotation_degrees: float, zoom_in: bool = False, zoom_out: bool = False) -> None:
        self._args = (float(rotation_degrees), bool(zoom_in), bool(zoom_out))

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, "Rotate")
        _check_float(x, "Rotate")
        return nd_image.imrotate(x, *self._args)

    def __repr__(self) -> str:
        return f"Rotate(rotation_degrees={self._args[0]})"


class RandomRotation(_Transform):
    """With probability ``rotate_with_proba``, rotates each float image by an angle drawn
    uniformly from ``angle_limits = (low, high)`` degrees (see :class:`Rotate`)."""

    def __init__(self, angle_limits: tuple[float, float], zoom_in: bool = False, zoom_out: bool = False,
                 rotate_with_proba: float = 1.0) -> None:
        if not 0.0 <= float(rotate_with_proba) <= 1.0:
            raise ValueError(f"RandomRotation: rotate_with_proba must be in [0, 1], "
                             f"got {rotate_with_proba!r}")
        low, high = (float(a) for a in angle_limits)
        if low > high:
            raise ValueError(f"RandomRotation: angle_limits must be (low, high), got {tuple(angle_limits)}")
        self._limits, self._zoom = (low, high), (bool(zoom_in), bool(zoom_out))
        self._p = float(rotate_with_proba)

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, "RandomRotation")
        _check_float(x, "RandomRotation")
        if self._p < 1.0 and float(torch.rand(())) >= self._p:
            return x
        n = x.shape[0] if _is_batch(x, "RandomRotation", "C, H, W") else 1
        low, high = self._limits
        angles = low + torch.rand(n, dtype=torch.float64) * (high - low)
        return nd_image.imrotate(x, angles, *self._zoom)

    def __repr__(self) -> str:
        return f"RandomRotation(angle_limits={self._limits}, rotate_with_proba={self._p})"


class RandomSaturation(_RandomFactor):
    """Blends each pixel with its grey level: ``alpha * x + (1 - alpha) * grey``, ``alpha`` drawn
    uniformly from ``[1 - saturation, 1 + saturation]`` per image."""

    _arg = "saturation"

    def __init__(self, saturation: float) -> None:
        super().__init__(saturation)

    def _apply(self, work: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        weights = torch.tensor(_LUMA, dtype=work.dtype, device=work.device)
        gray = (work * weights).sum(-1, keepdim=True)
        return work * alpha + gray * (1.0 - alpha)


# RGB <-> YIQ (NTSC): the hue turns in the I-Q plane
_TYIQ = ((0.299, 0.587, 0.114), (0.596, -0.274, -0.321), (0.211, -0.523, 0.311))
_ITYIQ = ((1.0, 0.956, 0.621), (1.0, -0.272, -0.647), (1.0, -1.107, 1.705))


class RandomHue(_RandomFactor):
    """Turns each image's hue by ``U(-hue, hue)`` half-turns in YIQ space (3-channel RGB images)."""

    _arg = "hue"

    def __init__(self, hue: float) -> None:
        super().__init__(hue)

    def _apply(self, work: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        turn = (alpha.reshape(-1) - 1.0) * math.pi
        u, w = turn.cos(), turn.sin()
        one, zero = torch.ones_like(u), torch.zeros_like(u)
        bt = torch.stack([torch.stack([one, zero, zero], -1), torch.stack([zero, u, -w], -1),
                          torch.stack([zero, w, u], -1)], 1)  # (N, 3, 3)
        tyiq = torch.tensor(_TYIQ, dtype=work.dtype, device=work.device)
        ityiq = torch.tensor(_ITYIQ, dtype=work.dtype, device=work.device)
        t = ityiq @ bt @ tyiq
        return torch.einsum("nhwc,ndc->nhwd", work, t)


class RandomColorJitter(_Transform):
    """RandomBrightness, RandomContrast, RandomSaturation and RandomHue (those with a non-zero
    amount), applied in a random order."""

    def __init__(self, brightness: float = 0.0, contrast: float = 0.0, saturation: float = 0.0,
                 hue: float = 0.0) -> None:
        makers: list[tuple[float, Callable[[float], _Transform]]] = [
            (brightness, RandomBrightness), (contrast, RandomContrast), (saturation, RandomSaturation),
            (hue, RandomHue)]
        self._ts = [make(v) for v, make in makers if v > 0]

    def __call__(self, x: Any) -> torch.Tensor:
        for i in torch.randperm(len(self._ts)).tolist():
            x = self._ts[i](x)
        return _as_tensor(x, "RandomColorJitter")


# AlexNet's PCA of ImageNet RGB pixels (Krizhevsky et al., 2012), as MXNet's lighting noise uses
_EIGVAL = (55.46, 4.794, 1.148)
_EIGVEC = ((-0.5675, 0.7192, 0.4009), (-0.5808, -0.0045, -0.8140), (-0.5836, -0.6948, 0.4203))


class RandomLighting(_Transform):
    """AlexNet-style PCA lighting noise on ``(H, W, 3)`` images: adds ``eigvec @ (a * eigval)``,
    ``a ~ N(0, alpha)`` per image and channel."""

    def __init__(self, alpha: float) -> None:
        if alpha < 0:
            raise ValueError(f"RandomLighting: alpha must be >= 0, got {alpha!r}")
        self._alpha = float(alpha)

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, "RandomLighting")
        batch = _is_batch(x, "RandomLighting", "H, W, C")
        xb = x if batch else x.unsqueeze(0)
        if xb.shape[-1] != 3:
            raise MXNetError(f"RandomLighting expects 3-channel RGB images, got shape {tuple(x.shape)}")
        a = torch.randn(xb.shape[0], 3, dtype=torch.float32) * self._alpha
        rgb = (a * torch.tensor(_EIGVAL)) @ torch.tensor(_EIGVEC).T  # (N, 3)
        work = xb.to(torch.float32) + rgb.reshape(-1, 1, 1, 3).to(xb.device)
        if xb.is_floating_point():
            out = work.to(xb.dtype)
        else:
            info = torch.iinfo(xb.dtype)
            out = work.round_().clamp_(info.min, info.max).to(xb.dtype)
        return out if batch else out[0]

    def __repr__(self) -> str:
        return f"RandomLighting(alpha={self._alpha})"


class RandomApply(_Transform):
    """Applies ``transforms`` (one transform or a list, composed) with probability ``p``."""

    def __init__(self, transforms: Any, p: float = 0.5) -> None:
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"RandomApply: p must be in [0, 1], got {p!r}")
        self._t = Compose(list(transforms)) if isinstance(transforms, (list, tuple)) else transforms
        self._p = float(p)

    def __call__(self, x: Any) -> Any:
        return self._t(x) if float(torch.rand(())) < self._p else x

    def __repr__(self) -> str:
        return f"RandomApply({self._t!r}, p={self._p})"
