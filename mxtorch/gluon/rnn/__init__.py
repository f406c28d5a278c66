"""Gluon recurrent layers (fused RNN/LSTM/GRU) and recurrent cells."""

from .rnn_cell import (
    BidirectionalCell,
    DropoutCell,
    GRUCell,
    HybridRecurrentCell,
    HybridSequentialRNNCell,
    LSTMCell,
    LSTMPCell,
    ModifierCell,
    RecurrentCell,
    ResidualCell,
    RNNCell,
    SequentialRNNCell,
    ZoneoutCell,
)
from .rnn_layer import GRU, LSTM, RNN

__all__ = [
    "RNN",
    "LSTM",
    "GRU",
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
