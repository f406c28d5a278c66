"""JPEG pixels against real MXNet 1.9.1 (issue 31): ``tests/data/jpeg`` holds small JPEGs (4:2:0,
4:2:2 and 4:4:4 chroma, odd sizes, quality 50-100, progressive, restart markers, one gray) and
``mx.image.imdecode``'s pixels from MXNet 1.9.1 (``tools/make_jpeg_fixtures.py``).  With the pinned
OpenCV (opencv-python-headless 5.0.0.93) the bound is 0: every pixel equal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mxtorch as mx

pytest.importorskip("cv2")
DATA = Path(__file__).parent / "data" / "jpeg"
EXPECTED = np.load(DATA / "expected.npz")
NAMES = sorted(p.stem for p in DATA.glob("*.jpg"))
JPEG_MAX_ABS_DIFF = 0  # measured: 480 decodes of 240 JPEGs (100-400 px, q40-100, cv2 and Pillow encoders)


def test_fixtures_are_mxnets() -> None:
    assert str(EXPECTED["mxnet"]) == "1.9.1" and len(NAMES) == 8
    assert {f"{n}_{k}" for n in NAMES for k in ("rgb", "gray")} <= set(EXPECTED.files)


@pytest.mark.parametrize("name", NAMES)
def test_jpeg_pixels_equal_mxnets(name: str) -> None:
    data = (DATA / f"{name}.jpg").read_bytes()
    for flag, kind in ((1, "rgb"), (0, "gray")):
        ref = EXPECTED[f"{name}_{kind}"]
        ours = mx.image.imdecode(data, flag).numpy()
        assert ours.shape == ref.shape and ours.dtype == np.uint8
        assert int(np.abs(ours.astype(int) - ref.astype(int)).max()) <= JPEG_MAX_ABS_DIFF, (name, kind)
    # the other readers decode the same way: a file, a packed record (BGR, as OpenCV)
    assert np.array_equal(mx.image.imread(str(DATA / f"{name}.jpg")).numpy(), EXPECTED[f"{name}_rgb"])
    record = mx.recordio.pack(mx.recordio.IRHeader(0, 1.0, 0, 0), data)
    _, bgr = mx.recordio.unpack_img(record, 1)
    assert np.array_equal(bgr[:, :, ::-1], EXPECTED[f"{name}_rgb"])
