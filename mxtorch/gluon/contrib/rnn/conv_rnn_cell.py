"""Convolutional recurrent cells (Shi et al., "Convolutional LSTM Network", NIPS 2015): the
Elman, LSTM and GRU cells with their input-to-hidden and hidden-to-hidden products replaced by
1-D, 2-D or 3-D convolutions, so inputs and states are feature maps.

``input_shape`` is one step's input without the batch axis, channels first (``(C, W)``,
``(C, H, W)``, ``(C, D, H, W)``; ``C`` may be 0: known at the first call).  The i2h convolution
(``i2h_kernel``, ``i2h_pad``, ``i2h_dilate``, stride 1) sets the states' spatial size; the h2h
one keeps it (an odd ``h2h_kernel``, padded by ``h2h_dilate * (h2h_kernel - 1) / 2``).  Gates
are stacked along the channel axis in MXNet's order (LSTM: input, forget, cell, output; GRU:
reset, update, new); parameters are ``i2h_weight`` ``(gates * hidden_channels, C, *i2h_kernel)``,
``h2h_weight`` ``(gates * hidden_channels, hidden_channels, *h2h_kernel)`` and the two biases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ...rnn._sym_steps import Weights, gru_step, lstm_step, rnn_step
from ...rnn.base_cell import HybridRecurrentCell, Tensor, _activation, _check_states
from ...symbolic import symbol_translation

__all__ = ["Conv1DRNNCell", "Conv2DRNNCell", "Conv3DRNNCell", "Conv1DLSTMCell", "Conv2DLSTMCell",
           "Conv3DLSTMCell", "Conv1DGRUCell", "Conv2DGRUCell", "Conv3DGRUCell"]

_CONVS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _per_dim(value: int | Sequence[int], dims: int, what: str, cls: str) -> tuple[int, ...]:
    out = (int(value),) * dims if isinstance(value, int) else tuple(int(v) for v in value)
    if len(out) != dims:
        raise ValueError(f"{cls}: {what} must be an int or {dims} ints for a {dims}-D convolution, "
                         f"got {value!r}")
    return out


class _ConvCell(HybridRecurrentCell):
    """What the nine convolutional cells share; subclasses set ``_dims`` and ``_gates``."""

    _dims = 1
    _gates = 1
    _kind = "rnn"

    def __init__(self, input_shape: Sequence[int], hidden_channels: int, i2h_kernel: int | Sequence[int],
                 h2h_kernel: int | Sequence[int], i2h_pad: int | Sequence[int] = 0,
                 i2h_dilate: int | Sequence[int] = 1, h2h_dilate: int | Sequence[int] = 1,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 conv_layout: str | None = None, activation: Any = "tanh", prefix: str | None = None,
                 params: Any = None) -> None:
        super().__init__(prefix, params)
        name, dims = type(self).__name__, self._dims
        layout = "NC" + "DHW"[3 - dims:] if conv_layout is None else conv_layout
        if layout != "NC" + "DHW"[3 - dims:]:
            raise ValueError(f"{name}: conv_layout {conv_layout!r} is not supported; use channels-first "
                             f"{'NC' + 'DHW'[3 - dims:]!r}")
        shape = tuple(int(s) for s in input_shape)
        if len(shape) != dims + 1 or any(s <= 0 for s in shape[1:]) or shape[0] < 0:
            raise ValueError(f"{name}: input_shape must be (channels, {dims} spatial sizes > 0), "
                             f"got {input_shape!r}")
        if int(hidden_channels) <= 0:
            raise ValueError(f"{name}: hidden_channels must be a positive int, got {hidden_channels!r}")
        self._hidden_channels, self._conv_layout, self._activation = int(hidden_channels), layout, activation
        self._act = _activation(activation)
        self._i2h_kernel = _per_dim(i2h_kernel, dims, "i2h_kernel", name)
        self._i2h_pad = _per_dim(i2h_pad, dims, "i2h_pad", name)
        self._i2h_dilate = _per_dim(i2h_dilate, dims, "i2h_dilate", name)
        self._h2h_kernel = _per_dim(h2h_kernel, dims, "h2h_kernel", name)
        self._h2h_dilate = _per_dim(h2h_dilate, dims, "h2h_dilate", name)
        if any(k % 2 == 0 for k in self._h2h_kernel):
            raise ValueError(f"{name}: h2h_kernel must be odd (the states keep their size), "
                             f"got {h2h_kernel!r}")
        self._h2h_pad = tuple(d * (k - 1) // 2 for d, k in zip(self._h2h_dilate, self._h2h_kernel))
        spatial = tuple(x + 2 * p - d * (k - 1) for x, k, p, d in
                        zip(shape[1:], self._i2h_kernel, self._i2h_pad, self._i2h_dilate))
        if any(s <= 0 for s in spatial):
            raise ValueError(f"{name}: the i2h convolution leaves no output for input_shape {input_shape!r}")
        self._state_shape = (self._hidden_channels, *spatial)
        rows = self._gates * self._hidden_channels

        def param(pname: str, pshape: tuple[int, ...], init: Any) -> Any:
            return self.params.get(pname, shape=pshape, init=init, allow_deferred_init=True)

        self.i2h_weight = param("i2h_weight", (rows, shape[0], *self._i2h_kernel), i2h_weight_initializer)
        self.h2h_weight = param("h2h_weight", (rows, self._hidden_channels, *self._h2h_kernel),
                                h2h_weight_initializer)
        self.i2h_bias = param("i2h_bias", (rows,), i2h_bias_initializer)
        self.h2h_bias = param("h2h_bias", (rows,), h2h_bias_initializer)

    def _alias(self) -> str:
        return f"conv_{self._kind}"

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        info = {"shape": (batch_size, *self._state_shape), "__layout__": self._conv_layout}
        return [dict(info) for _ in range(2 if self._kind == "lstm" else 1)]

    def _convolve(self, inputs: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        """The i2h and h2h convolutions of one step (the input channels known from the first input)."""
        if inputs.dim() != self._dims + 2:
            raise ValueError(f"{type(self).__name__} expects step inputs of shape (batch, channels, "
                             f"{self._dims} spatial sizes), got {tuple(inputs.shape)}")
        w = self.i2h_weight
        if w._data is None:
            w.infer_shape((self._gates * self._hidden_channels, inputs.shape[1], *self._i2h_kernel))
        conv = _CONVS[self._dims]
        i2h = conv(inputs, w.data(), self.i2h_bias.data(), padding=self._i2h_pad, dilation=self._i2h_dilate)
        h2h = conv(h, self.h2h_weight.data(), self.h2h_bias.data(), padding=self._h2h_pad,
                   dilation=self._h2h_dilate)
        return i2h, h2h

    def _project(self, F: Any, x: Any, h: Any, w: Weights, rows: int, prefix: str) -> tuple[Any, Any]:
        """The two convolutions as graph nodes (MXNet's names: ``<prefix>i2h``, ``<prefix>h2h``)."""
        i2h = F.Convolution(data=x, weight=w[0], bias=w[1], num_filter=rows, kernel=self._i2h_kernel,
                            pad=self._i2h_pad, dilate=self._i2h_dilate, name=prefix + "i2h")
        h2h = F.Convolution(data=h, weight=w[2], bias=w[3], num_filter=rows, kernel=self._h2h_kernel,
                            pad=self._h2h_pad, dilate=self._h2h_dilate, name=prefix + "h2h")
        return i2h, h2h

    def _graph_args(self) -> tuple[Weights, str]:
        weights = (self.i2h_weight.var(), self.i2h_bias.var(), self.h2h_weight.var(), self.h2h_bias.var())
        return weights, f"t{self._counter}_"

    def __repr__(self) -> str:
        shape = self.i2h_weight.shape or (0, 0)
        return (f"{type(self).__name__}({shape[1] or None} -> {shape[0]}, {self._activation}, "
                f"{self._conv_layout})")


class _ConvRNNCell(_ConvCell):
    """``h' = activation(conv_i2h(x) + conv_h2h(h))``; states ``[h]``."""

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        (h,) = _check_states(self, states, inputs.shape[0])
        i2h, h2h = self._convolve(inputs, h)
        out = self._act(i2h + h2h)
        return out, [out]


class _ConvLSTMCell(_ConvCell):
    """The LSTM step on feature maps (sigmoid gates, ``activation`` on the cell input and state);
    states ``[h, c]``."""

    _gates = 4
    _kind = "lstm"

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        h, c = _check_states(self, states, inputs.shape[0])
        i2h, h2h = self._convolve(inputs, h)
        gi, gf, gg, go = (i2h + h2h).chunk(4, dim=1)
        next_c = torch.sigmoid(gf) * c + torch.sigmoid(gi) * self._act(gg)
        next_h = torch.sigmoid(go) * self._act(next_c)
        return next_h, [next_h, next_c]


class _ConvGRUCell(_ConvCell):
    """The GRU step on feature maps: ``n = act(i_n + r * h_n)``, ``h' = (1 - z) * n + z * h``;
    states ``[h]``."""

    _gates = 3
    _kind = "gru"

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        (h,) = _check_states(self, states, inputs.shape[0])
        i2h, h2h = self._convolve(inputs, h)
        ir, iz, in_ = i2h.chunk(3, dim=1)
        hr, hz, hn = h2h.chunk(3, dim=1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        next_h = (1 - z) * self._act(in_ + r * hn) + z * h
        return next_h, [next_h]


@symbol_translation(_ConvRNNCell)
def _conv_rnn_graph(F: Any, cell: _ConvRNNCell, inputs: Any, states: Any) -> Any:
    w, prefix = cell._graph_args()
    return rnn_step(F, inputs, states, w, cell._hidden_channels, cell._activation, prefix, cell._project)


@symbol_translation(_ConvLSTMCell)
def _conv_lstm_graph(F: Any, cell: _ConvLSTMCell, inputs: Any, states: Any) -> Any:
    w, prefix = cell._graph_args()
    return lstm_step(F, inputs, states, w, cell._hidden_channels, cell._activation, "sigmoid", prefix,
                     cell._project)


@symbol_translation(_ConvGRUCell)
def _conv_gru_graph(F: Any, cell: _ConvGRUCell, inputs: Any, states: Any) -> Any:
    w, prefix = cell._graph_args()
    return gru_step(F, inputs, states, w, cell._hidden_channels, cell._activation, "sigmoid", prefix,
                    cell._project)


class Conv1DRNNCell(_ConvRNNCell):
    """1-D convolutional Elman cell (layout 'NCW')."""


class Conv2DRNNCell(_ConvRNNCell):
    """2-D convolutional Elman cell (layout 'NCHW')."""

    _dims = 2


class Conv3DRNNCell(_ConvRNNCell):
    """3-D convolutional Elman cell (layout 'NCDHW')."""

    _dims = 3


class Conv1DLSTMCell(_ConvLSTMCell):
    """1-D convolutional LSTM cell (layout 'NCW')."""


class Conv2DLSTMCell(_ConvLSTMCell):
    """2-D convolutional LSTM cell (layout 'NCHW')."""

    _dims = 2


class Conv3DLSTMCell(_ConvLSTMCell):
    """3-D convolutional LSTM cell (layout 'NCDHW')."""

    _dims = 3


class Conv1DGRUCell(_ConvGRUCell):
    """1-D convolutional GRU cell (layout 'NCW')."""


class Conv2DGRUCell(_ConvGRUCell):
    """2-D convolutional GRU cell (layout 'NCHW')."""

    _dims = 2


class Conv3DGRUCell(_ConvGRUCell):
    """3-D convolutional GRU cell (layout 'NCDHW')."""

    _dims = 3
