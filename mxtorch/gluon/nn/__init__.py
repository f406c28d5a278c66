"""Gluon neural-network layers."""

from ..block import Block, HybridBlock
from ..symbol_block import SymbolBlock
from .activations import ELU, GELU, SELU, Activation, LeakyReLU, PReLU, SiLU, Swish
from .basic_layers import (
    Dense,
    Dropout,
    Flatten,
    HybridLambda,
    HybridSequential,
    Identity,
    Lambda,
    Sequential,
)

__all__ = [
    "Block", "HybridBlock", "SymbolBlock", "Sequential", "HybridSequential", "Dense", "Dropout",
    "Flatten", "Lambda", "HybridLambda", "Identity", "Activation", "LeakyReLU", "PReLU", "ELU", "SELU",
    "GELU", "Swish", "SiLU",
]

from .conv_layers import (  # noqa: E402
    AvgPool1D,
    AvgPool2D,
    AvgPool3D,
    Conv1D,
    Conv1DTranspose,
    Conv2D,
    Conv2DTranspose,
    Conv3D,
    Conv3DTranspose,
    GlobalAvgPool1D,
    GlobalAvgPool2D,
    GlobalAvgPool3D,
    GlobalMaxPool1D,
    GlobalMaxPool2D,
    GlobalMaxPool3D,
    MaxPool1D,
    MaxPool2D,
    MaxPool3D,
    PixelShuffle1D,
    PixelShuffle2D,
    PixelShuffle3D,
    ReflectionPad2D,
)
from .embedding import Embedding  # noqa: E402
from .norm_layers import (  # noqa: E402
    BatchNorm,
    BatchNormReLU,
    GroupNorm,
    InstanceNorm,
    LayerNorm,
    SyncBatchNorm,
)

__all__ += [
    "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
    "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D", "AvgPool3D",
    "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D", "GlobalAvgPool1D", "GlobalAvgPool2D",
    "GlobalAvgPool3D", "ReflectionPad2D", "PixelShuffle1D", "PixelShuffle2D", "PixelShuffle3D",
    "Embedding", "BatchNorm", "BatchNormReLU", "SyncBatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm",
]
