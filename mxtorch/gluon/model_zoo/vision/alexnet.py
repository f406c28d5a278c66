"""AlexNet (Krizhevsky, "One weird trick for parallelizing convolutional neural networks", 2014)."""

from __future__ import annotations

from typing import Any

from .... import context as _context
from ... import nn
from ...block import HybridBlock
from ._base import DEFAULT_ROOT, FeaturesOutput, load_pretrained

__all__ = ["AlexNet", "alexnet"]


class AlexNet(FeaturesOutput):
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


def alexnet(pretrained: bool = False, ctx: _context.Context | None = None, root: str = DEFAULT_ROOT,
            **kwargs: Any) -> HybridBlock:
    """AlexNet; ``pretrained=True`` loads ``alexnet.params`` from ``root`` (see ``get_model``)."""
    return load_pretrained(AlexNet(**kwargs), pretrained, "alexnet", root, ctx)
