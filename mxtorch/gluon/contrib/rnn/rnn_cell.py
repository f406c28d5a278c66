"""VariationalDropoutCell: dropout whose mask is drawn once per sequence (Gal & Ghahramani,
"A Theoretically Grounded Application of Dropout in Recurrent Neural Networks", 2016)."""

from __future__ import annotations

import torch

from .... import autograd
from ....base import MXNetError
from ...rnn.base_cell import RecurrentCell, Tensor, _dropout
from ...rnn.wrapper_cells import BidirectionalCell, ModifierCell, check_rates

__all__ = ["VariationalDropoutCell"]


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
