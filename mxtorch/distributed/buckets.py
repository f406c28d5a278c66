"""Gradient buckets in backward order: which tensors share a bucket (the allreduce store's overlap
and ZeRO 2's reduction lay their buckets out the same way)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["backward_order_groups"]


def backward_order_groups(tensors: Iterable[tuple[int, torch.Tensor]], bucket_bytes: int) -> list[list[int]]:
    """The indices of ``tensors`` (given in the order backward produces them) grouped into
    buckets of one dtype and device holding at most ``bucket_bytes`` each (a larger tensor gets a
    bucket of its own); buckets in the order they fill, then the partly filled ones."""
    groups: list[list[int]] = []
    open_: dict[tuple[torch.dtype, torch.device], tuple[list[int], int]] = {}
    for i, t in tensors:
        key = (t.dtype, t.device)
        nbytes = t.numel() * t.element_size()
        members, size = open_.get(key, ([], 0))
        if members and size + nbytes > bucket_bytes:
            groups.append(members)
            members, size = [], 0
        open_[key] = (members + [i], size + nbytes)
    groups.extend(members for members, _ in open_.values() if members)
    return groups
