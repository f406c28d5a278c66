"""Gluon recurrent layers (fused RNN/LSTM/GRU) and recurrent cells."""

from . import rnn_cell
from .rnn_cell import *  # noqa: F403  (the cells; rnn_cell.__all__ names them once)
from .rnn_layer import GRU, LSTM, RNN

__all__ = ["RNN", "LSTM", "GRU", *rnn_cell.__all__]
