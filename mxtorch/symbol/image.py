"""``mx.sym.image``: MXNet's image operators (``crop``, ``resize``, ``to_tensor``, ``normalize``,
the flips, ``imrotate``) as graph nodes ``_image_<op>`` running ``mx.nd.image``'s functions."""

from __future__ import annotations

from ..nd import image as _nd_image
from .symbol import namespace_operators

__all__ = list(_nd_image.OPERATORS)

globals().update(namespace_operators("_image_", _nd_image, __all__))
