"""Parallel branches whose outputs are concatenated along the channel axis."""

from __future__ import annotations

from typing import Any

import torch

from ... import nn


class Concurrent(nn.HybridSequential):
    """Runs every child on the same input and concatenates their outputs along ``axis``
    (MXNet's ``HybridConcurrent``, used by the Inception, SqueezeNet and DenseNet blocks).

    The children are its own (``net[0]``, ``net[1]``...), as in a HybridSequential, so their
    names follow MXNet's: with ``prefix=''`` they are named in the enclosing scope.
    """

    def __init__(self, axis: int = 1, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        self.axis = axis

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return torch.cat([branch(x) for branch in self], dim=self.axis)
