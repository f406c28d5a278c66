"""Fusion: packing many small tensors into flat buckets, one copy in and one out, and the plan
that groups a list of keys into such buckets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..base import Key, KVStoreError

ALONE_BYTES = 4 << 20
"""Tensors of a list at least this large are reduced in place on their own, not bucketed."""
DEFAULT_BUCKET_BYTES = 25 << 20
"""Default size cap of a gradient bucket (DDP's default)."""



# ---- buffers ---------------------------------------------------------------------------


@dataclass
class _Job:
    key: Key
    buf: torch.Tensor  # contiguous; reduced or broadcast in place
    dsts: list[torch.Tensor]
    done: int | None  # the index of the out that ``buf`` shares memory with: no copy needed

    @classmethod
    def of(cls, key: Key, buffer: tuple[torch.Tensor, int | None], dsts: list[torch.Tensor]) -> _Job:
        return cls(key, buffer[0], dsts, buffer[1])


def _holds_sparse(value: Any) -> bool:
    """Whether a pushed value (a tensor or a list of them) is sparse (row_sparse)."""
    if isinstance(value, torch.Tensor):
        return value.layout != torch.strided
    return isinstance(value, (list, tuple)) and any(
        isinstance(t, torch.Tensor) and t.layout != torch.strided for t in value)


def _check_same(key: Key, srcs: list[torch.Tensor], dsts: list[torch.Tensor], like: torch.Tensor) -> None:
    for t in [*srcs, *dsts]:
        if t.shape != like.shape:
            raise KVStoreError(f"shape mismatch for key {key!r}: {tuple(like.shape)} and {tuple(t.shape)} in "
                               "the same call: every value and out of a key must have one shape")


def _sum_buffer(srcs: list[torch.Tensor], dsts: list[torch.Tensor]) -> tuple[torch.Tensor, int | None]:
    """The contiguous tensor to reduce in place, and the index of the out it already is (if any)."""
    first = srcs[0].detach()
    if len(srcs) == 1:
        same = next((i for i, d in enumerate(dsts) if d is srcs[0]), None)
        if same is not None and first.is_contiguous():
            return first, same  # in place: no copy at all
        out = dsts[0].detach()
        if out.is_contiguous() and out.dtype == first.dtype and out.device == first.device:
            return out.copy_(first), 0
        return first.clone(memory_format=torch.contiguous_format), None
    acc = first.clone(memory_format=torch.contiguous_format)
    for s in srcs[1:]:
        acc.add_(s.detach().to(acc.device, non_blocking=acc.device.type != "cpu"))  # D2H must block
    return acc, None


def _broadcast_buffer(src: torch.Tensor, dsts: list[torch.Tensor],
                      rank: int) -> tuple[torch.Tensor, int | None]:
    """Like :func:`_sum_buffer`: only rank 0's content matters."""
    first = src.detach()
    same = next((i for i, d in enumerate(dsts) if d is src), None)
    if same is not None and first.is_contiguous():
        return first, same
    out = dsts[0].detach()
    if out.is_contiguous() and out.dtype == first.dtype and out.device == first.device:
        return (out.copy_(first) if rank == 0 else out), 0
    return first.clone(memory_format=torch.contiguous_format), None


def _plan(jobs: list[_Job]) -> list[list[_Job]]:
    """Group small buffers by (dtype, device) into buckets; large ones stay alone."""
    alone: list[list[_Job]] = []
    small: dict[tuple[torch.dtype, torch.device], list[_Job]] = {}
    for j in jobs:
        if j.buf.numel() * j.buf.element_size() >= ALONE_BYTES:
            alone.append([j])
        else:
            small.setdefault((j.buf.dtype, j.buf.device), []).append(j)
    buckets = list(alone)
    for group_jobs in small.values():
        current: list[_Job] = []
        size = 0
        for j in group_jobs:
            nbytes = j.buf.numel() * j.buf.element_size()
            if current and size + nbytes > DEFAULT_BUCKET_BYTES:
                buckets.append(current)
                current, size = [], 0
            current.append(j)
            size += nbytes
        if current:
            buckets.append(current)
    return buckets
