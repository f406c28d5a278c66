"""The recurrent cell base classes and the sequence helpers the cells and the fused layers share.

A cell call ``cell(inputs, states)`` returns ``(output, new_states)``; ``states`` is a list of
tensors as given by ``cell.begin_state(batch_size)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from ..._dtype import to_torch_dtype
from ...base import MXNetError
from ...context import as_context
from ..block import Block, HybridBlock
from ..nn.activations import activation_fn
from ._sym_steps import batch_zeros, is_symbol

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
    if is_symbol(inputs):
        return _format_symbols(length, inputs, axis, merge)
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


def _format_symbols(length: int | None, inputs: Any, axis: int, merge: bool | None) -> tuple[Any, int, int]:
    """``_format_sequence`` of a graph: one Symbol holding the sequence or a list of step Symbols
    (the batch size is 0, unknown until the graph is bound, as in MXNet)."""
    from ... import symbol as F

    if isinstance(inputs, (list, tuple)):
        _check_length(length, len(inputs), "input list")
        if merge is True:
            return F.stack(*inputs, axis=axis), axis, 0
        return list(inputs), axis, 0
    if merge is False:
        if length is None:
            raise ValueError("unroll of a Symbol needs length: the number of steps to split it into")
        return list(F.split(inputs, axis=axis, num_outputs=int(length), squeeze_axis=1)), axis, 0
    return inputs, axis, 0


def _mask_symbols(outputs: list[Any], all_states: list[list[Any]], valid_length: Any, axis: int,
                  merge: bool | None) -> tuple[Any, list[Any]]:
    """A graph's outputs zeroed past each sample's ``valid_length`` (merged unless ``merge`` is
    False) and its states those of each sample's last valid step."""
    from ... import symbol as F

    states = [F.SequenceLast(F.stack(*s, axis=0), sequence_length=valid_length, use_sequence_length=True,
                             axis=0) for s in zip(*all_states)]
    masked = F.SequenceMask(F.stack(*outputs, axis=axis), sequence_length=valid_length,
                            use_sequence_length=True, axis=axis)
    if merge is False:
        return list(F.split(masked, axis=axis, num_outputs=len(outputs), squeeze_axis=1)), states
    return masked, states


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


def _check_states(cell: Any, states: Any, batch_size: int) -> list[Tensor]:
    """``states`` (one tensor or a list) checked against ``cell.state_info(batch_size)``."""
    if isinstance(states, Tensor):
        states = [states]
    if not isinstance(states, (list, tuple)):
        raise TypeError(
            f"{type(cell).__name__}: states must be a tensor or a list of tensors, got "
            f"{type(states).__name__}"
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


class _Unroll(NamedTuple):
    """The arguments of ``RecurrentCell.unroll``, in its order."""

    length: int
    inputs: Sequenceish
    begin_state: Sequence[Tensor] | None
    layout: str
    merge_outputs: bool | None
    valid_length: Any


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
        return self._begin_state(batch_size, func, kwargs)

    def _begin_state(
        self, batch_size: int, func: Callable[..., Tensor], kwargs: dict[str, Any]
    ) -> list[Tensor]:
        """``begin_state`` once the cell is known not to be wrapped; containers override this one."""
        states = []
        for info in self.state_info(batch_size):
            self._init_counter += 1
            states.append(create_state(func, tuple(info["shape"]), kwargs, info.get("dtype")))
        return states

    def _default_begin_state(self, inputs: Sequenceish, batch_size: int, layout: str = "NTC") -> list[Tensor]:
        if is_symbol(inputs):
            return self._symbol_begin_state(inputs, layout)
        ref = inputs if isinstance(inputs, Tensor) else inputs[0]
        return self.begin_state(batch_size, func=torch.zeros, device=ref.device, dtype=ref.dtype)

    def _symbol_begin_state(self, inputs: Any, layout: str) -> list[Any]:
        """Zero begin states of a graph, their batch size taken from the inputs (a merged Symbol
        in ``layout`` or a list of steps)."""
        from ... import symbol as F

        like, axis = (inputs[0], 0) if isinstance(inputs, (list, tuple)) else (inputs, layout.find("N"))

        def zeros(shape: tuple[int, ...], **kwargs: Any) -> Any:
            return batch_zeros(F, shape, like, axis, None, kwargs.get("dtype"))

        return self.begin_state(0, func=zeros)

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
        return self._unroll(_Unroll(length, inputs, begin_state, layout, merge_outputs, valid_length))

    def _unroll(self, u: _Unroll) -> tuple[Sequenceish, list[Tensor]]:
        """``unroll`` after the step counters are reset; subclasses override this one."""
        steps, axis, batch_size = _format_sequence(u.length, u.inputs, u.layout, False)
        states = (
            list(u.begin_state) if u.begin_state is not None else self._default_begin_state(steps, batch_size)
        )
        graph = is_symbol(steps)
        vl = None
        if u.valid_length is not None and not graph:
            vl = _lengths_tensor(u.valid_length, batch_size, steps[0].device)
        outputs: list[Tensor] = []
        all_states: list[list[Tensor]] = []
        for x in steps:
            out, states = self(x, states)
            outputs.append(out)
            if u.valid_length is not None:
                all_states.append(states)
        if graph and u.valid_length is not None:
            return _mask_symbols(outputs, all_states, u.valid_length, axis, u.merge_outputs)
        result: Sequenceish = outputs
        merge = u.merge_outputs
        if vl is not None:
            states = [_sequence_last(s, vl) for s in zip(*all_states)]
            result = _mask_sequence(outputs, len(steps), vl, axis)
            merge = True if merge is None else merge  # MXNet merges masked outputs unless told not to
        result, _, _ = _format_sequence(u.length, result, u.layout, merge)
        return result, states

    def __call__(self, inputs: Any, states: Any = None, *args: Any, **kwargs: Any) -> Any:
        self._counter += 1
        return super().__call__(inputs, states, *args, **kwargs)


class HybridRecurrentCell(RecurrentCell, HybridBlock):
    """A recurrent cell that can be hybridized."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
