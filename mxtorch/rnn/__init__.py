"""MXNet 1.x's symbolic recurrent API, ``mx.rnn``: cells that build graphs one step at a time
(RNN, LSTM, GRU, fused, convolutional, and the stacking/dropout/zoneout/residual/bidirectional
wrappers), ``encode_sentences`` and ``BucketSentenceIter`` for bucketed text, and checkpoints
with per-gate weights."""

from __future__ import annotations

from . import io, wrappers
from .conv_cells import BaseConvRNNCell, ConvGRUCell, ConvLSTMCell, ConvRNNCell
from .fused import FusedRNNCell
from .io import BucketSentenceIter, encode_sentences
from .rnn import do_rnn_checkpoint, load_rnn_checkpoint, save_rnn_checkpoint
from .rnn_cell import BaseRNNCell, GRUCell, LSTMCell, RNNCell, RNNParams
from .wrappers import *  # noqa: F403  (the stacking, dropout, modifier and bidirectional cells)

__all__ = [
    "io", "RNNParams", "BaseRNNCell", "RNNCell", "LSTMCell", "GRUCell", "FusedRNNCell",
    *wrappers.__all__, "BaseConvRNNCell", "ConvRNNCell", "ConvLSTMCell", "ConvGRUCell",
    "encode_sentences", "BucketSentenceIter", "save_rnn_checkpoint", "load_rnn_checkpoint",
    "do_rnn_checkpoint",
]
