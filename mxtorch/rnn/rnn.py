"""Checkpoints of networks built from ``mx.rnn`` cells: the cells' weights are saved split per
gate (``unpack_weights``) and packed again on load."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..model_files import load_checkpoint, save_checkpoint
from .rnn_cell import BaseRNNCell

__all__ = ["save_rnn_checkpoint", "load_rnn_checkpoint", "do_rnn_checkpoint"]

Cells = BaseRNNCell | Sequence[BaseRNNCell]


def _cells(cells: Cells) -> Sequence[BaseRNNCell]:
    return [cells] if isinstance(cells, BaseRNNCell) else cells


def save_rnn_checkpoint(cells: Cells, prefix: str, epoch: int, symbol: Any, arg_params: dict[str, Any],
                        aux_params: dict[str, Any]) -> None:
    """``mx.model.save_checkpoint`` with the cells' weights unpacked per gate."""
    for cell in _cells(cells):
        arg_params = cell.unpack_weights(arg_params)
    save_checkpoint(prefix, epoch, symbol, arg_params, aux_params)


def load_rnn_checkpoint(cells: Cells, prefix: str, epoch: int) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``mx.model.load_checkpoint`` with the cells' weights packed back: (symbol, args, auxs)."""
    sym, arg, aux = load_checkpoint(prefix, epoch)
    arg = dict(arg)
    for cell in _cells(cells):
        arg = cell.pack_weights(arg)
    return sym, arg, aux


def do_rnn_checkpoint(cells: Cells, prefix: str, period: int = 1) -> Callable[..., None]:
    """An epoch-end callback saving an RNN checkpoint every ``period`` epochs."""
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any = None, arg: Any = None, aux: Any = None) -> None:
        if (iter_no + 1) % period == 0:
            save_rnn_checkpoint(cells, prefix, iter_no + 1, sym, arg, aux)

    return _callback
