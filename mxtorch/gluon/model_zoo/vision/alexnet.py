"""AlexNet (Krizhevsky, "One weird trick for parallelizing convolutional neural networks", 2014)."""

from __future__ import annotations

from typing import Any

import torch

from .... import context as _context
from ... import nn
from ...block import HybridBlock

__all__ = ["AlexNet", "alexnet"]

_DEFAULT_ROOT = "~/.mxnet/models"


class AlexNet(HybridBlock):
    """AlexNet: ``features`` (five convolutions, three max-pools, two Dense(4096) with Dropout)
    and ``output`` (Dense(classes)).  Input 224x224 (at least 63x63)."""

    def __init__(self, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():  # names as MXNet's: 'alexnet0_conv0_weight', ...
            f = nn.HybridSequential(prefix="")
            f.add(nn.Conv2D(64, kernel_size=11, strides=4, padding=2, activation="relu"),
                  nn.MaxPool2D(pool_size=3, strides=2),
                  nn.Conv2D(192, kernel_size=5, padding=2, activation="relu"),
                  nn.MaxPool2D(pool_size=3, strides=2),
                  nn.Conv2D(384, kernel_size=3, padding=1, activation="relu"),
                  nn.Conv2D(256, kernel_size=3, padding=1, activation="relu"),
                  nn.Conv2D(256, kernel_size=3, padding=1, activation="relu"),
                  nn.MaxPool2D(pool_size=3, strides=2),
                  nn.Flatten(),
                  nn.Dense(4096, activation="relu"), nn.Dropout(0.5),
                  nn.Dense(4096, activation="relu"), nn.Dropout(0.5))
            self.features = f
            self.output = nn.Dense(classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.features(x))


def alexnet(pretrained: bool = False, ctx: _context.Context | None = None, root: str = _DEFAULT_ROOT,
            **kwargs: Any) -> HybridBlock:
    """AlexNet; ``pretrained=True`` loads ``alexnet.params`` from ``root`` (see ``get_model``)."""
    from . import load_pretrained

    return load_pretrained(AlexNet(**kwargs), pretrained, "alexnet", root, ctx)
