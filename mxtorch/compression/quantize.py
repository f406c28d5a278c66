"""MXNet's threshold quantizers with error feedback: 2-bit (16 values per int32) and 1-bit (32).

2-bit, per element of ``v = gradient + residual`` (threshold ``t > 0``)::

    v >= t   -> code 1, decodes to +t
    v <= -t  -> code 2, decodes to -t
    else     -> code 0, decodes to 0
    residual <- v - decoded

1-bit, per element (any threshold, 0 included), as MXNet's 1-bit compression (PR #17952)::

    v > threshold -> bit 1, decodes to +1
    else          -> bit 0, decodes to -1
    residual <- v - decoded

Codes are packed with vectorised integer ops, lowest code in the lowest bits of each word;
the flat gradient is zero-padded to a whole number of words, and the padding is dropped again
on decompression.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from .base import CompressionContext, CompressionError, Compressor, Key, Payload

__all__ = ["TwoBitCompressor", "OneBitCompressor", "pack_codes", "unpack_codes"]

_WORD_BITS = 32
_UINT32_SPAN = 1 << 32


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack a flat tensor of small non-negative codes (``< 2**bits``) into int32 words.

    ``32 // bits`` codes go into each word, code ``i`` of a word at bit ``i * bits``; the input
    is zero-padded to a whole number of words.
    """
    if _WORD_BITS % bits:
        raise ValueError(f"bits must divide 32, got {bits}")
    per_word = _WORD_BITS // bits
    n = codes.numel()
    words = max(1, math.ceil(n / per_word))
    padded = torch.zeros(words * per_word, dtype=torch.int64, device=codes.device)
    padded[:n] = codes.reshape(-1).to(torch.int64)
    shifts = torch.arange(0, _WORD_BITS, bits, dtype=torch.int64, device=codes.device)
    # The fields do not overlap, so their sum is their bitwise or; done in int64 to avoid overflow.
    packed = (padded.view(words, per_word) << shifts).sum(dim=1)
    # Reinterpret the unsigned 32-bit pattern as int32 (two's complement).
    packed = torch.where(packed >= (1 << 31), packed - _UINT32_SPAN, packed)
    return packed.to(torch.int32)


def unpack_codes(words: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """Inverse of :func:`pack_codes`: the first ``count`` codes (int64) of the int32 ``words``."""
    if words.dtype != torch.int32 or words.dim() != 1:
        raise CompressionError(f"packed codes are a 1-D int32 tensor, got {words.dtype} of shape "
                               f"{tuple(words.shape)}")
    per_word = _WORD_BITS // bits
    if words.numel() * per_word < count:
        raise CompressionError(
            f"payload of {words.numel()} words holds {words.numel() * per_word} codes, {count} needed")
    unsigned = words.to(torch.int64) & (_UINT32_SPAN - 1)
    shifts = torch.arange(0, _WORD_BITS, bits, dtype=torch.int64, device=words.device)
    codes = (unsigned.unsqueeze(1) >> shifts) & ((1 << bits) - 1)
    return codes.reshape(-1)[:count]


def _check_threshold(value: Any, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CompressionError(f"threshold must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise CompressionError(f"2bit compression needs a threshold > 0, got {value!r} (MXNet uses 0.5)")
    return float(value)


class TwoBitCompressor(Compressor):
    """2-bit threshold quantization with error feedback (MXNet's ``'2bit'``); 16x smaller than fp32.

    >>> c = TwoBitCompressor(threshold=0.5)
    >>> payload, ctx = c.compress(torch.tensor([0.7, -0.2, -0.5]))
    >>> c.decompress(payload, ctx)
    tensor([ 0.5000,  0.0000, -0.5000])
    """

    name = "2bit"
    uses_error_feedback = True
    BITS = 2

    def __init__(self, threshold: float = 0.5) -> None:
        super().__init__()
        self.threshold = _check_threshold(threshold, positive=True)

    def params(self) -> dict[str, Any]:
        return {"threshold": self.threshold}

    def _encode(self, flat: torch.Tensor, ctx: CompressionContext,
                key: Key) -> tuple[Payload, CompressionContext]:
        t = self.threshold
        codes = torch.zeros(flat.shape, dtype=torch.int64, device=flat.device)
        codes[flat >= t] = 1
        codes[flat <= -t] = 2
        return pack_codes(codes, self.BITS), replace(ctx, extra={"threshold": t})

    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        (words,) = self._check_payload(payload, 1, "2bit")
        codes = unpack_codes(words, self.BITS, ctx.numel)
        if bool((codes == 3).any()):
            raise CompressionError("2bit payload holds the unused code 3: it is corrupt or not 2bit")
        t = float(ctx.extra.get("threshold", self.threshold))
        lut = torch.tensor([0.0, t, -t, 0.0], dtype=ctx.dtype, device=words.device)
        return lut[codes].reshape(ctx.shape).to(ctx.device)


class OneBitCompressor(Compressor):
    """1-bit threshold quantization with error feedback (MXNet's ``'1bit'``); 32x smaller than fp32.

    Each element is sent as one bit: ``v > threshold`` decodes to +1, anything else to -1, as
    MXNet's 1-bit compression does (``threshold=0`` is allowed and is the usual choice).  The
    decoded magnitude is always 1, so gradients much smaller than 1 are sent mostly as
    alternating signs whose error feedback cancels over steps.

    >>> c = OneBitCompressor()
    >>> payload, ctx = c.compress(torch.tensor([0.3, -0.2, 0.0]))
    >>> c.decompress(payload, ctx)
    tensor([ 1., -1., -1.])
    """

    name = "1bit"
    uses_error_feedback = True
    BITS = 1

    def __init__(self, threshold: float = 0.0) -> None:
        super().__init__()
        self.threshold = _check_threshold(threshold, positive=False)

    def params(self) -> dict[str, Any]:
        return {"threshold": self.threshold}

    def _encode(self, flat: torch.Tensor, ctx: CompressionContext,
                key: Key) -> tuple[Payload, CompressionContext]:
        return pack_codes(flat > self.threshold, self.BITS), ctx

    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        (words,) = self._check_payload(payload, 1, "1bit")
        bits = unpack_codes(words, self.BITS, ctx.numel)
        lut = torch.tensor([-1.0, 1.0], dtype=ctx.dtype, device=words.device)
        return lut[bits].reshape(ctx.shape).to(ctx.device)
