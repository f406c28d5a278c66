"""MXNet's ``gluon.contrib.nn``: containers that concatenate their branches, and layers kept
there for MXNet code (SyncBatchNorm, PixelShuffle and Identity are also in ``gluon.nn``)."""

from ...nn import Identity, PixelShuffle1D, PixelShuffle2D, PixelShuffle3D, SyncBatchNorm
from .basic_layers import Concurrent, HybridConcurrent, SparseEmbedding

__all__ = ["Concurrent", "HybridConcurrent", "Identity", "SparseEmbedding", "SyncBatchNorm",
           "PixelShuffle1D", "PixelShuffle2D", "PixelShuffle3D"]
