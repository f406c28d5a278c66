"""MXNet's ``mx.image``: decoding (OpenCV, as MXNet), crops and resizes, and the augmenters."""

from __future__ import annotations

import importlib
from typing import Any

from .augmenters import *  # noqa: F403  (augmenters.__all__)
from .augmenters import __all__ as _augmenter_names
from .codec import ImageArgumentError, ImageDecodeError
from .image import *  # noqa: F403  (image.__all__)
from .image import __all__ as _image_names
from .rotate import imrotate, random_rotate

__all__ = ["ImageDecodeError", "ImageArgumentError", "imrotate", "random_rotate", *_image_names,
           *_augmenter_names, "ImageIter"]  # noqa: F405  (lazy, below)


def __getattr__(name: str) -> Any:
    # ImageIter yields mx.io's DataBatch: it sits in mx.io's layer and loads on first use
    if name == "ImageIter":
        return importlib.import_module("mxtorch.image.image_iter").ImageIter
    raise AttributeError(f"module 'mxtorch.image' has no attribute {name!r}")
