"""``mx.rnn.FusedRNNCell``: a whole recurrent stack as one fused ``RNN`` operator, and its
unfused equivalent (a stack of cells with the same names)."""

from __future__ import annotations

import math
from typing import Any

import torch

from .. import initializer as init
from .. import symbol as sym
from ..base import MXNetError
from .rnn_cell import BaseRNNCell, GRUCell, LSTMCell, RNNCell, RNNParams, Symbol, normalize_sequence
from .wrappers import BidirectionalCell, DropoutCell, SequentialRNNCell

__all__ = ["FusedRNNCell"]


class FusedRNNCell(BaseRNNCell):
    """A whole stack in one fused ``RNN`` operator (one ``<prefix>parameters`` vector); it can
    only be unrolled.  :meth:`unfuse` gives the equivalent stack of cells."""

    _steppable = False

    def __init__(self, num_hidden: int, num_layers: int = 1, mode: str = "lstm", bidirectional: bool = False,
                 dropout: float = 0.0, get_next_state: bool = False, forget_bias: float = 1.0,
                 prefix: str | None = None, params: RNNParams | None = None) -> None:
        if mode not in ("rnn_relu", "rnn_tanh", "lstm", "gru"):
            raise ValueError(f"FusedRNNCell: mode must be rnn_relu, rnn_tanh, lstm or gru, got {mode!r}")
        super().__init__(prefix=f"{mode}_" if prefix is None else prefix, params=params)
        self._num_hidden, self._num_layers = int(num_hidden), int(num_layers)
        self._mode, self._bidirectional = mode, bool(bidirectional)
        self._dropout, self._get_next_state = float(dropout), bool(get_next_state)
        self._directions = ["l", "r"] if bidirectional else ["l"]
        self._parameter = self.params.get("parameters", init=init.FusedRNN(
            None, num_hidden, num_layers, mode, bidirectional, forget_bias))

    @property
    def state_info(self) -> list[dict[str, Any]]:
        b = len(self._directions) * self._num_layers
        n = 2 if self._mode == "lstm" else 1
        return [{"shape": (b, 0, self._num_hidden), "__layout__": "LNC"} for _ in range(n)]

    def unroll(self, length: int, inputs: Any, begin_state: list[Symbol] | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list[Symbol]]:
        self.reset()
        seq, axis = normalize_sequence(length, inputs, layout, True)
        if axis == 1:  # the operator takes TNC
            seq = sym.swapaxes(seq, dim1=0, dim2=1)
        states = begin_state if begin_state is not None else self._zero_states(seq, 1)
        extra = {"state_cell": states[1]} if self._mode == "lstm" else {}
        rnn = sym.RNN(data=seq, parameters=self._parameter, state=states[0], **extra,
                      state_size=self._num_hidden, num_layers=self._num_layers,
                      bidirectional=self._bidirectional, p=self._dropout,
                      state_outputs=self._get_next_state, mode=self._mode, name=self._prefix + "rnn")
        if self._get_next_state:
            outputs = rnn[0]
            next_states = [rnn[1], rnn[2]] if self._mode == "lstm" else [rnn[1]]
        else:
            outputs, next_states = rnn if len(rnn.list_outputs()) == 1 else rnn[0], []
        if axis == 1:
            outputs = sym.swapaxes(outputs, dim1=0, dim2=1)
        outputs, _ = normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, next_states

    @property
    def _gate_names(self) -> tuple[str, ...]:
        return {"lstm": ("_i", "_f", "_c", "_o"), "gru": ("_r", "_z", "_o")}.get(self._mode, ("",))

    def _layout(self, num_input: int) -> list[tuple[str, tuple[int, ...]]]:
        """The fused vector's pieces in order, each ``(name, shape)``: every layer's and direction's
        i2h then h2h weights per gate, then all biases in the same order (the RNN operator's layout)."""
        h, gates, b = self._num_hidden, self._gate_names, len(self._directions)
        weights: list[tuple[str, tuple[int, ...]]] = []
        biases: list[tuple[str, tuple[int, ...]]] = []
        for layer in range(self._num_layers):
            width = num_input if layer == 0 else b * h
            for d in self._directions:
                stem = f"{self._prefix}{d}{layer}_"
                weights += [(f"{stem}i2h{g}_weight", (h, width)) for g in gates]
                weights += [(f"{stem}h2h{g}_weight", (h, h)) for g in gates]
                biases += [(f"{stem}{grp}{g}_bias", (h,)) for grp in ("i2h", "h2h") for g in gates]
        return weights + biases

    def unpack_weights(self, args: dict[str, Any]) -> dict[str, Any]:
        """``args`` with the fused ``<prefix>parameters`` vector split into named per-layer,
        per-direction, per-gate weights and biases (``<prefix>l0_i2h_i_weight`` ...), copies."""
        args = dict(args)
        flat = args.pop(self._parameter.name)
        h, b, m = self._num_hidden, len(self._directions), len(self._gate_names)
        per_dir = int(flat.shape[0]) // (b * m * h)
        num_input = per_dir - (self._num_layers - 1) * (b * h + h + 2) - h - 2
        if num_input < 1 or sum(math.prod(s) for _, s in self._layout(num_input)) != int(flat.shape[0]):
            raise MXNetError(f"FusedRNNCell.unpack_weights: {self._parameter.name!r} has "
                             f"{int(flat.shape[0])} entries, which fits no input size for this cell")
        at = 0
        for name, shape in self._layout(num_input):
            n = math.prod(shape)
            args[name] = flat[at:at + n].reshape(shape).copy()
            at += n
        return args

    def pack_weights(self, args: dict[str, Any]) -> dict[str, Any]:
        """The inverse of :meth:`unpack_weights`: the named pieces concatenated into
        ``<prefix>parameters``."""
        args = dict(args)
        first = args[f"{self._prefix}l0_i2h{self._gate_names[0]}_weight"]
        pieces = [args.pop(name).reshape(-1) for name, _ in self._layout(int(first.shape[1]))]
        args[self._parameter.name] = torch.cat(pieces)
        return args

    def unfuse(self) -> Any:
        """The same network as a SequentialRNNCell of RNN/LSTM/GRU cells (bidirectional layers as
        BidirectionalCells with output prefix ``<prefix>bi_l<i>_``, dropout between layers)."""
        def cell(prefix: str) -> BaseRNNCell:
            if self._mode == "lstm":
                return LSTMCell(self._num_hidden, prefix=prefix)
            if self._mode == "gru":
                return GRUCell(self._num_hidden, prefix=prefix)
            return RNNCell(self._num_hidden, activation=self._mode[4:], prefix=prefix)

        stack = SequentialRNNCell()
        for i in range(self._num_layers):
            if self._bidirectional:
                stack.add(BidirectionalCell(cell(f"{self._prefix}l{i}_"), cell(f"{self._prefix}r{i}_"),
                                            output_prefix=f"{self._prefix}bi_l{i}_"))
            else:
                stack.add(cell(f"{self._prefix}l{i}_"))
            if self._dropout > 0 and i != self._num_layers - 1:
                stack.add(DropoutCell(self._dropout, prefix=f"{self._prefix}_dropout{i}_"))
        return stack
