"""The 2-bit and 1-bit block kernels of :mod:`.quantize` through NumPy, for CPU float tensors.

The same rule, block by block over the residual buffer, on the tensors' own memory (no copy):
NumPy's SIMD comparisons, masked adds and ``packbits`` run the encoding about twice as fast as
torch's single-threaded kernels on this kind of machine, and decoding is one ``numpy.take`` from a
table of each byte value's decoded floats (the signs times the scale, in the output's dtype)
straight into the output.  Bit for bit the values of the torch kernels (tests hold both against a
plain reference).  Used when :func:`._blocks.numpy_shareable` holds for the tensors involved.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from ._blocks import blocks, scratch

__all__ = ["two_bit_encode", "one_bit_encode", "decode"]

_TABLES: dict[tuple[int, str, float], np.ndarray] = {}


def _blocks_of(buf: torch.Tensor, grad: torch.Tensor, words: torch.Tensor,
               bits: int) -> Iterator[tuple[np.ndarray, int, int, np.ndarray]]:
    """Per block: the block of ``buf`` with ``grad`` added (NumPy views), its length, its length
    padded to whole words, and the bytes its codes go to."""
    per_word = 32 // bits
    b, g, out = buf.numpy(), grad.numpy(), words.numpy().view(np.uint8)
    for start, stop in blocks(b.size, buf.device):
        m = stop - start
        padded = -(-m // per_word) * per_word
        block = b[start:stop]
        np.add(block, g[start:stop], out=block)
        yield block, m, padded, out[start * bits // 8:(start + padded) * bits // 8]


def two_bit_encode(buf: torch.Tensor, grad: torch.Tensor, words: torch.Tensor, t: float, sent: float,
                   bound: float | None) -> None:
    """:func:`.quantize._two_bit_encode_` into ``words`` (zeros, sized for ``buf``)."""
    step = np.array(sent, dtype=buf.numpy().dtype)
    with np.errstate(all="ignore"):  # inf - inf is NaN silently, as in torch
        for block, m, padded, out in _blocks_of(buf, grad, words, 2):
            pos = np.greater_equal(block, t, out=_bytes(0, m, buf).view(np.bool_))
            neg = np.less_equal(block, -t, out=_bytes(1, m, buf).view(np.bool_))
            codes = _bytes(2, padded, buf)
            p8, n8 = pos.view(np.uint8), neg.view(np.uint8)
            np.add(p8, n8, out=codes[:m])
            np.add(codes[:m], n8, out=codes[:m])  # code 1 for v >= t, 2 for v <= -t, else 0
            codes[m:] = 0
            x = codes.view(np.uint32)  # four codes, one a byte (little-endian): fold them into the low byte
            x |= x >> 6
            x |= x >> 12
            np.copyto(out, x, casting="unsafe")  # the low byte of each
            signs = np.subtract(p8.view(np.int8), n8.view(np.int8), out=_bytes(3, m, buf).view(np.int8))
            decoded = scratch(4, m, buf.dtype, buf.device).numpy()
            np.copyto(decoded, signs, casting="unsafe")
            np.multiply(decoded, step, out=decoded)  # exact: 0 or +-sent
            np.subtract(block, decoded, out=block)
            if bound is not None:
                np.clip(block, -bound, bound, out=block)


def one_bit_encode(buf: torch.Tensor, grad: torch.Tensor, words: torch.Tensor, t: float) -> None:
    """:func:`.quantize._one_bit_encode_` into ``words`` (zeros, sized for ``buf``)."""
    with np.errstate(all="ignore"):
        for block, m, _, out in _blocks_of(buf, grad, words, 1):
            up = np.greater(block, t, out=_bytes(0, m, buf).view(np.bool_))
            packed = np.packbits(up, bitorder="little")
            out[:packed.size] = packed
            out[packed.size:] = 0
            decoded = scratch(4, m, buf.dtype, buf.device).numpy()
            np.copyto(decoded, up, casting="unsafe")
            np.multiply(decoded, 2, out=decoded)
            np.subtract(decoded, 1, out=decoded)  # bit 1 -> +1, bit 0 -> -1
            np.subtract(block, decoded, out=block)


def _bytes(slot: int, n: int, like: torch.Tensor) -> np.ndarray:
    return scratch(slot, n, torch.uint8, like.device).numpy()


def _table(bits: int, dtype: np.dtype, scale: float) -> np.ndarray:
    """Per byte value: its ``8 // bits`` decoded values (2-bit code 1 -> +scale, 2 -> -scale, 0 and
    the unused 3 -> 0; 1-bit 1 -> +scale, 0 -> -scale), computed as the torch kernel does."""
    key = (bits, dtype.str, scale)
    table = _TABLES.get(key)
    if table is None:
        fields = (np.arange(256)[:, None] >> np.arange(0, 8, bits)) & ((1 << bits) - 1)
        signs = np.array([0, 1, -1, 0] if bits == 2 else [-1, 1], dtype=np.int8)[fields]
        values = torch.from_numpy(signs).to(torch.from_numpy(np.zeros(0, dtype)).dtype)
        if scale != 1.0:
            values.mul_(scale)
        table = _TABLES.setdefault(key, values.numpy())
    return table


def decode(words: torch.Tensor, bits: int, out: torch.Tensor, scale: float) -> None:
    """Fill the flat float tensor ``out`` with the decoded first ``out.numel()`` codes of ``words``."""
    per_byte = 8 // bits
    data = words.contiguous().numpy().view(np.uint8)
    o = out.numpy()
    table = _table(bits, o.dtype, scale)
    whole = o.size // per_byte
    np.take(table, data[:whole], axis=0, out=o[:whole * per_byte].reshape(whole, per_byte), mode="clip")
    if o.size > whole * per_byte:
        o[whole * per_byte:] = table[data[whole]][:o.size - whole * per_byte]


def has_code_three(words: torch.Tensor, count: int) -> bool:
    """:func:`.quantize._has_code_three` on a CPU tensor."""
    w = words.contiguous().numpy().view(np.uint32)
    full, rest = divmod(count, 16)
    for start, stop in blocks(full, words.device):
        chunk = w[start:stop]
        both = np.right_shift(chunk, 1, out=_bytes(0, 4 * (stop - start), words).view(np.uint32))
        both &= chunk
        both &= 0x55555555
        if both.any():
            return True
    if rest:
        last = int(w[full])
        return bool(last & (last >> 1) & 0x55555555 & ((1 << (2 * rest)) - 1))
    return False
