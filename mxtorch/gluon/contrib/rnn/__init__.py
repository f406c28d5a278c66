"""MXNet's ``gluon.contrib.rnn``: LSTMPCell (the same class as ``gluon.rnn.LSTMPCell``) and
VariationalDropoutCell (one dropout mask per sequence)."""

from __future__ import annotations

from ...rnn import LSTMPCell
from .rnn_cell import VariationalDropoutCell

__all__ = ["LSTMPCell", "VariationalDropoutCell"]
