"""Recurrent cells: one time step at a time, with ``unroll`` to run them over a sequence.

A cell call ``cell(inputs, states)`` returns ``(output, new_states)``; ``states`` is a list of
tensors as given by ``cell.begin_state(batch_size)``.  Gate order and parameter names follow
MXNet (LSTM: input, forget, cell, output; GRU: reset, update, new), which is also torch's order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ... import autograd
from ..._dtype import to_torch_dtype
from ...base import MXNetError
from ...context import as_context
from ..block import Block, HybridBlock
from ..nn.activations import activation_fn

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

Tensor = torch.Tensor
Sequenceish = Tensor | Sequence[Tensor]

_TORCH_CREATORS = (torch.zeros, torch.ones, torch.empty, torch.rand, torch.randn)


# ---- helpers shared with rnn_layer ---------------------------------------------------------
def create_state(
    func: Callable[..., Tensor] | None,
    shape: tuple[int, ...],
    kwargs: dict[str, Any],
    default_dtype: Any = None,
) -> Tensor:
    """Call a state-creating ``func`` (torch.zeros, mx.nd.zeros, nd.random.uniform, ...) for ``shape``.

    ``ctx``/``dtype`` in ``kwargs`` are translated to ``device``/torch dtypes for torch's own
    creation functions; other functions get ``shape=`` and the keywords as given.
    """
    kw = dict(kwargs)
    if default_dtype is not None and "dtype" not in kw:
        kw["dtype"] = default_dtype
    if func is None or func in _TORCH_CREATORS:
        ctx = kw.pop("ctx", None)
        device = kw.pop("device", None)
        if device is None:
            device = as_context(ctx).torch_device
        dtype = to_torch_dtype(kw.pop("dtype", None))
        return (func or torch.zeros)(shape, dtype=dtype, device=device, **kw)
    return func(shape=shape, **kw)


def _check_length(length: int | None, got: int, what: str) -> None:
    if length is not None and int(length) != got:
        raise ValueError(f"unroll: length={length} but the {what} has {got} time steps")


def _format_sequence(
    length: int | None, inputs: Sequenceish, layout: str, merge: bool | None
) -> tuple[Sequenceish, int, int]:
    """Inputs as a list of steps (merge False), one stacked tensor (True) or as given (None).

    Returns ``(inputs, time_axis, batch_size)``.
    """
    if layout not in ("NTC", "TNC"):
        raise ValueError(f"layout must be 'NTC' or 'TNC', got {layout!r}")
    axis = layout.find("T")
    batch_axis = layout.find("N")
    if isinstance(inputs, Tensor):
        if inputs.dim() < 2:
            raise ValueError(
                f"expected inputs with time and batch axes ({layout}), got shape {tuple(inputs.shape)}"
            )
        _check_length(length, inputs.shape[axis], "input tensor")
        batch_size = inputs.shape[batch_axis]
        if merge is False:
            return list(inputs.unbind(axis)), axis, batch_size
        return inputs, axis, batch_size
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError(
            f"inputs must be a tensor or a non-empty list of tensors, got {type(inputs).__name__}"
        )
    _check_length(length, len(inputs), "input list")
    batch_size = inputs[0].shape[0]
    if merge is True:
        return torch.stack(list(inputs), dim=axis), axis, batch_size
    return list(inputs), axis, batch_size


def _lengths_tensor(valid_length: Any, batch_size: int, device: torch.device) -> Tensor:
    vl = torch.as_tensor(valid_length, device=device)
    if vl.dim() != 1 or vl.shape[0] != batch_size:
        raise ValueError(f"valid_length must have shape ({batch_size},), got {tuple(vl.shape)}")
    return vl.to(torch.long)


def _time_mask(length: int, valid_length: Tensor) -> Tensor:
    """(T, N) boolean mask, True where the step is inside the sequence."""
    return torch.arange(length, device=valid_length.device)[:, None] < valid_length[None, :]


def _mask_sequence(seq: Sequenceish, length: int, valid_length: Tensor, axis: int) -> Sequenceish:
    """Zero the steps at or beyond each sample's valid length."""
    mask = _time_mask(length, valid_length)
    if isinstance(seq, Tensor):
        m = mask if axis == 0 else mask.t()
        m = m.reshape(*m.shape, *([1] * (seq.dim() - 2)))
        return seq * m.to(seq.dtype)
    out = []
    for t, s in enumerate(seq):
        m = mask[t].reshape(-1, *([1] * (s.dim() - 1)))
        out.append(s * m.to(s.dtype))
    return out


def _sequence_last(steps: Sequence[Tensor], valid_length: Tensor) -> Tensor:
    """For each sample, the entry at its last valid step."""
    stacked = torch.stack(list(steps), dim=0)
    idx = (valid_length - 1).clamp(min=0).to(stacked.device)
    return stacked[idx, torch.arange(stacked.shape[1], device=stacked.device)]


def _reverse_sequence(seq: Sequenceish, length: int, valid_length: Tensor | None, axis: int) -> Sequenceish:
    """Reverse the time order; with ``valid_length`` only each sample's valid prefix is reversed."""
    if valid_length is None:
        if isinstance(seq, Tensor):
            return seq.flip(axis)
        return list(reversed(seq))
    is_tensor = isinstance(seq, Tensor)
    stacked = seq.movedim(axis, 0) if isinstance(seq, Tensor) else torch.stack(list(seq), dim=0)
    t = torch.arange(length, device=stacked.device)[:, None]
    vl = valid_length.to(stacked.device)[None, :]
    idx = torch.where(t < vl, vl - 1 - t, t)  # (T, N)
    gathered = stacked[idx, torch.arange(stacked.shape[1], device=stacked.device)[None, :]]
    if is_tensor:
        return gathered.movedim(0, axis)
    return list(gathered.unbind(0))


def _dropout(x: Tensor, rate: float, axes: Sequence[int]) -> Tensor:
    if not axes:
        return F.dropout(x, rate, training=True)
    shape = [1 if (i in axes or i - x.dim() in axes) else s for i, s in enumerate(x.shape)]
    keep = 1.0 - rate
    mask = torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(keep) / keep
    return x * mask


def _activation(act: Any) -> Callable[[Tensor], Tensor]:
    if isinstance(act, str):
        return activation_fn(act)
    if callable(act):
        return act  # type: ignore[no-any-return]
    raise TypeError(f"activation must be a name such as 'tanh' or a callable, got {act!r}")


def _check_states(cell: RecurrentCell, states: Any, batch_size: int) -> list[Tensor]:
    if isinstance(states, Tensor):
        states = [states]
    if not isinstance(states, (list, tuple)):
        raise TypeError(
            f"{type(cell).__name__}: states must be a list of tensors, got {type(states).__name__}"
        )
    info = cell.state_info(batch_size)
    if len(states) != len(info):
        raise ValueError(f"{type(cell).__name__} expects {len(info)} state tensor(s), got {len(states)}")
    for s, i in zip(states, info):
        if tuple(s.shape) != tuple(i["shape"]):
            raise ValueError(
                f"{type(cell).__name__}: invalid state shape {tuple(s.shape)}, expected {tuple(i['shape'])}"
            )
    return list(states)


# ---- base classes --------------------------------------------------------------------------
class RecurrentCell(Block):
    """Base class of recurrent cells; ``cell(inputs, states)`` returns ``(output, new_states)``.

    Subclasses define ``state_info`` and ``forward(inputs, states)`` (hybrid cells may write
    MXNet 1.x ``hybrid_forward(F, inputs, states, **params)`` instead).
    """

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        self._modified = False
        self.reset()

    def reset(self) -> None:
        """Reset step counters (and those of child cells) before reusing the cell."""
        self._init_counter = -1
        self._counter = -1
        for cell in self._modules.values():
            if isinstance(cell, RecurrentCell):
                cell.reset()

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        """Shape and layout of each state: a list of ``{'shape': ..., '__layout__': ...}``."""
        raise NotImplementedError(f"{type(self).__name__} must define state_info()")

    def begin_state(
        self, batch_size: int = 0, func: Callable[..., Tensor] = torch.zeros, **kwargs: Any
    ) -> list[Tensor]:
        """Initial states built by ``func`` (default zeros); ``kwargs`` such as ctx/dtype go to ``func``."""
        if self._modified:
            raise MXNetError(
                f"{type(self).__name__} is wrapped by a modifier cell (e.g. ZoneoutCell): "
                "call begin_state() on the modifier cell instead"
            )
        states = []
        for info in self.state_info(batch_size):
            self._init_counter += 1
            states.append(create_state(func, tuple(info["shape"]), kwargs, info.get("dtype")))
        return states

    def _default_begin_state(self, inputs: Sequenceish, batch_size: int) -> list[Tensor]:
        ref = inputs if isinstance(inputs, Tensor) else inputs[0]
        return self.begin_state(batch_size, func=torch.zeros, device=ref.device, dtype=ref.dtype)

    def unroll(
        self,
        length: int,
        inputs: Sequenceish,
        begin_state: Sequence[Tensor] | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
        valid_length: Any = None,
    ) -> tuple[Sequenceish, list[Tensor]]:
        """Run the cell over ``length`` steps of ``inputs`` (a tensor in ``layout`` or a list of steps).

        ``merge_outputs`` True stacks the outputs along the time axis, False gives a list, None
        keeps the cell's natural form.  With ``valid_length`` (one length per sample) outputs
        past a sample's length are zero and the returned states are those of its last valid step.
        """
        self.reset()
        steps, axis, batch_size = _format_sequence(length, inputs, layout, False)
        states = (
            list(begin_state) if begin_state is not None else self._default_begin_state(steps, batch_size)
        )
        vl = None if valid_length is None else _lengths_tensor(valid_length, batch_size, steps[0].device)
        outputs: list[Tensor] = []
        all_states: list[list[Tensor]] = []
        for x in steps:
            out, states = self(x, states)
            outputs.append(out)
            if vl is not None:
                all_states.append(states)
        result: Sequenceish = outputs
        if vl is not None:
            states = [_sequence_last(s, vl) for s in zip(*all_states)]
            result = _mask_sequence(outputs, len(steps), vl, axis)
        result, _, _ = _format_sequence(length, result, layout, merge_outputs)
        return result, states

    def __call__(self, inputs: Any, states: Any = None, *args: Any, **kwargs: Any) -> Any:
        self._counter += 1
        return super().__call__(inputs, states, *args, **kwargs)


class HybridRecurrentCell(RecurrentCell, HybridBlock):
    """A recurrent cell that can be hybridized."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)


class _GatedCell(HybridRecurrentCell):
    """Shared parameters of RNN/LSTM/GRU cells: i2h/h2h weights and biases."""

    _gates = 1

    def __init__(
        self,
        hidden_size: int,
        i2h_weight_initializer: Any,
        h2h_weight_initializer: Any,
        i2h_bias_initializer: Any,
        h2h_bias_initializer: Any,
        input_size: int,
        recurrent_size: int | None,
        dtype: Any,
        prefix: str | None,
        params: Any,
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
        rows = self._gates * self._hidden_size
        rec = self._hidden_size if recurrent_size is None else int(recurrent_size)
        self.i2h_weight = self.params.get(
            "i2h_weight",
            shape=(rows, self._input_size),
            dtype=dtype,
            init=i2h_weight_initializer,
            allow_deferred_init=True,
        )
        self.h2h_weight = self.params.get(
            "h2h_weight",
            shape=(rows, rec),
            dtype=dtype,
            init=h2h_weight_initializer,
            allow_deferred_init=True,
        )
        self.i2h_bias = self.params.get(
            "i2h_bias", shape=(rows,), dtype=dtype, init=i2h_bias_initializer, allow_deferred_init=True
        )
        self.h2h_bias = self.params.get(
            "h2h_bias", shape=(rows,), dtype=dtype, init=h2h_bias_initializer, allow_deferred_init=True
        )

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
            None,
            dtype,
            prefix,
            params,
        )
        self._activation = activation
        self._act = _activation(activation)

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

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
    """LSTM cell; gates in MXNet order (input, forget, cell, output); states ``[h, c]``."""

    _gates = 4

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
    ) -> None:
        super().__init__(
            hidden_size,
            i2h_weight_initializer,
            h2h_weight_initializer,
            i2h_bias_initializer,
            h2h_bias_initializer,
            input_size,
            None,
            dtype,
            prefix,
            params,
        )
        self._activation, self._recurrent_activation = activation, recurrent_activation
        self._act = _activation(activation)
        self._rec_act = _activation(recurrent_activation)

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return [
            {"shape": (batch_size, self._hidden_size), "__layout__": "NC"},
            {"shape": (batch_size, self._hidden_size), "__layout__": "NC"},
        ]

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
    """

    _gates = 3

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
    ) -> None:
        super().__init__(
            hidden_size,
            i2h_weight_initializer,
            h2h_weight_initializer,
            i2h_bias_initializer,
            h2h_bias_initializer,
            input_size,
            None,
            dtype,
            prefix,
            params,
        )
        self._activation, self._recurrent_activation = activation, recurrent_activation
        self._act = _activation(activation)
        self._rec_act = _activation(recurrent_activation)

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

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
            int(projection_size),
            dtype,
            prefix,
            params,
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
        return [
            {"shape": (batch_size, self._projection_size), "__layout__": "NC"},
            {"shape": (batch_size, self._hidden_size), "__layout__": "NC"},
        ]

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


# ---- containers ----------------------------------------------------------------------------
class SequentialRNNCell(RecurrentCell):
    """Stacks cells: the output of one is the input of the next; states are concatenated."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)

    def add(self, cell: RecurrentCell) -> SequentialRNNCell:
        """Append ``cell`` to the stack."""
        if not isinstance(cell, RecurrentCell):
            raise TypeError(f"{type(self).__name__}.add expects a recurrent cell, got {type(cell).__name__}")
        self.register_child(cell)
        return self

    def _cells(self) -> list[RecurrentCell]:
        return [c for c in self._modules.values() if isinstance(c, RecurrentCell)]

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return [i for c in self._cells() for i in c.state_info(batch_size)]

    def begin_state(
        self, batch_size: int = 0, func: Callable[..., Tensor] = torch.zeros, **kwargs: Any
    ) -> list[Tensor]:
        if self._modified:
            raise MXNetError(
                f"{type(self).__name__} is wrapped by a modifier cell: call begin_state() on "
                "the modifier cell instead"
            )
        return [s for c in self._cells() for s in c.begin_state(batch_size, func=func, **kwargs)]

    def _split_states(self, states: Sequence[Tensor], batch_size: int) -> list[list[Tensor]]:
        cells = self._cells()
        sizes = [len(c.state_info(batch_size)) for c in cells]
        if len(states) != sum(sizes):
            raise ValueError(f"{type(self).__name__} expects {sum(sizes)} state tensor(s), got {len(states)}")
        out, p = [], 0
        for n in sizes:
            out.append(list(states[p : p + n]))
            p += n
        return out

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        if not self._cells():
            raise MXNetError(f"{type(self).__name__} is empty: add() cells first")
        next_states: list[Tensor] = []
        for cell, st in zip(self._cells(), self._split_states(states, inputs.shape[0])):
            if isinstance(cell, BidirectionalCell):
                raise MXNetError("a BidirectionalCell cannot be stepped: call unroll() instead")
            inputs, st = cell(inputs, st)
            next_states.extend(st)
        return inputs, next_states

    def unroll(
        self,
        length: int,
        inputs: Sequenceish,
        begin_state: Sequence[Tensor] | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
        valid_length: Any = None,
    ) -> tuple[Sequenceish, list[Tensor]]:
        self.reset()
        cells = self._cells()
        if not cells:
            raise MXNetError(f"{type(self).__name__} is empty: add() cells first")
        inputs, _, batch_size = _format_sequence(length, inputs, layout, None)
        if begin_state is None:
            begin_state = self._default_begin_state(inputs, batch_size)
        next_states: list[Tensor] = []
        for i, (cell, st) in enumerate(zip(cells, self._split_states(begin_state, batch_size))):
            merge = merge_outputs if i == len(cells) - 1 else None
            inputs, st = cell.unroll(
                length, inputs, begin_state=st, layout=layout, merge_outputs=merge, valid_length=valid_length
            )
            next_states.extend(st)
        return inputs, next_states

    def __getitem__(self, i: int) -> RecurrentCell:
        return self._cells()[i]

    def __len__(self) -> int:
        return len(self._cells())

    def __repr__(self) -> str:
        body = "\n".join(f"  ({i}): {c!r}" for i, c in enumerate(self._cells()))
        return f"{type(self).__name__}(\n{body}\n)"


class HybridSequentialRNNCell(SequentialRNNCell, HybridRecurrentCell):
    """SequentialRNNCell that can be hybridized."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)


class DropoutCell(HybridRecurrentCell):
    """Applies dropout to its input (training mode only); has no state.

    ``axes`` lists axes that share one mask (variational dropout).
    """

    def __init__(
        self, rate: float, axes: Sequence[int] = (), prefix: str | None = None, params: Any = None
    ) -> None:
        super().__init__(prefix, params)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"DropoutCell: rate must be in [0, 1), got {rate!r}")
        self._rate = float(rate)
        self._axes = tuple(axes)

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return []

    def _drop(self, x: Tensor) -> Tensor:
        if self._rate > 0.0 and autograd.is_training():
            return _dropout(x, self._rate, self._axes)
        return x

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        return self._drop(inputs), list(states or [])

    def unroll(
        self,
        length: int,
        inputs: Sequenceish,
        begin_state: Sequence[Tensor] | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
        valid_length: Any = None,
    ) -> tuple[Sequenceish, list[Tensor]]:
        self.reset()
        inputs, _, _ = _format_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, Tensor):
            return self._drop(inputs), list(begin_state or [])
        return super().unroll(
            length,
            inputs,
            begin_state=begin_state,
            layout=layout,
            merge_outputs=merge_outputs,
            valid_length=valid_length,
        )

    def __repr__(self) -> str:
        return f"DropoutCell(rate={self._rate}, axes={self._axes})"


class ModifierCell(HybridRecurrentCell):
    """Base class of cells that wrap another cell (``base_cell``) and change its behaviour."""

    def __init__(self, base_cell: RecurrentCell) -> None:
        if not isinstance(base_cell, RecurrentCell):
            raise TypeError(f"{type(self).__name__} expects a recurrent cell, got {type(base_cell).__name__}")
        if base_cell._modified:
            raise MXNetError(f"cell {type(base_cell).__name__} is already wrapped by a modifier cell")
        super().__init__()
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self) -> Any:
        return self.base_cell.params

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return self.base_cell.state_info(batch_size)

    def begin_state(
        self, batch_size: int = 0, func: Callable[..., Tensor] = torch.zeros, **kwargs: Any
    ) -> list[Tensor]:
        if self._modified:
            raise MXNetError(
                f"{type(self).__name__} is wrapped by another modifier cell: call begin_state() "
                "on the outer cell instead"
            )
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(batch_size, func=func, **kwargs)
        finally:
            self.base_cell._modified = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_cell!r})"


class ZoneoutCell(ModifierCell):
    """Zoneout: in training, each output/state unit keeps its previous value with the given probability."""

    def __init__(
        self, base_cell: RecurrentCell, zoneout_outputs: float = 0.0, zoneout_states: float = 0.0
    ) -> None:
        if isinstance(base_cell, BidirectionalCell):
            raise MXNetError(
                "ZoneoutCell cannot wrap a BidirectionalCell (it cannot be stepped): wrap the cells "
                "inside it instead"
            )
        for name, p in (("zoneout_outputs", zoneout_outputs), ("zoneout_states", zoneout_states)):
            if not 0.0 <= float(p) < 1.0:
                raise ValueError(f"ZoneoutCell: {name} must be in [0, 1), got {p!r}")
        self._prev_output: Tensor | None = None
        super().__init__(base_cell)
        self.zoneout_outputs = float(zoneout_outputs)
        self.zoneout_states = float(zoneout_states)

    def reset(self) -> None:
        super().reset()
        self._prev_output = None

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        next_output, next_states = self.base_cell(inputs, states)
        if autograd.is_training():
            if self.zoneout_outputs > 0.0:
                prev = self._prev_output if self._prev_output is not None else torch.zeros_like(next_output)
                keep = torch.rand_like(next_output) >= self.zoneout_outputs
                next_output = torch.where(keep, next_output, prev)
            if self.zoneout_states > 0.0:
                next_states = [
                    torch.where(torch.rand_like(new) >= self.zoneout_states, new, old)
                    for new, old in zip(next_states, states)
                ]
        self._prev_output = next_output
        return next_output, next_states

    def __repr__(self) -> str:
        return f"ZoneoutCell(p_out={self.zoneout_outputs}, p_state={self.zoneout_states}, {self.base_cell!r})"


class ResidualCell(ModifierCell):
    """Adds the input to the base cell's output (a residual connection)."""

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        output, states = self.base_cell(inputs, states)
        return output + inputs, states

    def unroll(
        self,
        length: int,
        inputs: Sequenceish,
        begin_state: Sequence[Tensor] | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
        valid_length: Any = None,
    ) -> tuple[Sequenceish, list[Tensor]]:
        self.reset()
        if begin_state is None:
            fmt, _, batch_size = _format_sequence(length, inputs, layout, None)
            begin_state = self._default_begin_state(fmt, batch_size)
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(
                length,
                inputs,
                begin_state=begin_state,
                layout=layout,
                merge_outputs=merge_outputs,
                valid_length=valid_length,
            )
        finally:
            self.base_cell._modified = True
        merged = isinstance(outputs, Tensor)
        ins, axis, batch_size = _format_sequence(length, inputs, layout, merged)
        if valid_length is not None:
            ref = ins if isinstance(ins, Tensor) else ins[0]
            ins = _mask_sequence(ins, length, _lengths_tensor(valid_length, batch_size, ref.device), axis)
        if merged:
            return outputs + ins, states  # type: ignore[operator]
        return [o + i for o, i in zip(outputs, ins)], states


class BidirectionalCell(HybridRecurrentCell):
    """Runs ``l_cell`` forward and ``r_cell`` backward in time and concatenates their outputs.

    It can only be unrolled, not stepped; states are ``l_cell``'s followed by ``r_cell``'s.
    """

    def __init__(self, l_cell: RecurrentCell, r_cell: RecurrentCell, output_prefix: str = "bi_") -> None:
        for c in (l_cell, r_cell):
            if not isinstance(c, RecurrentCell):
                raise TypeError(f"BidirectionalCell expects recurrent cells, got {type(c).__name__}")
        super().__init__()
        self.l_cell = l_cell
        self.r_cell = r_cell
        self._output_prefix = output_prefix

    def __call__(self, inputs: Any, states: Any = None, *args: Any, **kwargs: Any) -> Any:
        raise MXNetError("a BidirectionalCell cannot be stepped: call unroll() instead")

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return self.l_cell.state_info(batch_size) + self.r_cell.state_info(batch_size)

    def begin_state(
        self, batch_size: int = 0, func: Callable[..., Tensor] = torch.zeros, **kwargs: Any
    ) -> list[Tensor]:
        if self._modified:
            raise MXNetError(
                "BidirectionalCell is wrapped by a modifier cell: call begin_state() on it instead"
            )
        return self.l_cell.begin_state(batch_size, func=func, **kwargs) + self.r_cell.begin_state(
            batch_size, func=func, **kwargs
        )

    def unroll(
        self,
        length: int,
        inputs: Sequenceish,
        begin_state: Sequence[Tensor] | None = None,
        layout: str = "NTC",
        merge_outputs: bool | None = None,
        valid_length: Any = None,
    ) -> tuple[Sequenceish, list[Tensor]]:
        self.reset()
        steps, axis, batch_size = _format_sequence(length, inputs, layout, False)
        vl = None if valid_length is None else _lengths_tensor(valid_length, batch_size, steps[0].device)
        states = (
            list(begin_state) if begin_state is not None else self._default_begin_state(steps, batch_size)
        )
        n_l = len(self.l_cell.state_info(batch_size))
        if len(states) != n_l + len(self.r_cell.state_info(batch_size)):
            raise ValueError(
                f"BidirectionalCell expects {len(self.state_info(batch_size))} state tensor(s), "
                f"got {len(states)}"
            )
        l_out, l_states = self.l_cell.unroll(
            length, steps, begin_state=states[:n_l], layout=layout, merge_outputs=False, valid_length=vl
        )
        r_in = _reverse_sequence(steps, len(steps), vl, axis)
        r_out, r_states = self.r_cell.unroll(
            length, r_in, begin_state=states[n_l:], layout=layout, merge_outputs=False, valid_length=vl
        )
        r_out = _reverse_sequence(r_out, len(steps), vl, axis)
        outputs: Sequenceish = [torch.cat([lo, ro], dim=-1) for lo, ro in zip(l_out, r_out)]
        outputs, _, _ = _format_sequence(length, outputs, layout, bool(merge_outputs))
        return outputs, list(l_states) + list(r_states)

    def __repr__(self) -> str:
        return f"BidirectionalCell(forward={self.l_cell!r}, backward={self.r_cell!r})"
