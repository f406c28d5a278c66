"""MXNet's threshold quantizers with error feedback: 2-bit (16 values per int32) and 1-bit (32).

2-bit, per element of ``v = gradient + residual`` (threshold ``t > 0``)::

    v >= t   -> code 1, decodes to +t
    v <= -t  -> code 2, decodes to -t
    else     -> code 0, decodes to 0
    residual <- v - decoded          (MXNet; with residual_limit=L: clipped to [-L*t, L*t])

``residual_limit`` is an mxtorch extension (MXNet's residual is unbounded, and so is the
default here).  An element whose gradient keeps exceeding ``t`` can only send ``t`` a step, so
an unbounded residual builds a backlog for as long as that lasts and then pays it out, in stale
directions, for as long again.  On the default ``mxtorch train`` job (LeNet-BN, 2 workers x 64
samples, whose summed gradients start at a median of 5 in the first convolution against
``t = 0.5``) that staleness cost 2.2 points of held-out accuracy (0.8937 against 0.9161);
``residual_limit=1`` (an element is never more than one send behind; the excess is dropped)
gave 0.9178, which is why ``mxtorch train --compression 2bit`` uses it.

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
import sys
from dataclasses import replace
from typing import Any

import torch

from .base import CompressionContext, CompressionError, Compressor, Key, Payload

__all__ = ["TwoBitCompressor", "OneBitCompressor", "pack_codes", "unpack_codes"]

_WORD_BITS = 32
_UINT32_SPAN = 1 << 32
_LITTLE_ENDIAN = sys.byteorder == "little"


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack a flat tensor of small non-negative codes (``< 2**bits``) into int32 words.

    ``32 // bits`` codes go into each word, code ``i`` of a word at bit ``i * bits``; the input
    is zero-padded to a whole number of words.
    """
    if _WORD_BITS % bits:
        raise ValueError(f"bits must divide 32, got {bits}")
    if bits in _FOLDS and _LITTLE_ENDIAN:
        return _pack_bytes(codes.reshape(-1).to(torch.uint8), bits)
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
    return _unpack(words, bits, count).to(torch.int64)


# The fast path works on bytes.  One byte holds 8 // bits codes, so a word is 4 bytes in
# little-endian order: code i of a word sits at bit (i * bits) either way.  Packing gathers the
# low ``bits`` bits of consecutive bytes into one byte by or-ing shifted copies of a wide integer
# view (each round halves the distance between the fields); unpacking spreads them back.
_FOLDS = {
    # bits: (integer dtype of one group of 8 // bits codes, right shifts that fold it, masks of the unfold)
    2: (torch.int32, (6, 12), (0x000F000F, 0x03030303)),
    1: (torch.int64, (7, 14, 28), (0x0000000F0000000F, 0x0003000300030003, 0x0101010101010101)),
}


def _pack_bytes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """:func:`pack_codes` for uint8 ``codes`` on a little-endian machine (a few passes over bytes)."""
    wide, shifts, _ = _FOLDS[bits]
    per_word = _WORD_BITS // bits
    n = codes.numel()
    total = max(1, math.ceil(n / per_word)) * per_word
    if total != n or not codes.is_contiguous() or codes.storage_offset() % 8:
        padded = torch.zeros(total, dtype=torch.uint8, device=codes.device)  # aligned for the view
        padded[:n] = codes
        codes = padded
    x = codes.view(wide)  # 8 // bits codes, one per byte
    for s in shifts:
        x = x | (x >> s)
    return (x & 0xFF).to(torch.uint8).view(torch.int32)


def _unpack(words: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """The first ``count`` codes of ``words``: uint8 on the fast path, int64 otherwise."""
    if words.dtype != torch.int32 or words.dim() != 1:
        raise CompressionError(f"packed codes are a 1-D int32 tensor, got {words.dtype} of shape "
                               f"{tuple(words.shape)}")
    per_word = _WORD_BITS // bits
    if words.numel() * per_word < count:
        raise CompressionError(
            f"payload of {words.numel()} words holds {words.numel() * per_word} codes, {count} needed")
    if bits in _FOLDS and _LITTLE_ENDIAN:
        wide, shifts, masks = _FOLDS[bits]
        x = words.contiguous().view(torch.uint8).to(wide)  # one byte of codes per wide integer
        for s, m in zip(reversed(shifts), masks):
            x = (x | (x << s)) & m
        return x.view(torch.uint8)[:count]
    unsigned = words.to(torch.int64) & (_UINT32_SPAN - 1)
    shifts_t = torch.arange(0, _WORD_BITS, bits, dtype=torch.int64, device=words.device)
    codes = (unsigned.unsqueeze(1) >> shifts_t) & ((1 << bits) - 1)
    return codes.reshape(-1)[:count]


def _check_limit(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise CompressionError(f"residual_limit must be a finite number > 0 (in thresholds) or None for an "
                               f"unbounded residual, got {value!r}")
    return float(value)


def _check_threshold(value: Any, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CompressionError(f"threshold must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise CompressionError(f"2bit compression needs a threshold > 0, got {value!r} (MXNet uses 0.5)")
    return float(value)


class TwoBitCompressor(Compressor):
    """2-bit threshold quantization with error feedback (MXNet's ``'2bit'``); 16x smaller than fp32.

    ``residual_limit`` (in thresholds; None: unbounded, as MXNet) bounds each element's
    error-feedback residual, see the module documentation.

    >>> c = TwoBitCompressor(threshold=0.5)
    >>> payload, ctx = c.compress(torch.tensor([0.7, -0.2, -0.5]))
    >>> c.decompress(payload, ctx)
    tensor([ 0.5000,  0.0000, -0.5000])
    """

    name = "2bit"
    uses_error_feedback = True
    BITS = 2

    def __init__(self, threshold: float = 0.5, residual_limit: float | None = None) -> None:
        super().__init__()
        self.threshold = _check_threshold(threshold, positive=True)
        self.residual_limit = _check_limit(residual_limit)

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"threshold": self.threshold}
        if self.residual_limit is not None:
            out["residual_limit"] = self.residual_limit
        return out

    def _bound_residual(self, residual: torch.Tensor) -> torch.Tensor:
        if self.residual_limit is None:
            return residual
        bound = self.residual_limit * self.threshold
        return residual.clamp_(-bound, bound)

    def _encode(self, flat: torch.Tensor, ctx: CompressionContext,
                key: Key) -> tuple[Payload, CompressionContext]:
        t = self.threshold
        codes = (flat >= t).to(torch.uint8) | ((flat <= -t).to(torch.uint8) << 1)
        return pack_codes(codes, self.BITS), replace(ctx, extra={"threshold": t})

    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        (words,) = self._check_payload(payload, 1, "2bit")
        codes = _unpack(words, self.BITS, ctx.numel)
        if bool((codes == 3).any()):
            raise CompressionError("2bit payload holds the unused code 3: it is corrupt or not 2bit")
        t = float(ctx.extra.get("threshold", self.threshold))
        signs = (codes & 1).to(torch.int8) - (codes >> 1).to(torch.int8)  # code 1 -> +1, 2 -> -1
        return signs.to(ctx.dtype).mul_(t).reshape(ctx.shape).to(ctx.device)


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
        return pack_codes((flat > self.threshold).to(torch.uint8), self.BITS), ctx

    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        (words,) = self._check_payload(payload, 1, "1bit")
        bits = _unpack(words, self.BITS, ctx.numel)
        return bits.to(ctx.dtype).mul_(2).sub_(1).reshape(ctx.shape).to(ctx.device)  # 0 -> -1, 1 -> +1
