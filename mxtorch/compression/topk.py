"""Top-k sparsification with error feedback (Aji & Heafield 2017; Lin et al., "Deep Gradient
Compression", 2018): send the ``k`` entries of largest magnitude, keep the rest as residual."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from .base import CompressionContext, CompressionError, Compressor, Key, Payload

__all__ = ["TopKCompressor"]


class TopKCompressor(Compressor):
    """Keep ``k = ceil(ratio * numel)`` (at least 1) entries of ``gradient + residual``.

    The payload is ``[values, indices]`` (indices as int32, flat positions); every entry not
    sent is fed back into the next gradient of the same key.

    >>> c = TopKCompressor(ratio=0.25)
    >>> payload, ctx = c.compress(torch.tensor([0.1, -3.0, 0.2, 1.0]))
    >>> c.decompress(payload, ctx)
    tensor([ 0., -3.,  0.,  0.])
    """

    name = "topk"
    uses_error_feedback = True

    def __init__(self, ratio: float = 0.01) -> None:
        super().__init__()
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise CompressionError(f"topk ratio must be a number in (0, 1], got {ratio!r}")
        self.ratio = float(ratio)

    def params(self) -> dict[str, Any]:
        return {"ratio": self.ratio}

    def k_for(self, numel: int) -> int:
        """How many entries a gradient of ``numel`` elements sends."""
        return min(numel, max(1, math.ceil(self.ratio * numel)))

    def _encode(self, flat: torch.Tensor, ctx: CompressionContext,
                key: Key) -> tuple[Payload, CompressionContext]:
        if flat.numel() >= 2**31:
            raise CompressionError(
                f"topk sends int32 indices; a tensor of {flat.numel()} elements is too big")
        k = self.k_for(flat.numel())
        indices = torch.topk(flat.abs(), k, sorted=False).indices
        return [flat[indices], indices.to(torch.int32)], replace(ctx, extra={"k": k})

    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        """The dense gradient; CompressionError for a payload that is not ``[float values, int
        indices]`` of one length with every index inside the gradient."""
        values, indices = self._check_payload(payload, 2, "topk")
        if values.shape != indices.shape or values.dim() != 1:
            raise CompressionError(f"topk payload needs 1-D values and indices of one length, got "
                                   f"{tuple(values.shape)} and {tuple(indices.shape)}")
        if not values.is_floating_point() or indices.dtype not in (torch.int32, torch.int64):
            raise CompressionError(f"topk payload needs float values and int32 indices, got {values.dtype} "
                                   f"and {indices.dtype}")
        if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= ctx.numel):
            raise CompressionError(f"topk indices outside 0..{ctx.numel - 1}")
        dense = torch.zeros(ctx.numel, dtype=values.dtype, device=values.device)
        dense[indices.to(torch.int64)] = values
        return dense.to(ctx.dtype).reshape(ctx.shape).to(ctx.device)
