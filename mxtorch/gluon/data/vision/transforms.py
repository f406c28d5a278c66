"""Image transforms, as in ``mxnet.gluon.data.vision.transforms``.

Each transform takes one image or a batch of images.  As in MXNet, images before
:class:`ToTensor` are laid out ``(H, W, C)`` (a batch ``(N, H, W, C)``), usually uint8 in
[0, 255]; :class:`ToTensor` turns them into float32 ``(C, H, W)`` (``(N, C, H, W)``) in [0, 1],
the layout :class:`Normalize`, :class:`Rotate` and :class:`RandomRotation` expect.  Geometric
and colour transforms on the ``(H, W, C)`` layout keep the dtype (uint8 results are rounded
and clipped to [0, 255]).  Random transforms draw from torch's global generator.
"""

from __future__ import annotations

from . import _transforms_core, transforms_extra
from ._transforms_core import *  # noqa: F403
from .transforms_extra import *  # noqa: F403

__all__ = [*_transforms_core.__all__, *transforms_extra.__all__]
