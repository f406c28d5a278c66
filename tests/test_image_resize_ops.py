"""mx.nd.image.resize / mx.sym.image.<op> / transforms.Resize checking its size when called,
against hand computations.

Bilinear on OpenCV's grid: widening [0, 4] to 4 pixels samples x = (i + 0.5) / 2 - 0.5 = -0.25,
0.25, 0.75, 1.25, clamped to the edges: 0, 1, 3, 4.
"""

from __future__ import annotations

import numpy as np
import pytest

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon.data.vision import transforms


def test_nd_image_resize_bilinear_nearest_and_keep_ratio() -> None:
    row = mx.nd.array([[[0.0], [4.0]]])  # (H=1, W=2, C=1)
    wide = mx.nd.image.resize(row, size=(4, 1))
    assert wide.shape == (1, 4, 1) and wide[0, :, 0].tolist() == [0.0, 1.0, 3.0, 4.0]
    near = mx.nd.image.resize(row, size=(4, 1), interp=0)
    assert near[0, :, 0].tolist() == [0.0, 0.0, 4.0, 4.0]
    img = mx.nd.zeros((30, 20, 3), dtype="uint8")
    assert mx.nd.image.resize(img, 10, keep_ratio=True).shape == (15, 10, 3)  # short side 10
    assert mx.nd.image.resize(img, 10).shape == (10, 10, 3)
    assert mx.nd.image.resize(mx.nd.zeros((2, 30, 20, 3)), (5, 6)).shape == (2, 6, 5, 3)
    for bad in (-1, (1, 2, 3), (0, 4)):
        with pytest.raises(MXNetError, match="size"):
            mx.nd.image.resize(img, bad)


def test_resize_transform_checks_its_size_when_called() -> None:
    bad = transforms.Resize(-150, keep_ratio=True)  # MXNet builds it; the operator refuses
    with pytest.raises(MXNetError, match="greater than 0"):
        bad(mx.nd.zeros((4, 4, 3)))
    with pytest.raises(MXNetError, match="pair"):
        transforms.Resize((1, 2, 3))(mx.nd.zeros((4, 4, 3)))


def test_sym_image_crop_forward_and_backward() -> None:
    data = mx.sym.Variable("data")
    crop = mx.sym.image.crop(data, 1, 2, 2, 1)  # x=1, y=2, width 2, height 1
    assert crop.tojson().count('"_image_crop"') == 1
    ex = crop.simple_bind(mx.cpu(), data=(4, 3, 1))
    a = np.arange(12, dtype=np.float32).reshape(4, 3, 1)
    out = ex.forward(is_train=True, data=a)[0]
    assert out[..., 0].tolist() == [[7.0, 8.0]]
    ex.backward([mx.nd.ones((1, 2, 1))])
    want = np.zeros_like(a)
    want[2, 1:3] = 1
    np.testing.assert_array_equal(ex.grad_dict["data"].asnumpy(), want)
    assert mx.sym.image.resize(data, size=(2, 3)).infer_shape(data=(5, 4, 3))[1] == [(3, 2, 3)]
