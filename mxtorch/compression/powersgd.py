"""PowerSGD low-rank compression with error feedback (Vogels et al., NeurIPS 2019).

A gradient is viewed as a matrix ``M`` of ``shape[0]`` rows; one step of power iteration,
warm-started from the previous step's ``Q`` of the same key, gives ``M ~= P @ Q.T`` with ``P``
(orthonormal columns) of ``rows x rank`` and ``Q`` of ``cols x rank``; the payload is
``[P, Q]``.  What the approximation misses is fed back into the next gradient.

In the paper ``P`` is all-reduced before ``Q`` is computed so that workers agree on one basis;
this compressor is the single-worker half of that scheme (``compress``/``decompress`` only).
Tensors with fewer than two dimensions, or too small for the rank to save anything, are sent
uncompressed (payload ``[flat]``, no residual).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch

from .base import CompressionContext, CompressionError, Compressor, Key, Payload

__all__ = ["PowerSGDCompressor"]


class PowerSGDCompressor(Compressor):
    """Rank-``rank`` PowerSGD with error feedback and warm-started ``Q`` (one per key)."""

    name = "powersgd"
    uses_error_feedback = True

    def __init__(self, rank: int = 1, seed: int = 0) -> None:
        super().__init__()
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise CompressionError(f"powersgd rank must be an int >= 1, got {rank!r}")
        self.rank = rank
        self.seed = seed
        self._q: dict[Key, torch.Tensor] = {}

    def params(self) -> dict[str, Any]:
        return {"rank": self.rank, "seed": self.seed}

    def _encode(self, flat: torch.Tensor, ctx: CompressionContext,
                key: Key) -> tuple[Payload, CompressionContext]:
        if len(ctx.shape) < 2 or ctx.numel == 0:
            return [flat], replace(ctx, extra={"low_rank": False})
        rows = ctx.shape[0]
        cols = ctx.numel // rows
        if (rows + cols) * self.rank >= rows * cols:
            return [flat], replace(ctx, extra={"low_rank": False})
        m = flat.view(rows, cols)
        q = self._q.get(key)
        if q is None or q.shape != (cols, self.rank):
            gen = torch.Generator().manual_seed(self.seed)
            q = torch.randn(cols, self.rank, generator=gen, dtype=flat.dtype)
        q = q.to(device=flat.device, dtype=flat.dtype)
        p = torch.linalg.qr(m @ q).Q
        q = m.t() @ p
        self._q[key] = q.detach().clone()
        return [p, q], replace(ctx, extra={"low_rank": True})

    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        if not ctx.extra.get("low_rank", False):
            (flat,) = self._check_payload(payload, 1, "powersgd (uncompressed)")
            if flat.numel() != ctx.numel:
                raise CompressionError(f"powersgd payload has {flat.numel()} values, {ctx.numel} expected")
            return flat.to(ctx.dtype).reshape(ctx.shape).to(ctx.device)
        p, q = self._check_payload(payload, 2, "powersgd")
        rows = ctx.shape[0]
        if p.dim() != 2 or q.dim() != 2 or p.shape[0] != rows or p.shape[1] != q.shape[1] \
                or rows * q.shape[0] != ctx.numel:
            raise CompressionError(f"powersgd factors {tuple(p.shape)} and {tuple(q.shape)} do not "
                                   f"rebuild shape {tuple(ctx.shape)}")
        return (p @ q.t()).to(ctx.dtype).reshape(ctx.shape).to(ctx.device)

    def reset(self) -> None:
        super().reset()
        self._q.clear()

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["q"] = {k: v.clone() for k, v in self._q.items()}
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        qs = state.get("q", {})
        if not isinstance(qs, Mapping) or not all(isinstance(v, torch.Tensor) for v in qs.values()):
            raise CompressionError("powersgd state 'q' must map keys to tensors")
        self._q = {k: v.detach().clone() for k, v in qs.items()}
