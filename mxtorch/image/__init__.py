"""MXNet's ``mx.image``: decoding (OpenCV, as MXNet), crops and resizes, and the augmenters."""

from __future__ import annotations

from .augmenters import *  # noqa: F403  (augmenters.__all__)
from .augmenters import __all__ as _augmenter_names
from .codec import ImageDecodeError
from .image import *  # noqa: F403  (image.__all__)
from .image import __all__ as _image_names

__all__ = ["ImageDecodeError", *_image_names, *_augmenter_names]
