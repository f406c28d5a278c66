"""Writes tests/data/jpeg/: small JPEGs and the pixels real Apache MXNet 1.9.1 decodes from them.

Two steps, because MXNet's reference venv has no OpenCV and ours has no MXNet:

    PYTHONPATH=$PWD .venv/bin/python tools/make_jpeg_fixtures.py tests/data/jpeg      # the JPEGs (cv2)
    /tmp/mxref/bin/python tools/make_jpeg_fixtures.py tests/data/jpeg                 # MXNet's pixels

The JPEGs cover what changes a decoder's rounding: chroma subsampling 4:2:0, 4:2:2 and 4:4:4,
odd sizes (chroma upsampling at the edges), quality 50-100, progressive scans, restart intervals
and a one-channel (gray) JPEG.  ``expected.npz`` holds ``mx.image.imdecode(jpeg, flag)`` for flag 1
(RGB) and 0 (gray) of every file (``<name>_rgb``, ``<name>_gray``).
"""

from __future__ import annotations

import os
import sys

import numpy as np

# name: (height, width, quality, sampling, progressive, restart, gray)
CASES = {
    "q95_420": (48, 64, 95, "420", False, 0, False),
    "q75_420_odd": (37, 53, 75, "420", False, 0, False),
    "q50_422": (40, 56, 50, "422", False, 0, False),
    "q90_444": (32, 40, 90, "444", False, 0, False),
    "q100_444_odd": (23, 31, 100, "444", False, 0, False),
    "q85_progressive": (48, 48, 85, "420", True, 0, False),
    "q80_restart": (64, 72, 80, "420", False, 2, False),
    "q90_gray": (33, 47, 90, "420", False, 0, True),
}


def picture(h: int, w: int, seed: int) -> np.ndarray:
    """A photo-like RGB image: smooth gradients, a sharp-edged disc, fine noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([255 * x / max(w - 1, 1), 255 * y / max(h - 1, 1),
                    127 + 100 * np.sin((x + y) / 5.0)], axis=-1)
    disc = (x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(h, w) / 4) ** 2
    img[disc] = (230, 40, 60)
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def write_jpegs(out: str) -> None:
    import cv2

    sampling = {"420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420, "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
                "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444}
    os.makedirs(out, exist_ok=True)
    for seed, (name, (h, w, quality, sub, progressive, restart, gray)) in enumerate(CASES.items()):
        rgb = picture(h, w, seed)
        img = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY) if gray else rgb[:, :, ::-1]
        params = [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, sampling[sub],
                  cv2.IMWRITE_JPEG_PROGRESSIVE, int(progressive), cv2.IMWRITE_JPEG_RST_INTERVAL, restart]
        ok, buf = cv2.imencode(".jpg", img, params)
        assert ok
        with open(os.path.join(out, f"{name}.jpg"), "wb") as f:
            f.write(buf.tobytes())


def decode_with_mxnet(out: str) -> None:
    import mxnet as mx

    arrays = {}
    for name in CASES:
        with open(os.path.join(out, f"{name}.jpg"), "rb") as f:
            data = f.read()
        arrays[f"{name}_rgb"] = mx.image.imdecode(data, flag=1).asnumpy()
        arrays[f"{name}_gray"] = mx.image.imdecode(data, flag=0).asnumpy()
    np.savez_compressed(os.path.join(out, "expected.npz"), mxnet=np.array(mx.__version__), **arrays)


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else "tests/data/jpeg"
    try:
        import mxnet  # noqa: F401
    except ImportError:
        write_jpegs(folder)
    else:
        decode_with_mxnet(folder)
