"""Symbolic cells built from other cells (``mx.rnn``): stacks, dropout, the modifiers (zoneout,
residual) and the bidirectional wrapper."""

from __future__ import annotations

from typing import Any

from .. import symbol as sym
from ..base import MXNetError
from ..gluon.rnn.wrapper_cells import check_rates, split_by_sizes
from .rnn_cell import BaseRNNCell, RNNParams, Symbol, normalize_sequence

__all__ = ["SequentialRNNCell", "DropoutCell", "ModifierCell", "ZoneoutCell", "ResidualCell",
           "BidirectionalCell"]


def _split_states(cells: list[BaseRNNCell], states: list[Symbol]) -> list[list[Symbol]]:
    return split_by_sizes(states, [len(c.state_info) for c in cells], "the cells")


class _Container(BaseRNNCell):
    """Cells holding other cells (``self._cells``): their states, in order, are the container's."""

    _cells: list[BaseRNNCell]

    @property
    def state_info(self) -> list[dict[str, Any]]:
        return [i for c in self._cells for i in c.state_info]

    def begin_state(self, **kwargs: Any) -> list[Symbol]:  # type: ignore[override]
        if self._modified:
            raise MXNetError(f"{type(self).__name__} is wrapped by a modifier cell: call begin_state() "
                             "on the modifier cell instead")
        return [s for c in self._cells for s in c.begin_state(**kwargs)]

    def unpack_weights(self, args: dict[str, Any]) -> dict[str, Any]:
        for cell in self._cells:
            args = cell.unpack_weights(args)
        return args

    def pack_weights(self, args: dict[str, Any]) -> dict[str, Any]:
        for cell in self._cells:
            args = cell.pack_weights(args)
        return args


class SequentialRNNCell(_Container):
    """A stack of cells: each cell's output is the next one's input."""

    def __init__(self, params: RNNParams | None = None) -> None:
        super().__init__(prefix="", params=params)
        self._override_cell_params = params is not None
        self._cells = []

    def add(self, cell: BaseRNNCell) -> None:
        """Append ``cell``; its weights join this stack's container (and, when the stack was given
        ``params``, the cell takes those)."""
        if not isinstance(cell, BaseRNNCell):
            raise TypeError(f"SequentialRNNCell.add expects an mx.rnn cell, got {type(cell).__name__}")
        self._cells.append(cell)
        if self._override_cell_params:
            if not cell._own_params:
                raise MXNetError("SequentialRNNCell was given params: the cells added must not have "
                                 "their own params container")
            cell.params.variables.update(self.params.variables)
        self.params.variables.update(cell.params.variables)

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        self._counter += 1
        next_states: list[Symbol] = []
        for cell, st in zip(self._cells, _split_states(self._cells, states)):
            if isinstance(cell, BidirectionalCell):
                raise MXNetError("a BidirectionalCell cannot be stepped: call unroll() instead")
            inputs, st = cell(inputs, st)
            next_states.extend(st)
        return inputs, next_states

    def unroll(self, length: int, inputs: Any, begin_state: list[Symbol] | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list[Symbol]]:
        self.reset()
        if not self._cells:
            raise MXNetError("SequentialRNNCell is empty: add() cells first")
        if begin_state is None:
            steps, _ = normalize_sequence(length, inputs, layout, False)
            inputs, begin_state = steps, self._zero_states(steps[0], 0)
        next_states: list[Symbol] = []
        last = len(self._cells) - 1
        for i, (cell, st) in enumerate(zip(self._cells, _split_states(self._cells, begin_state))):
            inputs, st = cell.unroll(length, inputs, begin_state=st, layout=layout,
                                     merge_outputs=merge_outputs if i == last else None)
            next_states.extend(st)
        return inputs, next_states


class DropoutCell(BaseRNNCell):
    """Dropout of the inputs (``p = dropout``); no state."""

    def __init__(self, dropout: float, prefix: str = "dropout_", params: RNNParams | None = None) -> None:
        super().__init__(prefix, params)
        check_rates("DropoutCell", dropout=dropout)
        self.dropout = float(dropout)

    @property
    def state_info(self) -> list[dict[str, Any]]:
        return []

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        if self.dropout > 0:
            inputs = sym.Dropout(data=inputs, p=self.dropout)
        return inputs, states

    def unroll(self, length: int, inputs: Any, begin_state: list[Symbol] | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list[Symbol]]:
        self.reset()
        inputs, _ = normalize_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, sym.Symbol):
            return self(inputs, [])[0], []
        return super().unroll(length, inputs, begin_state=[], layout=layout, merge_outputs=merge_outputs)


class ModifierCell(BaseRNNCell):
    """Base class of cells that change another cell's behaviour; the wrapped cell can then only
    be used through the modifier."""

    def __init__(self, base_cell: BaseRNNCell) -> None:
        if base_cell._modified:
            raise MXNetError(f"{type(base_cell).__name__} is already wrapped by a modifier cell")
        base_cell._modified = True
        super().__init__()
        self.base_cell = base_cell

    @property
    def params(self) -> RNNParams:
        self._own_params = False
        return self.base_cell.params

    @property
    def state_info(self) -> list[dict[str, Any]]:
        return self.base_cell.state_info

    def begin_state(self, func: Any = sym.zeros, **kwargs: Any) -> list[Symbol]:
        if self._modified:
            raise MXNetError(f"{type(self).__name__} is wrapped by a modifier cell: call begin_state() "
                             "on the modifier cell instead")
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(func=func, **kwargs)
        finally:
            self.base_cell._modified = True

    def unpack_weights(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.base_cell.pack_weights(args)


class ZoneoutCell(ModifierCell):
    """Zoneout: each output/state unit keeps its previous value with probability
    ``zoneout_outputs``/``zoneout_states`` (in training; masks drawn by Dropout)."""

    def __init__(self, base_cell: BaseRNNCell, zoneout_outputs: float = 0.0,
                 zoneout_states: float = 0.0) -> None:
        if not base_cell._steppable:
            raise MXNetError(f"ZoneoutCell cannot wrap a {type(base_cell).__name__} (it cannot be stepped); "
                             "unfuse it or wrap the cells inside it")
        check_rates("ZoneoutCell", zoneout_outputs=zoneout_outputs, zoneout_states=zoneout_states)
        super().__init__(base_cell)
        self.zoneout_outputs, self.zoneout_states = float(zoneout_outputs), float(zoneout_states)
        self.prev_output: Symbol | None = None

    def reset(self) -> None:
        super().reset()
        self.prev_output = None

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        next_output, next_states = self.base_cell(inputs, states)

        def keep(p: float, like: Symbol) -> Symbol:  # 1 where the new value is kept
            return sym.Dropout(sym.ones_like(like), p=p)

        output = next_output
        if self.zoneout_outputs != 0.0:
            prev = self.prev_output if self.prev_output is not None else sym.zeros_like(next_output)
            output = sym.where(keep(self.zoneout_outputs, next_output), next_output, prev)
        if self.zoneout_states != 0.0:
            next_states = [sym.where(keep(self.zoneout_states, new), new, old)
                           for new, old in zip(next_states, states)]
        self.prev_output = output
        return output, next_states


class ResidualCell(ModifierCell):
    """Adds the input to the base cell's output (``<output name>_plus_residual``)."""

    def __call__(self, inputs: Symbol, states: list[Symbol]) -> tuple[Symbol, list[Symbol]]:
        output, states = self.base_cell(inputs, states)
        return sym.elemwise_add(output, inputs, name=f"{output.name}_plus_residual"), states

    def unroll(self, length: int, inputs: Any, begin_state: list[Symbol] | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list[Symbol]]:
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs, begin_state=begin_state, layout=layout,
                                                    merge_outputs=merge_outputs)
        finally:
            self.base_cell._modified = True
        merge = isinstance(outputs, sym.Symbol) if merge_outputs is None else merge_outputs
        inputs, _ = normalize_sequence(length, inputs, layout, merge)
        if merge:
            return sym.elemwise_add(outputs, inputs, name=f"{outputs.name}_plus_residual"), states
        return [sym.elemwise_add(o, i, name=f"{o.name}_plus_residual")
                for o, i in zip(outputs, inputs)], states


class BidirectionalCell(_Container):
    """Runs ``l_cell`` forward and ``r_cell`` backward in time; outputs are concatenated
    (``<output_prefix>t<i>``, or ``<output_prefix>out`` merged).  It can only be unrolled."""

    _steppable = False

    def __init__(self, l_cell: BaseRNNCell, r_cell: BaseRNNCell, params: RNNParams | None = None,
                 output_prefix: str = "bi_") -> None:
        super().__init__("", params=params)
        self._output_prefix = output_prefix
        self._override_cell_params = params is not None
        if self._override_cell_params:
            if not (l_cell._own_params and r_cell._own_params):
                raise MXNetError("BidirectionalCell was given params: its cells must not have their own")
            l_cell.params.variables.update(self.params.variables)
            r_cell.params.variables.update(self.params.variables)
        self.params.variables.update(l_cell.params.variables)
        self.params.variables.update(r_cell.params.variables)
        self._cells = [l_cell, r_cell]

    def unroll(self, length: int, inputs: Any, begin_state: list[Symbol] | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list[Symbol]]:
        self.reset()
        steps, axis = normalize_sequence(length, inputs, layout, False)
        if begin_state is None:
            begin_state = self._zero_states(steps[0], 0)
        (l_cell, r_cell), (l_begin, r_begin) = self._cells, _split_states(self._cells, begin_state)
        l_out, l_states = l_cell.unroll(length, steps, begin_state=l_begin, layout=layout,
                                        merge_outputs=merge_outputs)
        r_out, r_states = r_cell.unroll(length, list(reversed(steps)), begin_state=r_begin, layout=layout,
                                        merge_outputs=merge_outputs)
        if merge_outputs is None:
            merge_outputs = isinstance(l_out, sym.Symbol) and isinstance(r_out, sym.Symbol)
            if not merge_outputs:
                l_out, _ = normalize_sequence(length, l_out, layout, False)
                r_out, _ = normalize_sequence(length, r_out, layout, False)
        if merge_outputs:
            outputs = sym.Concat(l_out, sym.reverse(r_out, axis=axis), dim=2,
                                 name=f"{self._output_prefix}out")
        else:
            outputs = [sym.Concat(lo, ro, dim=1, name=f"{self._output_prefix}t{i}")
                       for i, (lo, ro) in enumerate(zip(l_out, reversed(list(r_out))))]
        return outputs, l_states + r_states
