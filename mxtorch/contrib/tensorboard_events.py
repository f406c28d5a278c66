"""TensorBoard event files of scalars written by mxtorch itself: :class:`ScalarEventFile`.

``mxtorch train --tensorboard`` writes a few scalars every step.  Through ``torch.utils.tensorboard``
one step's event cost the training thread 80-220 us (measured on the loaded 2-core machine; 13-20 us
here): building the ``Summary``/``Event`` protos, and tensorboard's pure-Python CRC32C of the record
on its writer thread, which holds the GIL while the step waits to put the next record in its 10-slot
queue.  Here an event is encoded by hand (protobuf's wire format of ``Event{wall_time, step,
summary{value{tag, simple_value}}}``), framed as a TFRecord (length, masked CRC32C of the length,
data, masked CRC32C of the data) and appended to a buffered file on the calling thread, flushed every
``flush_secs`` seconds and by :meth:`~ScalarEventFile.flush` / :meth:`~ScalarEventFile.close`;
tensorboard's readers (``EventAccumulator``) check both CRCs.

The CRC of the data is what costs in pure Python (a table lookup per byte of ~150).  Events with the
same tags share a layout in which only the wall time, the step and the values' bytes vary, and a CRC
is affine over GF(2) for messages of one length: the CRC of an event is its layout's constant XOR
one precomputed entry per varying byte (:class:`_Kind`), about 40 lookups.
"""

from __future__ import annotations

import itertools
import math
import os
import socket
import struct
import time
from collections.abc import Mapping

__all__ = ["ScalarEventFile", "crc32c", "masked_crc32c"]

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def _byte_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (_POLY if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _byte_table()


def crc32c(data: bytes) -> int:
    """The CRC-32C of ``data`` (as TFRecord files use it)."""
    c, t = 0xFFFFFFFF, _TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``."""
    return _mask(crc32c(data))


def _varint(n: int) -> bytes:
    if 0 <= n < 0x4000:  # a step below 16384: one or two bytes
        return bytes((n,)) if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7))
    n &= (1 << 64) - 1  # an int64 as protobuf encodes it (a negative one in ten bytes)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _f32(v: float) -> bytes:
    try:
        return struct.pack("<f", v)
    except OverflowError:  # beyond float32, as protobuf stores it: infinite
        return struct.pack("<f", math.copysign(math.inf, v))


_DOUBLE = struct.Struct("<d")
_FILE_VERSION = b"brain.Event:2"


def _advance(c: int, zeros: int) -> int:
    """The linear part of a CRC state ``c`` after ``zeros`` more zero bytes."""
    t = _TABLE
    for _ in range(zeros):
        c = t[c & 0xFF] ^ (c >> 8)
    return c


class _Kind:
    """Events of one set of tags whose step takes ``step_len`` bytes: a ``struct`` that packs the
    whole event from ``[wall time, step bytes, value, value, ...]``, and the CRC of its bytes as the
    CRC with zeros at the varying positions (``base``) XOR one :attr:`tables` entry per varying byte."""

    __slots__ = ("packer", "values", "args", "base", "tables")

    def __init__(self, step_len: int, prefixes: list[bytes]) -> None:
        size = sum(len(p) + 4 for p in prefixes)
        mid = b"\x2a" + _varint(size)  # summary (5), its length
        fmt = f"<Bd B{step_len}s{len(mid)}s" + "".join(f"{len(p)}sf" for p in prefixes)
        self.packer = struct.Struct(fmt.replace(" ", ""))
        self.values = struct.Struct(f"<{len(prefixes)}f")  # the values' bytes alone, for the CRC
        self.args: list[object] = [0x09, 0.0, 0x10, bytes(step_len), mid]  # wall time (1), step (2)
        positions = list(range(1, 9)) + list(range(10, 10 + step_len))
        at = 10 + step_len + len(mid)
        for prefix in prefixes:
            self.args += [prefix, 0.0]
            at += len(prefix)
            positions += range(at, at + 4)
            at += 4
        template = self.packer.pack(*self.args)
        self.base = crc32c(template)
        n = len(template)
        tables: list[list[int]] = []
        basis: list[int] = []
        after = n
        for p in reversed(positions):  # a byte's effect is its own CRC pushed through the bytes after it
            basis = ([_advance(_TABLE[1 << i], n - p - 1) for i in range(8)] if not basis
                     else [_advance(c, after - p) for c in basis])
            after = p
            table = [0] * 256
            for b in range(1, 256):
                low = b & -b
                table[b] = table[b ^ low] ^ basis[low.bit_length() - 1]
            tables.append(table)
        tables.reverse()
        self.tables = tables

    def encode(self, wall: float, step_b: bytes, values: list[float]) -> tuple[bytes, int]:
        """The event's bytes and their CRC-32C."""
        args = self.args.copy()
        args[1], args[3] = wall, step_b
        args[6::2] = values
        try:
            data, packed = self.packer.pack(*args), self.values.pack(*values)
        except OverflowError:  # beyond float32, as protobuf stores it: infinite
            values = [math.copysign(math.inf, v) if abs(v) > _F32_MAX else v for v in values]  # NaN stays
            args[6::2] = values
            data, packed = self.packer.pack(*args), self.values.pack(*values)
        c = self.base
        for table, b in zip(self.tables, _DOUBLE.pack(wall) + step_b + packed):  # the varying bytes in order
            c ^= table[b]
        return data, c


_F32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
_uid = itertools.count()
_MAX_KINDS = 32  # kinds of event with CRC tables (~10 KiB each); others are CRC'd byte by byte


class ScalarEventFile:
    """A TensorBoard event file of scalars in ``folder`` (made if missing), written on the calling
    thread; see the module's docstring.  ``add_scalars({tag: value}, step)`` writes one event."""

    def __init__(self, folder: str, flush_secs: float = 1.0) -> None:
        os.makedirs(folder, exist_ok=True)
        # tensorboard's readers take files with "tfevents" in the name; the rest keeps names unique
        host, pid, uid = socket.gethostname(), os.getpid(), next(_uid)
        name = f"events.out.tfevents.{int(time.time()):010d}.{host}.{pid}.{uid}"
        self.path = os.path.join(folder, name)
        self._file = open(self.path, "wb")  # open until close()
        self.flush_secs = flush_secs
        self._flushed_at = time.monotonic()
        self._prefixes: dict[str, bytes] = {}  # tag -> its Summary.Value's bytes before the value
        self._kinds: dict[tuple[tuple[str, ...], int], _Kind | None] = {}
        self._headers: dict[int, bytes] = {}
        version = b"\x09" + _DOUBLE.pack(time.time()) + b"\x1a" + _varint(len(_FILE_VERSION)) + _FILE_VERSION
        self._record(version, crc32c(version))
        self.flush()

    def _prefix(self, tag: str) -> bytes:
        prefix = self._prefixes.get(tag)
        if prefix is None:
            raw = tag.encode()
            value = b"\x0a" + _varint(len(raw)) + raw + b"\x15"  # tag (1), simple_value (2: 4 bytes)
            prefix = self._prefixes[tag] = b"\x0a" + _varint(len(value) + 4) + value
        return prefix

    def add_scalars(self, scalars: Mapping[str, float], step: int, wall_time: float | None = None) -> None:
        """One event at ``step`` holding every ``tag: value`` (float32, as TensorBoard keeps them)."""
        wall = time.time() if wall_time is None else float(wall_time)
        step_b = _varint(int(step))
        values = [float(v) for v in scalars.values()]
        key = (tuple(scalars), len(step_b))
        if key in self._kinds:
            kind = self._kinds[key]
        else:  # the first of its kind: tables for it while there is room
            prefixes = [self._prefix(t) for t in key[0]]
            kind = self._kinds[key] = _Kind(len(step_b), prefixes) if len(self._kinds) < _MAX_KINDS else None
        if kind is None:
            parts = [self._prefix(t) + _f32(v) for t, v in zip(key[0], values)]
            data = b"".join([b"\x09", _DOUBLE.pack(wall), b"\x10", step_b, b"\x2a",
                             _varint(sum(map(len, parts))), *parts])
            self._record(data, crc32c(data))
        else:
            self._record(*kind.encode(wall, step_b, values))

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.add_scalars({tag: value}, step)

    def _record(self, data: bytes, crc: int) -> None:
        header = self._headers.get(len(data))
        if header is None:  # the length and its CRC: a few lengths recur
            length = struct.pack("<Q", len(data))
            header = self._headers[len(data)] = length + struct.pack("<I", masked_crc32c(length))
        self._file.write(b"".join([header, data, struct.pack("<I", _mask(crc))]))
        if time.monotonic() - self._flushed_at >= self.flush_secs:
            self.flush()

    def flush(self) -> None:
        """Write what is buffered to the file."""
        self._file.flush()
        self._flushed_at = time.monotonic()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
