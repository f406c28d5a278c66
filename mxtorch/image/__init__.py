"""MXNet's ``mx.image``: decoding (OpenCV, as MXNet) and the image transforms MXNet trains with."""

from __future__ import annotations

from .codec import ImageDecodeError
from .image import *  # noqa: F403  (image.__all__)
from .image import __all__ as _image_names

__all__ = ["ImageDecodeError", *_image_names]
