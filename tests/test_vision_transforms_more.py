"""mx.nd.image operators and the rest of Gluon's image transforms (CropResize, Rotate,
RandomRotation, RandomSaturation, RandomHue, RandomColorJitter, RandomLighting, RandomApply),
checked by hand-computed examples."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon.data.vision import transforms as T

nd = mx.nd


def test_flips_and_crop_of_hwc_images() -> None:
    img = nd.arange(12).reshape((2, 2, 3))  # H=2, W=2, C=3
    assert nd.image.flip_left_right(img).asnumpy()[0, 0].tolist() == [3, 4, 5]
    assert nd.image.flip_top_bottom(img).asnumpy()[0, 0].tolist() == [6, 7, 8]
    batch = nd.arange(48).reshape((2, 2, 4, 3))
    out = nd.image.crop(batch, 1, 0, 2, 1)  # x=1, y=0, width 2, height 1
    assert out.shape == (2, 1, 2, 3) and out.asnumpy()[0, 0, 0].tolist() == [3, 4, 5]
    for bad in ((3, 0, 2, 1), (0, 0, -1, 1)):
        with pytest.raises(MXNetError):
            nd.image.crop(batch, *bad)


def test_wrong_rank_is_an_mxnet_error_and_a_value_error() -> None:
    five_d = nd.zeros((2, 2, 4, 4, 3))
    for call in (T.ToTensor(), T.Normalize(0.5, 0.5), nd.image.to_tensor):
        with pytest.raises(MXNetError) as err:
            call(five_d)
        assert isinstance(err.value, ValueError)
    with pytest.raises(MXNetError, match="channels"):  # 2 means for 4 channels
        T.Normalize(mean=(0, 1), std=1)(nd.zeros((4, 2, 2)))


def test_rotate_turns_counter_clockwise_about_the_centre() -> None:
    img = nd.array([[[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]])  # a dot right of centre
    up = T.Rotate(90.0)(img).asnumpy()[0]
    assert np.allclose(up, [[0, 1, 0], [0, 0, 0], [0, 0, 0]], atol=1e-6)
    wide = nd.random.uniform(shape=(2, 3, 4, 6))  # a batch of non-square images
    half_turn = T.Rotate(180.0)(wide)
    np.testing.assert_allclose(half_turn.asnumpy(), wide.asnumpy()[:, :, ::-1, ::-1], atol=1e-5)
    with pytest.raises(TypeError):
        T.Rotate(10.0)(nd.ones((3, 4, 4), dtype="uint8"))
    full = T.Rotate(30.0, zoom_in=True)(nd.ones((1, 20, 40)))
    assert float(full.min().asscalar()) > 0.5  # no empty corner


def test_random_rotation_probability_and_limits() -> None:
    with pytest.raises(ValueError):
        T.RandomRotation((-10, 10), rotate_with_proba=1.5)
    x = nd.random.uniform(shape=(3, 8, 8))
    never = T.RandomRotation((-90, 90), rotate_with_proba=0.0)
    np.testing.assert_array_equal(never(x).asnumpy(), x.asnumpy())
    half_turn = T.RandomRotation((180, 180))(x).asnumpy()
    np.testing.assert_allclose(half_turn, x.asnumpy()[:, ::-1, ::-1], atol=1e-5)


def test_crop_resize_crops_then_resizes() -> None:
    img = nd.arange(60).reshape((5, 4, 3))
    out = T.CropResize(1, 2, 2, 3)(img)  # x=1, y=2, width 2, height 3
    np.testing.assert_array_equal(out.asnumpy(), img.asnumpy()[2:5, 1:3])
    resized = T.CropResize(0, 0, 4, 4, size=(2, 2), interpolation=0)(nd.ones((5, 4, 3)))
    assert resized.shape == (2, 2, 3)
    with pytest.raises(MXNetError):
        T.CropResize(0, 0, 4, 4, size=(-2, 2))(img)


def test_colour_transforms_keep_grey_grey_and_do_nothing_at_zero() -> None:
    grey = nd.full((4, 4, 3), 100.0)
    for t in (T.RandomSaturation(0.9), T.RandomHue(0.5), T.RandomColorJitter(saturation=0.5, hue=0.5)):
        np.testing.assert_allclose(t(grey).asnumpy(), grey.asnumpy(), atol=0.5)
    x = nd.random.uniform(0, 255, shape=(2, 4, 4, 3))
    np.testing.assert_allclose(T.RandomHue(0.0)(x).asnumpy(), x.asnumpy(), rtol=1e-2, atol=1.0)
    np.testing.assert_allclose(T.RandomLighting(0.0)(x).asnumpy(), x.asnumpy(), rtol=1e-6)
    dark = T.RandomLighting(10.0)(nd.zeros((4, 4, 3), dtype="uint8"))
    assert dark.dtype == torch.uint8  # clamped to the dtype's range, not wrapped around
    red = np.array([255.0, 0.0, 0.0])
    grey_level = 0.299 * 255.0  # luma of pure red
    moved = T.RandomSaturation(0.5)(nd.array(red.reshape(1, 1, 3))).asnumpy().reshape(3)
    ratio = (moved - grey_level) / (red - grey_level)  # alpha * (x - grey) + grey: one alpha for all
    assert np.allclose(ratio, ratio[0], atol=1e-4) and 0.5 - 1e-6 <= ratio[0] <= 1.5 + 1e-6


def test_random_apply_applies_with_probability_p() -> None:
    img = nd.ones((4, 6, 3), dtype="uint8")
    assert T.RandomApply(T.Resize(2), p=0.0)(img).shape == (4, 6, 3)
    assert T.RandomApply([T.Resize(2), T.ToTensor()], p=1.0)(img).shape == (3, 2, 2)
    with pytest.raises(ValueError):
        T.RandomApply(T.Resize(2), p=2.0)
