"""ResNet v1 (post-activation) and v2 (pre-activation), for ImageNet and for CIFAR-sized images.

References: He et al., "Deep Residual Learning for Image Recognition" (v1) and "Identity
Mappings in Deep Residual Networks" (v2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from .... import context as _context
from ... import nn
from ...block import HybridBlock
from ._base import DEFAULT_ROOT, FeaturesOutput, load_pretrained, preset

__all__ = [
    "ResNetV1", "ResNetV2", "BasicBlockV1", "BasicBlockV2", "BottleneckV1", "BottleneckV2",
    "CIFARResNetV1", "CIFARResNetV2", "get_resnet", "get_cifar_resnet",
    "resnet18_v1", "resnet34_v1", "resnet50_v1", "resnet101_v1", "resnet152_v1",
    "resnet18_v2", "resnet34_v2", "resnet50_v2", "resnet101_v2", "resnet152_v2",
    "cifar_resnet20_v1", "cifar_resnet56_v1", "cifar_resnet110_v1",
    "cifar_resnet20_v2", "cifar_resnet56_v2", "cifar_resnet110_v2",
]


def _conv3x3(channels: int, stride: int, in_channels: int) -> nn.Conv2D:
    return nn.Conv2D(channels, kernel_size=3, strides=stride, padding=1, use_bias=False,
                     in_channels=in_channels)


def _bn(last_gamma: bool = False, **kwargs: Any) -> nn.BatchNorm:
    return nn.BatchNorm(gamma_initializer="zeros", **kwargs) if last_gamma else nn.BatchNorm(**kwargs)


def _shortcut(channels: int, stride: int, in_channels: int) -> nn.HybridSequential:
    """The v1 projection shortcut: strided 1x1 convolution + BatchNorm (no prefix of its own)."""
    seq = nn.HybridSequential(prefix="")
    seq.add(nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False, in_channels=in_channels),
            nn.BatchNorm())
    return seq


# ---- residual units ------------------------------------------------------------------------


class BasicBlockV1(HybridBlock):
    """Two 3x3 convolutions, each followed by BatchNorm; ReLU after the residual sum.

    ``downsample=True`` adds a strided 1x1 convolution + BatchNorm on the shortcut.
    ``last_gamma=True`` starts the last BatchNorm's gamma at zero.
    """

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0,
                 last_gamma: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(_conv3x3(channels, stride, in_channels), nn.BatchNorm(), nn.Activation("relu"),
                      _conv3x3(channels, 1, channels), _bn(last_gamma))
        self.downsample = _shortcut(channels, stride, in_channels) if downsample else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.body(x)
        residual = self.downsample(x) if self.downsample is not None else x
        return F.relu(residual + out)


class BottleneckV1(HybridBlock):
    """1x1 (stride) → 3x3 → 1x1 convolutions with ``channels // 4`` inner width, post-activation.

    As in MXNet's model zoo, the two 1x1 convolutions of the body carry a bias (so parameter
    files keep the same names and shapes); the 3x3 convolution and the shortcut have none.
    """

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0,
                 last_gamma: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        mid = channels // 4
        self.body = nn.HybridSequential(prefix="")
        self.body.add(
            nn.Conv2D(mid, kernel_size=1, strides=stride),
            nn.BatchNorm(), nn.Activation("relu"),
            _conv3x3(mid, 1, mid), nn.BatchNorm(), nn.Activation("relu"),
            nn.Conv2D(channels, kernel_size=1, strides=1),
            _bn(last_gamma),
        )
        self.downsample = _shortcut(channels, stride, in_channels) if downsample else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.body(x)
        residual = self.downsample(x) if self.downsample is not None else x
        return F.relu(out + residual)


class _PreActUnit(HybridBlock):
    """What the v2 units share: BN → ReLU on the input, which also feeds the 1x1 shortcut if any."""

    bn1: nn.BatchNorm
    downsample: nn.Conv2D | None

    def _pre_activation(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The activated input and the residual (``x`` itself, or the shortcut of the activated input)."""
        act = F.relu(self.bn1(x))
        return act, x if self.downsample is None else self.downsample(act)


class BasicBlockV2(_PreActUnit):
    """Pre-activation basic unit: BN → ReLU → 3x3 conv, twice; the shortcut is a plain 1x1 conv."""

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0,
                 last_gamma: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()
        self.conv1 = _conv3x3(channels, stride, in_channels)
        self.bn2 = _bn(last_gamma)
        self.conv2 = _conv3x3(channels, 1, channels)
        self.downsample = (nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False,
                                     in_channels=in_channels) if downsample else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, residual = self._pre_activation(x)
        x = self.conv1(x)
        x = F.relu(self.bn2(x))
        x = self.conv2(x)
        return x + residual


class BottleneckV2(_PreActUnit):
    """Pre-activation bottleneck: (BN → ReLU → conv) for 1x1, 3x3 (stride), 1x1 convolutions."""

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0,
                 last_gamma: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        mid = channels // 4
        self.bn1 = nn.BatchNorm()
        self.conv1 = nn.Conv2D(mid, kernel_size=1, strides=1, use_bias=False)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(mid, stride, mid)
        self.bn3 = _bn(last_gamma)
        self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=1, use_bias=False)
        self.downsample = (nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False,
                                     in_channels=in_channels) if downsample else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, residual = self._pre_activation(x)
        x = self.conv1(x)
        x = self.conv2(F.relu(self.bn2(x)))
        x = self.conv3(F.relu(self.bn3(x)))
        return x + residual


def _check_layout(layers: list[int], channels: list[int]) -> None:
    if len(layers) + 1 != len(channels):
        raise ValueError(f"ResNet: channels needs one more entry than layers (the stem width), got "
                         f"layers={list(layers)} and channels={list(channels)}")
    if any(int(n) < 1 for n in layers):
        raise ValueError(f"ResNet: every stage needs at least one unit, got layers={list(layers)}")


def _make_stage(block: Any, num_units: int, channels: int, stride: int, in_channels: int,
                last_gamma: bool, index: int) -> nn.HybridSequential:
    """Stage ``index`` (from 1): prefix 'stage<index>_'; its units have no prefix of their own,
    so their layers are named 'stage1_conv0_', 'stage1_batchnorm0_'... as in MXNet."""
    stage = nn.HybridSequential(prefix=f"stage{index}_")
    with stage.name_scope():
        stage.add(block(channels, stride, channels != in_channels, in_channels=in_channels,
                        last_gamma=last_gamma, prefix=""))
        for _ in range(num_units - 1):
            stage.add(block(channels, 1, False, in_channels=channels, last_gamma=last_gamma, prefix=""))
    return stage


def _add_stages(features: nn.HybridSequential, block: Any, layers: list[int], channels: list[int],
                last_gamma: bool) -> None:
    for i, n in enumerate(layers):
        features.add(_make_stage(block, n, channels[i + 1], 1 if i == 0 else 2, channels[i], last_gamma,
                                 i + 1))


# ---- networks ------------------------------------------------------------------------------


def _stem(width: int, thumbnail: bool) -> list[HybridBlock]:
    """The ImageNet stem (7x7/2 convolution, BN, ReLU, 3x3/2 max-pool), or one 3x3 convolution."""
    if thumbnail:
        return [_conv3x3(width, 1, 0)]
    return [nn.Conv2D(width, kernel_size=7, strides=2, padding=3, use_bias=False),
            nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(pool_size=3, strides=2, padding=1)]


def _data_norm() -> HybridBlock:
    """The v2 networks' input normalization: a BatchNorm without scale and shift."""
    return nn.BatchNorm(scale=False, center=False)


def _v2_tail() -> list[HybridBlock]:
    return [nn.BatchNorm(), nn.Activation("relu"), nn.GlobalAvgPool2D(), nn.Flatten()]


class _ResNet(FeaturesOutput):
    """``features``: ``stem()``'s layers, the residual stages, ``tail()``'s layers; ``output``: Dense.

    ``stem`` and ``tail`` are called inside the name scope, so that their layers get MXNet's names.
    """

    def __init__(self, block: Any, layers: list[int], channels: list[int], classes: int, last_gamma: bool,
                 stem: Callable[[], list[HybridBlock]], tail: Callable[[], list[HybridBlock]],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_layout(layers, channels)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(*stem())
            _add_stages(self.features, block, layers, channels, last_gamma)
            self.features.add(*tail())
            self.output = nn.Dense(classes, in_units=channels[-1])


class ResNetV1(_ResNet):
    """ResNet v1: ``features`` (stem, residual stages, global average pool) and ``output`` (Dense).

    ``block`` is BasicBlockV1 or BottleneckV1, ``layers`` the units per stage and ``channels``
    the stem width followed by each stage's width.  ``thumbnail=True`` replaces the 7x7/2
    convolution + max-pool stem by one 3x3 convolution, for 32x32 inputs.
    """

    def __init__(self, block: Any, layers: list[int], channels: list[int], classes: int = 1000,
                 thumbnail: bool = False, last_gamma: bool = False, **kwargs: Any) -> None:
        super().__init__(block, layers, channels, classes, last_gamma,
                         lambda: _stem(channels[0], thumbnail), lambda: [nn.GlobalAvgPool2D()], **kwargs)


class ResNetV2(_ResNet):
    """ResNet v2 (pre-activation); same arguments as :class:`ResNetV1`, with the V2 units.

    The input first goes through a BatchNorm without scale and shift (data normalization);
    the features end with BatchNorm → ReLU → global average pool → flatten.
    """

    def __init__(self, block: Any, layers: list[int], channels: list[int], classes: int = 1000,
                 thumbnail: bool = False, last_gamma: bool = False, **kwargs: Any) -> None:
        super().__init__(block, layers, channels, classes, last_gamma,
                         lambda: [_data_norm(), *_stem(channels[0], thumbnail)], _v2_tail, **kwargs)


class CIFARResNetV1(_ResNet):
    """ResNet v1 for 32x32 images: 3x3 stem (conv → BN → ReLU), then 3 stages (16/32/64 wide)."""

    def __init__(self, block: Any, layers: list[int], channels: list[int], classes: int = 10,
                 last_gamma: bool = False, **kwargs: Any) -> None:
        super().__init__(block, layers, channels, classes, last_gamma,
                         lambda: [_conv3x3(channels[0], 1, 0), nn.BatchNorm(), nn.Activation("relu")],
                         lambda: [nn.GlobalAvgPool2D()], **kwargs)


class CIFARResNetV2(_ResNet):
    """Pre-activation ResNet for 32x32 images (input BatchNorm, 3x3 stem, 3 stages)."""

    def __init__(self, block: Any, layers: list[int], channels: list[int], classes: int = 10,
                 last_gamma: bool = False, **kwargs: Any) -> None:
        super().__init__(block, layers, channels, classes, last_gamma,
                         lambda: [_data_norm(), _conv3x3(channels[0], 1, 0)], _v2_tail, **kwargs)


# ---- specifications and constructors -------------------------------------------------------

# depth -> (unit kind, units per stage, stem width + stage widths)
_RESNET_SPEC: dict[int, tuple[str, list[int], list[int]]] = {
    18: ("basic", [2, 2, 2, 2], [64, 64, 128, 256, 512]),
    34: ("basic", [3, 4, 6, 3], [64, 64, 128, 256, 512]),
    50: ("bottleneck", [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
    101: ("bottleneck", [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
    152: ("bottleneck", [3, 8, 36, 3], [64, 256, 512, 1024, 2048]),
}
_NETS: dict[int, type[ResNetV1] | type[ResNetV2]] = {1: ResNetV1, 2: ResNetV2}
_UNITS: dict[int, dict[str, type[HybridBlock]]] = {
    1: {"basic": BasicBlockV1, "bottleneck": BottleneckV1},
    2: {"basic": BasicBlockV2, "bottleneck": BottleneckV2},
}


def get_resnet(version: int, num_layers: int, pretrained: bool = False,
               ctx: _context.Context | None = None, root: str = DEFAULT_ROOT, **kwargs: Any) -> HybridBlock:
    """ResNet ``version`` (1 or 2) of depth ``num_layers`` (18, 34, 50, 101 or 152).

    ``pretrained=True`` loads ``resnet<depth>_v<version>.params`` from ``root`` onto ``ctx``
    (weights are never downloaded).  Other keywords (``classes``, ``thumbnail``,
    ``last_gamma``) go to :class:`ResNetV1` / :class:`ResNetV2`.
    """
    if num_layers not in _RESNET_SPEC:
        raise ValueError(f"ResNet depth {num_layers} is not supported; choose one of {sorted(_RESNET_SPEC)}")
    if version not in _NETS:
        raise ValueError(f"ResNet version {version} is not supported; choose 1 or 2")
    kind, layers, channels = _RESNET_SPEC[num_layers]
    net = _NETS[version](_UNITS[version][kind], layers, channels, **kwargs)
    return load_pretrained(net, pretrained, f"resnet{num_layers}_v{version}", root, ctx)


def get_cifar_resnet(version: int, num_layers: int, pretrained: bool = False,
                     ctx: _context.Context | None = None, root: str = DEFAULT_ROOT,
                     **kwargs: Any) -> HybridBlock:
    """CIFAR ResNet ``version`` (1 or 2) with ``num_layers = 6n + 2`` (20, 56, 110, ...).

    Three stages of ``n`` basic units, 16/32/64 channels wide; ``classes`` defaults to 10.
    """
    if version not in _NETS:
        raise ValueError(f"CIFAR ResNet version {version} is not supported; choose 1 or 2")
    if num_layers < 8 or (num_layers - 2) % 6 != 0:
        raise ValueError(f"CIFAR ResNet depth must be 6n + 2 (20, 32, 44, 56, 110, ...), got {num_layers}")
    n = (num_layers - 2) // 6
    net_cls = CIFARResNetV1 if version == 1 else CIFARResNetV2
    block = BasicBlockV1 if version == 1 else BasicBlockV2
    net = net_cls(block, [n] * 3, [16, 16, 32, 64], **kwargs)
    return load_pretrained(net, pretrained, f"cifar_resnet{num_layers}_v{version}", root, ctx)


resnet18_v1 = preset("resnet18_v1", get_resnet, 1, 18, doc="ResNet-18 v1 (basic units, 2-2-2-2).")
resnet34_v1 = preset("resnet34_v1", get_resnet, 1, 34, doc="ResNet-34 v1 (basic units, 3-4-6-3).")
resnet50_v1 = preset("resnet50_v1", get_resnet, 1, 50, doc="ResNet-50 v1 (bottleneck units, 3-4-6-3).")
resnet101_v1 = preset("resnet101_v1", get_resnet, 1, 101, doc="ResNet-101 v1 (bottleneck units, 3-4-23-3).")
resnet152_v1 = preset("resnet152_v1", get_resnet, 1, 152, doc="ResNet-152 v1 (bottleneck units, 3-8-36-3).")
resnet18_v2 = preset("resnet18_v2", get_resnet, 2, 18,
                     doc="ResNet-18 v2 (pre-activation basic units, 2-2-2-2).")
resnet34_v2 = preset("resnet34_v2", get_resnet, 2, 34,
                     doc="ResNet-34 v2 (pre-activation basic units, 3-4-6-3).")
resnet50_v2 = preset("resnet50_v2", get_resnet, 2, 50,
                     doc="ResNet-50 v2 (pre-activation bottleneck units, 3-4-6-3).")
resnet101_v2 = preset("resnet101_v2", get_resnet, 2, 101,
                      doc="ResNet-101 v2 (pre-activation bottleneck units, 3-4-23-3).")
resnet152_v2 = preset("resnet152_v2", get_resnet, 2, 152,
                      doc="ResNet-152 v2 (pre-activation bottleneck units, 3-8-36-3).")
cifar_resnet20_v1 = preset("cifar_resnet20_v1", get_cifar_resnet, 1, 20,
                           doc="ResNet-20 v1 for CIFAR (3 units per stage).")
cifar_resnet56_v1 = preset("cifar_resnet56_v1", get_cifar_resnet, 1, 56,
                           doc="ResNet-56 v1 for CIFAR (9 units per stage).")
cifar_resnet110_v1 = preset("cifar_resnet110_v1", get_cifar_resnet, 1, 110,
                            doc="ResNet-110 v1 for CIFAR (18 units per stage).")
cifar_resnet20_v2 = preset("cifar_resnet20_v2", get_cifar_resnet, 2, 20,
                           doc="ResNet-20 v2 for CIFAR (3 pre-activation units per stage).")
cifar_resnet56_v2 = preset("cifar_resnet56_v2", get_cifar_resnet, 2, 56,
                           doc="ResNet-56 v2 for CIFAR (9 pre-activation units per stage).")
cifar_resnet110_v2 = preset("cifar_resnet110_v2", get_cifar_resnet, 2, 110,
                            doc="ResNet-110 v2 for CIFAR (18 pre-activation units per stage).")
