"""Vision datasets and transforms (``mxnet.gluon.data.vision``)."""

from __future__ import annotations

from . import datasets, transforms
from .datasets import (
    CIFAR10,
    CIFAR100,
    EMBEDDED_FASHION_MNIST_ROOT,
    MNIST,
    FashionMNIST,
    ImageFolderDataset,
    embedded_fashion_mnist_root,
)

__all__ = [
    "datasets",
    "transforms",
    "MNIST",
    "FashionMNIST",
    "CIFAR10",
    "CIFAR100",
    "ImageFolderDataset",
    "EMBEDDED_FASHION_MNIST_ROOT",
    "embedded_fashion_mnist_root",
]
