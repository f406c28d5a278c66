"""Image transforms, as in ``mxnet.gluon.data.vision.transforms`` (which re-exports these and
those of :mod:`.transforms_extra`), written with torch ops.

Each transform takes one image or a batch of images.  As in MXNet, images before
:class:`ToTensor` are laid out ``(H, W, C)`` (a batch ``(N, H, W, C)``), usually uint8 in
[0, 255]; :class:`ToTensor` turns them into float32 ``(C, H, W)`` (``(N, C, H, W)``) in [0, 1],
the layout :class:`Normalize` expects.  Geometric and colour transforms (Resize, the crops, the
flips, RandomBrightness, RandomContrast) work on the ``(H, W, C)`` layout and keep the dtype
(uint8 results are rounded and clipped to [0, 255]).

Random transforms draw from torch's global generator (``torch.manual_seed``); on a batch they
draw independently for every image.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ...._dtype import dtype_name, to_torch_dtype
from ....nd.image import ImageShapeError, check_interp, image_rank, resize_nhwc, resized_hw

__all__ = [
    "Compose",
    "Cast",
    "ToTensor",
    "Normalize",
    "Resize",
    "CenterCrop",
    "RandomResizedCrop",
    "RandomCrop",
    "RandomFlipLeftRight",
    "RandomFlipTopBottom",
    "RandomBrightness",
    "RandomContrast",
]


class _Transform:
    """Base class: a callable on one image or a batch of images."""

    #: mxtorch transforms accept whole batches, which lets the DataLoader transform a batch at once
    _mxtorch_batchable = True

    def __call__(self, x: Any) -> torch.Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _as_tensor(x: Any, who: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    raise TypeError(f"{who} expects a torch.Tensor or numpy array image, got {type(x).__name__}")


def _is_batch(x: torch.Tensor, who: str, layout: str) -> bool:
    """True for a batch (rank 4), False for one image (rank 3); else an ImageShapeError (an
    MXNetError, as MXNet's image operators raise, and a ValueError)."""
    return image_rank(x, who, layout)


def _size_wh(size: Any, who: str) -> tuple[int, int]:
    """MXNet sizes: an int (square) or a (width, height) pair."""
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        w = h = int(size)
    elif isinstance(size, (tuple, list)) and len(size) == 2 and all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in size
    ):
        w, h = int(size[0]), int(size[1])
    else:
        raise TypeError(f"{who}: size must be an int or a (width, height) pair of ints, got {size!r}")
    if w <= 0 or h <= 0:
        raise ValueError(f"{who}: size must be positive, got {size!r}")
    return w, h


def _resize_hwc(x: torch.Tensor, h: int, w: int, interpolation: int) -> torch.Tensor:
    return resize_nhwc(x.unsqueeze(0), h, w, interpolation)[0]


def _scale_down(src_wh: tuple[int, int], size_wh: tuple[int, int]) -> tuple[int, int]:
    """Shrink the crop size ``size_wh``, keeping its aspect ratio, until it fits in ``src_wh``."""
    sw, sh = src_wh
    w, h = float(size_wh[0]), float(size_wh[1])
    if sh < h:
        w, h = w * sh / h, float(sh)
    if sw < w:
        w, h = float(sw), h * sw / w
    return max(int(w), 1), max(int(h), 1)


def _crop_resize_hwc(
    x: torch.Tensor, x0: int, y0: int, cw: int, ch: int, size_wh: tuple[int, int], interpolation: int
) -> torch.Tensor:
    out = x[y0 : y0 + ch, x0 : x0 + cw, :]
    if (cw, ch) != size_wh:
        out = _resize_hwc(out, size_wh[1], size_wh[0], interpolation)
    return out


def _per_image(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    return torch.stack([fn(img) for img in x])


class Compose(_Transform):
    """Applies ``transforms`` one after another."""

    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        transforms = list(transforms)
        for t in transforms:
            if not callable(t):
                raise TypeError(f"Compose expects callables, got {t!r}")
        self._transforms = transforms

    @property
    def _mxtorch_batchable(self) -> bool:  # type: ignore[override]
        return all(getattr(t, "_mxtorch_batchable", False) for t in self._transforms)

    def __call__(self, x: Any) -> Any:
        for t in self._transforms:
            x = t(x)
        return x

    def __len__(self) -> int:
        return len(self._transforms)

    def __getitem__(self, i: int) -> Callable[[Any], Any]:
        return self._transforms[i]

    def __repr__(self) -> str:
        inner = "".join(f"\n  ({i}): {t!r}" for i, t in enumerate(self._transforms))
        return f"Compose({inner}\n)"


class Cast(_Transform):
    """Casts to ``dtype`` (default float32)."""

    def __init__(self, dtype: Any = "float32") -> None:
        self._dtype = to_torch_dtype(dtype)

    def __call__(self, x: Any) -> torch.Tensor:
        return _as_tensor(x, "Cast").to(self._dtype)

    def __repr__(self) -> str:
        return f"Cast(dtype={dtype_name(self._dtype)})"


class ToTensor(_Transform):
    """uint8 ``(H, W, C)`` in [0, 255] to float32 ``(C, H, W)`` in [0, 1]; batches
    ``(N, H, W, C)`` to ``(N, C, H, W)``."""

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, "ToTensor")
        order = (0, 3, 1, 2) if _is_batch(x, "ToTensor", "H, W, C") else (2, 0, 1)
        return x.permute(order).to(torch.float32, memory_format=torch.contiguous_format).div_(255.0)


def _channel_values(v: Any, who: str, name: str) -> tuple[float, ...]:
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return (float(v),)
    if isinstance(v, torch.Tensor):
        v = v.tolist()
    try:
        vals = tuple(float(a) for a in v)
    except TypeError:
        raise TypeError(f"{who}: {name} must be a number or a sequence of numbers, got {v!r}") from None
    if not vals:
        raise ValueError(f"{who}: {name} must not be empty")
    return vals


class Normalize(_Transform):
    """``(x - mean) / std`` per channel of a float ``(C, H, W)`` image or ``(N, C, H, W)`` batch.

    ``mean`` and ``std`` are numbers or one value per channel.
    """

    def __init__(self, mean: float | Sequence[float] = 0.0, std: float | Sequence[float] = 1.0) -> None:
        self._mean = _channel_values(mean, "Normalize", "mean")
        self._std = _channel_values(std, "Normalize", "std")
        if any(s == 0 for s in self._std):
            raise ValueError(f"Normalize: std must not contain 0, got {std!r}")
        self._cache: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, "Normalize")
        batch = _is_batch(x, "Normalize", "C, H, W")
        if not x.is_floating_point():
            raise TypeError(
                f"Normalize expects a floating-point (C, H, W) tensor (apply ToTensor first), got {x.dtype}"
            )
        c = x.shape[1] if batch else x.shape[0]
        for name, vals in (("mean", self._mean), ("std", self._std)):
            if len(vals) not in (1, c):
                raise ImageShapeError(
                    f"Normalize: {name} has {len(vals)} values but the input has {c} channels "
                    f"(shape {tuple(x.shape)}; expected (C, H, W) or (N, C, H, W))"
                )
        key = (x.dtype, x.device, c)
        if key not in self._cache:
            mean = torch.tensor(self._mean, dtype=x.dtype, device=x.device).expand(c).reshape(c, 1, 1)
            std = torch.tensor(self._std, dtype=x.dtype, device=x.device).expand(c).reshape(c, 1, 1)
            self._cache[key] = (mean, std)
        mean, std = self._cache[key]
        return (x - mean) / std

    def __repr__(self) -> str:
        return f"Normalize(mean={self._mean}, std={self._std})"


class Resize(_Transform):
    """Resizes ``(H, W, C)`` images to ``size``: an int or ``(width, height)``.

    With an int ``size`` and ``keep_ratio=True`` the shorter side becomes ``size`` and the
    longer one keeps the aspect ratio.  ``interpolation``: 0 nearest, 1 bilinear, 2 bicubic,
    3 area, 9 auto, 10 random.
    """

    def __init__(self, size: int | tuple[int, int], keep_ratio: bool = False, interpolation: int = 1) -> None:
        self._size = size  # checked on each call, as MXNet's resize operator does
        self._keep_ratio = keep_ratio
        self._interp = check_interp(interpolation, "Resize")

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, "Resize")
        batch = _is_batch(x, "Resize", "H, W, C")
        xb = x if batch else x.unsqueeze(0)
        th, tw = resized_hw(xb.shape[1], xb.shape[2], self._size, self._keep_ratio, "Resize")
        if self._interp == 10 and batch:
            out = _per_image(xb, lambda img: _resize_hwc(img, th, tw, 10))
        else:
            out = resize_nhwc(xb, th, tw, self._interp)
        return out if batch else out[0]

    def __repr__(self) -> str:
        return f"Resize(size={self._size}, keep_ratio={self._keep_ratio}, interpolation={self._interp})"


class CenterCrop(_Transform):
    """Crops the centre ``size`` (an int or ``(width, height)``) of ``(H, W, C)`` images.

    An image smaller than ``size`` gives its largest centred region of that aspect ratio,
    resized up to ``size``.
    """

    def __init__(self, size: int | tuple[int, int], interpolation: int = 1) -> None:
        self._size = _size_wh(size, "CenterCrop")
        self._interp = check_interp(interpolation, "CenterCrop")

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, "CenterCrop")
        batch = _is_batch(x, "CenterCrop", "H, W, C")
        xb = x if batch else x.unsqueeze(0)
        h, w = xb.shape[1], xb.shape[2]
        cw, ch = _scale_down((w, h), self._size)
        x0, y0 = (w - cw) // 2, (h - ch) // 2
        out = xb[:, y0 : y0 + ch, x0 : x0 + cw, :]
        if (cw, ch) != self._size:
            out = resize_nhwc(out, self._size[1], self._size[0], self._interp)
        return out if batch else out[0]

    def __repr__(self) -> str:
        return f"CenterCrop(size={self._size}, interpolation={self._interp})"


class RandomCrop(_Transform):
    """Pads ``(H, W, C)`` images by ``pad`` (an int, or ``(pad_h, pad_w)``) with ``pad_value``,
    then crops a random ``size`` (an int or ``(width, height)``) region.

    An image smaller than ``size`` gives a random region of that aspect ratio resized up.
    """

    def __init__(
        self,
        size: int | tuple[int, int],
        pad: int | tuple[int, int] | None = None,
        pad_value: float = 0,
        interpolation: int = 1,
    ) -> None:
        self._size = _size_wh(size, "RandomCrop")
        if pad is None:
            self._pad = (0, 0)
        elif isinstance(pad, (int, np.integer)) and not isinstance(pad, bool) and pad >= 0:
            self._pad = (int(pad), int(pad))
        elif (
            isinstance(pad, (tuple, list))
            and len(pad) == 2
            and all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) and p >= 0 for p in pad)
        ):
            self._pad = (int(pad[0]), int(pad[1]))
        else:
            raise ValueError(f"RandomCrop: pad must be None, an int >= 0 or (pad_h, pad_w), got {pad!r}")
        self._pad_value = pad_value
        self._interp = check_interp(interpolation, "RandomCrop")

    def _crop_one(self, img: torch.Tensor) -> torch.Tensor:
        h, w = img.shape[0], img.shape[1]
        cw, ch = _scale_down((w, h), self._size)
        x0 = int(torch.randint(0, w - cw + 1, ()).item())
        y0 = int(torch.randint(0, h - ch + 1, ()).item())
        return _crop_resize_hwc(img, x0, y0, cw, ch, self._size, self._interp)

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, "RandomCrop")
        batch = _is_batch(x, "RandomCrop", "H, W, C")
        xb = x if batch else x.unsqueeze(0)
        ph, pw = self._pad
        if ph or pw:
            # F.pad pads trailing dims first: (C: 0, 0), (W: pw, pw), (H: ph, ph)
            xb = F.pad(xb, (0, 0, pw, pw, ph, ph), value=self._pad_value)
        out = _per_image(xb, self._crop_one)
        return out if batch else out[0]

    def __repr__(self) -> str:
        return f"RandomCrop(size={self._size}, pad={self._pad}, pad_value={self._pad_value})"


class RandomResizedCrop(_Transform):
    """Crops a random region of ``(H, W, C)`` images and resizes it to ``size`` (an int or
    ``(width, height)``).

    The region covers a fraction of the image area drawn uniformly from ``scale`` and has an
    aspect ratio (width / height) drawn log-uniformly from ``ratio``; after 10 failed draws the
    centre crop is used.
    """

    def __init__(
        self,
        size: int | tuple[int, int],
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: int = 1,
    ) -> None:
        self._size = _size_wh(size, "RandomResizedCrop")
        if len(scale) != 2 or not 0 < scale[0] <= scale[1]:
            raise ValueError(f"RandomResizedCrop: scale must be (min, max), 0 < min <= max, got {scale!r}")
        if len(ratio) != 2 or not 0 < ratio[0] <= ratio[1]:
            raise ValueError(f"RandomResizedCrop: ratio must be (min, max), 0 < min <= max, got {ratio!r}")
        self._scale = (float(scale[0]), float(scale[1]))
        self._ratio = (float(ratio[0]), float(ratio[1]))
        self._interp = check_interp(interpolation, "RandomResizedCrop")

    def _crop_one(self, img: torch.Tensor) -> torch.Tensor:
        h, w = img.shape[0], img.shape[1]
        area = h * w
        log_lo, log_hi = math.log(self._ratio[0]), math.log(self._ratio[1])
        for _ in range(10):
            u = torch.rand(2).tolist()
            target = area * (self._scale[0] + (self._scale[1] - self._scale[0]) * u[0])
            aspect = math.exp(log_lo + (log_hi - log_lo) * u[1])
            cw = int(round(math.sqrt(target * aspect)))
            ch = int(round(math.sqrt(target / aspect)))
            if 0 < cw <= w and 0 < ch <= h:
                x0 = int(torch.randint(0, w - cw + 1, ()).item())
                y0 = int(torch.randint(0, h - ch + 1, ()).item())
                return _crop_resize_hwc(img, x0, y0, cw, ch, self._size, self._interp)
        cw, ch = _scale_down((w, h), self._size)
        return _crop_resize_hwc(img, (w - cw) // 2, (h - ch) // 2, cw, ch, self._size, self._interp)

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, "RandomResizedCrop")
        if _is_batch(x, "RandomResizedCrop", "H, W, C"):
            return _per_image(x, self._crop_one)
        return self._crop_one(x)

    def __repr__(self) -> str:
        return f"RandomResizedCrop(size={self._size}, scale={self._scale}, ratio={self._ratio})"


class _RandomFlip(_Transform):
    _axis = 0  # axis of a single (H, W, C) image
    _name = ""

    def __init__(self, p: float = 0.5) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: p must be in [0, 1], got {p!r}")
        self._p = float(p)

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, type(self).__name__)
        if _is_batch(x, type(self).__name__, "H, W, C"):
            flip = torch.rand(x.shape[0]) < self._p
            if not bool(flip.any()):
                return x
            out = x.clone()
            out[flip] = x[flip].flip(self._axis + 1)
            return out
        if float(torch.rand(())) < self._p:
            return x.flip(self._axis)
        return x

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self._p})"


class RandomFlipLeftRight(_RandomFlip):
    """Mirrors ``(H, W, C)`` images left to right with probability ``p``."""

    _axis = 1


class RandomFlipTopBottom(_RandomFlip):
    """Flips ``(H, W, C)`` images upside down with probability ``p``."""

    _axis = 0


def _blend_out(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if x.is_floating_point():
        return y.to(x.dtype)
    info = torch.iinfo(x.dtype)
    return y.round_().clamp_(info.min, info.max).to(x.dtype)


def _factors(n: int, amount: float) -> torch.Tensor:
    return 1.0 + (torch.rand(n, dtype=torch.float32) * 2.0 - 1.0) * amount


class _RandomFactor(_Transform):
    """Transforms each ``(H, W, C)`` image with its own factor ``alpha`` drawn uniformly from
    ``[1 - amount, 1 + amount]`` (:meth:`_apply`); integer images are rounded and clamped back."""

    _arg = "amount"  # the constructor argument's name, as MXNet spells it

    def __init__(self, amount: float) -> None:
        if amount < 0:
            raise ValueError(f"{type(self).__name__}: {self._arg} must be >= 0, got {amount!r}")
        self._amount = float(amount)

    def _apply(self, work: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, x: Any) -> torch.Tensor:
        x = _as_tensor(x, type(self).__name__)
        batch = _is_batch(x, type(self).__name__, "H, W, C")
        xb = x if batch else x.unsqueeze(0)
        work = xb.to(torch.float32) if not xb.is_floating_point() else xb
        alpha = _factors(xb.shape[0], self._amount).to(work.dtype).reshape(-1, 1, 1, 1)
        out = _blend_out(xb, self._apply(work, alpha))
        return out if batch else out[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._arg}={self._amount})"


class RandomBrightness(_RandomFactor):
    """Multiplies each image by a factor drawn uniformly from ``[1 - brightness, 1 + brightness]``."""

    _arg = "brightness"

    def __init__(self, brightness: float) -> None:
        super().__init__(brightness)

    def _apply(self, work: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        return work * alpha


_LUMA = (0.299, 0.587, 0.114)


class RandomContrast(_RandomFactor):
    """Blends each ``(H, W, C)`` image with its mean grey level: ``alpha * x + (1 - alpha) * mean``,
    ``alpha`` drawn uniformly from ``[1 - contrast, 1 + contrast]`` (grey uses the
    0.299/0.587/0.114 luma weights for 3-channel images, the plain mean otherwise)."""

    _arg = "contrast"

    def __init__(self, contrast: float) -> None:
        super().__init__(contrast)

    def _apply(self, work: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        if work.shape[-1] == 3:
            weights = torch.tensor(_LUMA, dtype=work.dtype, device=work.device)
            gray = (work * weights).sum(-1).mean(dim=(1, 2))
        else:
            gray = work.mean(dim=(1, 2, 3))
        return work * alpha + (gray.reshape(-1, 1, 1, 1) * (1.0 - alpha))
