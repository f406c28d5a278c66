"""MobileNet v1 (Howard et al., depthwise-separable convolutions) and MobileNet v2 (Sandler et
al., inverted residuals with linear bottlenecks), each with a width multiplier."""

from __future__ import annotations

from typing import Any

import torch

from .... import context as _context
from ... import nn
from ...block import HybridBlock
from ._base import DEFAULT_ROOT, FeaturesOutput, load_pretrained, preset

__all__ = [
    "MobileNet", "MobileNetV2", "LinearBottleneck", "RELU6", "get_mobilenet", "get_mobilenet_v2",
    "mobilenet1_0", "mobilenet0_75", "mobilenet0_5", "mobilenet0_25",
    "mobilenet_v2_1_0", "mobilenet_v2_0_75", "mobilenet_v2_0_5", "mobilenet_v2_0_25",
]


class RELU6(HybridBlock):
    """``min(max(x, 0), 6)``; in a graph, MXNet's ``clip`` node '<prefix>relu6'."""

    def hybrid_forward(self, F: Any, x: torch.Tensor) -> torch.Tensor:
        return F.clip(x, 0, 6, name="relu6")  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return "RELU6"


def _add_conv(seq: nn.HybridSequential, channels: int, kernel: int = 1, stride: int = 1, pad: int = 0,
              groups: int = 1, active: bool = True, relu6: bool = False) -> None:
    """Append conv (no bias) → BatchNorm → [ReLU or ReLU6] to ``seq``."""
    seq.add(nn.Conv2D(channels, kernel_size=kernel, strides=stride, padding=pad, groups=groups,
                      use_bias=False), nn.BatchNorm())
    if active:
        seq.add(RELU6() if relu6 else nn.Activation("relu"))


def _check_multiplier(multiplier: float) -> float:
    m = float(multiplier)
    if m < 0.25:
        raise ValueError(f"MobileNet: the width multiplier must be at least 0.25, got {multiplier!r}")
    return m


class MobileNet(FeaturesOutput):
    """MobileNet v1: ``features`` (3x3/2 conv, 13 depthwise-separable units, global average
    pool, flatten) and ``output`` (Dense(classes)).  Every width is scaled by ``multiplier``."""

    def __init__(self, multiplier: float = 1.0, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        m = _check_multiplier(multiplier)
        dw_widths = [32, 64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024]
        pw_widths = [64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024] * 2
        strides = [1, 2] * 3 + [1] * 5 + [2, 1]
        with self.name_scope():  # names as MXNet's: 'mobilenet0_conv0_weight', ...
            self.features = nn.HybridSequential(prefix="")
            _add_conv(self.features, int(32 * m), kernel=3, stride=2, pad=1)
            for dw, pw, s in zip(dw_widths, pw_widths, strides):
                dwc = int(dw * m)
                _add_conv(self.features, dwc, kernel=3, stride=s, pad=1, groups=dwc)  # depthwise
                _add_conv(self.features, int(pw * m))  # pointwise
            self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
            self.output = nn.Dense(classes)


class LinearBottleneck(HybridBlock):
    """MobileNet v2 unit: 1x1 expand (×t) → 3x3 depthwise (stride) → 1x1 linear projection,
    with an identity shortcut when the stride is 1 and the width is unchanged."""

    def __init__(self, in_channels: int, channels: int, t: int, stride: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.use_shortcut = stride == 1 and in_channels == channels
        mid = in_channels * t
        with self.name_scope():
            self.out = nn.HybridSequential()
            _add_conv(self.out, mid, relu6=True)
            _add_conv(self.out, mid, kernel=3, stride=stride, pad=1, groups=mid, relu6=True)
            _add_conv(self.out, channels, active=False)

    def hybrid_forward(self, F: Any, x: torch.Tensor) -> torch.Tensor:
        out = self.out(x)
        return F.elemwise_add(out, x) if self.use_shortcut else out  # type: ignore[no-any-return]


class MobileNetV2(FeaturesOutput):
    """MobileNet v2: ``features`` (3x3/2 conv, 17 linear bottlenecks, 1x1 conv to 1280 channels,
    global average pool) and ``output`` (1x1 conv to ``classes`` + flatten)."""

    def __init__(self, multiplier: float = 1.0, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        m = _check_multiplier(multiplier)
        base = [32, 16] + [24] * 2 + [32] * 3 + [64] * 4 + [96] * 3 + [160] * 3 + [320]
        widths = [int(c * m) for c in base]
        in_widths, out_widths = widths[:-1], widths[1:]
        expansions = [1] + [6] * 16
        strides = [1, 2] * 2 + [1, 1, 2] + [1] * 6 + [2] + [1] * 3
        with self.name_scope():  # names as MXNet's: 'mobilenetv20_features_conv0_weight', ...
            self.features = nn.HybridSequential(prefix="features_")
            with self.features.name_scope():
                _add_conv(self.features, int(32 * m), kernel=3, stride=2, pad=1, relu6=True)
                for cin, cout, t, s in zip(in_widths, out_widths, expansions, strides):
                    self.features.add(LinearBottleneck(cin, cout, t, s))
                last = int(1280 * m) if m > 1.0 else 1280
                _add_conv(self.features, last, relu6=True)
                self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.HybridSequential(prefix="output_")
            with self.output.name_scope():
                self.output.add(nn.Conv2D(classes, kernel_size=1, use_bias=False, prefix="pred_"),
                                nn.Flatten())


def get_mobilenet(multiplier: float, pretrained: bool = False, ctx: _context.Context | None = None,
                  root: str = DEFAULT_ROOT, **kwargs: Any) -> HybridBlock:
    """MobileNet v1 with width ``multiplier`` (≥ 0.25); ``pretrained`` loads a local file."""
    return load_pretrained(MobileNet(multiplier, **kwargs), pretrained, f"mobilenet{multiplier}", root, ctx)


def get_mobilenet_v2(multiplier: float, pretrained: bool = False, ctx: _context.Context | None = None,
                     root: str = DEFAULT_ROOT, **kwargs: Any) -> HybridBlock:
    """MobileNet v2 with width ``multiplier`` (≥ 0.25); ``pretrained`` loads a local file."""
    net = MobileNetV2(multiplier, **kwargs)
    return load_pretrained(net, pretrained, f"mobilenetv2_{multiplier}", root, ctx)


mobilenet1_0 = preset("mobilenet1_0", get_mobilenet, 1.0, doc="MobileNet v1, width multiplier 1.0.")
mobilenet0_75 = preset("mobilenet0_75", get_mobilenet, 0.75, doc="MobileNet v1, width multiplier 0.75.")
mobilenet0_5 = preset("mobilenet0_5", get_mobilenet, 0.5, doc="MobileNet v1, width multiplier 0.5.")
mobilenet0_25 = preset("mobilenet0_25", get_mobilenet, 0.25, doc="MobileNet v1, width multiplier 0.25.")
mobilenet_v2_1_0 = preset("mobilenet_v2_1_0", get_mobilenet_v2, 1.0,
                          doc="MobileNet v2, width multiplier 1.0.")
mobilenet_v2_0_75 = preset("mobilenet_v2_0_75", get_mobilenet_v2, 0.75,
                           doc="MobileNet v2, width multiplier 0.75.")
mobilenet_v2_0_5 = preset("mobilenet_v2_0_5", get_mobilenet_v2, 0.5,
                          doc="MobileNet v2, width multiplier 0.5.")
mobilenet_v2_0_25 = preset("mobilenet_v2_0_25", get_mobilenet_v2, 0.25,
                           doc="MobileNet v2, width multiplier 0.25.")
