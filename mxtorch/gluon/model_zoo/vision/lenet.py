"""LeNet for 28x28 images (MNIST, Fashion-MNIST), with an optional BatchNorm variant."""

from __future__ import annotations

from typing import Any

import torch

from .... import context as _context
from ... import nn
from ...block import HybridBlock

__all__ = ["LeNet", "get_lenet", "lenet", "lenet_bn"]

_DEFAULT_ROOT = "~/.mxnet/models"


class LeNet(HybridBlock):
    """LeNet: ``features`` = conv(20, 5x5) → max-pool 2 → conv(50, 5x5) → max-pool 2 → flatten →
    Dense(500), all with ReLU, and ``output`` = Dense(classes).

    ``batch_norm=True`` puts BatchNorm before each ReLU (the convolutions and the hidden Dense
    then have no bias); ``dropout`` > 0 adds Dropout before the output layer.  Takes any number
    of input channels; 28x28 inputs give 50x4x4 features before the Dense layers.
    """

    def __init__(self, classes: int = 10, batch_norm: bool = False, dropout: float = 0.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.features = nn.HybridSequential()
        if batch_norm:
            self.features.add(nn.Conv2D(20, kernel_size=5, use_bias=False), nn.BatchNorm(),
                              nn.Activation("relu"), nn.MaxPool2D(pool_size=2, strides=2),
                              nn.Conv2D(50, kernel_size=5, use_bias=False), nn.BatchNorm(),
                              nn.Activation("relu"), nn.MaxPool2D(pool_size=2, strides=2),
                              nn.Flatten(), nn.Dense(500, use_bias=False), nn.BatchNorm(),
                              nn.Activation("relu"))
        else:
            self.features.add(nn.Conv2D(20, kernel_size=5, activation="relu"),
                              nn.MaxPool2D(pool_size=2, strides=2),
                              nn.Conv2D(50, kernel_size=5, activation="relu"),
                              nn.MaxPool2D(pool_size=2, strides=2),
                              nn.Flatten(), nn.Dense(500, activation="relu"))
        if dropout > 0:
            self.features.add(nn.Dropout(dropout))
        self.output = nn.Dense(classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.features(x))


def get_lenet(batch_norm: bool = False, pretrained: bool = False, ctx: _context.Context | None = None,
              root: str = _DEFAULT_ROOT, **kwargs: Any) -> HybridBlock:
    """LeNet (``batch_norm=True``: the BatchNorm variant); ``ctx``/``root`` unused, ``pretrained`` raises."""
    from . import check_pretrained

    check_pretrained(pretrained, "lenet_bn" if batch_norm else "lenet")
    return LeNet(batch_norm=batch_norm, **kwargs)


def lenet(**kwargs: Any) -> HybridBlock:
    """Classic LeNet (conv 20 → conv 50 → Dense 500 → Dense classes), classes=10."""
    return get_lenet(False, **kwargs)


def lenet_bn(**kwargs: Any) -> HybridBlock:
    """LeNet with BatchNorm after each convolution and the hidden Dense layer, classes=10."""
    return get_lenet(True, **kwargs)
