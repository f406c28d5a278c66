"""Datasets, samplers and the DataLoader (``mxnet.gluon.data``)."""

from __future__ import annotations

from . import sampler, vision
from .dataloader import DataLoader, default_batchify_fn
from .dataset import ArrayDataset, Dataset, SimpleDataset
from .recordfile import RecordFileDataset
from .sampler import *  # noqa: F403  (the samplers; sampler.__all__ names them once)

__all__ = [
    "Dataset",
    "SimpleDataset",
    "ArrayDataset",
    "RecordFileDataset",
    *sampler.__all__,
    "DataLoader",
    "default_batchify_fn",
    "vision",
]
