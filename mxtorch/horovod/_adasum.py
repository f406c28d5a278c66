"""Adasum (``op=hvd.Adasum``): Horovod's adaptive summation of gradients.

Two gradients combine as ``(1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b``: orthogonal
gradients add, identical ones average, and anything between is weighted by how much they agree.
Ranks combine pairwise up a binary tree in rank order ((0, 1), (2, 3), then the pairs' results,
...; with a number of ranks that is not a power of two the last one is carried up a level).
Each tensor of a grouped call combines on its own, as Horovod does per tensor.

Horovod's kernels run the tree with recursive halving; here every rank gathers all ranks'
tensors (``size`` times the memory of one) and computes the same tree in float64, so every rank
gets bit-identical results.  That is the reference algorithm, not a fast one: use it for
correctness and modest sizes.
"""

from __future__ import annotations

import torch

from ..profiler import span
from ._control import all_gather_flat
from ._scope import Scope

__all__ = ["adasum_pair", "adasum_tree", "adasum_reduce"]


def adasum_pair(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Adasum of two gradients (float64); a zero gradient leaves the other unchanged."""
    dot = torch.dot(a.reshape(-1), b.reshape(-1))
    na, nb = torch.dot(a.reshape(-1), a.reshape(-1)), torch.dot(b.reshape(-1), b.reshape(-1))
    ca = 1.0 - dot / (2 * na) if na > 0 else torch.ones((), dtype=a.dtype)
    cb = 1.0 - dot / (2 * nb) if nb > 0 else torch.ones((), dtype=b.dtype)
    return ca * a + cb * b


def adasum_tree(values: list[torch.Tensor]) -> torch.Tensor:
    """Combine ``values`` (one per rank, in rank order) pairwise up a binary tree."""
    level = list(values)
    while len(level) > 1:
        nxt = [adasum_pair(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def adasum_reduce(tensors: list[torch.Tensor], prescale: float, postscale: float, inplace: bool,
                  where: Scope) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    with torch.no_grad():
        for t in tensors:
            mine = t.detach().reshape(-1).to(torch.float64) * prescale
            if where.size > 1:
                every = torch.empty(where.size * mine.numel(), dtype=torch.float64, device=mine.device)
                with span("allreduce", keys="adasum", bytes=every.numel() * 8):
                    all_gather_flat(every, mine.contiguous(), group=where.group)
                parts = list(every.view(where.size, -1).unbind(0))
            else:
                parts = [mine]
            result = (adasum_tree(parts) * postscale).view(t.shape).to(t.dtype)
            if inplace:
                t.copy_(result)
                out.append(t)
            else:
                out.append(result)
    return out
