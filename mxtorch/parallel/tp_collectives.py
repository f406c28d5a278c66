"""The two collectives of tensor-parallel layers as autograd pieces on DTensor: the column layer's
input (identity forward, gradient all-reduced backward) and the row layer's output (partial
outputs all-reduced forward, identity backward).  Shared by :mod:`.tensor` and :mod:`.tp_rnn`."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["copy_in", "reduce_out"]


def copy_in(x: torch.Tensor, mesh: Any) -> torch.Tensor:
    """Identity forward; all-reduce of the gradient backward (the column layer's input)."""
    from torch.distributed.tensor import DTensor, Partial, Replicate

    return DTensor.from_local(x, mesh, [Replicate()], run_check=False).to_local(grad_placements=[Partial()])


def reduce_out(x: torch.Tensor, mesh: Any) -> torch.Tensor:
    """All-reduce forward (the row layer's partial outputs); identity backward."""
    from torch.distributed.tensor import DTensor, Partial, Replicate

    d = DTensor.from_local(x, mesh, [Partial()], run_check=False)
    return d.redistribute(mesh, [Replicate()]).to_local()
