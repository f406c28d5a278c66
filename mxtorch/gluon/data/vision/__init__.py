"""Vision datasets and transforms (``mxnet.gluon.data.vision``)."""

from __future__ import annotations

from . import datasets, transforms
from .datasets import *  # noqa: F403  (the names in datasets.__all__)
from .record_dataset import ImageRecordDataset

__all__ = ["datasets", "transforms", *datasets.__all__, "ImageRecordDataset"]
