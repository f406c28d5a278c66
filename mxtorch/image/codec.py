"""Image encoding, decoding and resizing: OpenCV, the library MXNet itself uses, else Pillow/torch.

OpenCV (``opencv-python-headless``, the ``image`` extra) was chosen by measurement on this
kind of machine: one thread, a 500x375 JPEG at quality 95, cv2 5.0 decoded 205 images/s and
Pillow 13 169; decode + resize to 298x224: cv2 180/s, Pillow 93/s (simplejpeg is not on the
package index here).  Using MXNet's library also keeps PNG pixels equal and, with the pinned
opencv-python-headless 5.0.0.93, JPEG pixels equal to MXNet 1.9.1's (max abs difference 0:
docs/data.md, tests/test_image_jpeg_mxnet.py).

Without OpenCV, Pillow decodes and encodes (PNG pixels equal; JPEG pixels may differ from
OpenCV's by the decoders' rounding) and torch resizes with OpenCV's sampling rules (pixel
centres, bicubic a=-0.75, area = averaging; Lanczos through Pillow's float mode).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import torch

from ..base import MXNetError


class ImageDecodeError(MXNetError):
    """The bytes are not an image OpenCV (or Pillow) can decode, or an image file cannot be read."""


class ImageArgumentError(MXNetError, ValueError):
    """An image function's argument is out of range (MXNet raises MXNetError from the operator)."""


_NO_DECODER = ("mx.image and mx.recordio's image helpers need OpenCV (pip install 'mxtorch[image]', "
               "opencv-python-headless) or Pillow (pip install pillow)")


def _cv2_or_none() -> Any:
    try:
        import cv2
    except ImportError:
        return None
    return cv2


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError(_NO_DECODER) from e
    return Image


def cv2_module() -> Any:
    """OpenCV, imported on first use with a message saying how to install it."""
    cv2 = _cv2_or_none()
    if cv2 is None:
        raise ImportError("this needs OpenCV: pip install 'mxtorch[image]' (opencv-python-headless)")
    return cv2


def decode_bgr(buf: bytes | np.ndarray, flag: int = -1) -> np.ndarray:
    """Decodes as ``cv2.imdecode(buf, flag)``: BGR channel order, HxWxC (or HxW for gray)."""
    arr = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, (bytes, bytearray, memoryview)) else buf
    if arr.size == 0:
        raise ImageDecodeError("cannot decode an image from 0 bytes")
    cv2 = _cv2_or_none()
    if cv2 is None and not _looks_like_an_image(arr[:16].tobytes()):
        img = None  # refused as MXNet refuses it, even where no decoder is installed
    else:
        img = cv2.imdecode(arr, flag) if cv2 is not None else _pillow_decode(arr, flag)
    if img is None:
        raise ImageDecodeError(f"cannot decode an image from {arr.size} bytes "
                               "(not a JPEG/PNG/... that OpenCV or Pillow reads)")
    return img


# the first bytes of the formats OpenCV reads (JPEG, PNG, BMP, GIF, TIFF, WebP, JPEG 2000, PNM,
# PFM, Radiance HDR, OpenEXR, Sun raster)
_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"BM", b"GIF8", b"II*\x00", b"MM\x00*", b"RIFF",
               b"\x00\x00\x00\x0cjP  ", b"\xff\x4f\xff\x51", b"P1", b"P2", b"P3", b"P4", b"P5", b"P6", b"P7",
               b"PF", b"Pf", b"#?", b"v/1\x01", b"\x59\xa6\x6a\x95")


def _looks_like_an_image(head: bytes) -> bool:
    return head.startswith(_SIGNATURES)


def _pillow_decode(arr: np.ndarray, flag: int) -> np.ndarray | None:
    image_mod = _pillow()
    try:  # Pillow refuses decompression bombs (> 2 * MAX_IMAGE_PIXELS) before allocating
        with image_mod.open(io.BytesIO(arr.tobytes())) as im:
            if flag == 0:
                return np.array(im.convert("L"))
            if flag > 0 or im.mode not in ("L", "RGBA"):
                im = im.convert("RGB")
            px = np.array(im)
    except (OSError, ValueError, image_mod.DecompressionBombError):
        return None
    if px.ndim == 3:  # RGB(A) -> OpenCV's BGR(A)
        px = np.concatenate([px[:, :, 2::-1], px[:, :, 3:]], axis=2)
    return px


def encode_bgr(img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encodes a BGR (or gray) uint8 image as MXNet's ``pack_img``: JPEG quality or PNG compression."""
    fmt = img_fmt.lower()
    if fmt not in (".jpg", ".jpeg", ".png"):
        raise ValueError(f"img_fmt must be '.jpg', '.jpeg' or '.png', got {img_fmt!r}")
    cv2 = _cv2_or_none()
    if cv2 is None:
        return _pillow_encode(np.ascontiguousarray(img), int(quality), fmt)
    if fmt == ".png":
        params = [cv2.IMWRITE_PNG_COMPRESSION, int(quality)]
    else:
        params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    ok, out = cv2.imencode(fmt, np.ascontiguousarray(img), params)
    if not ok:
        raise ImageDecodeError(f"OpenCV could not encode a {np.shape(img)} image as {fmt}")
    return bytes(out.tobytes())


def _pillow_encode(img: np.ndarray, quality: int, fmt: str) -> bytes:
    image_mod = _pillow()
    px = img[:, :, 0] if img.ndim == 3 and img.shape[2] == 1 else img
    if px.ndim == 3:
        px = np.ascontiguousarray(px[:, :, ::-1])  # BGR -> RGB
    out = io.BytesIO()
    if fmt == ".png":
        image_mod.fromarray(px).save(out, format="PNG", compress_level=quality)
    else:
        image_mod.fromarray(px).save(out, format="JPEG", quality=quality)
    return out.getvalue()


_TORCH_MODES = {0: "nearest", 1: "bilinear", 2: "bicubic"}


def resize_hwc(arr: np.ndarray, w: int, h: int, interp: int) -> np.ndarray:
    """``arr`` (HxW or HxWxC) resized to ``w`` x ``h`` with OpenCV's interpolation code ``interp``
    (0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos); same dtype, same layout."""
    if interp not in (0, 1, 2, 3, 4):
        raise ImageArgumentError(f"interp must be 0-4 (OpenCV's codes), got {interp!r}")
    cv2 = _cv2_or_none()
    if cv2 is not None:
        return np.asarray(cv2.resize(arr, (w, h), interpolation=interp))
    chw = torch.from_numpy(np.ascontiguousarray(arr.reshape(arr.shape[0], arr.shape[1], -1))).permute(2, 0, 1)
    ih, iw = chw.shape[1:]
    if interp in _TORCH_MODES:  # torch's rules are OpenCV's here (pixel centres, bicubic a=-0.75)
        mode = _TORCH_MODES[interp]
        corners = {"align_corners": False} if interp else {}
        out = torch.nn.functional.interpolate(chw[None].double(), size=(h, w), mode=mode, **corners)[0]
    else:
        weights = _lanczos4_weights if interp == 4 else _area_weights(ih >= h and iw >= w)
        out = torch.einsum("oh,chw,pw->cop", weights(h, ih), chw.double(), weights(w, iw))
    if arr.dtype == np.uint8:  # OpenCV rounds and saturates integer pixels
        out = out.round().clamp(0, 255)
    res = out.permute(1, 2, 0).numpy().astype(arr.dtype)
    return res[:, :, 0] if arr.ndim == 2 else res


def _area_weights(shrinking: bool) -> Any:
    """OpenCV's INTER_AREA along one axis: where the image shrinks on both axes each output
    pixel averages the source pixels it covers (by covered fraction); otherwise linear weights
    that keep source pixels whole wherever an output pixel lies inside one."""

    def weights(n_out: int, n_in: int) -> torch.Tensor:
        scale = n_in / n_out
        m = torch.zeros(n_out, n_in, dtype=torch.float64)
        for o in range(n_out):
            if shrinking:
                lo, hi = o * scale, (o + 1) * scale
                for i in range(int(lo), min(int(np.ceil(hi)), n_in)):
                    m[o, i] = (min(hi, i + 1) - max(lo, i)) / scale
                continue
            si = int(np.floor(o * scale))
            f = (o + 1) - (si + 1) / scale
            f = 0.0 if f <= 0 else f - np.floor(f)
            if si >= n_in - 1:
                si, f = n_in - 1, 0.0
            m[o, si] += 1 - f
            if f:
                m[o, si + 1] += f
        return m

    return weights


def _lanczos4_weights(n_out: int, n_in: int) -> torch.Tensor:
    """OpenCV's INTER_LANCZOS4 along one axis: 8 taps around the pixel-centre position, window
    a=4, normalised to sum 1, edge pixels repeated."""
    scale = n_in / n_out
    m = torch.zeros(n_out, n_in, dtype=torch.float64)
    for o in range(n_out):
        pos = (o + 0.5) * scale - 0.5
        si = int(np.floor(pos))
        frac = pos - si
        t = frac + 3 - np.arange(8)
        with np.errstate(invalid="ignore", divide="ignore"):
            lanczos = np.sin(np.pi * t) * np.sin(np.pi * t / 4) / (np.pi**2 * t**2 / 4)
            k = np.where(np.abs(t) < 1e-7, 1.0, lanczos)
        k /= k.sum()
        for tap, wgt in enumerate(k):
            m[o, min(max(si - 3 + tap, 0), n_in - 1)] += float(wgt)
    return m
