"""MXNet 1.9's ``gluon.contrib.cnn`` deformable convolution layers: a regular convolution predicts
the tap offsets (and, modulated, the masks) that :func:`mxtorch.nd._deformable.deformable_conv2d`
applies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ....base import MXNetError
from ....nd._deformable import deformable_conv2d
from ...block import HybridBlock
from ...nn.activations import Activation

__all__ = ["deformable_conv2d", "DeformableConvolution", "ModulatedDeformableConvolution"]

Tensor = torch.Tensor


def _pair(v: int | Sequence[int], what: str, layer: str) -> tuple[int, int]:
    out = (int(v), int(v)) if isinstance(v, int) else tuple(int(x) for x in v)
    if len(out) != 2:
        raise ValueError(f"{layer}: {what} must be an int or 2 ints, got {v!r}")
    return out  # type: ignore[return-value]


class DeformableConvolution(HybridBlock):
    """MXNet 1.9's ``gluon.contrib.cnn.DeformableConvolution``: a regular convolution predicts the
    offsets (``offset_weight`` / ``offset_bias``, zeros at first: it starts as a plain convolution)
    and the deformable one (``deformable_conv_weight`` / ``deformable_conv_bias``) uses them.
    Input channels may be 0 (known at the first call); layouts 'NCHW' and 'NHWC'."""

    _mask_per_tap = 0

    def __init__(self, channels: int, kernel_size: int | Sequence[int] = (1, 1),
                 strides: int | Sequence[int] = (1, 1), padding: int | Sequence[int] = (0, 0),
                 dilation: int | Sequence[int] = (1, 1), groups: int = 1, num_deformable_group: int = 1,
                 layout: str = "NCHW", use_bias: bool = True, in_channels: int = 0,
                 activation: str | None = None,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 offset_weight_initializer: Any = "zeros", offset_bias_initializer: Any = "zeros",
                 offset_use_bias: bool = True, op_name: str = "DeformableConvolution", adj: Any = None,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        name = type(self).__name__
        if layout not in ("NCHW", "NHWC"):
            raise ValueError(f"{name}: layout must be 'NCHW' or 'NHWC', got {layout!r}")
        if int(channels) <= 0 or int(groups) <= 0 or int(num_deformable_group) <= 0 or channels % groups:
            raise ValueError(f"{name}: channels ({channels}) must be a positive multiple of groups "
                             f"({groups}), num_deformable_group ({num_deformable_group}) positive")
        self._channels, self._groups, self._dg = int(channels), int(groups), int(num_deformable_group)
        self._layout = layout
        self._kernel = _pair(kernel_size, "kernel_size", name)
        self._stride = _pair(strides, "strides", name)
        self._pad = _pair(padding, "padding", name)
        self._dilate = _pair(dilation, "dilation", name)
        taps = self._kernel[0] * self._kernel[1] * self._dg
        self._offset_channels = (2 + self._mask_per_tap) * taps

        def param(pname: str, shape: tuple[int, ...], init: Any) -> Any:
            return self.params.get(pname, shape=shape, init=init, allow_deferred_init=True)

        cin = int(in_channels) // self._groups
        self.offset_weight = param("offset_weight", (self._offset_channels, cin, *self._kernel),
                                   offset_weight_initializer)
        self.offset_bias = param("offset_bias", (self._offset_channels,), offset_bias_initializer) \
            if offset_use_bias else None
        self.deformable_conv_weight = param("deformable_conv_weight", (self._channels, cin, *self._kernel),
                                            weight_initializer)
        self.deformable_conv_bias = param("deformable_conv_bias", (self._channels,), bias_initializer) \
            if use_bias else None
        with self.name_scope():  # MXNet's name: '<layer prefix><activation>_'
            self.act = Activation(activation, prefix=f"{activation}_") if activation is not None else None

    def _alias(self) -> str:
        return "deformable_conv"

    def _offsets(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        """The predicted offsets, and the modulation mask (None here)."""
        b = None if self.offset_bias is None else self.offset_bias.data()
        off = torch.nn.functional.conv2d(x, self.offset_weight.data(), b, self._stride, self._pad,
                                         self._dilate, self._groups)
        return off, None

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4:
            raise MXNetError(f"{type(self).__name__}: expected a 4-D input in layout {self._layout}, "
                             f"got shape {tuple(x.shape)}")
        if self._layout == "NHWC":
            x = x.movedim(-1, 1)
        c = int(x.shape[1])
        if self.deformable_conv_weight._data is None:
            if c % self._groups:
                raise MXNetError(f"{type(self).__name__}: {c} input channels are not divisible by groups")
            self.offset_weight.infer_shape((self._offset_channels, c // self._groups, *self._kernel))
            self.deformable_conv_weight.infer_shape((self._channels, c // self._groups, *self._kernel))
        offset, mask = self._offsets(x)
        b = None if self.deformable_conv_bias is None else self.deformable_conv_bias.data()
        out = deformable_conv2d(x, offset, self.deformable_conv_weight.data(), b, self._stride, self._pad,
                                self._dilate, self._groups, self._dg, mask)
        if self.act is not None:
            out = self.act(out)
        return out.movedim(1, -1) if self._layout == "NHWC" else out


class ModulatedDeformableConvolution(DeformableConvolution):
    """The modulated (v2) variant: the offset convolution also predicts one mask value per tap,
    ``2 * sigmoid(.)`` (1 at the zero start), that scales the tap's sample."""

    _mask_per_tap = 1

    def _alias(self) -> str:
        return "modulated_deformable_conv"

    def _offsets(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        both, _ = super()._offsets(x)
        split = 2 * self._kernel[0] * self._kernel[1] * self._dg
        return both[:, :split], torch.sigmoid(both[:, split:]) * 2
