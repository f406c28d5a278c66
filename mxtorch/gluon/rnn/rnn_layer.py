"""Fused recurrent layers RNN, LSTM and GRU, run by torch's fused kernels (cuDNN on GPU).

Parameters are named as in MXNet: ``l0_i2h_weight``, ``l0_h2h_weight``, ``l0_i2h_bias``,
``l0_h2h_bias`` (``r0_...`` for the reverse direction, ``l0_h2r_weight`` for LSTM projection).
MXNet's gate orders (LSTM: input, forget, cell, output; GRU: reset, update, new) are torch's,
so the weights go to the kernel unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
from torch import _VF
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from ... import autograd
from ...base import MXNetError
from ...nd._nn import rnn_sequence_lengths
from ..block import HybridBlock
from ..parameter_core import Parameter
from ..symbolic import symbol_translation
from .base_cell import _check_states, create_state

__all__ = ["RNN", "LSTM", "GRU"]

Tensor = torch.Tensor
_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


class _RNNLayer(HybridBlock):
    """Shared implementation of the fused recurrent layers."""

    def __init__(
        self,
        mode: str,
        hidden_size: int,
        num_layers: int,
        layout: str,
        dropout: float,
        bidirectional: bool,
        input_size: int,
        i2h_weight_initializer: Any,
        h2h_weight_initializer: Any,
        i2h_bias_initializer: Any,
        h2h_bias_initializer: Any,
        dtype: Any,
        projection_size: int | None = None,
        h2r_weight_initializer: Any = None,
        state_clip_min: float | None = None,
        state_clip_max: float | None = None,
        state_clip_nan: bool = False,
        use_sequence_length: bool = False,
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        super().__init__(prefix, params)
        name = type(self).__name__
        if int(hidden_size) <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        if int(num_layers) <= 0:
            raise ValueError(f"{name}: num_layers must be a positive int, got {num_layers!r}")
        if layout not in ("TNC", "NTC"):
            raise ValueError(f"{name}: layout must be 'TNC' or 'NTC', got {layout!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"{name}: dropout must be in [0, 1), got {dropout!r}")
        if int(input_size) < 0:
            raise ValueError(f"{name}: input_size must be >= 0, got {input_size!r}")
        if projection_size is not None and int(projection_size) <= 0:
            raise ValueError(
                f"{name}: projection_size must be a positive int or None, got {projection_size!r}"
            )
        if (state_clip_min is None) != (state_clip_max is None):
            raise ValueError(f"{name}: give both state_clip_min and state_clip_max, or neither")
        if state_clip_min is not None and float(state_clip_min) > float(state_clip_max):  # type: ignore[arg-type]
            raise ValueError(f"{name}: state_clip_min ({state_clip_min}) > state_clip_max ({state_clip_max})")
        self._mode = mode
        self._hidden_size = int(hidden_size)
        self._projection_size = int(projection_size) if projection_size is not None else None
        self._num_layers = int(num_layers)
        self._layout = layout
        self._dropout = float(dropout)
        self._dir = 2 if bidirectional else 1
        self._input_size = int(input_size)
        self._gates = _GATES[mode]
        self._dtype = dtype
        self._clip = None if state_clip_min is None else (float(state_clip_min), float(state_clip_max))  # type: ignore[arg-type]
        self._clip_nan = bool(state_clip_nan)
        self._use_sequence_length = bool(use_sequence_length)

        rows = self._gates * self._hidden_size
        out_size = self._projection_size or self._hidden_size
        names: list[str] = []
        ni = self._input_size
        for i in range(self._num_layers):
            for d in ("l", "r")[: self._dir]:
                specs: list[tuple[str, tuple[int, ...], Any]] = [
                    ("i2h_weight", (rows, ni), i2h_weight_initializer),
                    ("h2h_weight", (rows, out_size), h2h_weight_initializer),
                    ("i2h_bias", (rows,), i2h_bias_initializer),
                    ("h2h_bias", (rows,), h2h_bias_initializer),
                ]
                if self._projection_size is not None:
                    specs.append(
                        ("h2r_weight", (self._projection_size, self._hidden_size), h2r_weight_initializer)
                    )
                for pname, shape, init in specs:
                    full = f"{d}{i}_{pname}"
                    setattr(
                        self,
                        full,
                        self.params.get(full, shape=shape, dtype=dtype, init=init, allow_deferred_init=True),
                    )
                    names.append(full)
            ni = out_size * self._dir
        self._flat_names = names

    def _param(self, name: str) -> Parameter:
        params: dict[str, Parameter] = self.__dict__["_gluon_params"]
        return params[name]

    # ---- states ------------------------------------------------------------------------
    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        """Shapes of the states: (num_layers * directions, batch, size), layout 'LNC'."""
        n = self._num_layers * self._dir
        out = [
            {
                "shape": (n, batch_size, self._projection_size or self._hidden_size),
                "__layout__": "LNC",
                "dtype": self._dtype,
            }
        ]
        if self._mode == "lstm":
            out.append(
                {"shape": (n, batch_size, self._hidden_size), "__layout__": "LNC", "dtype": self._dtype}
            )
        return out

    def begin_state(
        self, batch_size: int = 0, func: Callable[..., Tensor] = torch.zeros, **kwargs: Any
    ) -> list[Tensor]:
        """Initial states made by ``func`` (default zeros); ``kwargs`` (ctx, dtype, ...) go to ``func``."""
        return [
            create_state(func, tuple(info["shape"]), kwargs, info["dtype"])
            for info in self.state_info(batch_size)
        ]

    def infer_shape(self, inputs: Any, *args: Any) -> None:
        """The first layer's input size from ``inputs`` (MXNet 1.x's ``layer.infer_shape(x, states)``
        fills the parameters' unknown shapes before they are set or initialized)."""
        if len(getattr(inputs, "shape", ())) != 3:
            raise ValueError(
                f"{type(self).__name__} expects a 3-d input in layout {self._layout}, got "
                f"{type(inputs).__name__} of shape {tuple(getattr(inputs, 'shape', ()))}"
            )
        self._infer_input_size(int(inputs.shape[2]))

    def _unfuse(self) -> Any:
        """This layer as a stack of cells sharing its parameters (MXNet 1.x's ``layer._unfuse()``):
        one cell per layer (a BidirectionalCell of two when bidirectional), DropoutCells between
        layers when ``dropout`` > 0; names are the layer's (``lstm0_l0_i2h_weight``)."""
        from .rnn_cell import GRUCell, LSTMCell, RNNCell
        from .wrapper_cells import BidirectionalCell, DropoutCell, HybridSequentialRNNCell

        if self._projection_size is not None:
            raise MXNetError(f"{type(self).__name__}._unfuse: a layer with projection_size has no cell form")
        if self._clip is not None:
            raise MXNetError(f"{type(self).__name__}._unfuse: a layer with state clipping has no cell form")
        if self._mode == "lstm":
            make: Callable[..., Any] = LSTMCell
        elif self._mode == "gru":
            make = GRUCell
        else:
            act = "relu" if self._mode == "rnn_relu" else "tanh"

            def make(hidden: int, **kw: Any) -> Any:
                return RNNCell(hidden, act, **kw)

        stack = HybridSequentialRNNCell(prefix=self.prefix, params=self.params)
        with stack.name_scope():
            ni = self._input_size
            for i in range(self._num_layers):
                kw = {"input_size": ni, "dtype": self._dtype}
                if self._dir == 2:
                    stack.add(BidirectionalCell(make(self._hidden_size, prefix=f"l{i}_", **kw),
                                                make(self._hidden_size, prefix=f"r{i}_", **kw)))
                else:
                    stack.add(make(self._hidden_size, prefix=f"l{i}_", **kw))
                if self._dropout > 0 and i != self._num_layers - 1:
                    stack.add(DropoutCell(self._dropout))
                ni = self._hidden_size * self._dir
        return stack

    # ---- forward -----------------------------------------------------------------------
    def _infer_input_size(self, in_size: int) -> None:
        first = self._param("l0_i2h_weight")
        if first._data is None and first.shape is not None and first.shape[1] == 0:
            for d in ("l", "r")[: self._dir]:
                p = self._param(f"{d}0_i2h_weight")
                p.infer_shape((self._gates * self._hidden_size, in_size))
            self._input_size = in_size
        elif first.shape is not None and first.shape[1] not in (0, in_size):
            raise ValueError(
                f"{type(self).__name__}: inputs have {in_size} features, but the layer was built "
                f"for input_size={first.shape[1]}"
            )

    def forward(
        self, inputs: Tensor, states: Any = None, sequence_length: Any = None
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """``layer(x)`` returns the outputs; ``layer(x, states)`` returns ``(outputs, new_states)``.

        ``sequence_length`` (one length per sample) runs each sample over its own length:
        outputs past it are zero and the returned states are those of its last valid step.
        """
        if not isinstance(inputs, Tensor) or inputs.dim() != 3:
            raise ValueError(
                f"{type(self).__name__} expects a 3-d input in layout {self._layout}, got "
                f"{tuple(inputs.shape) if isinstance(inputs, Tensor) else type(inputs).__name__}"
            )
        if self._use_sequence_length and sequence_length is None:
            raise MXNetError(
                f"{type(self).__name__} was built with use_sequence_length=True: pass sequence_length"
            )
        batch_size = inputs.shape[self._layout.find("N")]
        skip_states = states is None
        if skip_states:
            states = self.begin_state(batch_size, device=inputs.device, dtype=inputs.dtype)
        else:
            states = _check_states(self, states, batch_size)
        self._infer_input_size(inputs.shape[2])
        weights: list[Tensor] = [self._param(n).data() for n in self._flat_names]
        if self._clip is not None:
            out, new_states = self._forward_clipped(inputs, states, weights, sequence_length)
        else:
            out, new_states = self._forward_fused(inputs, states, weights, sequence_length)
        return out if skip_states else (out, new_states)

    def _call_kernel(
        self, args: tuple[Any, ...], hx: Any, weights: list[Tensor], train: bool, batch_first: bool | None
    ) -> tuple[Tensor, ...]:
        fn = getattr(_VF, self._mode)
        common = (weights, True, self._num_layers, self._dropout, train, self._dir == 2)
        if batch_first is None:  # packed call: (data, batch_sizes, hx, ...)
            return fn(args[0], args[1], hx, *common)  # type: ignore[no-any-return]
        return fn(args[0], hx, *common, batch_first)  # type: ignore[no-any-return]

    def _forward_fused(
        self, x: Tensor, states: list[Tensor], weights: list[Tensor], sequence_length: Any
    ) -> tuple[Tensor, list[Tensor]]:
        train = autograd.is_training()
        batch_first = self._layout == "NTC"
        lstm = self._mode == "lstm"
        if sequence_length is None:
            hx = (states[0], states[1]) if lstm else states[0]
            res = self._call_kernel((x,), hx, weights, train, batch_first)
            return res[0], list(res[1:])
        lengths = _lengths(
            sequence_length, x.shape[1 if batch_first else 0], x.shape[0 if batch_first else 1]
        )
        packed = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=False)
        order, unorder = packed.sorted_indices, packed.unsorted_indices
        if order is None or unorder is None:  # only with enforce_sorted=True
            order = unorder = torch.arange(x.shape[0 if batch_first else 1], device=x.device)
        hs = [s.index_select(1, order) for s in states]
        hx = (hs[0], hs[1]) if lstm else hs[0]
        res = self._call_kernel((packed.data, packed.batch_sizes), hx, weights, train, None)
        out, _ = pad_packed_sequence(
            PackedSequence(res[0], packed.batch_sizes, order, unorder),
            batch_first=batch_first,
            total_length=x.shape[1 if batch_first else 0],
        )
        return out, [s.index_select(1, unorder) for s in res[1:]]

    def _forward_clipped(
        self, x: Tensor, states: list[Tensor], weights: list[Tensor], sequence_length: Any
    ) -> tuple[Tensor, list[Tensor]]:
        """LSTM with the cell state clipped after every step (no fused kernel does this: steps in Python)."""
        lo, hi = self._clip or (float("-inf"), float("inf"))
        seq = x if self._layout == "TNC" else x.transpose(0, 1)
        steps, batch = seq.shape[0], seq.shape[1]
        mask = None
        if sequence_length is not None:
            vl = _lengths(sequence_length, steps, batch).to(x.device)
            mask = (torch.arange(steps, device=x.device)[:, None] < vl[None, :]).unsqueeze(-1)  # (T, N, 1)
        per = 5 if self._projection_size is not None else 4
        train = autograd.is_training()
        h_out: list[Tensor] = []
        c_out: list[Tensor] = []
        layer_in = seq
        for layer in range(self._num_layers):
            outs = []
            for d in range(self._dir):
                k = layer * self._dir + d
                w = weights[k * per : (k + 1) * per]
                h, c = states[0][k], states[1][k]
                gates_x = torch.nn.functional.linear(layer_in, w[0], w[2])  # (T, N, 4H)
                ys: list[Tensor] = [torch.empty(0)] * steps
                order = range(steps) if d == 0 else range(steps - 1, -1, -1)
                for t in order:
                    gi, gf, gg, go = (gates_x[t] + torch.nn.functional.linear(h, w[1], w[3])).chunk(4, dim=-1)
                    c_new = torch.sigmoid(gf) * c + torch.sigmoid(gi) * torch.tanh(gg)
                    if self._clip_nan:
                        c_new = torch.nan_to_num(c_new, nan=lo, posinf=hi, neginf=lo)
                    c_new = c_new.clamp(lo, hi)
                    h_new = torch.sigmoid(go) * torch.tanh(c_new)
                    if per == 5:
                        h_new = torch.nn.functional.linear(h_new, w[4])
                    if mask is not None:
                        m = mask[t]
                        h = torch.where(m, h_new, h)
                        c = torch.where(m, c_new, c)
                        ys[t] = h_new * m.to(h_new.dtype)
                    else:
                        h, c = h_new, c_new
                        ys[t] = h_new
                outs.append(torch.stack(ys, 0))
                h_out.append(h)
                c_out.append(c)
            layer_in = torch.cat(outs, dim=-1) if self._dir == 2 else outs[0]
            if train and self._dropout > 0.0 and layer < self._num_layers - 1:
                layer_in = torch.nn.functional.dropout(layer_in, self._dropout, training=True)
        out = layer_in if self._layout == "TNC" else layer_in.transpose(0, 1).contiguous()
        return out, [torch.stack(h_out, 0), torch.stack(c_out, 0)]

    def __repr__(self) -> str:
        shape = self._param("l0_i2h_weight").shape
        in_size = shape[1] if shape else 0
        s = f"{type(self).__name__}({in_size or None} -> {self._hidden_size}, {self._layout}"
        if self._num_layers != 1:
            s += f", num_layers={self._num_layers}"
        if self._dropout:
            s += f", dropout={self._dropout}"
        if self._dir == 2:
            s += ", bidirectional"
        return s + ")"


def _lengths(sequence_length: Any, steps: int, batch: int) -> Tensor:
    return rnn_sequence_lengths(sequence_length, steps, batch, 1, "rnn layer")


@symbol_translation(_RNNLayer)
def _rnn_graph(F: ModuleType, b: _RNNLayer, x: Any, states: Any = None, sequence_length: Any = None) -> Any:
    # MXNet's _RNNLayer graph: parameters flattened in MXNet's order into one vector (an LSTM's
    # projection h2r weights after each h2h, no bias), the fused RNN operator with MXNet 1.9's
    # arguments, zero initial states shaped like the batch when none are given
    if b._use_sequence_length and sequence_length is None:
        raise MXNetError(f"{type(b).__name__} was built with use_sequence_length=True: pass sequence_length")
    if b._layout == "NTC":
        x = F.swapaxes(x, dim1=0, dim2=1)
    gates = ("i2h", "h2h", "h2r") if b._projection_size is not None else ("i2h", "h2h")
    order = [
        f"{d}{i}_{g}_{t}"
        for t in ("weight", "bias")
        for i in range(b._num_layers)
        for d in ("l", "r")[: b._dir]
        for g in gates
        if not (g == "h2r" and t == "bias")
    ]
    flat = F.Concat(*[F.reshape(b._param(n).var(), shape=(-1,)) for n in order], dim=0)
    skip = states is None
    if skip:
        n = b._num_layers * b._dir
        sizes = [b._projection_size or b._hidden_size] + ([b._hidden_size] if b._mode == "lstm" else [])
        states = [
            F.broadcast_like(F.zeros(shape=(n, 1, size)), x, lhs_axes=(1,), rhs_axes=(1,)) for size in sizes
        ]
    elif isinstance(states, F.Symbol):
        states = [states]
    extra = [sequence_length] if b._use_sequence_length else []
    lo, hi = b._clip if b._clip is not None else (None, None)
    rnn = F.RNN(x, flat, *states, *extra, state_size=b._hidden_size, num_layers=b._num_layers,
                bidirectional=b._dir == 2, p=b._dropout, state_outputs=True, mode=b._mode,
                projection_size=b._projection_size, lstm_state_clip_min=lo, lstm_state_clip_max=hi,
                lstm_state_clip_nan=b._clip_nan, use_sequence_length=b._use_sequence_length)
    out = rnn[0]
    if b._layout == "NTC":
        out = F.swapaxes(out, dim1=0, dim2=1)
    new_states = [rnn[1], rnn[2]] if b._mode == "lstm" else [rnn[1]]
    return out if skip else (out, new_states)


class RNN(_RNNLayer):
    """Multi-layer Elman RNN: ``h_t = activation(W_i x_t + b_i + W_h h_{t-1} + b_h)``.

    ``activation`` is 'relu' (default) or 'tanh'.  Input shape (T, N, C) for layout 'TNC'
    or (N, T, C) for 'NTC'; outputs have ``hidden_size * directions`` features.  States:
    ``[h]`` of shape (num_layers * directions, N, hidden_size).
    """

    def __init__(
        self,
        hidden_size: int,
        num_layers: int = 1,
        activation: str = "relu",
        layout: str = "TNC",
        dropout: float = 0,
        bidirectional: bool = False,
        i2h_weight_initializer: Any = None,
        h2h_weight_initializer: Any = None,
        i2h_bias_initializer: Any = "zeros",
        h2h_bias_initializer: Any = "zeros",
        input_size: int = 0,
        dtype: Any = "float32",
        *,
        use_sequence_length: bool = False,
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        if activation not in ("relu", "tanh"):
            raise ValueError(f"RNN: activation must be 'relu' or 'tanh', got {activation!r}")
        super().__init__(
            "rnn_" + activation,
            hidden_size,
            num_layers,
            layout,
            dropout,
            bidirectional,
            input_size,
            i2h_weight_initializer,
            h2h_weight_initializer,
            i2h_bias_initializer,
            h2h_bias_initializer,
            dtype,
            use_sequence_length=use_sequence_length,
            prefix=prefix,
            params=params,
        )
        self._activation = activation


class LSTM(_RNNLayer):
    """Multi-layer LSTM (gates: input, forget, cell, output).  States: ``[h, c]``.

    ``projection_size`` adds a projection of the hidden state (``l*_h2r_weight``), making
    ``h`` and the outputs that size.  ``state_clip_min``/``state_clip_max`` clip the cell state
    after every step (``state_clip_nan=True`` also maps NaN to the bounds); clipping runs the
    steps in Python, as no fused kernel supports it.
    """

    def __init__(
        self,
        hidden_size: int,
        num_layers: int = 1,
        layout: str = "TNC",
        dropout: float = 0,
        bidirectional: bool = False,
        input_size: int = 0,
        i2h_weight_initializer: Any = None,
        h2h_weight_initializer: Any = None,
        i2h_bias_initializer: Any = "zeros",
        h2h_bias_initializer: Any = "zeros",
        projection_size: int | None = None,
        h2r_weight_initializer: Any = None,
        state_clip_min: float | None = None,
        state_clip_max: float | None = None,
        state_clip_nan: bool = False,
        dtype: Any = "float32",
        *,
        use_sequence_length: bool = False,
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        super().__init__(
            "lstm",
            hidden_size,
            num_layers,
            layout,
            dropout,
            bidirectional,
            input_size,
            i2h_weight_initializer,
            h2h_weight_initializer,
            i2h_bias_initializer,
            h2h_bias_initializer,
            dtype,
            projection_size=projection_size,
            h2r_weight_initializer=h2r_weight_initializer,
            state_clip_min=state_clip_min,
            state_clip_max=state_clip_max,
            state_clip_nan=state_clip_nan,
            use_sequence_length=use_sequence_length,
            prefix=prefix,
            params=params,
        )


class GRU(_RNNLayer):
    """Multi-layer GRU (gates: reset, update, new).  States: ``[h]``.

    ``n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))``, ``h_t = (1 - z_t) n_t + z_t h_{t-1}``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_layers: int = 1,
        layout: str = "TNC",
        dropout: float = 0,
        bidirectional: bool = False,
        input_size: int = 0,
        i2h_weight_initializer: Any = None,
        h2h_weight_initializer: Any = None,
        i2h_bias_initializer: Any = "zeros",
        h2h_bias_initializer: Any = "zeros",
        dtype: Any = "float32",
        *,
        use_sequence_length: bool = False,
        prefix: str | None = None,
        params: Any = None,
    ) -> None:
        super().__init__(
            "gru",
            hidden_size,
            num_layers,
            layout,
            dropout,
            bidirectional,
            input_size,
            i2h_weight_initializer,
            h2h_weight_initializer,
            i2h_bias_initializer,
            h2h_bias_initializer,
            dtype,
            use_sequence_length=use_sequence_length,
            prefix=prefix,
            params=params,
        )
