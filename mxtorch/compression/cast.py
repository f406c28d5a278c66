"""Compressors that send the gradient in a narrower float type (Horovod's ``Compression.fp16``).

No error feedback: the rounding error is small and unbiased, as in Horovod and DDP's fp16 hook.
Values beyond the target type's range become ``inf`` (fp16's largest finite value is 65504);
bf16 keeps fp32's range at lower precision.  The payloads are :attr:`~.Compressor.summable`:
the allreduce stores sum them in the narrow type on the wire, as Horovod's ``Compression.fp16``
does (each addition rounds to that type; the parameter server sums decompressed fp32 values).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from .base import CompressionContext, CompressionError, Compressor, Key, Payload

__all__ = ["CastCompressor", "FP16Compressor", "BF16Compressor"]


class CastCompressor(Compressor):
    """Send the gradient cast to :attr:`wire_dtype`; decompression casts back to the original dtype."""

    wire_dtype: ClassVar[torch.dtype] = torch.float16
    summable = True

    def _encode(self, flat: torch.Tensor, ctx: CompressionContext,
                key: Key) -> tuple[Payload, CompressionContext]:
        return flat.to(self.wire_dtype), ctx

    def cast(self, tensor: torch.Tensor, key: Key = 0) -> torch.Tensor:
        """``tensor`` flat in :attr:`wire_dtype`, through :meth:`compress` (its span and checks):
        the one tensor a cast's payload is, for collectives that sum it in that dtype."""
        payload, _ = self.compress(tensor, key=key)
        return payload if isinstance(payload, torch.Tensor) else payload[0]

    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        (data,) = self._check_payload(payload, 1, self.name)
        if data.dtype != self.wire_dtype or data.numel() != ctx.numel:
            raise CompressionError(
                f"{self.name} payload must be {ctx.numel} {self.wire_dtype} values, got "
                f"{data.numel()} {data.dtype} values")
        return data.to(ctx.dtype).reshape(ctx.shape).to(ctx.device)


class FP16Compressor(CastCompressor):
    """Send gradients as IEEE float16 (half the bytes of fp32)."""

    name = "fp16"
    wire_dtype = torch.float16


class BF16Compressor(CastCompressor):
    """Send gradients as bfloat16 (half the bytes of fp32, fp32's exponent range)."""

    name = "bf16"
    wire_dtype = torch.bfloat16
