"""MXNet's ``mx.image``: decoding (OpenCV, as MXNet) and the image transforms MXNet trains with."""

from __future__ import annotations

from .codec import ImageDecodeError

__all__ = ["ImageDecodeError"]
