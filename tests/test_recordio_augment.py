"""mx.image's augmenters and CreateAugmenter: MXNet's list order, shapes, value ranges and
the formulas checked by hand on a fixture image decoded as MXNet 1.9.1 decodes it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import torch

import mxtorch as mx
from mxtorch import image as I

DATA = Path(__file__).parent / "data" / "recordio"
IMG = torch.from_numpy(np.load(DATA / "expected.npz")["decoded_6"])  # 11 x 10 x 3 uint8, MXNet's pixels


def test_create_augmenter_order_and_output() -> None:
    augs = mx.image.CreateAugmenter((3, 6, 5), resize=8, rand_crop=True, rand_mirror=True, mean=True,
                                    std=True, brightness=0.2, contrast=0.2, saturation=0.2, hue=0.1,
                                    pca_noise=0.1, rand_gray=0.2)
    assert [type(a).__name__ for a in augs] == [
        "ResizeAug", "RandomCropAug", "HorizontalFlipAug", "CastAug", "ColorJitterAug", "HueJitterAug",
        "LightingAug", "RandomGrayAug", "ColorNormalizeAug"]
    random.seed(0)
    np.random.seed(0)
    out = IMG
    for a in augs:
        out = a(out)
    assert out.shape == (6, 5, 3) and out.dtype == torch.float32
    assert out.abs().max() < 10  # normalised by MXNet's ImageNet std
    plain = mx.image.CreateAugmenter((3, 4, 4))
    assert [type(a).__name__ for a in plain] == ["CenterCropAug", "CastAug"]
    assert json.loads(plain[0].dumps()) == ["centercropaug", {"size": [4, 4], "interp": 2}]


def test_flip_gray_normalise_and_jitters_by_hand() -> None:
    src = IMG.float()
    assert torch.equal(I.HorizontalFlipAug(1.0)(src), src.flip(1))
    assert torch.equal(I.HorizontalFlipAug(0.0)(src), src)
    gray = I.RandomGrayAug(1.0)(src)
    assert torch.allclose(gray[..., 0], gray[..., 1]) and torch.allclose(gray[..., 1], gray[..., 2])
    norm = I.ColorNormalizeAug([1.0, 2.0, 3.0], [2.0, 4.0, 8.0])(src)
    assert torch.allclose(norm, (src - torch.tensor([1.0, 2.0, 3.0])) / torch.tensor([2.0, 4.0, 8.0]))
    random.seed(5)
    alpha = 1.0 + random.uniform(-0.3, 0.3)
    random.seed(5)
    assert torch.allclose(I.BrightnessJitterAug(brightness=0.3)(src), src * alpha)  # MXNet's keyword
    random.seed(5)
    sat = I.SaturationJitterAug(0.3)(src)
    lum = (src * torch.tensor([0.299, 0.587, 0.114])).sum(2, keepdim=True)
    assert torch.allclose(sat, src * alpha + lum * (1 - alpha), atol=1e-4)
    random.seed(5)
    con = I.ContrastJitterAug(0.3)(src)
    assert torch.allclose(con, src * alpha + 3 * (1 - alpha) * lum.mean() / 3, atol=1e-3)
    # a zero hue turn is the identity up to the rounding of MXNet's YIQ matrices
    assert torch.allclose(I.HueJitterAug(0.0)(src), src, atol=1.5)
    assert I.ForceResizeAug((7, 3))(IMG).shape == (3, 7, 3)
    assert I.ResizeAug(5)(IMG).shape == (5 * 11 // 10, 5, 3)
    assert I.RandomSizedCropAug((4, 4), 0.5, (0.75, 1.33))(IMG).shape == (4, 4, 3)
