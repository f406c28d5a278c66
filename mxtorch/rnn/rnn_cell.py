"""MXNet 1.x's symbolic recurrent cells (``mx.rnn``): each call adds one time step to a graph.

``cell(inputs, states)`` returns ``(output, new_states)`` as Symbols; ``cell.unroll(length,
inputs)`` builds the whole sequence.  Node names are MXNet's (``<prefix>t<step>_out``), weights
are variables named ``<prefix>i2h_weight`` ... held by an :class:`RNNParams` container that
cells may share.  The step arithmetic is that of Gluon's cells (:mod:`mxtorch.gluon.rnn._sym_steps`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import initializer as init
from .. import symbol as sym
from ..base import MXNetError
from ..gluon.rnn._sym_steps import activation, batch_zeros, gru_step, lstm_step, rnn_step

__all__ = ["RNNParams", "BaseRNNCell", "RNNCell", "LSTMCell", "GRUCell", "normalize_sequence"]

Symbol = Any


def normalize_sequence(length: int | None, inputs: Any, layout: str, merge: bool | None,
                       in_layout: str | None = None) -> tuple[Any, int]:
    """``inputs`` (one Symbol holding the sequence or a list of step Symbols) as a list of steps
    (``merge`` False), one Symbol in ``layout`` (True) or as given (None); and the time axis."""
    if inputs is None:
        raise MXNetError("unroll: inputs=None is not supported; make the input variables first "
                         "(mx.sym.Variable('data'))")
    if layout not in ("NTC", "TNC"):
        raise ValueError(f"layout must be 'NTC' or 'TNC', got {layout!r}")
    axis = layout.find("T")
    in_axis = in_layout.find("T") if in_layout is not None else axis
    if isinstance(inputs, sym.Symbol):
        if merge is False:
            if len(inputs.list_outputs()) != 1:
                raise MXNetError("unroll: a grouped Symbol is not a sequence; pass list(inputs) instead")
            if length is None:
                raise ValueError("unroll of one Symbol needs length: the number of steps to split it into")
            inputs = list(sym.split(inputs, axis=in_axis, num_outputs=int(length), squeeze_axis=1))
    else:
        if length is not None and len(inputs) != length:
            raise ValueError(f"unroll: length={length} but {len(inputs)} input steps were given")
        if merge is True:
            inputs = sym.Concat(*[sym.expand_dims(i, axis=axis) for i in inputs], dim=axis)
            in_axis = axis
    if isinstance(inputs, sym.Symbol) and axis != in_axis:
        inputs = sym.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis


class RNNParams:
    """The weight variables of one or more cells, by name (``prefix + name``); cells given the
    same container share their weights."""

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._params: dict[str, Symbol] = {}

    @property
    def variables(self) -> dict[str, Symbol]:
        """The variables by full name: the container's own dict (MXNet code reads it as ``_params``)."""
        return self._params

    def get(self, name: str, **kwargs: Any) -> Symbol:
        """The variable ``prefix + name``, made (with ``kwargs`` for ``mx.sym.Variable``) on first use."""
        name = self._prefix + name
        if name not in self._params:
            self._params[name] = sym.Variable(name, **kwargs)
        return self._params[name]


class BaseRNNCell:
    """Base class of the symbolic cells.  Subclasses define ``state_info`` (a property: a list of
    ``{'shape': ..., '__layout__': ...}`` with 0 for the unknown batch size) and ``__call__``."""

    _steppable = True  # False for cells that can only be unrolled (fused, bidirectional)

    def __init__(self, prefix: str = "", params: RNNParams | None = None) -> None:
        self._own_params = params is None
        self._prefix = prefix
        self._params = RNNParams(prefix) if params is None else params
        self._modified = False
        self.reset()

    def reset(self) -> None:
        """Reset the step counters before building another graph with this cell."""
        self._init_counter = -1
        self._counter = -1
        for cell in getattr(self, "_cells", ()):
            cell.reset()

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        if not self._steppable:
            raise MXNetError(f"a {type(self).__name__} cannot be stepped: call unroll() instead")
        raise NotImplementedError(f"{type(self).__name__} must define __call__(inputs, states)")

    @property
    def params(self) -> RNNParams:
        """The cell's weight container."""
        self._own_params = False
        return self._params

    @property
    def state_info(self) -> list[dict[str, Any]]:
        raise NotImplementedError(f"{type(self).__name__} must define state_info")

    @property
    def state_shape(self) -> list[tuple[int, ...]]:
        return [info["shape"] for info in self.state_info]

    @property
    def _gate_names(self) -> tuple[str, ...]:
        return ()

    def begin_state(self, func: Callable[..., Symbol] = sym.zeros, **kwargs: Any) -> list[Symbol]:
        """The initial states, made by ``func`` (``mx.sym.zeros``, ``mx.sym.Variable``, ...) with
        the name ``<prefix>begin_state_<i>``, the state's shape and layout, and ``kwargs``."""
        if self._modified:
            raise MXNetError(f"{type(self).__name__} is wrapped by a modifier cell: call begin_state() "
                             "on the modifier cell instead")
        states = []
        for info in self.state_info:
            self._init_counter += 1
            kw = dict(kwargs)
            if info is not None:
                kw.update(info)
            states.append(func(name=f"{self._prefix}begin_state_{self._init_counter}", **kw))
        return states

    def _zero_states(self, like: Symbol, batch_axis: int) -> list[Symbol]:
        """Zero begin states whose batch size is that of ``like`` along ``batch_axis`` (MXNet's
        ``zeros(shape=(0, n))`` leaves the 0 to backward shape inference; graphs here infer forwards)."""

        def zeros(name: str, shape: Sequence[int], __layout__: str = "NC", dtype: Any = None,
                  **_: Any) -> Symbol:
            return batch_zeros(sym, shape, like, batch_axis, name, dtype, __layout__.find("N"))

        return self.begin_state(func=zeros)

    def unpack_weights(self, args: dict[str, Any]) -> dict[str, Any]:
        """``args`` with this cell's stacked i2h/h2h weights and biases split per gate
        (``<prefix>i2h_i_weight`` ...): readable, and what ``save_rnn_checkpoint`` writes."""
        args = dict(args)
        if not self._gate_names:
            return args
        h = self._num_hidden  # type: ignore[attr-defined]
        for group in ("i2h", "h2h"):
            weight = args.pop(f"{self._prefix}{group}_weight")
            bias = args.pop(f"{self._prefix}{group}_bias")
            for j, gate in enumerate(self._gate_names):
                args[f"{self._prefix}{group}{gate}_weight"] = weight[j * h:(j + 1) * h].copy()
                args[f"{self._prefix}{group}{gate}_bias"] = bias[j * h:(j + 1) * h].copy()
        return args

    def pack_weights(self, args: dict[str, Any]) -> dict[str, Any]:
        """The inverse of :meth:`unpack_weights`."""
        args = dict(args)
        if not self._gate_names:
            return args
        for group in ("i2h", "h2h"):
            for kind in ("weight", "bias"):
                parts = [args.pop(f"{self._prefix}{group}{gate}_{kind}") for gate in self._gate_names]
                args[f"{self._prefix}{group}_{kind}"] = torch.cat(list(parts), dim=0)
        return args

    def unroll(self, length: int, inputs: Any, begin_state: list[Symbol] | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list[Symbol]]:
        """Run the cell over ``length`` steps of ``inputs`` (one Symbol in ``layout`` or a list of
        step Symbols).  ``merge_outputs`` True gives one Symbol, False a list, None the natural form."""
        self.reset()
        steps, _ = normalize_sequence(length, inputs, layout, False)
        states = begin_state if begin_state is not None else self._zero_states(steps[0], 0)
        outputs = []
        for i in range(length):
            output, states = self(steps[i], states)
            outputs.append(output)
        outputs, _ = normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, inputs: Symbol, act: Any, **kwargs: Any) -> Symbol:
        """``act`` (an act_type name or a function of symbols) applied to ``inputs``."""
        return activation(sym, inputs, act, kwargs.get("name"))

    def _step_name(self) -> str:
        self._counter += 1
        return f"{self._prefix}t{self._counter}_"

    def _weights(self) -> tuple[Symbol, Symbol, Symbol, Symbol]:
        return (self._iW, self._iB, self._hW, self._hB)  # type: ignore[attr-defined]


class _DenseCell(BaseRNNCell):
    """Cells whose gates are dense projections: ``i2h``/``h2h`` weights and biases, and
    ``_num_states`` states of shape (batch, num_hidden)."""

    _num_states = 1

    def __init__(self, num_hidden: int, prefix: str, params: RNNParams | None,
                 i2h_bias_init: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = int(num_hidden)
        self._iW, self._hW = self.params.get("i2h_weight"), self.params.get("h2h_weight")
        bias_kw = {} if i2h_bias_init is None else {"init": i2h_bias_init}
        self._iB, self._hB = self.params.get("i2h_bias", **bias_kw), self.params.get("h2h_bias")

    @property
    def state_info(self) -> list[dict[str, Any]]:
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}] * self._num_states


class RNNCell(_DenseCell):
    """Elman cell: ``out = activation(W_i x + b_i + W_h h + b_h)``; states ``[out]``."""

    def __init__(self, num_hidden: int, activation: Any = "tanh", prefix: str = "rnn_",
                 params: RNNParams | None = None) -> None:
        super().__init__(num_hidden, prefix, params)
        self._activation = activation

    @property
    def _gate_names(self) -> tuple[str, ...]:
        return ("",)

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        return rnn_step(sym, inputs, states, self._weights(), self._num_hidden, self._activation,
                        self._step_name())


class LSTMCell(_DenseCell):
    """LSTM cell (gates input, forget, cell, output); ``forget_bias`` initializes the forget
    gate's part of ``i2h_bias`` (``mx.init.LSTMBias``); states ``[h, c]``."""

    _num_states = 2

    def __init__(self, num_hidden: int, prefix: str = "lstm_", params: RNNParams | None = None,
                 forget_bias: float = 1.0) -> None:
        super().__init__(num_hidden, prefix, params, init.LSTMBias(forget_bias=forget_bias))

    @property
    def _gate_names(self) -> tuple[str, ...]:
        return ("_i", "_f", "_c", "_o")

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        return lstm_step(sym, inputs, states, self._weights(), self._num_hidden, "tanh", "sigmoid",
                         self._step_name())


class GRUCell(_DenseCell):
    """GRU cell (gates reset, update, new); states ``[h]``."""

    def __init__(self, num_hidden: int, prefix: str = "gru_", params: RNNParams | None = None) -> None:
        super().__init__(num_hidden, prefix, params)

    @property
    def _gate_names(self) -> tuple[str, ...]:
        return ("_r", "_z", "_o")

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        return gru_step(sym, inputs, states, self._weights(), self._num_hidden, "tanh", "sigmoid",
                        self._step_name())
