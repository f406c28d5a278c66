"""MXNet's ``gluon.contrib.rnn``: LSTMPCell (the same class as ``gluon.rnn.LSTMPCell``),
VariationalDropoutCell (one dropout mask per sequence), the convolutional RNN/LSTM/GRU cells
(1-D, 2-D, 3-D) and ``rnn_cell.dynamic_unroll``."""

from __future__ import annotations

from ...rnn import LSTMPCell
from . import conv_rnn_cell, rnn_cell
from .conv_rnn_cell import (
    Conv1DGRUCell,
    Conv1DLSTMCell,
    Conv1DRNNCell,
    Conv2DGRUCell,
    Conv2DLSTMCell,
    Conv2DRNNCell,
    Conv3DGRUCell,
    Conv3DLSTMCell,
    Conv3DRNNCell,
)
from .rnn_cell import VariationalDropoutCell, dynamic_unroll

__all__ = ["LSTMPCell", "VariationalDropoutCell", "dynamic_unroll", "conv_rnn_cell", "rnn_cell",
           "Conv1DRNNCell", "Conv2DRNNCell", "Conv3DRNNCell", "Conv1DLSTMCell", "Conv2DLSTMCell",
           "Conv3DLSTMCell", "Conv1DGRUCell", "Conv2DGRUCell", "Conv3DGRUCell"]
