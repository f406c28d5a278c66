"""MXNet's image augmenters (``mx.image.*Aug``) and ``CreateAugmenter``.

Each augmenter is called on one ``(H, W, C)`` image tensor and returns the new image; the colour
augmenters work on float images (``CreateAugmenter`` puts a ``CastAug`` before them, as MXNet).
Random draws use Python's ``random`` (and NumPy's for ``LightingAug``), as MXNet's do.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from . import image as _image

__all__ = ["Augmenter", "SequentialAug", "RandomOrderAug", "ResizeAug", "ForceResizeAug", "RandomCropAug",
           "RandomSizedCropAug", "CenterCropAug", "BrightnessJitterAug", "ContrastJitterAug",
           "SaturationJitterAug", "HueJitterAug", "ColorJitterAug", "LightingAug", "ColorNormalizeAug",
           "RandomGrayAug", "HorizontalFlipAug", "CastAug", "CreateAugmenter"]

_GRAY_COEF = torch.tensor([0.299, 0.587, 0.114])
_TYIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_ITYIQ = torch.tensor([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])


class Augmenter:
    """Base class: ``aug(src) -> image``; ``dumps()`` describes it as MXNet's JSON."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = {k: (v.tolist() if isinstance(v, (np.ndarray, torch.Tensor)) else v)
                        for k, v in kwargs.items()}

    def dumps(self) -> str:
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, src: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")


class SequentialAug(Augmenter):
    """Applies ``ts`` in order."""

    def __init__(self, ts: Sequence[Augmenter]) -> None:
        super().__init__()
        self.ts = list(ts)

    def dumps(self) -> str:
        return json.dumps([type(self).__name__.lower(), [json.loads(t.dumps()) for t in self.ts]])

    def __call__(self, src: Any) -> Any:
        for t in self.ts:
            src = t(src)
        return src


class RandomOrderAug(SequentialAug):
    """Applies ``ts`` in a random order."""

    def __call__(self, src: Any) -> Any:
        ts = list(self.ts)
        random.shuffle(ts)
        for t in ts:
            src = t(src)
        return src


class _SizedAug(Augmenter):
    """An augmenter set by a target ``size`` and an ``interp`` code."""

    def __init__(self, size: Any, interp: int = 2) -> None:
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp


class ResizeAug(_SizedAug):
    """Resizes the shorter side to ``size``."""

    def __call__(self, src: Any) -> Any:
        return _image.resize_short(src, self.size, self.interp)


class ForceResizeAug(_SizedAug):
    """Resizes to ``size`` (w, h), ignoring the aspect ratio."""

    def __call__(self, src: Any) -> Any:
        h, w = src.shape[:2]
        interp = _image._interp(self.interp, (h, w, self.size[1], self.size[0]))
        return _image.imresize(src, self.size[0], self.size[1], interp=interp)


class RandomCropAug(_SizedAug):
    """A random crop of ``size`` (w, h)."""

    def __call__(self, src: Any) -> Any:
        return _image.random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    def __init__(self, size: tuple[int, int], area: Any, ratio: tuple[float, float], interp: int = 2,
                 **kwargs: Any) -> None:
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        self.size, self.area, self.ratio, self.interp, self.kwargs = size, area, ratio, interp, kwargs

    def __call__(self, src: Any) -> Any:
        return _image.random_size_crop(src, self.size, self.area, self.ratio, self.interp, **self.kwargs)[0]


class CenterCropAug(_SizedAug):
    """The central crop of ``size`` (w, h)."""

    def __call__(self, src: Any) -> Any:
        return _image.center_crop(src, self.size, self.interp)[0]


class _JitterAug(Augmenter):
    """A colour jitter set by one strength, kept under the name MXNet gives it."""

    name = ""

    def __init__(self, strength: float | None = None, **named: float) -> None:
        if strength is None:  # MXNet's keyword: BrightnessJitterAug(brightness=0.2)
            strength = named.pop(self.name)
        if named:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(named)}")
        super().__init__(**{self.name: strength})
        setattr(self, self.name, strength)
        self.strength = strength

    def __call__(self, src: Any) -> Any:
        return self.blend(src, 1.0 + random.uniform(-self.strength, self.strength))

    def blend(self, src: Any, alpha: float) -> Any:
        raise NotImplementedError


class BrightnessJitterAug(_JitterAug):
    """Multiplies by ``1 + U(-brightness, brightness)``."""

    name = "brightness"

    def blend(self, src: Any, alpha: float) -> Any:
        return src * alpha


class ContrastJitterAug(_JitterAug):
    """Blends with the image's mean gray level by ``1 + U(-contrast, contrast)``."""

    name = "contrast"

    def blend(self, src: Any, alpha: float) -> Any:
        mean_gray = (src * _GRAY_COEF.to(src.dtype)).sum() * (3.0 / src.numel())
        return src * alpha + mean_gray * (1.0 - alpha)


class SaturationJitterAug(_JitterAug):
    """Blends each pixel with its gray level by ``1 + U(-saturation, saturation)``."""

    name = "saturation"

    def blend(self, src: Any, alpha: float) -> Any:
        return src * alpha + (src * _GRAY_COEF.to(src.dtype)).sum(dim=2, keepdim=True) * (1.0 - alpha)


class HueJitterAug(_JitterAug):
    """Rotates the hue (in YIQ space) by ``U(-hue, hue)`` half-turns."""

    name = "hue"

    def __call__(self, src: Any) -> Any:
        alpha = random.uniform(-self.strength, self.strength)
        u, w = math.cos(alpha * math.pi), math.sin(alpha * math.pi)
        bt = torch.tensor([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        t = (_ITYIQ @ bt @ _TYIQ).T
        return src @ t.to(src.dtype)


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitters (those not zero) in a random order."""

    def __init__(self, brightness: float, contrast: float, saturation: float) -> None:
        ts: list[Augmenter] = []
        if brightness > 0:
            ts.append(BrightnessJitterAug(brightness))
        if contrast > 0:
            ts.append(ContrastJitterAug(contrast))
        if saturation > 0:
            ts.append(SaturationJitterAug(saturation))
        super().__init__(ts)


class LightingAug(Augmenter):
    """AlexNet's PCA lighting noise: adds ``eigvec @ (alpha * eigval)``, ``alpha ~ N(0, alphastd)``."""

    def __init__(self, alphastd: float, eigval: Any, eigvec: Any) -> None:
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd, self.eigval, self.eigvec = alphastd, np.asarray(eigval), np.asarray(eigvec)

    def __call__(self, src: Any) -> Any:
        alpha = np.random.normal(0, self.alphastd, size=(3,))
        rgb = np.dot(self.eigvec * alpha, self.eigval)
        return src + torch.as_tensor(rgb, dtype=src.dtype)


class ColorNormalizeAug(Augmenter):
    def __init__(self, mean: Any, std: Any) -> None:
        super().__init__(mean=mean, std=std)
        self.mean = None if mean is None else torch.as_tensor(np.asarray(mean, np.float32))
        self.std = None if std is None else torch.as_tensor(np.asarray(std, np.float32))

    def __call__(self, src: Any) -> Any:
        return _image.color_normalize(src, self.mean, self.std)


class RandomGrayAug(Augmenter):
    """With probability ``p``, replaces each channel by the pixel's gray level."""

    def __init__(self, p: float) -> None:
        super().__init__(p=p)
        self.p = p
        self.mat = torch.tensor([[0.21, 0.21, 0.21], [0.72, 0.72, 0.72], [0.07, 0.07, 0.07]])

    def __call__(self, src: Any) -> Any:
        return src @ self.mat.to(src.dtype) if random.random() < self.p else src


class HorizontalFlipAug(Augmenter):
    """With probability ``p``, mirrors left-right."""

    def __init__(self, p: float) -> None:
        super().__init__(p=p)
        self.p = p

    def __call__(self, src: Any) -> Any:
        return torch.flip(src, dims=[1]) if random.random() < self.p else src


class CastAug(Augmenter):
    def __init__(self, typ: str = "float32") -> None:
        super().__init__(type=typ)
        self.typ = getattr(torch, typ)

    def __call__(self, src: Any) -> Any:
        return src.to(self.typ)


def CreateAugmenter(data_shape: Sequence[int], resize: int = 0, rand_crop: bool = False,  # noqa: N802
                    rand_resize: bool = False, rand_mirror: bool = False, mean: Any = None, std: Any = None,
                    brightness: float = 0, contrast: float = 0, saturation: float = 0, hue: float = 0,
                    pca_noise: float = 0, rand_gray: float = 0, inter_method: int = 2) -> list[Augmenter]:
    """MXNet's default augmenter list for ``data_shape`` (C, H, W), in MXNet's order."""
    if len(data_shape) != 3:
        raise ValueError(f"CreateAugmenter: data_shape must be (channels, height, width), got {data_shape!r}")
    if rand_resize and not rand_crop:
        raise ValueError("CreateAugmenter: rand_resize needs rand_crop=True")
    auglist: list[Augmenter] = []
    if resize > 0:
        auglist.append(ResizeAug(resize, inter_method))
    crop_size = (int(data_shape[2]), int(data_shape[1]))
    if rand_resize:
        auglist.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        auglist.append(RandomCropAug(crop_size, inter_method))
    else:
        auglist.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        auglist.append(HorizontalFlipAug(0.5))
    auglist.append(CastAug())
    if brightness or contrast or saturation:
        auglist.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        auglist.append(HueJitterAug(hue))
    if pca_noise > 0:
        eigval = np.array([55.46, 4.794, 1.148])
        eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                           [-0.5836, -0.6948, 0.4203]])
        auglist.append(LightingAug(pca_noise, eigval, eigvec))
    if rand_gray > 0:
        auglist.append(RandomGrayAug(rand_gray))
    if mean is True:
        mean = [123.68, 116.28, 103.53]
    if std is True:
        std = [58.395, 57.12, 57.375]
    if mean is not None or std is not None:
        auglist.append(ColorNormalizeAug(mean, std))
    return auglist
