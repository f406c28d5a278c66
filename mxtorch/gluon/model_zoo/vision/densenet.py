"""DenseNet (Huang et al., "Densely Connected Convolutional Networks", 2017)."""

from __future__ import annotations

from typing import Any

from .... import context as _context
from ... import nn
from ...block import HybridBlock
from ._base import DEFAULT_ROOT, FeaturesOutput, load_pretrained, preset
from ._concat import Concurrent

__all__ = ["DenseNet", "get_densenet", "densenet121", "densenet161", "densenet169", "densenet201"]


# depth -> (initial features, growth rate, layers per dense block)
_DENSENET_SPEC: dict[int, tuple[int, int, list[int]]] = {
    121: (64, 32, [6, 12, 24, 16]),
    161: (96, 48, [6, 12, 36, 24]),
    169: (64, 32, [6, 12, 32, 32]),
    201: (64, 32, [6, 12, 48, 32]),
}


def _dense_layer(growth_rate: int, bn_size: int, dropout: float) -> Concurrent:
    """The input concatenated (channel axis) with BN-ReLU-Conv1x1(bn_size * growth)-BN-ReLU-
    Conv3x3(growth) [-Dropout] of it.

    As in MXNet, an Identity and the body side by side, none with a prefix of its own, so the
    layers and the concat are named in the dense block's scope ('stage1_conv0_', 'stage1_concat0').
    """
    body = nn.HybridSequential(prefix="")
    body.add(nn.BatchNorm(), nn.Activation("relu"),
             nn.Conv2D(bn_size * growth_rate, kernel_size=1, use_bias=False),
             nn.BatchNorm(), nn.Activation("relu"),
             nn.Conv2D(growth_rate, kernel_size=3, padding=1, use_bias=False))
    if dropout:
        body.add(nn.Dropout(dropout))
    out = Concurrent(axis=1, prefix="")
    out.add(nn.Identity(), body)
    return out


def _dense_block(num_layers: int, bn_size: int, growth_rate: int, dropout: float,
                 index: int) -> nn.HybridSequential:
    """Dense block ``index`` (from 1), prefix 'stage<index>_'."""
    block = nn.HybridSequential(prefix=f"stage{index}_")
    with block.name_scope():
        for _ in range(num_layers):
            block.add(_dense_layer(growth_rate, bn_size, dropout))
    return block


def _transition(channels: int) -> nn.HybridSequential:
    """BN-ReLU-Conv1x1(channels)-AvgPool(2, 2), named in the enclosing scope."""
    out = nn.HybridSequential(prefix="")
    out.add(nn.BatchNorm(), nn.Activation("relu"), nn.Conv2D(channels, kernel_size=1, use_bias=False),
            nn.AvgPool2D(pool_size=2, strides=2))
    return out


class DenseNet(FeaturesOutput):
    """DenseNet: ``features`` (7x7 stem, dense blocks joined by transitions that halve the
    channels and the resolution, BN-ReLU, 7x7 average pool, Flatten) and ``output``
    (Dense(classes)).  Input 224x224."""

    def __init__(self, num_init_features: int, growth_rate: int, block_config: list[int], bn_size: int = 4,
                 dropout: float = 0, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            f = nn.HybridSequential(prefix="")
            f.add(nn.Conv2D(num_init_features, kernel_size=7, strides=2, padding=3, use_bias=False),
                  nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(pool_size=3, strides=2, padding=1))
            features = num_init_features
            for i, num_layers in enumerate(block_config):
                f.add(_dense_block(num_layers, bn_size, growth_rate, dropout, i + 1))
                features += num_layers * growth_rate
                if i != len(block_config) - 1:
                    features //= 2
                    f.add(_transition(features))
            f.add(nn.BatchNorm(), nn.Activation("relu"), nn.AvgPool2D(pool_size=7), nn.Flatten())
            self.features = f
            self.output = nn.Dense(classes)


def get_densenet(num_layers: int, pretrained: bool = False, ctx: _context.Context | None = None,
                 root: str = DEFAULT_ROOT, **kwargs: Any) -> HybridBlock:
    """DenseNet of depth ``num_layers`` (121, 161, 169 or 201); ``pretrained=True`` loads
    ``densenet<depth>.params`` from ``root``."""
    if num_layers not in _DENSENET_SPEC:
        raise ValueError(f"DenseNet depth {num_layers} is not supported; "
                         f"choose one of {sorted(_DENSENET_SPEC)}")
    init_features, growth, config = _DENSENET_SPEC[num_layers]
    net = DenseNet(init_features, growth, config, **kwargs)
    return load_pretrained(net, pretrained, f"densenet{num_layers}", root, ctx)


densenet121 = preset("densenet121", get_densenet, 121, doc="DenseNet-121.")
densenet161 = preset("densenet161", get_densenet, 161, doc="DenseNet-161.")
densenet169 = preset("densenet169", get_densenet, 169, doc="DenseNet-169.")
densenet201 = preset("densenet201", get_densenet, 201, doc="DenseNet-201.")
