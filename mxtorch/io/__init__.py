"""MXNet 1.x's ``mx.io``: data iterators for ``mx.mod.Module``.

``NDArrayIter`` (in-memory arrays), ``CSVIter`` and ``MNISTIter`` (files), ``ResizeIter``,
``PrefetchingIter`` (background threads) and ``DataLoaderIter`` (a gluon DataLoader), all
yielding ``DataBatch`` objects described by ``provide_data`` / ``provide_label``.
"""

from __future__ import annotations

from .base import DataBatch, DataDesc, DataIter
from .csv_iter import CSVIter
from .image_record_iter import ImageRecordIter
from .mnist_iter import EMBEDDED_FASHION_MNIST_ROOT, MNISTIter
from .ndarray_iter import NDArrayIter
from .wrappers import DataLoaderIter, PrefetchingIter, ResizeIter

__all__ = [
    "DataBatch",
    "DataDesc",
    "DataIter",
    "NDArrayIter",
    "CSVIter",
    "ImageRecordIter",
    "MNISTIter",
    "ResizeIter",
    "PrefetchingIter",
    "DataLoaderIter",
    "EMBEDDED_FASHION_MNIST_ROOT",
]
