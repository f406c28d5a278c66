"""Cells built from other cells: stacks (sequential), dropout, the modifiers (zoneout, residual)
and the bidirectional wrapper."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ... import autograd
from ...base import MXNetError
from ._sym_steps import is_symbol
from .base_cell import (
    HybridRecurrentCell,
    RecurrentCell,
    Sequenceish,
    Tensor,
    _dropout,
    _format_sequence,
    _lengths_tensor,
    _mask_sequence,
    _reverse_sequence,
    _Unroll,
)


def check_rates(cell: str, **rates: float) -> None:
    """Each rate (a probability of dropping) in [0, 1), else a ValueError naming it."""
    for name, p in rates.items():
        if not 0.0 <= float(p) < 1.0:
            raise ValueError(f"{cell}: {name} must be in [0, 1), got {p!r}")


def split_by_sizes(states: Sequence[Any], sizes: Sequence[int], owner: str) -> list[list[Any]]:
    """``states`` cut into consecutive lists of ``sizes`` (each cell's states, in order)."""
    if len(states) != sum(sizes):
        raise ValueError(f"{owner} expects {sum(sizes)} state(s), got {len(states)}")
    out, p = [], 0
    for n in sizes:
        out.append(list(states[p : p + n]))
        p += n
    return out


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

    def _begin_state(
        self, batch_size: int, func: Callable[..., Tensor], kwargs: dict[str, Any]
    ) -> list[Tensor]:
        return [s for c in self._cells() for s in c.begin_state(batch_size, func=func, **kwargs)]

    def _split_states(self, states: Sequence[Tensor], batch_size: int) -> list[list[Tensor]]:
        return split_by_sizes(states, [len(c.state_info(batch_size)) for c in self._cells()],
                              type(self).__name__)

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

    def _unroll(self, u: _Unroll) -> tuple[Sequenceish, list[Tensor]]:
        cells = self._cells()
        if not cells:
            raise MXNetError(f"{type(self).__name__} is empty: add() cells first")
        inputs, _, batch_size = _format_sequence(u.length, u.inputs, u.layout, None)
        begin_state = u.begin_state
        if begin_state is None:
            begin_state = self._default_begin_state(inputs, batch_size)
        next_states: list[Tensor] = []
        for i, (cell, st) in enumerate(zip(cells, self._split_states(begin_state, batch_size))):
            merge = u.merge_outputs if i == len(cells) - 1 else None
            inputs, st = cell.unroll(u.length, inputs, st, u.layout, merge, u.valid_length)
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

    def _alias(self) -> str:
        return "dropout"

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return []

    def _drop(self, x: Tensor) -> Tensor:
        if self._rate > 0.0 and autograd.is_training():
            return _dropout(x, self._rate, self._axes)
        return x

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        return self._drop(inputs), list(states or [])

    def _unroll(self, u: _Unroll) -> tuple[Sequenceish, list[Tensor]]:
        inputs, _, _ = _format_sequence(u.length, u.inputs, u.layout, u.merge_outputs)
        if isinstance(inputs, Tensor):
            return self._drop(inputs), list(u.begin_state or [])
        return super()._unroll(u._replace(inputs=inputs))

    def __repr__(self) -> str:
        return f"DropoutCell(rate={self._rate}, axes={self._axes})"


class ModifierCell(HybridRecurrentCell):
    """Base class of cells that wrap another cell (``base_cell``) and change its behaviour."""

    def __init__(self, base_cell: RecurrentCell) -> None:
        if not isinstance(base_cell, RecurrentCell):
            raise TypeError(f"{type(self).__name__} expects a recurrent cell, got {type(base_cell).__name__}")
        if base_cell._modified:
            raise MXNetError(f"cell {type(base_cell).__name__} is already wrapped by a modifier cell")
        # MXNet's prefix: the wrapped cell's followed by the alias, no count ('lstm0_zoneout')
        super().__init__(prefix=base_cell.prefix + self._alias())
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self) -> Any:
        return self.base_cell.params

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return self.base_cell.state_info(batch_size)

    def _begin_state(
        self, batch_size: int, func: Callable[..., Tensor], kwargs: dict[str, Any]
    ) -> list[Tensor]:
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
        check_rates("ZoneoutCell", zoneout_outputs=zoneout_outputs, zoneout_states=zoneout_states)
        self._prev_output: Tensor | None = None
        super().__init__(base_cell)
        self.zoneout_outputs = float(zoneout_outputs)
        self.zoneout_states = float(zoneout_states)

    def _alias(self) -> str:
        return "zoneout"

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

    def _unroll(self, u: _Unroll) -> tuple[Sequenceish, list[Tensor]]:
        if u.begin_state is None:
            fmt, _, batch_size = _format_sequence(u.length, u.inputs, u.layout, None)
            u = u._replace(begin_state=self._default_begin_state(fmt, batch_size))
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(*u)
        finally:
            self.base_cell._modified = True
        merged = isinstance(outputs, Tensor)
        ins, axis, batch_size = _format_sequence(u.length, u.inputs, u.layout, merged)
        if u.valid_length is not None:
            ref = ins if isinstance(ins, Tensor) else ins[0]
            vl = _lengths_tensor(u.valid_length, batch_size, ref.device)
            ins = _mask_sequence(ins, u.length, vl, axis)
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
        super().__init__(prefix="")  # as MXNet: no prefix of its own
        self.l_cell = l_cell
        self.r_cell = r_cell
        self._output_prefix = output_prefix

    def __call__(self, inputs: Any, states: Any = None, *args: Any, **kwargs: Any) -> Any:
        raise MXNetError("a BidirectionalCell cannot be stepped: call unroll() instead")

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return self.l_cell.state_info(batch_size) + self.r_cell.state_info(batch_size)

    def _begin_state(
        self, batch_size: int, func: Callable[..., Tensor], kwargs: dict[str, Any]
    ) -> list[Tensor]:
        l_states = self.l_cell.begin_state(batch_size, func=func, **kwargs)
        return l_states + self.r_cell.begin_state(batch_size, func=func, **kwargs)

    def _unroll(self, u: _Unroll) -> tuple[Sequenceish, list[Tensor]]:
        steps, axis, batch_size = _format_sequence(u.length, u.inputs, u.layout, False)
        vl = None if u.valid_length is None else _lengths_tensor(u.valid_length, batch_size, steps[0].device)
        states = (
            list(u.begin_state) if u.begin_state is not None else self._default_begin_state(steps, batch_size)
        )
        n_l = len(self.l_cell.state_info(batch_size))
        if len(states) != n_l + len(self.r_cell.state_info(batch_size)):
            raise ValueError(
                f"BidirectionalCell expects {len(self.state_info(batch_size))} state tensor(s), "
                f"got {len(states)}"
            )
        l_out, l_states = self.l_cell.unroll(u.length, steps, states[:n_l], u.layout, False, vl)
        r_in = _reverse_sequence(steps, len(steps), vl, axis)
        r_out, r_states = self.r_cell.unroll(u.length, r_in, states[n_l:], u.layout, False, vl)
        r_out = _reverse_sequence(r_out, len(steps), vl, axis)
        outputs: Sequenceish
        if is_symbol(steps):  # MXNet's node names: '<output_prefix>t<step>'
            from ... import symbol as F

            outputs = [F.concat(lo, ro, dim=1, name=f"{self._output_prefix}t{i}")
                       for i, (lo, ro) in enumerate(zip(l_out, r_out))]
        else:
            outputs = [torch.cat([lo, ro], dim=-1) for lo, ro in zip(l_out, r_out)]
        merge = bool(u.merge_outputs) if u.merge_outputs is not None or vl is None else True
        outputs, _, _ = _format_sequence(u.length, outputs, u.layout, merge)
        return outputs, list(l_states) + list(r_states)

    def __repr__(self) -> str:
        return f"BidirectionalCell(forward={self.l_cell!r}, backward={self.r_cell!r})"
