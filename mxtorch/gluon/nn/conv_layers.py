"""Convolution, pooling, padding and pixel-shuffle layers (MXNet's ``gluon.nn`` names and shapes).

Weights keep MXNet's shapes so checkpoints map one to one: a convolution's weight is
``(channels, in_channels // groups, *kernel)`` and a transposed convolution's is
``(in_channels, channels // groups, *kernel)``.  With a channels-last layout ('NWC', 'NHWC',
'NDHWC') data *and* weight follow that layout, as in MXNet (weight ``(channels, *kernel,
in_channels // groups)``); the layers permute to channels-first around the torch kernels.

Pooling runs on torch's kernels, which differ from MXNet in two corner cases: padding may be at
most half the pool size (checked at construction), and with ``ceil_mode=True`` a last window that
would start entirely inside the right padding is dropped (MXNet's 'full' convention keeps it).
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

from ...base import MXNetError
from ..block import HybridBlock
from ..symbolic import symbol_translation
from .activations import Activation

__all__ = [
    "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
    "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D", "AvgPool3D",
    "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D",
    "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D",
    "ReflectionPad2D", "PixelShuffle1D", "PixelShuffle2D", "PixelShuffle3D",
]

_LAYOUTS: dict[int, tuple[str, str]] = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _is_int(value: Any) -> bool:
    """True for Python and numpy integers (not bools)."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def _tuple(value: Any, n: int, what: str, layer: str, minimum: int = 0) -> tuple[int, ...]:
    """``value`` (an int or a sequence of ``n`` ints, each >= ``minimum``) as an n-tuple."""
    if isinstance(value, bool):
        raise TypeError(f"{layer}: {what} must be an int or a tuple of {n} ints, got {value!r}")
    if _is_int(value):
        out: tuple[int, ...] = (int(value),) * n
    elif isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != n or not all(_is_int(v) for v in value):
            raise ValueError(f"{layer}: {what} must be an int or a tuple of {n} ints, got {value!r}")
        out = tuple(int(v) for v in value)
    else:
        raise TypeError(f"{layer}: {what} must be an int or a tuple of {n} ints, got {value!r}")
    if any(v < minimum for v in out):
        raise ValueError(f"{layer}: every entry of {what} must be >= {minimum}, got {value!r}")
    return out


def _check_layout(layout: str, ndim: int, layer: str) -> bool:
    """Validate ``layout`` for ``ndim`` spatial dims; True when channels come last."""
    allowed = _LAYOUTS[ndim]
    if layout not in allowed:
        raise ValueError(f"{layer}: layout must be one of {allowed}, got {layout!r}")
    return layout == allowed[1]


def _check_input(x: torch.Tensor, ndim: int, layout: str, layer: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{layer}: expected a tensor input, got {type(x).__name__}")
    if x.dim() != ndim + 2:
        raise MXNetError(f"{layer}: expected a {ndim + 2}-D input in layout {layout}, "
                         f"got shape {tuple(x.shape)}")


class _Conv(HybridBlock):
    """Shared implementation of the convolution and transposed-convolution layers."""

    _ndim = 2
    _transpose = False

    def _alias(self) -> str:
        """Every (transposed) convolution is named 'conv0_', 'conv1_'... as in MXNet."""
        return "conv"

    def __init__(
        self,
        channels: int,
        kernel_size: int | Sequence[int],
        strides: int | Sequence[int],
        padding: int | Sequence[int],
        dilation: int | Sequence[int],
        groups: int,
        layout: str,
        activation: str | None,
        use_bias: bool,
        weight_initializer: Any,
        bias_initializer: Any,
        in_channels: int,
        output_padding: int | Sequence[int] = 0,
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        super().__init__(prefix, params)
        n, name = self._ndim, type(self).__name__
        if not _is_int(channels) or channels <= 0:
            raise ValueError(f"{name}: channels must be a positive int, got {channels!r}")
        if not _is_int(groups) or groups <= 0:
            raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
        if not _is_int(in_channels) or in_channels < 0:
            raise ValueError(f"{name}: in_channels must be an int >= 0 (0 = infer), got {in_channels!r}")
        if channels % groups:
            raise ValueError(f"{name}: channels ({channels}) must be divisible by groups ({groups})")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        channels, groups, in_channels = int(channels), int(groups), int(in_channels)
        self._channels_last = _check_layout(layout, n, name)
        self._layout = layout
        self._channels = channels
        self._in_channels = in_channels
        self._kernel = _tuple(kernel_size, n, "kernel_size", name, 1)
        self._strides = _tuple(strides, n, "strides", name, 1)
        self._padding = _tuple(padding, n, "padding", name, 0)
        self._dilation = _tuple(dilation, n, "dilation", name, 1)
        self._groups = groups
        self._out_pad = _tuple(output_padding, n, "output_padding", name, 0)
        if self._transpose:
            for op, s, d in zip(self._out_pad, self._strides, self._dilation):
                if op >= max(s, d):
                    raise ValueError(f"{name}: each output_padding must be smaller than its stride or "
                                     f"dilation, got output_padding={self._out_pad}, "
                                     f"strides={self._strides}, dilation={self._dilation}")
        self.weight = self.params.get("weight", shape=self._weight_shape(in_channels),
                                      init=weight_initializer, allow_deferred_init=True)
        self.bias = (self.params.get("bias", shape=(channels,), init=bias_initializer,
                                     allow_deferred_init=True) if use_bias else None)
        self._act_name = activation
        with self.name_scope():  # MXNet's name: '<layer prefix><activation>_'
            self.act = Activation(activation, prefix=f"{activation}_") if activation is not None else None

    def _weight_shape(self, in_channels: int) -> tuple[int, ...]:
        """MXNet's weight shape for ``in_channels`` (0 = unknown), in this layer's layout."""
        if self._transpose:
            first, second = in_channels, self._channels // self._groups
        else:
            first, second = self._channels, in_channels // self._groups
        if self._channels_last:
            return (first, *self._kernel, second)
        return (first, second, *self._kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        name = type(self).__name__
        _check_input(x, self._ndim, self._layout, name)
        if self._channels_last:
            x = x.movedim(-1, 1)
        c = int(x.shape[1])
        if self.weight._data is None:
            if c % self._groups:
                raise MXNetError(f"{name}: input has {c} channels, which is not divisible by "
                                 f"groups={self._groups}")
            self.weight.infer_shape(self._weight_shape(c))
            self._in_channels = c
        w: torch.Tensor = self.weight.data()
        if self._channels_last:
            w = w.movedim(-1, 1)
        expected = w.shape[0] if self._transpose else w.shape[1] * self._groups
        if c != expected:
            raise MXNetError(f"{name}: input has {c} channels (shape {tuple(x.shape)} after moving channels "
                             f"to axis 1), but the layer expects in_channels={expected}")
        b = self.bias.data() if self.bias is not None else None
        if self._transpose:
            out = _CONV_T[self._ndim](x, w, b, self._strides, self._padding, self._out_pad,
                                      self._groups, self._dilation)
        else:
            out = _CONV[self._ndim](x, w, b, self._strides, self._padding, self._dilation, self._groups)
        if self.act is not None:
            out = self.act(out)
        if self._channels_last:
            out = out.movedim(1, -1)
        return out  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        n = self._ndim
        shape = self.weight.shape or ()
        in_c: int | None = self._in_channels or None
        if shape:
            in_c = shape[0] if self._transpose else shape[-1 if self._channels_last else 1] * self._groups
            in_c = in_c or None
        mapping = f"{in_c} -> {self._channels}"
        s = f"{type(self).__name__}({mapping}, kernel_size={self._kernel}, stride={self._strides}"
        if self._padding != (0,) * n:
            s += f", padding={self._padding}"
        if self._dilation != (1,) * n:
            s += f", dilation={self._dilation}"
        if self._transpose and self._out_pad != (0,) * n:
            s += f", output_padding={self._out_pad}"
        if self._groups != 1:
            s += f", groups={self._groups}"
        if self._channels_last:
            s += f", layout={self._layout}"
        if self.bias is None:
            s += ", bias=False"
        if self.act is not None:
            s += f", {self.act!r}"
        return s + ")"


def _window(b: _Conv | _Pool, kernel: tuple[int, ...]) -> dict[str, Any]:
    """The sliding-window attributes of MXNet's Convolution and Pooling operators."""
    return {"kernel": kernel, "stride": b._strides, "pad": b._padding, "layout": b._layout}


@symbol_translation(_Conv)
def _conv_graph(F: ModuleType, b: _Conv, x: Any) -> Any:
    kw = _window(b, b._kernel)
    kw.update(dilate=b._dilation, num_filter=b._channels, num_group=b._groups, no_bias=b.bias is None)
    op = F.Convolution
    if b._transpose:
        op = F.Deconvolution
        kw["adj"] = b._out_pad
    out = op(data=x, weight=b.weight.var(), bias=None if b.bias is None else b.bias.var(), name="fwd", **kw)
    return b.act(out) if b.act is not None else out


class Conv1D(_Conv):
    """1-D convolution over (batch, channels, width) input.

    ``in_channels=0`` infers the input channels at the first forward pass.  Weight shape is
    (channels, in_channels // groups, kernel_size).  ``layout`` is 'NCW' or 'NWC'.
    """

    _ndim = 1

    def __init__(self, channels: int, kernel_size: int | Sequence[int], strides: int | Sequence[int] = 1,
                 padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
                 layout: str = "NCW", activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros", in_channels: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, activation,
                         use_bias, weight_initializer, bias_initializer, in_channels,
                         prefix=prefix, params=params)


class Conv2D(_Conv):
    """2-D convolution over (batch, channels, height, width) input.

    ``in_channels=0`` infers the input channels at the first forward pass.  Weight shape is
    (channels, in_channels // groups, kh, kw).  ``layout`` is 'NCHW' or 'NHWC'.
    """

    _ndim = 2

    def __init__(self, channels: int, kernel_size: int | Sequence[int], strides: int | Sequence[int] = (1, 1),
                 padding: int | Sequence[int] = (0, 0), dilation: int | Sequence[int] = (1, 1),
                 groups: int = 1, layout: str = "NCHW", activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros", in_channels: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, activation,
                         use_bias, weight_initializer, bias_initializer, in_channels,
                         prefix=prefix, params=params)


class Conv3D(_Conv):
    """3-D convolution over (batch, channels, depth, height, width) input.

    ``in_channels=0`` infers the input channels at the first forward pass.  Weight shape is
    (channels, in_channels // groups, kd, kh, kw).  ``layout`` is 'NCDHW' or 'NDHWC'.
    """

    _ndim = 3

    def __init__(self, channels: int, kernel_size: int | Sequence[int],
                 strides: int | Sequence[int] = (1, 1, 1), padding: int | Sequence[int] = (0, 0, 0),
                 dilation: int | Sequence[int] = (1, 1, 1), groups: int = 1, layout: str = "NCDHW",
                 activation: str | None = None, use_bias: bool = True, weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_channels: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, activation,
                         use_bias, weight_initializer, bias_initializer, in_channels,
                         prefix=prefix, params=params)


class Conv1DTranspose(_Conv):
    """Transposed 1-D convolution (deconvolution).

    Output width is ``(w - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1 + output_padding``.
    Weight shape is (in_channels, channels // groups, kernel_size), as in MXNet.
    """

    _ndim = 1
    _transpose = True

    def __init__(self, channels: int, kernel_size: int | Sequence[int], strides: int | Sequence[int] = 1,
                 padding: int | Sequence[int] = 0, output_padding: int | Sequence[int] = 0,
                 dilation: int | Sequence[int] = 1, groups: int = 1, layout: str = "NCW",
                 activation: str | None = None, use_bias: bool = True, weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_channels: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, activation,
                         use_bias, weight_initializer, bias_initializer, in_channels, output_padding,
                         prefix=prefix, params=params)


class Conv2DTranspose(_Conv):
    """Transposed 2-D convolution (deconvolution).

    Each output size is ``(in - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1 +
    output_padding``.  Weight shape is (in_channels, channels // groups, kh, kw), as in MXNet.
    """

    _ndim = 2
    _transpose = True

    def __init__(self, channels: int, kernel_size: int | Sequence[int], strides: int | Sequence[int] = (1, 1),
                 padding: int | Sequence[int] = (0, 0), output_padding: int | Sequence[int] = (0, 0),
                 dilation: int | Sequence[int] = (1, 1), groups: int = 1, layout: str = "NCHW",
                 activation: str | None = None, use_bias: bool = True, weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_channels: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, activation,
                         use_bias, weight_initializer, bias_initializer, in_channels, output_padding,
                         prefix=prefix, params=params)


class Conv3DTranspose(_Conv):
    """Transposed 3-D convolution (deconvolution).

    Weight shape is (in_channels, channels // groups, kd, kh, kw), as in MXNet.
    """

    _ndim = 3
    _transpose = True

    def __init__(self, channels: int, kernel_size: int | Sequence[int],
                 strides: int | Sequence[int] = (1, 1, 1), padding: int | Sequence[int] = (0, 0, 0),
                 output_padding: int | Sequence[int] = (0, 0, 0), dilation: int | Sequence[int] = (1, 1, 1),
                 groups: int = 1, layout: str = "NCDHW", activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros", in_channels: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, activation,
                         use_bias, weight_initializer, bias_initializer, in_channels, output_padding,
                         prefix=prefix, params=params)


# ---- pooling ---------------------------------------------------------------------------------
class _Pool(HybridBlock):
    """Shared implementation of the max/average pooling layers."""

    _ndim = 2
    _type = "max"

    def _alias(self) -> str:
        """All pooling layers are named 'pool0_', 'pool1_'... as in MXNet."""
        return "pool"

    def __init__(self, pool_size: int | Sequence[int], strides: int | Sequence[int] | None,
                 padding: int | Sequence[int], ceil_mode: bool, layout: str,
                 count_include_pad: bool = True, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        n, name = self._ndim, type(self).__name__
        self._channels_last = _check_layout(layout, n, name)
        self._layout = layout
        self._pool = _tuple(pool_size, n, "pool_size", name, 1)
        self._strides = self._pool if strides is None else _tuple(strides, n, "strides", name, 1)
        self._padding = _tuple(padding, n, "padding", name, 0)
        for p, k in zip(self._padding, self._pool):
            if 2 * p > k:
                raise ValueError(f"{name}: padding must be at most half of pool_size, got padding="
                                 f"{self._padding} for pool_size={self._pool}")
        self._ceil_mode = bool(ceil_mode)
        self._count_include_pad = bool(count_include_pad)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self._ndim, self._layout, type(self).__name__)
        if self._channels_last:
            x = x.movedim(-1, 1)
        if self._type == "max":
            out = _MAX_POOL[self._ndim](x, self._pool, self._strides, self._padding,
                                        ceil_mode=self._ceil_mode)
        else:
            out = _AVG_POOL[self._ndim](x, self._pool, self._strides, self._padding,
                                        ceil_mode=self._ceil_mode, count_include_pad=self._count_include_pad)
        return out.movedim(1, -1) if self._channels_last else out

    def __repr__(self) -> str:
        s = (f"{type(self).__name__}(size={self._pool}, stride={self._strides}, padding={self._padding}, "
             f"ceil_mode={self._ceil_mode}, global_pool=False, pool_type={self._type}, layout={self._layout}")
        if self._type == "avg":
            s += f", count_include_pad={self._count_include_pad}"
        return s + ")"


@symbol_translation(_Pool)
def _pool_graph(F: ModuleType, b: _Pool, x: Any) -> Any:
    kw = _window(b, b._pool)
    kw.update(pool_type=b._type, global_pool=False, pooling_convention="full" if b._ceil_mode else "valid")
    if b._type == "avg":
        kw["count_include_pad"] = b._count_include_pad
    return F.Pooling(x, name="fwd", **kw)


class MaxPool1D(_Pool):
    """Max pooling over the width of (N, C, W) input; ``strides=None`` means ``pool_size``."""

    _ndim, _type = 1, "max"

    def __init__(self, pool_size: int | Sequence[int] = 2, strides: int | Sequence[int] | None = None,
                 padding: int | Sequence[int] = 0, layout: str = "NCW", ceil_mode: bool = False,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, layout, prefix=prefix, params=params)


class MaxPool2D(_Pool):
    """Max pooling over (H, W) of (N, C, H, W) input; ``strides=None`` means ``pool_size``."""

    _ndim, _type = 2, "max"

    def __init__(self, pool_size: int | Sequence[int] = (2, 2), strides: int | Sequence[int] | None = None,
                 padding: int | Sequence[int] = 0, layout: str = "NCHW", ceil_mode: bool = False,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, layout, prefix=prefix, params=params)


class MaxPool3D(_Pool):
    """Max pooling over (D, H, W) of (N, C, D, H, W) input; ``strides=None`` means ``pool_size``."""

    _ndim, _type = 3, "max"

    def __init__(self, pool_size: int | Sequence[int] = (2, 2, 2), strides: int | Sequence[int] | None = None,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, layout: str = "NCDHW",
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, layout, prefix=prefix, params=params)


class AvgPool1D(_Pool):
    """Average pooling over the width of (N, C, W) input.

    ``count_include_pad=False`` leaves padded positions out of each average.
    """

    _ndim, _type = 1, "avg"

    def __init__(self, pool_size: int | Sequence[int] = 2, strides: int | Sequence[int] | None = None,
                 padding: int | Sequence[int] = 0, layout: str = "NCW", ceil_mode: bool = False,
                 count_include_pad: bool = True, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, layout, count_include_pad,
                         prefix=prefix, params=params)


class AvgPool2D(_Pool):
    """Average pooling over (H, W) of (N, C, H, W) input."""

    _ndim, _type = 2, "avg"

    def __init__(self, pool_size: int | Sequence[int] = (2, 2), strides: int | Sequence[int] | None = None,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, layout: str = "NCHW",
                 count_include_pad: bool = True, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, layout, count_include_pad,
                         prefix=prefix, params=params)


class AvgPool3D(_Pool):
    """Average pooling over (D, H, W) of (N, C, D, H, W) input."""

    _ndim, _type = 3, "avg"

    def __init__(self, pool_size: int | Sequence[int] = (2, 2, 2), strides: int | Sequence[int] | None = None,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, layout: str = "NCDHW",
                 count_include_pad: bool = True, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(pool_size, strides, padding, ceil_mode, layout, count_include_pad,
                         prefix=prefix, params=params)


class _GlobalPool(HybridBlock):
    """Pools over all spatial axes; the output keeps them with size 1, as MXNet does.

    ``layout`` defaults to channels first (NCW, NCHW or NCDHW by ``_ndim``).
    """

    _ndim = 2
    _type = "max"

    def _alias(self) -> str:
        """Named 'pool0_'... like the other pooling layers, as in MXNet."""
        return "pool"

    def __init__(self, layout: str | None = None, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        layout = _LAYOUTS[self._ndim][0] if layout is None else layout
        self._channels_last = _check_layout(layout, self._ndim, type(self).__name__)
        self._layout = layout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self._ndim, self._layout, type(self).__name__)
        dims = tuple(range(1, x.dim() - 1)) if self._channels_last else tuple(range(2, x.dim()))
        if self._type == "max":
            return x.amax(dim=dims, keepdim=True)
        return x.mean(dim=dims, keepdim=True)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(size={(1,) * self._ndim}, global_pool=True, pool_type={self._type}, "
                f"layout={self._layout})")


@symbol_translation(_GlobalPool)
def _global_pool_graph(F: ModuleType, b: _GlobalPool, x: Any) -> Any:
    return F.Pooling(x, name="fwd", kernel=(1,) * b._ndim, pool_type=b._type, global_pool=True,
                     layout=b._layout)


class GlobalMaxPool1D(_GlobalPool):
    """Maximum over the width: (N, C, W) -> (N, C, 1)."""

    _ndim, _type = 1, "max"


class GlobalMaxPool2D(_GlobalPool):
    """Maximum over (H, W): (N, C, H, W) -> (N, C, 1, 1)."""

    _ndim, _type = 2, "max"


class GlobalMaxPool3D(_GlobalPool):
    """Maximum over (D, H, W): (N, C, D, H, W) -> (N, C, 1, 1, 1)."""

    _ndim, _type = 3, "max"


class GlobalAvgPool1D(_GlobalPool):
    """Mean over the width: (N, C, W) -> (N, C, 1)."""

    _ndim, _type = 1, "avg"


class GlobalAvgPool2D(_GlobalPool):
    """Mean over (H, W): (N, C, H, W) -> (N, C, 1, 1)."""

    _ndim, _type = 2, "avg"


class GlobalAvgPool3D(_GlobalPool):
    """Mean over (D, H, W): (N, C, D, H, W) -> (N, C, 1, 1, 1)."""

    _ndim, _type = 3, "avg"


# ---- padding and pixel shuffle ---------------------------------------------------------------
class ReflectionPad2D(HybridBlock):
    """Pads the H and W axes of (N, C, H, W) input by reflection.

    ``padding`` is an int (the same on all four sides) or MXNet's 8-tuple ``pad_width``
    (before/after for N, C, H, W; the N and C entries must be 0).
    """

    def __init__(self, padding: int | Sequence[int] = 0, prefix: str | None = None,
                 params: Any = None) -> None:
        super().__init__(prefix, params)
        if not isinstance(padding, Sequence) and _is_int(padding) and int(padding) >= 0:
            p = int(padding)
            width: tuple[int, ...] = (0, 0, 0, 0, p, p, p, p)
        elif (isinstance(padding, Sequence) and len(padding) == 8
              and all(_is_int(v) and v >= 0 for v in padding)):
            width = tuple(int(v) for v in padding)
            if any(width[:4]):
                raise ValueError(f"ReflectionPad2D: only H and W can be padded; the first four entries of "
                                 f"padding must be 0, got {padding!r}")
        else:
            raise ValueError(f"ReflectionPad2D: padding must be an int >= 0 or an 8-tuple of ints >= 0 "
                             f"(MXNet's pad_width), got {padding!r}")
        self._padding = width
        # torch orders the pairs from the last axis backwards: (W_before, W_after, H_before, H_after)
        self._torch_pad = (width[6], width[7], width[4], width[5])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, 2, "NCHW", "ReflectionPad2D")
        h, w = int(x.shape[2]), int(x.shape[3])
        if max(self._torch_pad[2:]) >= h or max(self._torch_pad[:2]) >= w:
            raise MXNetError(f"ReflectionPad2D: padding {self._padding} must be smaller than the padded "
                             f"axes of the input, got input shape {tuple(x.shape)}")
        return F.pad(x, self._torch_pad, mode="reflect")

    def __repr__(self) -> str:
        return f"ReflectionPad2D(padding={self._padding})"


class _PixelShuffle(HybridBlock):
    """Moves groups of channels into blocks of pixels: (N, C*f1*...*fn, S1, ..., Sn) ->
    (N, C, S1*f1, ..., Sn*fn); channel ``c*prod(f) + offset`` goes to block position ``offset``."""

    _ndim = 2

    def __init__(self, factor: int | Sequence[int], prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        self._factors = _tuple(factor, self._ndim, "factor", type(self).__name__, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, name = self._ndim, type(self).__name__
        _check_input(x, n, _LAYOUTS[n][0], name)
        fs = self._factors
        prod = 1
        for f in fs:
            prod *= f
        batch, c, *spatial = (int(s) for s in x.shape)
        if c % prod:
            raise MXNetError(f"{name}: the number of input channels ({c}) must be divisible by the product "
                             f"of the factors {fs} ({prod}); got input shape {tuple(x.shape)}")
        x = x.reshape(batch, c // prod, *fs, *spatial)
        # (N, C, f1..fn, S1..Sn) -> (N, C, S1, f1, ..., Sn, fn)
        order = [0, 1]
        for i in range(n):
            order += [2 + n + i, 2 + i]
        x = x.permute(order)
        return x.reshape(batch, c // prod, *(s * f for s, f in zip(spatial, fs)))

    def __repr__(self) -> str:
        factors: Any = self._factors[0] if self._ndim == 1 else self._factors
        return f"{type(self).__name__}({factors})"


class PixelShuffle1D(_PixelShuffle):
    """(N, f*C, W) -> (N, C, W*f)."""

    _ndim = 1


class PixelShuffle2D(_PixelShuffle):
    """(N, f1*f2*C, H, W) -> (N, C, H*f1, W*f2); ``factor`` is an int or a pair."""

    _ndim = 2


class PixelShuffle3D(_PixelShuffle):
    """(N, f1*f2*f3*C, D, H, W) -> (N, C, D*f1, H*f2, W*f3); ``factor`` is an int or a triple."""

    _ndim = 3
