"""Image encoding and decoding through OpenCV, the library MXNet itself decodes with.

OpenCV (``opencv-python-headless``, the ``image`` extra) was chosen by measurement on this
kind of machine: one thread, a 500x375 JPEG at quality 95, cv2 5.0 decoded 205 images/s and
Pillow 13 169; decode + resize to 298x224: cv2 180/s, Pillow 93/s (simplejpeg is not on the
package index here).  Using MXNet's library also keeps PNG pixels equal and, with the pinned
opencv-python-headless 5.0.0.93, JPEG pixels equal to MXNet 1.9.1's (max abs difference 0:
docs/data.md, tests/test_image_jpeg_mxnet.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import MXNetError


class ImageDecodeError(MXNetError):
    """The bytes are not an image OpenCV can decode."""


def cv2_module() -> Any:
    """OpenCV, imported on first use with a message saying how to install it."""
    try:
        import cv2
    except ImportError as e:  # pragma: no cover - the test command installs the extra
        raise ImportError("mx.image and mx.recordio's image helpers need OpenCV: "
                          "pip install 'mxtorch[image]' (opencv-python-headless)") from e
    return cv2


def decode_bgr(buf: bytes | np.ndarray, flag: int = -1) -> np.ndarray:
    """Decodes as ``cv2.imdecode(buf, flag)``: BGR channel order, HxWxC (or HxW for gray)."""
    cv2 = cv2_module()
    arr = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, (bytes, bytearray, memoryview)) else buf
    if arr.size == 0:
        raise ImageDecodeError("cannot decode an image from 0 bytes")
    img = cv2.imdecode(arr, flag)
    if img is None:
        raise ImageDecodeError(f"cannot decode an image from {arr.size} bytes "
                               "(not a JPEG/PNG/... that OpenCV reads)")
    return img


def encode_bgr(img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encodes a BGR (or gray) uint8 image as MXNet's ``pack_img``: JPEG quality or PNG compression."""
    cv2 = cv2_module()
    fmt = img_fmt.lower()
    if fmt in (".jpg", ".jpeg"):
        params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    elif fmt == ".png":
        params = [cv2.IMWRITE_PNG_COMPRESSION, int(quality)]
    else:
        raise ValueError(f"img_fmt must be '.jpg', '.jpeg' or '.png', got {img_fmt!r}")
    ok, out = cv2.imencode(fmt, np.ascontiguousarray(img), params)
    if not ok:
        raise ImageDecodeError(f"OpenCV could not encode a {np.shape(img)} image as {fmt}")
    return bytes(out.tobytes())
