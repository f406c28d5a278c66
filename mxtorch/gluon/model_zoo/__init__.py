"""Predefined Gluon networks (``mxtorch.gluon.model_zoo.vision``).

Pretrained weights are not downloaded by mxtorch: build a network with
``vision.get_model(name)`` and load a local file with ``net.load_parameters(path)``.
"""

from __future__ import annotations

from . import vision
from .vision import get_model

__all__ = ["vision", "get_model"]
