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

Speed: the rule, the packing and the residual update run block by block over the
compressor's residual buffer (:mod:`._blocks`: each block's temporaries stay in cache), with
no gradient-sized temporary; decompression turns each payload byte into its 4 (2-bit) or 8
(1-bit) decoded signs with one table lookup.  On the CPU, float32/float64 tensors take the same
kernels written in NumPy on the same memory (:mod:`._numpy_kernels`: its SIMD loops run them about
twice as fast as torch's single-threaded ones; 100 MiB, process CPU time: 2-bit compress 67 -> 39
ms, decompress 71 -> 62 ms, against a 54-60 ms ``clone()``).  The values are those of the rule
above, bit for bit, on either route (tests/test_compression_kernels.py holds them against a plain
reference).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch

from . import _numpy_kernels
from ._blocks import blocks, numpy_pair, numpy_shareable, scratch
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


def _check_words(words: torch.Tensor, bits: int, count: int) -> None:
    if words.dtype != torch.int32 or words.dim() != 1:
        raise CompressionError(f"packed codes are a 1-D int32 tensor, got {words.dtype} of shape "
                               f"{tuple(words.shape)}")
    per_word = _WORD_BITS // bits
    if words.numel() * per_word < count:
        raise CompressionError(
            f"payload of {words.numel()} words holds {words.numel() * per_word} codes, {count} needed")


def _unpack(words: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """The first ``count`` codes of ``words``: uint8 on the fast path, int64 otherwise."""
    _check_words(words, bits, count)
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


# ---- the block kernels (little-endian machines; see the module documentation) ---------------------
_SIGN_TABLES: dict[tuple[int, torch.device], torch.Tensor] = {}


def _sign_table(bits: int, device: torch.device) -> torch.Tensor:
    """Per byte value of a payload: the int8 signs of its 8 // bits codes (code i in byte i) as one
    integer: 2-bit code 1 -> +1, 2 -> -1, 0 (and the unused 3) -> 0; 1-bit 1 -> +1, 0 -> -1."""
    table = _SIGN_TABLES.get((bits, device))
    if table is None:
        per_byte = 8 // bits
        fields = (torch.arange(256).unsqueeze(1) >> torch.arange(0, 8, bits)) & ((1 << bits) - 1)
        signs = torch.tensor([0, 1, -1, 0] if bits == 2 else [-1, 1], dtype=torch.int8)[fields]
        table = signs.contiguous().view(torch.int32 if per_byte == 4 else torch.int64).reshape(256)
        table = _SIGN_TABLES.setdefault((bits, device), table.to(device))
    return table


def _pack_block(codes: torch.Tensor, bits: int, out: torch.Tensor) -> None:
    """Pack uint8 ``codes`` (a whole number of words, scratch: overwritten) into the bytes ``out``."""
    wide, shifts, _ = _FOLDS[bits]
    x = codes.view(wide)
    tmp = scratch(3, x.numel(), wide, x.device)
    for s in shifts:
        torch.bitwise_right_shift(x, s, out=tmp)
        x.bitwise_or_(tmp)
    out.copy_(torch.bitwise_and(x, 0xFF, out=tmp))


def _block_signs(data: torch.Tensor, bits: int, start: int, stop: int) -> torch.Tensor:
    """The int8 signs of codes ``start:stop`` of the payload bytes ``data`` (``start`` aligned to a byte)."""
    per_byte = 8 // bits
    chunk = data[start // per_byte:(stop + per_byte - 1) // per_byte]
    index = scratch(0, chunk.numel(), torch.int32, data.device)
    index.copy_(chunk)
    table = _sign_table(bits, data.device)
    signs = scratch(1, chunk.numel(), table.dtype, data.device)
    torch.index_select(table, 0, index, out=signs)
    return signs.view(torch.int8)[:stop - start]


def _summed_blocks(buf: torch.Tensor, grad: torch.Tensor, words: torch.Tensor,
                   bits: int) -> Iterator[tuple[torch.Tensor, int, int, torch.Tensor]]:
    """Per block of ``buf``: the block with ``grad`` added in place, its length, its length padded
    to whole words, and the bytes of ``words`` its codes go to."""
    per_word = _WORD_BITS // bits
    out = words.view(torch.uint8)
    for start, stop in blocks(buf.numel(), buf.device):
        m = stop - start
        padded = -(-m // per_word) * per_word
        codes_to = out[start * bits // 8:(start + padded) * bits // 8]
        yield buf[start:stop].add_(grad[start:stop]), m, padded, codes_to


def _new_words(n: int, bits: int, device: torch.device) -> torch.Tensor:
    return torch.zeros(max(1, -(-n // (_WORD_BITS // bits))), dtype=torch.int32, device=device)


def _two_bit_encode_(buf: torch.Tensor, grad: torch.Tensor, t: float, sent: float,
                     bound: float | None) -> torch.Tensor:
    """2-bit words of ``v = buf + grad`` (threshold ``t``); ``buf`` becomes ``v - sign * sent``,
    clamped to ``[-bound, bound]`` when ``bound`` is given."""
    words = _new_words(buf.numel(), 2, buf.device)
    if numpy_pair(buf, grad):
        _numpy_kernels.two_bit_encode(buf, grad, words, t, sent, bound)
        return words
    for block, m, padded, out in _summed_blocks(buf, grad, words, 2):
        pos = torch.ge(block, t, out=scratch(0, m, torch.bool, buf.device))
        neg = torch.le(block, -t, out=scratch(1, m, torch.bool, buf.device))
        codes = scratch(2, padded, torch.uint8, buf.device)
        torch.add(pos.view(torch.uint8), neg.view(torch.uint8), alpha=2, out=codes[:m])
        if padded > m:
            codes[m:].zero_()
        _pack_block(codes, 2, out)
        signs = torch.sub(pos.view(torch.uint8), neg.view(torch.uint8), out=pos.view(torch.uint8))
        decoded = scratch(4, m, buf.dtype, buf.device).copy_(signs.view(torch.int8))
        block.add_(decoded, alpha=-sent)  # exact: sign * sent is 0 or +-sent
        if bound is not None:
            block.clamp_(-bound, bound)
    return words


def _one_bit_encode_(buf: torch.Tensor, grad: torch.Tensor, t: float) -> torch.Tensor:
    """1-bit words of ``v = buf + grad`` (threshold ``t``); ``buf`` becomes ``v - (+1 or -1)``."""
    words = _new_words(buf.numel(), 1, buf.device)
    if numpy_pair(buf, grad):
        _numpy_kernels.one_bit_encode(buf, grad, words, t)
        return words
    for block, m, padded, out in _summed_blocks(buf, grad, words, 1):
        bits = scratch(0, padded, torch.bool, buf.device)
        torch.gt(block, t, out=bits[:m])
        if padded > m:
            bits[m:].zero_()
        signs = torch.mul(bits[:m].view(torch.uint8), 2, out=scratch(1, m, torch.uint8, buf.device))
        decoded = scratch(4, m, buf.dtype, buf.device).copy_(signs.add_(255).view(torch.int8))
        block.sub_(decoded)  # bit 1 -> 2 + 255 = +1, bit 0 -> 255 = -1 (uint8 wraps, read as int8)
        _pack_block(bits.view(torch.uint8), 1, out)
    return words


def _decode(words: torch.Tensor, bits: int, ctx: CompressionContext, scale: float) -> torch.Tensor:
    """The decoded signs of the first ``ctx.numel`` codes times ``scale``, as ``ctx`` describes."""
    data = words.contiguous().view(torch.uint8)
    out = torch.empty(ctx.numel, dtype=ctx.dtype, device=words.device)
    if numpy_shareable(out):  # out is on the payload's device
        _numpy_kernels.decode(words, bits, out, scale)
        return out.reshape(ctx.shape).to(ctx.device)
    for start, stop in blocks(ctx.numel, words.device):
        # as signs.to(dtype).mul_(t), in two vectorized ops (int8 * float in one op takes a
        # slow casting loop); the second runs on the block while it is in cache
        decoded = out[start:stop].copy_(_block_signs(data, bits, start, stop))
        if scale != 1.0:
            decoded.mul_(scale)
    return out.reshape(ctx.shape).to(ctx.device)


def _has_code_three(words: torch.Tensor, count: int) -> bool:
    """Whether one of the first ``count`` 2-bit codes of ``words`` is the unused code 3."""
    if words.device.type == "cpu":
        return _numpy_kernels.has_code_three(words, count)
    full, rest = divmod(count, 16)
    for start, stop in blocks(full, words.device):
        w = words[start:stop]
        both = torch.bitwise_right_shift(w, 1, out=scratch(0, stop - start, torch.int32, w.device))
        if int(both.bitwise_and_(w).bitwise_and_(0x55555555).amax()) > 0:  # amax: ~80x faster than any()
            return True
    if rest:
        last = int(words[full]) & (_UINT32_SPAN - 1)
        return bool(last & (last >> 1) & 0x55555555 & ((1 << (2 * rest)) - 1))
    return False


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
    encodes_in_place = _LITTLE_ENDIAN
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

    def _encode_in_place(self, buf: torch.Tensor, grad: torch.Tensor, ctx: CompressionContext,
                         key: Key) -> tuple[Payload, CompressionContext]:
        t = self.threshold
        # what decompress() rebuilds for a code 1, in ctx's dtype (t rounded to it), is what was sent
        sent = float(torch.ones(1, dtype=ctx.dtype).mul_(t).to(buf.dtype))
        bound = None if self.residual_limit is None else self.residual_limit * t
        return _two_bit_encode_(buf, grad, t, sent, bound), replace(ctx, extra={"threshold": t})

    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        (words,) = self._check_payload(payload, 1, "2bit")
        if self.encodes_in_place:
            _check_words(words, self.BITS, ctx.numel)
            if _has_code_three(words, ctx.numel):
                raise CompressionError("2bit payload holds the unused code 3: it is corrupt or not 2bit")
            return _decode(words, self.BITS, ctx, float(ctx.extra.get("threshold", self.threshold)))
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
    encodes_in_place = _LITTLE_ENDIAN
    BITS = 1

    def __init__(self, threshold: float = 0.0) -> None:
        super().__init__()
        self.threshold = _check_threshold(threshold, positive=False)

    def params(self) -> dict[str, Any]:
        return {"threshold": self.threshold}

    def _encode(self, flat: torch.Tensor, ctx: CompressionContext,
                key: Key) -> tuple[Payload, CompressionContext]:
        return pack_codes((flat > self.threshold).to(torch.uint8), self.BITS), ctx

    def _encode_in_place(self, buf: torch.Tensor, grad: torch.Tensor, ctx: CompressionContext,
                         key: Key) -> tuple[Payload, CompressionContext]:
        return _one_bit_encode_(buf, grad, self.threshold), ctx

    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        (words,) = self._check_payload(payload, 1, "1bit")
        if self.encodes_in_place:
            _check_words(words, self.BITS, ctx.numel)
            return _decode(words, self.BITS, ctx, 1.0)
        bits = _unpack(words, self.BITS, ctx.numel)
        return bits.to(ctx.dtype).mul_(2).sub_(1).reshape(ctx.shape).to(ctx.device)  # 0 -> -1, 1 -> +1
