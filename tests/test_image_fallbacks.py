"""mx.image without OpenCV (Pillow decodes, torch resizes with OpenCV's sampling rules), its
MXNetError family (missing file, not an image, bad interp), and imrotate / random_rotate."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.image import codec

cv2 = pytest.importorskip("cv2")  # the reference the fallbacks are measured against


@pytest.fixture
def no_opencv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "_cv2_or_none", lambda: None)


def _image(h: int = 12, w: int = 16) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("interp", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("size", [(32, 24), (8, 6), (11, 9), (16, 30)])
def test_torch_resize_follows_opencv(
    interp: int, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    img = _image()
    want_u8 = cv2.resize(img, size, interpolation=interp)
    want_f32 = cv2.resize(img.astype(np.float32), size, interpolation=interp)
    monkeypatch.setattr(codec, "_cv2_or_none", lambda: None)
    got_u8 = codec.resize_hwc(img, *size, interp)
    got_f32 = codec.resize_hwc(img.astype(np.float32), *size, interp)
    assert got_u8.dtype == np.uint8 and got_u8.shape == want_u8.shape
    assert np.abs(got_u8.astype(int) - want_u8.astype(int)).max() <= 1  # OpenCV's fixed-point rounding
    np.testing.assert_allclose(got_f32, want_f32, atol=1e-3)


def test_pillow_decodes_png_as_opencv(no_opencv: None) -> None:
    pytest.importorskip("PIL")
    img = _image()
    ok, png = cv2.imencode(".png", img)
    assert ok
    got = mx.image.imdecode(png.tobytes(), to_rgb=False).numpy()
    np.testing.assert_array_equal(got, img)  # BGR, as OpenCV gives it
    rgb = mx.image.imdecode(png.tobytes()).numpy()
    np.testing.assert_array_equal(rgb, img[:, :, ::-1])
    gray = mx.image.imdecode(png.tobytes(), flag=0).numpy()
    assert gray.shape == (12, 16, 1)
    assert np.abs(gray[:, :, 0].astype(int) - cv2.cvtColor(img, cv2.COLOR_BGR2GRAY).astype(int)).max() <= 1
    again = codec.decode_bgr(codec.encode_bgr(img, quality=3, img_fmt=".png"))
    np.testing.assert_array_equal(again, img)


def test_not_an_image_is_refused_even_without_a_decoder(
    no_opencv: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing() -> None:
        raise ImportError("no Pillow")

    monkeypatch.setattr(codec, "_pillow", missing)
    with pytest.raises(mx.MXNetError, match="cannot decode an image from 25 bytes"):
        mx.image.imdecode(b"clearly not image content")
    with pytest.raises(mx.MXNetError, match="0 bytes"):
        mx.image.imdecode(b"")
    with pytest.raises(ImportError):  # a real PNG needs a decoder
        mx.image.imdecode(b"\x89PNG\r\n\x1a\n" + bytes(20))


def test_image_errors_are_mxnet_errors(tmp_path: object) -> None:
    with pytest.raises(mx.MXNetError, match="imread: cannot read"):
        mx.img.image.imread("/no/such/dir/x.jpg")
    with pytest.raises(mx.MXNetError, match="interp must be"):
        mx.image.imresize(mx.nd.ones((4, 4, 3)), 2, 2, interp=-1)
    with pytest.raises(ValueError):  # still a ValueError for code that catches that
        mx.image.imresize(mx.nd.ones((4, 4, 3)), 2, 2, interp=7)


def test_imrotate_quarter_turn_is_rot90() -> None:
    src = torch.arange(2 * 5 * 5, dtype=torch.float32).reshape(2, 5, 5)
    out = mx.image.imrotate(src, 90)
    # output (y, x) samples the source at the centred point rotated by +90 degrees
    torch.testing.assert_close(out, torch.rot90(src, k=1, dims=(1, 2)), atol=1e-4, rtol=0)
    batch = mx.image.imrotate(torch.stack([src, src]), mx.nd.array([0, 90]))
    torch.testing.assert_close(batch[0], src)
    torch.testing.assert_close(batch[1], out)


def test_imrotate_zoom_keeps_the_centre_and_scales_by_the_bounding_box() -> None:
    src = torch.zeros(1, 9, 9)
    src[0, 4, 4] = 1.0
    for kw in ({"zoom_in": True}, {"zoom_out": True}):
        assert float(mx.image.imrotate(src, 45, **kw)[0, 4, 4]) == pytest.approx(1.0)
    ones = torch.ones(1, 9, 9)
    # zoom_in at 45 degrees samples within the source (scale 1/(cos+sin)): no zero padding
    assert float(mx.image.imrotate(ones, 45, zoom_in=True).min()) == pytest.approx(1.0)
    # zoom_out shows the whole source: the corners are padding
    assert float(mx.image.imrotate(ones, 45, zoom_out=True)[0, 0, 0]) == 0.0


def test_imrotate_refuses_what_mxnet_refuses() -> None:
    img = torch.zeros(3, 4, 4)
    with pytest.raises(ValueError, match="zoom_in and zoom_out"):
        mx.image.imrotate(img, 5, zoom_in=True, zoom_out=True)
    with pytest.raises(TypeError, match="float32"):
        mx.image.imrotate(img.double(), 5)
    with pytest.raises(TypeError, match="scalar"):
        mx.image.imrotate(img, mx.nd.array([1, 2]))
    with pytest.raises(ValueError, match="2 images but 3"):
        mx.image.imrotate(torch.zeros(2, 3, 4, 4), mx.nd.array([1, 2, 3]))


def test_random_rotate_draws_from_numpy_within_the_limits() -> None:
    img = torch.rand(3, 6, 8)
    np.random.seed(3)
    got = mx.image.random_rotate(img, (-5.0, 5.0))
    np.random.seed(3)
    want = mx.image.imrotate(img, float(np.random.uniform(-5.0, 5.0)))
    torch.testing.assert_close(got, want)
    assert mx.image.random_rotate(torch.stack([img, img]), (-5.0, 5.0)).shape == (2, 3, 6, 8)
