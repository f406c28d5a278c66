"""Datasets, samplers and the DataLoader (``mxnet.gluon.data``)."""

from __future__ import annotations

from . import vision
from .dataloader import DataLoader, default_batchify_fn
from .dataset import ArrayDataset, Dataset, SimpleDataset
from .sampler import (
    BatchSampler,
    FilterSampler,
    IntervalSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SplitSampler,
)

__all__ = [
    "Dataset",
    "SimpleDataset",
    "ArrayDataset",
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "FilterSampler",
    "BatchSampler",
    "IntervalSampler",
    "SplitSampler",
    "DataLoader",
    "default_batchify_fn",
    "vision",
]
