"""SqueezeNet 1.0 and 1.1 (Iandola et al., "SqueezeNet: AlexNet-level accuracy with 50x fewer
parameters and <0.5MB model size", 2016)."""

from __future__ import annotations

from typing import Any

from .... import context as _context
from ... import nn
from ...block import HybridBlock
from ._base import DEFAULT_ROOT, FeaturesOutput, load_pretrained, preset
from ._concat import Concurrent

__all__ = ["SqueezeNet", "get_squeezenet", "squeezenet1_0", "squeezenet1_1"]


def _conv_relu(channels: int, kernel_size: int, padding: int = 0) -> nn.HybridSequential:
    """Convolution followed by a ReLU layer (no prefix of its own: 'conv0_', 'relu0_')."""
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(channels, kernel_size=kernel_size, padding=padding), nn.Activation("relu"))
    return out


def _fire(squeeze: int, expand1x1: int, expand3x3: int) -> nn.HybridSequential:
    """Fire module: a 1x1 squeeze, then 1x1 and 3x3 expansions concatenated (all ReLU)."""
    out = nn.HybridSequential(prefix="")
    out.add(_conv_relu(squeeze, 1))
    expand = Concurrent(axis=1, prefix="")
    expand.add(_conv_relu(expand1x1, 1), _conv_relu(expand3x3, 3, 1))
    out.add(expand)
    return out


def _pool() -> nn.MaxPool2D:
    return nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True)


class SqueezeNet(FeaturesOutput):
    """SqueezeNet ``version`` '1.0' or '1.1': ``features`` (stem convolution, Fire modules,
    max-pools, Dropout(0.5)) and ``output`` (1x1 convolution to ``classes``, ReLU, 13x13 average
    pool, Flatten).  Input 224x224."""

    def __init__(self, version: str, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if version not in ("1.0", "1.1"):
            raise ValueError(f"SqueezeNet version must be '1.0' or '1.1', got {version!r}")
        with self.name_scope():
            self.features = self._features(version)
            self.output = nn.HybridSequential(prefix="")
            self.output.add(nn.Conv2D(classes, kernel_size=1), nn.Activation("relu"), nn.AvgPool2D(13),
                            nn.Flatten())

    @staticmethod
    def _features(version: str) -> nn.HybridSequential:
        f = nn.HybridSequential(prefix="")
        if version == "1.0":
            f.add(nn.Conv2D(96, kernel_size=7, strides=2), nn.Activation("relu"), _pool(),
                  _fire(16, 64, 64), _fire(16, 64, 64), _fire(32, 128, 128), _pool(),
                  _fire(32, 128, 128), _fire(48, 192, 192), _fire(48, 192, 192), _fire(64, 256, 256),
                  _pool(), _fire(64, 256, 256))
        else:
            f.add(nn.Conv2D(64, kernel_size=3, strides=2), nn.Activation("relu"), _pool(),
                  _fire(16, 64, 64), _fire(16, 64, 64), _pool(),
                  _fire(32, 128, 128), _fire(32, 128, 128), _pool(),
                  _fire(48, 192, 192), _fire(48, 192, 192), _fire(64, 256, 256), _fire(64, 256, 256))
        f.add(nn.Dropout(0.5))
        return f


def get_squeezenet(version: str, pretrained: bool = False, ctx: _context.Context | None = None,
                   root: str = DEFAULT_ROOT, **kwargs: Any) -> HybridBlock:
    """SqueezeNet '1.0' or '1.1'; ``pretrained=True`` loads ``squeezenet<version>.params`` from ``root``."""
    return load_pretrained(SqueezeNet(version, **kwargs), pretrained, f"squeezenet{version}", root, ctx)


squeezenet1_0 = preset("squeezenet1_0", get_squeezenet, "1.0", doc="SqueezeNet 1.0.")
squeezenet1_1 = preset("squeezenet1_1", get_squeezenet, "1.1",
                       doc="SqueezeNet 1.1 (2.4x less computation than 1.0 at the same accuracy).")
