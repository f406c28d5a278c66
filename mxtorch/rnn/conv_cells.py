"""Convolutional recurrent cells (``mx.rnn.ConvRNNCell``, ``ConvLSTMCell``, ``ConvGRUCell``): the
i2h and h2h projections are convolutions (Shi et al., "Convolutional LSTM Network", 2015), so
the states are feature maps whose shape follows from ``input_shape`` and the i2h convolution."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from .. import symbol as sym
from ..base import MXNetError
from .rnn_cell import BaseRNNCell, RNNParams, Symbol

__all__ = ["BaseConvRNNCell", "ConvRNNCell", "ConvLSTMCell", "ConvGRUCell"]

_LEAKY = functools.partial(sym.LeakyReLU, act_type="leaky", slope=0.2)


class BaseConvRNNCell(BaseRNNCell):
    """Shared parts of the convolutional cells: the weights, the state shape and the two
    convolutions.  ``h2h_kernel`` must be odd (the h2h convolution keeps the state's size)."""

    _gates = 1

    def __init__(self, input_shape: Sequence[int], num_hidden: int, h2h_kernel: Sequence[int],
                 h2h_dilate: Sequence[int], i2h_kernel: Sequence[int], i2h_stride: Sequence[int],
                 i2h_pad: Sequence[int], i2h_dilate: Sequence[int], i2h_weight_initializer: Any,
                 h2h_weight_initializer: Any, i2h_bias_initializer: Any, h2h_bias_initializer: Any,
                 activation: Any, prefix: str = "", params: RNNParams | None = None,
                 conv_layout: str = "NCHW") -> None:
        super().__init__(prefix=prefix, params=params)
        if any(int(k) % 2 != 1 for k in h2h_kernel):
            raise MXNetError(f"{type(self).__name__}: h2h_kernel must be odd in every dimension, got "
                             f"{tuple(h2h_kernel)}")
        self._num_hidden = int(num_hidden)
        self._input_shape = tuple(int(s) for s in input_shape)
        self._conv_layout = conv_layout
        self._activation = activation
        self._i2h = {"kernel": tuple(i2h_kernel), "stride": tuple(i2h_stride), "pad": tuple(i2h_pad),
                     "dilate": tuple(i2h_dilate)}
        self._h2h = {"kernel": tuple(h2h_kernel), "dilate": tuple(h2h_dilate),
                     "pad": tuple(d * (k - 1) // 2 for d, k in zip(h2h_dilate, h2h_kernel)),
                     "stride": (1,) * len(h2h_kernel)}
        data = sym.Variable("data")
        shape = sym.Convolution(data=data, num_filter=self._num_hidden, layout=conv_layout,
                                **self._i2h).infer_shape(data=self._input_shape)[1][0]
        self._state_shape = (0, *shape[1:])
        self._iW = self.params.get("i2h_weight", init=i2h_weight_initializer)
        self._hW = self.params.get("h2h_weight", init=h2h_weight_initializer)
        self._iB = self.params.get("i2h_bias", init=i2h_bias_initializer)
        self._hB = self.params.get("h2h_bias", init=h2h_bias_initializer)

    @property
    def _num_states(self) -> int:
        return 1

    @property
    def state_info(self) -> list[dict[str, Any]]:
        return [{"shape": self._state_shape, "__layout__": self._conv_layout}] * self._num_states

    def _conv_forward(self, inputs: Symbol, states: list[Symbol], name: str) -> tuple[Symbol, Symbol]:
        filters = self._num_hidden * self._gates
        i2h = sym.Convolution(name=f"{name}i2h", data=inputs, num_filter=filters, weight=self._iW,
                              bias=self._iB, layout=self._conv_layout, **self._i2h)
        h2h = sym.Convolution(name=f"{name}h2h", data=states[0], num_filter=filters, weight=self._hW,
                              bias=self._hB, layout=self._conv_layout, **self._h2h)
        return i2h, h2h

    def _slice(self, x: Symbol, n: int, name: str) -> Symbol:
        return sym.SliceChannel(x, num_outputs=n, axis=self._conv_layout.find("C"), name=name)


def _defaults(kw: dict[str, Any]) -> dict[str, Any]:
    return {"h2h_kernel": (3, 3), "h2h_dilate": (1, 1), "i2h_kernel": (3, 3), "i2h_stride": (1, 1),
            "i2h_pad": (1, 1), "i2h_dilate": (1, 1), "i2h_weight_initializer": None,
            "h2h_weight_initializer": None, "i2h_bias_initializer": "zeros",
            "h2h_bias_initializer": "zeros", "activation": _LEAKY, "params": None,
            "conv_layout": "NCHW", **kw}


class ConvRNNCell(BaseConvRNNCell):
    """``out = activation(conv_i(x) + conv_h(h))``; states ``[out]``.  Keywords as MXNet's:
    ``h2h_kernel``, ``h2h_dilate``, ``i2h_kernel``, ``i2h_stride``, ``i2h_pad``, ``i2h_dilate``,
    the four initializers, ``activation`` (default leaky ReLU, slope 0.2), ``prefix``, ``params``,
    ``conv_layout``."""

    def __init__(self, input_shape: Sequence[int], num_hidden: int, prefix: str = "ConvRNN_",
                 **kwargs: Any) -> None:
        super().__init__(input_shape, num_hidden, prefix=prefix, **_defaults(kwargs))

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        name = self._step_name()
        i2h, h2h = self._conv_forward(inputs, states, name)
        output = self._get_activation(i2h + h2h, self._activation, name=f"{name}out")
        return output, [output]


class ConvLSTMCell(BaseConvRNNCell):
    """Convolutional LSTM (gates input, forget, cell, output along the channel axis); states
    ``[h, c]``.  Keywords as :class:`ConvRNNCell`'s."""

    _gates = 4

    def __init__(self, input_shape: Sequence[int], num_hidden: int, prefix: str = "ConvLSTM_",
                 **kwargs: Any) -> None:
        super().__init__(input_shape, num_hidden, prefix=prefix, **_defaults(kwargs))

    @property
    def _num_states(self) -> int:
        return 2

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        name = self._step_name()
        i2h, h2h = self._conv_forward(inputs, states, name)
        gates = self._slice(i2h + h2h, 4, f"{name}slice")
        in_gate = sym.Activation(gates[0], act_type="sigmoid", name=f"{name}i")
        forget_gate = sym.Activation(gates[1], act_type="sigmoid", name=f"{name}f")
        in_transform = self._get_activation(gates[2], self._activation, name=f"{name}c")
        out_gate = sym.Activation(gates[3], act_type="sigmoid", name=f"{name}o")
        next_c = sym.elemwise_add(forget_gate * states[1], in_gate * in_transform, name=f"{name}state")
        next_h = sym.elemwise_mul(out_gate, self._get_activation(next_c, self._activation), name=f"{name}out")
        return next_h, [next_h, next_c]


class ConvGRUCell(BaseConvRNNCell):
    """Convolutional GRU (gates reset, update, new along the channel axis); states ``[h]``.
    Keywords as :class:`ConvRNNCell`'s."""

    _gates = 3

    def __init__(self, input_shape: Sequence[int], num_hidden: int, prefix: str = "ConvGRU_",
                 **kwargs: Any) -> None:
        super().__init__(input_shape, num_hidden, prefix=prefix, **_defaults(kwargs))

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        name = self._step_name()
        i2h, h2h = self._conv_forward(inputs, states, name)
        i_r, i_z, i_n = self._slice(i2h, 3, f"{name}_i2h_slice")
        h_r, h_z, h_n = self._slice(h2h, 3, f"{name}_h2h_slice")
        reset = sym.Activation(i_r + h_r, act_type="sigmoid", name=f"{name}_r_act")
        update = sym.Activation(i_z + h_z, act_type="sigmoid", name=f"{name}_z_act")
        new = self._get_activation(i_n + reset * h_n, self._activation, name=f"{name}_h_act")
        next_h = sym.elemwise_add((1.0 - update) * new, update * states[0], name=f"{name}out")
        return next_h, [next_h]
