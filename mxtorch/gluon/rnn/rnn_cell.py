"""Recurrent cells: one time step at a time, with ``unroll`` to run them over a sequence.

A cell call ``cell(inputs, states)`` returns ``(output, new_states)``; ``states`` is a list of
tensors as given by ``cell.begin_state(batch_size)``.  Gate order and parameter names follow
MXNet (LSTM: input, forget, cell, output; GRU: reset, update, new), which is also torch's order.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..symbolic import symbol_translation
from ._sym_steps import gru_step, lstm_step, rnn_step
from .base_cell import HybridRecurrentCell, RecurrentCell, Tensor, _activation, _check_states
from .wrapper_cells import (
    BidirectionalCell,
    DropoutCell,
    HybridSequentialRNNCell,
    ModifierCell,
    ResidualCell,
    SequentialRNNCell,
    ZoneoutCell,
)

__all__ = [
    "RecurrentCell",
    "HybridRecurrentCell",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "LSTMPCell",
    "SequentialRNNCell",
    "HybridSequentialRNNCell",
    "DropoutCell",
    "ModifierCell",
    "ZoneoutCell",
    "ResidualCell",
    "BidirectionalCell",
]


class _GatedCell(HybridRecurrentCell):
    """Shared parameters of RNN/LSTM/GRU cells: i2h/h2h weights and biases.

    The keyword arguments are those of LSTMCell and GRUCell; ``recurrent_size`` is the width of
    the recurrent input (the projection size of LSTMPCell, else ``hidden_size``).
    """

    _gates = 1

    def __init__(
        self,
        hidden_size: int,
        i2h_weight_initializer: Any = None,
        h2h_weight_initializer: Any = None,
        i2h_bias_initializer: Any = "zeros",
        h2h_bias_initializer: Any = "zeros",
        input_size: int = 0,
        *,
        activation: Any = "tanh",
        recurrent_activation: Any = "sigmoid",
        dtype: Any = "float32",
        prefix: str | None = None,
        params: Any = None,
        recurrent_size: int | None = None,
    ) -> None:
        super().__init__(prefix, params)
        if int(hidden_size) <= 0:
            raise ValueError(
                f"{type(self).__name__}: hidden_size must be a positive int, got {hidden_size!r}"
            )
        if int(input_size) < 0:
            raise ValueError(f"{type(self).__name__}: input_size must be >= 0, got {input_size!r}")
        self._hidden_size = int(hidden_size)
        self._input_size = int(input_size)
        self._activation, self._recurrent_activation = activation, recurrent_activation
        self._act = _activation(activation)
        self._rec_act = _activation(recurrent_activation)
        rows = self._gates * self._hidden_size
        rec = self._hidden_size if recurrent_size is None else int(recurrent_size)

        def param(name: str, shape: tuple[int, ...], init: Any) -> Any:
            return self.params.get(name, shape=shape, dtype=dtype, init=init, allow_deferred_init=True)

        self.i2h_weight = param("i2h_weight", (rows, self._input_size), i2h_weight_initializer)
        self.h2h_weight = param("h2h_weight", (rows, rec), h2h_weight_initializer)
        self.i2h_bias = param("i2h_bias", (rows,), i2h_bias_initializer)
        self.h2h_bias = param("h2h_bias", (rows,), h2h_bias_initializer)

    @staticmethod
    def _nc_states(batch_size: int, *widths: int) -> list[dict[str, Any]]:
        """``state_info`` for states of shape (batch_size, width), one per width."""
        return [{"shape": (batch_size, w), "__layout__": "NC"} for w in widths]

    def _alias(self) -> str:
        return type(self).__name__.lower().replace("cell", "")

    def _weights(self, inputs: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        if inputs.dim() != 2:
            raise ValueError(
                f"{type(self).__name__} expects step inputs of shape (batch, features), got "
                f"{tuple(inputs.shape)}"
            )
        w = self.i2h_weight
        if w._data is None:
            w.infer_shape((self._gates * self._hidden_size, inputs.shape[-1]))
            self._input_size = inputs.shape[-1]
        elif w.shape is not None and w.shape[1] != inputs.shape[-1]:
            raise ValueError(
                f"{type(self).__name__}: inputs have {inputs.shape[-1]} features, but the cell was "
                f"built for input_size={w.shape[1]}"
            )
        return w.data(), self.h2h_weight.data(), self.i2h_bias.data(), self.h2h_bias.data()

    def __repr__(self) -> str:
        shape = self.i2h_weight.shape or (0, 0)
        return f"{type(self).__name__}({shape[1] if shape[1] > 0 else None} -> {self._hidden_size})"


# ---- concrete cells ------------------------------------------------------------------------
class RNNCell(_GatedCell):
    """Elman cell: ``h' = activation(W_i x + b_i + W_h h + b_h)``; states ``[h]``."""

    _gates = 1

    def __init__(
        self,
        hidden_size: int,
        activation: Any = "tanh",
        i2h_weight_initializer: Any = None,
        h2h_weight_initializer: Any = None,
        i2h_bias_initializer: Any = "zeros",
        h2h_bias_initializer: Any = "zeros",
        input_size: int = 0,
        *,
        dtype: Any = "float32",
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        super().__init__(
            hidden_size,
            i2h_weight_initializer,
            h2h_weight_initializer,
            i2h_bias_initializer,
            h2h_bias_initializer,
            input_size,
            activation=activation,
            dtype=dtype,
            prefix=prefix,
            params=params,
        )

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return self._nc_states(batch_size, self._hidden_size)

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        wi, wh, bi, bh = self._weights(inputs)
        (h,) = _check_states(self, states, inputs.shape[0])
        if self._activation == "tanh":
            out = torch.rnn_tanh_cell(inputs, h, wi, wh, bi, bh)
        elif self._activation == "relu":
            out = torch.rnn_relu_cell(inputs, h, wi, wh, bi, bh)
        else:
            out = self._act(F.linear(inputs, wi, bi) + F.linear(h, wh, bh))
        return out, [out]


class LSTMCell(_GatedCell):
    """LSTM cell; gates in MXNet order (input, forget, cell, output); states ``[h, c]``.

    Arguments: ``hidden_size``, the four initializers, ``input_size``; keyword-only
    ``activation`` ('tanh'), ``recurrent_activation`` ('sigmoid'), ``dtype``, ``prefix``, ``params``.
    """

    _gates = 4

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return self._nc_states(batch_size, self._hidden_size, self._hidden_size)

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        wi, wh, bi, bh = self._weights(inputs)
        h, c = _check_states(self, states, inputs.shape[0])
        if self._activation == "tanh" and self._recurrent_activation == "sigmoid":
            next_h, next_c = torch.lstm_cell(inputs, (h, c), wi, wh, bi, bh)
        else:
            gi, gf, gg, go = (F.linear(inputs, wi, bi) + F.linear(h, wh, bh)).chunk(4, dim=-1)
            next_c = self._rec_act(gf) * c + self._rec_act(gi) * self._act(gg)
            next_h = self._rec_act(go) * self._act(next_c)
        return next_h, [next_h, next_c]


class GRUCell(_GatedCell):
    """GRU cell; gates in MXNet order (reset, update, new); states ``[h]``.

    ``n = act(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``.
    Arguments as LSTMCell's.
    """

    _gates = 3

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return self._nc_states(batch_size, self._hidden_size)

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        wi, wh, bi, bh = self._weights(inputs)
        (h,) = _check_states(self, states, inputs.shape[0])
        if self._activation == "tanh" and self._recurrent_activation == "sigmoid":
            next_h = torch.gru_cell(inputs, h, wi, wh, bi, bh)
        else:
            ir, iz, in_ = F.linear(inputs, wi, bi).chunk(3, dim=-1)
            hr, hz, hn = F.linear(h, wh, bh).chunk(3, dim=-1)
            r = self._rec_act(ir + hr)
            z = self._rec_act(iz + hz)
            n = self._act(in_ + r * hn)
            next_h = (1 - z) * n + z * h
        return next_h, [next_h]


class LSTMPCell(_GatedCell):
    """LSTM cell with a projected recurrent state: ``r = W_r (o * tanh(c))``; states ``[r, c]``.

    ``h2h_weight`` has shape (4 * hidden_size, projection_size) and ``h2r_weight``
    (projection_size, hidden_size); the output is ``r``.
    """

    _gates = 4

    def __init__(
        self,
        hidden_size: int,
        projection_size: int,
        i2h_weight_initializer: Any = None,
        h2h_weight_initializer: Any = None,
        h2r_weight_initializer: Any = None,
        i2h_bias_initializer: Any = "zeros",
        h2h_bias_initializer: Any = "zeros",
        input_size: int = 0,
        *,
        dtype: Any = "float32",
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        if int(projection_size) <= 0:
            raise ValueError(f"LSTMPCell: projection_size must be a positive int, got {projection_size!r}")
        super().__init__(
            hidden_size,
            i2h_weight_initializer,
            h2h_weight_initializer,
            i2h_bias_initializer,
            h2h_bias_initializer,
            input_size,
            dtype=dtype,
            prefix=prefix,
            params=params,
            recurrent_size=int(projection_size),
        )
        self._projection_size = int(projection_size)
        self.h2r_weight = self.params.get(
            "h2r_weight",
            shape=(self._projection_size, self._hidden_size),
            dtype=dtype,
            init=h2r_weight_initializer,
            allow_deferred_init=True,
        )

    def _alias(self) -> str:
        return "lstmp"

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return self._nc_states(batch_size, self._projection_size, self._hidden_size)

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        wi, wh, bi, bh = self._weights(inputs)
        r, c = _check_states(self, states, inputs.shape[0])
        gi, gf, gg, go = (F.linear(inputs, wi, bi) + F.linear(r, wh, bh)).chunk(4, dim=-1)
        next_c = torch.sigmoid(gf) * c + torch.sigmoid(gi) * torch.tanh(gg)
        next_r = F.linear(torch.sigmoid(go) * torch.tanh(next_c), self.h2r_weight.data())
        return next_r, [next_r, next_c]

    def __repr__(self) -> str:
        shape = self.i2h_weight.shape or (0, 0)
        return (
            f"LSTMPCell({shape[1] if shape[1] > 0 else None} -> {self._hidden_size} -> "
            f"{self._projection_size})"
        )


# ---- graphs: the cells called with symbols (MXNet's node names, '<prefix>t<step>_out') -------
def _weight_vars(cell: _GatedCell) -> tuple[Any, Any, Any, Any]:
    return (cell.i2h_weight.var(), cell.i2h_bias.var(), cell.h2h_weight.var(), cell.h2h_bias.var())


@symbol_translation(RNNCell)
def _rnn_cell_graph(F: Any, cell: RNNCell, inputs: Any, states: Any) -> Any:
    return rnn_step(F, inputs, states, _weight_vars(cell), cell._hidden_size, cell._activation,
                    f"t{cell._counter}_")


@symbol_translation(LSTMCell)
def _lstm_cell_graph(F: Any, cell: LSTMCell, inputs: Any, states: Any) -> Any:
    return lstm_step(F, inputs, states, _weight_vars(cell), cell._hidden_size, cell._activation,
                     cell._recurrent_activation, f"t{cell._counter}_")


@symbol_translation(GRUCell)
def _gru_cell_graph(F: Any, cell: GRUCell, inputs: Any, states: Any) -> Any:
    return gru_step(F, inputs, states, _weight_vars(cell), cell._hidden_size, cell._activation,
                    cell._recurrent_activation, f"t{cell._counter}_")


@symbol_translation(LSTMPCell)
def _lstmp_cell_graph(F: Any, cell: LSTMPCell, inputs: Any, states: Any) -> Any:
    prefix = f"t{cell._counter}_"
    hidden, (_, next_c) = lstm_step(F, inputs, states, _weight_vars(cell), cell._hidden_size, "tanh",
                                    "sigmoid", prefix, out_name="hidden")
    next_r = F.FullyConnected(data=hidden, weight=cell.h2r_weight.var(), no_bias=True,
                              num_hidden=cell._projection_size, name=prefix + "out")
    return next_r, [next_r, next_c]
