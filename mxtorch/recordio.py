"""MXNet's RecordIO files (``mx.recordio``): ``.rec`` records and their ``.idx`` text index.

The bytes on disk are dmlc-core's: each part of a record is the magic word ``0xced7230a``, a
length word whose upper 3 bits are the continuation flag (0 whole, 1 first, 2 middle, 3 last)
and whose lower 29 bits are the part's length, the part, and zero padding to 4 bytes.  A record
that holds the magic word at a 4-byte aligned offset is split there (the word itself is not
written; the reader puts it back), so a reader can resynchronise on the magic.  The ``.idx``
file is one ``key<TAB>offset`` line per record.  ``pack``/``unpack`` put MXNet's image-record
header (``IRHeader``: flag, label, id, id2 as ``IfQQ``) in front of a payload.

Files are hostile input: every length is bounded by the bytes the file still holds before
anything is allocated, and a bad or truncated record raises :class:`RecordIOError` naming the
file and the record's offset.
"""

from __future__ import annotations

import numbers
import os
import struct
from collections import namedtuple
from typing import IO, Any

import numpy as np

from .base import MXNetError

__all__ = ["RecordIOError", "MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack",
           "pack_img", "unpack_img"]

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_LENGTH_BITS = 29
MAX_PART_BYTES = (1 << _LENGTH_BITS) - 1  # the length field's 29 bits
_WHOLE, _FIRST, _MIDDLE, _LAST = 0, 1, 2, 3


class RecordIOError(MXNetError):
    """A RecordIO or index file is malformed, truncated, or used against its mode."""


def _padded(n: int) -> int:
    return (n + 3) & ~3


def _part_header(cflag: int, length: int) -> bytes:
    return _MAGIC_BYTES + struct.pack("<I", (cflag << _LENGTH_BITS) | length)


def encode_record(buf: bytes) -> bytes:
    """The bytes dmlc-core's writer puts on disk for one record (parts, headers, padding)."""
    if len(buf) > MAX_PART_BYTES:
        raise RecordIOError(f"a record holds at most {MAX_PART_BYTES} bytes, got {len(buf)}: "
                            "split the payload or store it outside the .rec file")
    out: list[bytes] = []
    start = 0
    # only aligned occurrences matter: the reader scans in 4-byte words
    pos = buf.find(_MAGIC_BYTES)
    while pos != -1 and pos + 4 <= (len(buf) & ~3):
        if pos % 4 == 0:
            out.append(_part_header(_FIRST if start == 0 else _MIDDLE, pos - start))
            out.append(buf[start:pos])
            start = pos + 4
            pos = buf.find(_MAGIC_BYTES, start)
        else:
            pos = buf.find(_MAGIC_BYTES, pos + 1)
    out.append(_part_header(_LAST if start else _WHOLE, len(buf) - start))
    out.append(buf[start:])
    out.append(b"\0" * (_padded(len(buf)) - len(buf)))
    return b"".join(out)


class MXRecordIO:
    """Reads (``flag='r'``) or writes (``flag='w'``) a ``.rec`` file record by record.

    Example::

        w = MXRecordIO("data.rec", "w"); w.write(b"abc"); w.close()
        r = MXRecordIO("data.rec", "r"); assert r.read() == b"abc"; assert r.read() is None
    """

    def __init__(self, uri: str | os.PathLike[str], flag: str) -> None:
        self.uri = os.fspath(uri)
        if flag not in ("r", "w"):
            raise ValueError(f"MXRecordIO flag must be 'r' (read) or 'w' (write), got {flag!r}")
        self.flag = flag
        self._file: IO[bytes] | None = None
        self.pid = 0
        self.is_open = False
        self.open()

    @property
    def writable(self) -> bool:
        return self.flag == "w"

    def open(self) -> None:
        """Opens the file (``reset`` and unpickling call this again)."""
        self._file = open(self.uri, "wb" if self.writable else "rb")  # noqa: SIM115  (closed by close())
        self._size = 0 if self.writable else os.fstat(self._file.fileno()).st_size
        self.pid = os.getpid()
        self.is_open = True

    def close(self) -> None:
        if not self.is_open:
            return
        assert self._file is not None
        self._file.close()
        self._file = None
        self.is_open = False
        self.pid = 0

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown: nothing left to report to)
            pass

    def __enter__(self) -> MXRecordIO:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # a DataLoader worker gets a copy: it reopens the file rather than share a handle
        state = self.__dict__.copy()
        state["_file"] = None
        state["is_open"] = False
        state["_reopen"] = self.is_open
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        reopen = state.pop("_reopen", False)
        self.__dict__.update(state)
        if reopen:
            self.open()

    def reset(self) -> None:
        """Goes back to the start of the file (a writer truncates it)."""
        self.close()
        self.open()

    def _handle(self, allow_reset: bool) -> IO[bytes]:
        if not self.is_open or self._file is None:
            raise RecordIOError(f"{self.uri}: the record file is closed; call open() or reset() first")
        if self.pid != os.getpid():
            # a forked child shares the parent's file offset: reopen instead of racing on it
            if not allow_reset:
                raise RecordIOError(f"{self.uri}: a record file opened in another process cannot be "
                                    "written here; open it in this process")
            pos = self._file.tell()
            self.reset()
            assert self._file is not None
            self._file.seek(pos)
        return self._file

    def write(self, buf: bytes) -> None:
        """Appends one record."""
        if not self.writable:
            raise RecordIOError(f"{self.uri}: opened for reading (flag='r'); open it with flag='w' to write")
        self._handle(allow_reset=False).write(encode_record(bytes(buf)))

    def tell(self) -> int:
        """The byte offset of the next record (what ``.idx`` files store)."""
        return self._handle(allow_reset=True).tell()

    def seek(self, pos: int) -> None:
        """Moves a reader to the record at byte offset ``pos`` (from ``tell`` or an index)."""
        if self.writable:
            raise RecordIOError(f"{self.uri}: seek() is for readers; this file is open for writing")
        pos = int(pos)
        if not 0 <= pos <= self._size:
            raise RecordIOError(f"{self.uri}: offset {pos} is outside the file (0..{self._size})")
        self._handle(allow_reset=True).seek(pos)

    def read(self) -> bytes | None:
        """The next record, or ``None`` at the end of the file."""
        if self.writable:
            raise RecordIOError(f"{self.uri}: opened for writing (flag='w'); open it with flag='r' to read")
        f = self._handle(allow_reset=True)
        record, end = read_record_at(f.fileno(), f.tell(), self._size, self.uri)
        f.seek(end)
        return record


def read_record_at(fd: int, start: int, size: int, uri: str) -> tuple[bytes | None, int]:
    """``(record, offset after it)`` for the record at byte ``start`` of the open file ``fd``
    (``size`` bytes long), by positioned reads (threads may share ``fd``); ``None`` at the end."""
    parts: list[bytes] = []
    at = start
    while True:
        head = os.pread(fd, 8, at)
        if not head and not parts:
            return None, at
        if len(head) < 8:
            raise RecordIOError(f"{uri}: record at offset {start} is truncated "
                                f"(a part header at {at} has {len(head)} of 8 bytes)")
        magic, lrec = struct.unpack("<II", head)
        if magic != MAGIC:
            raise RecordIOError(f"{uri}: record at offset {start} is corrupt (magic {magic:#010x} "
                                f"at {at}, expected {MAGIC:#010x}); is this a RecordIO file?")
        cflag, length = lrec >> _LENGTH_BITS, lrec & MAX_PART_BYTES
        expected = (_WHOLE, _FIRST) if not parts else (_MIDDLE, _LAST)
        if cflag not in expected:
            raise RecordIOError(f"{uri}: record at offset {start} is corrupt (continuation flag "
                                f"{cflag} at {at} where {' or '.join(map(str, expected))} belongs)")
        if at + 8 + _padded(length) > size:
            raise RecordIOError(f"{uri}: record at offset {start} is truncated (a part of {length} "
                                f"bytes at {at} runs past the end of the file, {size} bytes)")
        data = os.pread(fd, length, at + 8)
        if len(data) < length:  # the file shrank under us
            raise RecordIOError(f"{uri}: record at offset {start} is truncated")
        parts.append(data)
        at += 8 + _padded(length)
        if cflag in (_WHOLE, _LAST):
            return _MAGIC_BYTES.join(parts), at


def record_offsets(uri: str | os.PathLike[str]) -> list[int]:
    """The byte offset of every record of a ``.rec`` file, from its part headers alone."""
    path = os.fspath(uri)
    offsets: list[int] = []
    with open(path, "rb") as f:
        fd, size, at = f.fileno(), os.fstat(f.fileno()).st_size, 0
        start = 0
        while at < size:
            head = os.pread(fd, 8, at)
            if len(head) < 8 or head[:4] != _MAGIC_BYTES:
                raise RecordIOError(f"{path}: record at offset {start} is corrupt or truncated "
                                    f"(no part header at {at})")
            (lrec,) = struct.unpack("<I", head[4:])
            if lrec >> _LENGTH_BITS in (_WHOLE, _FIRST):
                start = at
                offsets.append(at)
            at += 8 + _padded(lrec & MAX_PART_BYTES)
        if at > size:
            raise RecordIOError(f"{path}: record at offset {start} is truncated "
                                f"(runs past the end, {size} bytes)")
    return offsets


class MXIndexedRecordIO(MXRecordIO):
    """A ``.rec`` file with its ``.idx`` index: random access by key (``read_idx``/``write_idx``)."""

    def __init__(self, idx_path: str | os.PathLike[str], uri: str | os.PathLike[str], flag: str,
                 key_type: type = int) -> None:
        self.idx_path = os.fspath(idx_path)
        self.key_type = key_type
        self.idx: dict[Any, int] = {}
        self.keys: list[Any] = []
        self._fidx: IO[str] | None = None
        super().__init__(uri, flag)

    def open(self) -> None:
        super().open()
        self.idx = {}
        self.keys = []
        if self.writable:
            self._fidx = open(self.idx_path, "w")  # noqa: SIM115  (closed by close())
            return
        with open(self.idx_path, encoding="utf-8", errors="strict") as fidx:
            for lineno, line in enumerate(fidx, 1):
                self._parse_index_line(line, lineno)

    def _parse_index_line(self, line: str, lineno: int) -> None:
        fields = line.strip().split("\t")
        if fields == [""]:
            return  # a blank line (MXNet's reader would fail on it; tolerating it loses nothing)
        try:
            if len(fields) != 2:
                raise ValueError(f"{len(fields)} tab-separated fields, expected 2")
            key = self.key_type(fields[0])
            pos = int(fields[1])
            if not 0 <= pos < max(self._size, 1):
                raise ValueError(f"offset {pos} is outside the .rec file ({self._size} bytes)")
        except ValueError as e:
            raise RecordIOError(f"{self.idx_path}: line {lineno} is not 'key<TAB>offset' ({e}); "
                                "rebuild the index with mxtorch im2rec or MXIndexedRecordIO") from e
        if key not in self.idx:
            self.keys.append(key)
        self.idx[key] = pos

    def close(self) -> None:
        if not self.is_open:
            return
        super().close()
        if self._fidx is not None:
            self._fidx.close()
            self._fidx = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_fidx"] = None
        return state

    def seek(self, idx: Any) -> None:  # type: ignore[override]
        # MXNet's indexed reader seeks by key, not by offset
        """Moves to the record stored under key ``idx``."""
        if idx not in self.idx:
            raise KeyError(f"{self.idx_path}: no record with key {idx!r}")
        super().seek(self.idx[idx])

    def read_idx(self, idx: Any) -> bytes:
        """The record stored under key ``idx``."""
        self.seek(idx)
        record = self.read()
        if record is None:
            raise RecordIOError(f"{self.uri}: key {idx!r} points at the end of the file ({self.idx[idx]})")
        return record

    def write_idx(self, idx: Any, buf: bytes) -> None:
        """Appends a record and indexes it under key ``idx``."""
        key = self.key_type(idx)
        pos = self.tell()
        self.write(buf)
        assert self._fidx is not None
        self._fidx.write(f"{key}\t{pos}\n")
        self.idx[key] = pos
        self.keys.append(key)


IRHeader = namedtuple("IRHeader", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """An image record's header: ``flag`` (0 or #labels), ``label``, ``id``, ``id2``."""
_IR_FORMAT = "IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)  # 24, native alignment as MXNet's struct.pack


def pack(header: Any, s: bytes) -> bytes:
    """MXNet's image-record header (label(s) included) followed by the payload ``s``."""
    h = IRHeader(*header)
    if isinstance(h.label, numbers.Number):
        h = h._replace(flag=0)
    else:
        label = np.asarray(h.label, dtype=np.float32)
        h = h._replace(flag=label.size, label=0)
        s = label.tobytes() + bytes(s)
    return struct.pack(_IR_FORMAT, *h) + bytes(s)


def unpack(s: bytes) -> tuple[IRHeader, bytes]:
    """``(header, payload)`` from a record made by :func:`pack`; a label vector is a float32 array."""
    if len(s) < _IR_SIZE:
        raise RecordIOError(f"an image record is at least {_IR_SIZE} bytes (its header), got {len(s)}")
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        if header.flag * 4 > len(s):
            raise RecordIOError(f"an image record's header announces {header.flag} labels "
                                f"({header.flag * 4} bytes) but only {len(s)} bytes follow")
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag).copy())
        s = s[header.flag * 4:]
    return header, s


def pack_img(header: Any, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encodes ``img`` (HxW or HxWx3 BGR uint8, as OpenCV) and packs it with ``header``."""
    from .image.codec import encode_bgr

    return pack(header, encode_bgr(img, quality=quality, img_fmt=img_fmt))


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[IRHeader, np.ndarray]:
    """``(header, image)``; the image is decoded as OpenCV does (BGR, ``iscolor`` as cv2's flag)."""
    from .image.codec import decode_bgr

    header, payload = unpack(s)
    return header, decode_bgr(payload, iscolor)
