"""VariationalDropoutCell: dropout whose mask is drawn once per sequence (Gal & Ghahramani,
"A Theoretically Grounded Application of Dropout in Recurrent Neural Networks", 2016), and
``dynamic_unroll``: a cell run over a sequence tensor whose samples may end early."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .... import autograd
from ....base import MXNetError
from ...rnn._sym_steps import is_symbol
from ...rnn.base_cell import RecurrentCell, Tensor, _dropout, _time_mask
from ...rnn.wrapper_cells import BidirectionalCell, ModifierCell, check_rates

__all__ = ["VariationalDropoutCell", "dynamic_unroll"]


class VariationalDropoutCell(ModifierCell):
    """Applies dropout to the inputs, the first state (``h``) and the outputs of ``base_cell``
    with one mask per sequence: the mask drawn at the first step is kept until ``reset()`` (which
    ``unroll`` calls).  Rates are probabilities of dropping; dropout acts in training only."""

    def __init__(self, base_cell: RecurrentCell, drop_inputs: float = 0.0, drop_states: float = 0.0,
                 drop_outputs: float = 0.0) -> None:
        if isinstance(base_cell, BidirectionalCell):
            raise MXNetError("VariationalDropoutCell cannot wrap a BidirectionalCell (it cannot be "
                             "stepped): wrap the cells inside it instead")
        check_rates("VariationalDropoutCell", drop_inputs=drop_inputs, drop_states=drop_states,
                    drop_outputs=drop_outputs)
        super().__init__(base_cell)  # its reset() makes the (empty) mask table
        self.drop_inputs, self.drop_states, self.drop_outputs = map(float, (drop_inputs, drop_states,
                                                                            drop_outputs))

    def reset(self) -> None:
        super().reset()
        self._masks: dict[str, Tensor] = {}

    def _alias(self) -> str:
        return "vardrop"

    def _drop(self, key: str, x: Tensor, rate: float) -> Tensor:
        if rate <= 0.0 or not autograd.is_training():
            return x
        mask = self._masks.get(key)
        if mask is None:  # the first step of the sequence draws the mask the others reuse
            mask = self._masks[key] = _dropout(torch.ones_like(x), rate, ())
        return x * mask

    def forward(self, inputs: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        states = list(states)
        if states:
            states[0] = self._drop("states", states[0], self.drop_states)
        output, next_states = self.base_cell(self._drop("inputs", inputs, self.drop_inputs), states)
        return self._drop("outputs", output, self.drop_outputs), next_states

    def __repr__(self) -> str:
        return (f"VariationalDropoutCell(drop_inputs={self.drop_inputs}, drop_states={self.drop_states}, "
                f"drop_outputs={self.drop_outputs}, {self.base_cell!r})")


def dynamic_unroll(cell: RecurrentCell, inputs: Tensor, begin_state: Sequence[Tensor],
                   drop_inputs: float = 0.0, drop_outputs: float = 0.0, layout: str = "TNC",
                   valid_length: Any = None) -> tuple[Tensor, list[Tensor]]:
    """Run ``cell`` over every step of ``inputs`` (one tensor in ``layout``, 'TNC' or 'NTC')
    from ``begin_state``; return the outputs stacked in ``layout`` and the last states.

    With ``valid_length`` (one length per sample) a sample's states stop changing after its last
    valid step and its outputs beyond it are zeros.  ``drop_inputs`` / ``drop_outputs`` are
    dropout rates applied in training with one mask per sequence (shared over time).
    """
    if layout not in ("TNC", "NTC"):
        raise ValueError(f"dynamic_unroll: layout must be 'TNC' or 'NTC', got {layout!r}")
    if is_symbol(inputs) or not isinstance(inputs, Tensor):
        raise MXNetError("dynamic_unroll runs on arrays: for a graph use cell.unroll(length, inputs, ...)")
    axis = layout.find("T")
    seq = inputs.movedim(axis, 0)
    training = autograd.is_training()
    if drop_inputs and training:
        seq = _dropout(seq, float(drop_inputs), (0,))
    states = list(begin_state)
    lengths = None if valid_length is None else torch.as_tensor(valid_length, device=seq.device)
    outputs = []
    for t in range(seq.shape[0]):
        out, new_states = cell(seq[t], states)
        if lengths is not None:  # samples already past their end keep their states
            live = lengths > t
            new_states = [torch.where(live.reshape(-1, *([1] * (n.dim() - 1))), n, s)
                          for n, s in zip(new_states, states)]
        outputs.append(out)
        states = list(new_states)
    stacked = torch.stack(outputs, 0)
    if drop_outputs and training:
        stacked = _dropout(stacked, float(drop_outputs), (0,))
    if lengths is not None:
        mask = _time_mask(stacked.shape[0], lengths)
        stacked = stacked * mask.reshape(*mask.shape, *([1] * (stacked.dim() - 2))).to(stacked.dtype)
    return stacked.movedim(0, axis), states
