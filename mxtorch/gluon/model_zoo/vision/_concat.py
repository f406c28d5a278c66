"""Parallel branches whose outputs are concatenated along the channel axis."""

from __future__ import annotations

from typing import Any

import torch

from ... import nn
from ...block import HybridBlock


class Concurrent(HybridBlock):
    """Runs every child on the same input and concatenates their outputs along ``axis``
    (MXNet's ``HybridConcurrent``, used by the Inception, SqueezeNet and DenseNet blocks)."""

    def __init__(self, axis: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.axis = axis
        self.branches = nn.HybridSequential()

    def add(self, *blocks: HybridBlock) -> Concurrent:
        self.branches.add(*blocks)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([branch(x) for branch in self.branches], dim=self.axis)
