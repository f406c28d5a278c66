"""Gradient compression as in Horovod: ``compress(t) -> (payload, ctx)``, ``decompress(payload, ctx)``."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["Compressor", "NoneCompressor", "FP16Compressor", "Compression"]


class Compressor:
    """The two-function interface every compressor implements (static methods, no state)."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """The payload to reduce instead of ``tensor``, and what ``decompress`` needs to undo it."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """The reduced ``payload`` turned back into the original dtype."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        return tensor


class FP16Compressor(Compressor):
    """Sends fp32/fp64 tensors as fp16 (half the bytes) and casts the result back.

    Other dtypes (fp16, bf16, integers) pass through unchanged: bf16 has a wider range than fp16,
    so narrowing it could overflow.
    """

    _WIDE = (torch.float32, torch.float64)

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        if tensor.dtype in FP16Compressor._WIDE:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        return tensor if ctx is None else tensor.to(ctx)


class Compression:
    """The compressors by name, as in Horovod: ``Compression.none`` and ``Compression.fp16``."""

    none: type[Compressor] = NoneCompressor
    fp16: type[Compressor] = FP16Compressor
