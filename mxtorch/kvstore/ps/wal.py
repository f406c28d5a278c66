"""A parameter server's write-ahead log: what changed its state since its last snapshot.

``<MXTORCH_PS_SNAPSHOT_DIR>/server-<rank>.wal`` beside the snapshot (:mod:`.snapshot`).  Before
a server answers a request whose effect a worker may rely on (a completed round's reply, a
PUSH's ACK, the ACK of an INIT, SET_OPTIMIZER, SET_HYPER, SET_STATES), it appends a record of
that effect; a snapshot starts a new, empty log (:meth:`WriteAheadLog.reset`).  A restarted
server loads its snapshot and replays the log in order (:mod:`.recovery`), so it resumes where
the killed process was.  A snapshot starts the next log beside this one and puts it in place
by a rename once the snapshot is written (:meth:`WriteAheadLog.prepare`, ``commit``), so a
server killed in between leaves on disk a log that matches the snapshot it finds.

File::

    header   struct '<8sQII': magic b'MXPSWAL1', generation u64 (the snapshot it follows),
             server rank u32, CRC-32 of the 20 bytes before it
    records  struct '<QI': payload length u64, CRC-32 of the payload; then the payload:
             u16 frame count n (3..258), n x u64 frame lengths, the frames

A record's frames are a parameter-server message as :func:`~.protocol.encode` writes it
(fixed header, key, JSON, raw tensor bytes): reading one back goes through
:func:`~.protocol.decode`, with every bound the wire has.  Reading (:func:`read_wal`) trusts
nothing: a record is allocated only as far as the file holds bytes; a record cut short at the
end of the file (a process killed while appending it) is dropped with a log line; anything
else (a bad magic or checksum, a frame table or message that does not parse, a record cut
short before the end) raises :class:`~mxtorch.kvstore.KVStoreError` naming the file and the
byte offset.

Durability: each record is handed to the operating system (``write``) before the reply it
covers is sent, which survives the fault this log is for, a server process killed (SIGKILL,
OOM): the kernel keeps the written pages.  ``MXTORCH_PS_WAL_FSYNC=1`` also ``fsync``\\ s every
record (survives a host crash too, at the disk's latency per record).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from torch.profiler import record_function

from ..base import KVStoreError
from . import protocol as P
from .protocol import Message, ProtocolError

__all__ = ["WAL_MAGIC", "WalRecord", "WriteAheadLog", "read_wal", "wal_path"]

WAL_MAGIC = b"MXPSWAL1"
_HEADER = struct.Struct("<8sQII")
_RECORD = struct.Struct("<QI")
_COUNT = struct.Struct("<H")
_LENGTH = struct.Struct("<Q")
_IOV_MAX = 1024  # the parts one writev takes (Linux's limit); a record has at most 259
_MAX_FRAMES = 3 + 255  # header, key, JSON, at most 255 tensors (the wire format's limit)
_logger = logging.getLogger("mxtorch.kvstore.ps.wal")


def wal_path(folder: str, rank: int) -> str:
    return os.path.join(folder, f"server-{rank}.wal")


def _write_all(fd: int, data: Any) -> None:
    view = memoryview(data).cast("B")
    while view.nbytes:
        n = os.write(fd, view)
        view = view[n:]


def _write_parts(fd: int, parts: list[memoryview]) -> None:
    """Write ``parts`` in order: one ``writev`` call, unless the kernel takes less at once."""
    parts = [p for p in parts if p.nbytes]
    done = os.writev(fd, parts[:_IOV_MAX])
    for p in parts:
        if done >= p.nbytes:
            done -= p.nbytes
            continue
        _write_all(fd, p[done:])
        done = 0


@dataclass
class WalRecord:
    """One record read back: the message, and where its bytes lie in the file."""

    message: Message
    offset: int
    length: int  # the whole record: its 12-byte prefix and the payload


class WriteAheadLog:
    """The log a server appends to (see the module docstring); one open file descriptor."""

    def __init__(self, path: str, rank: int, fsync: bool = False) -> None:
        """A log at ``path``, not open yet: :meth:`reset` starts it (the file may hold an older one)."""
        self.path = path
        self.rank = rank
        self.fsync = fsync
        self.generation: int | None = None
        self.size = 0
        self.records = 0
        self._fd = -1
        self._next: tuple[int, int, int, int] | None = None  # a prepared log: fd, generation, size, records

    def append(self, msg: Message) -> tuple[int, int]:
        """Hand one record of ``msg`` to the operating system (and the disk with ``fsync``); return
        its (offset, length) in the file."""
        with record_function("mxtorch/ps.wal.append"):
            frames = P.encode(msg)
            table = bytearray(_COUNT.pack(len(frames)))
            views = []
            for f in frames:
                v = memoryview(f).cast("B")
                views.append(v)
                table += _LENGTH.pack(v.nbytes)
            crc = zlib.crc32(table)
            for v in views:
                crc = zlib.crc32(v, crc)
            payload = len(table) + sum(v.nbytes for v in views)
            offset = self.size
            _write_parts(self._fd, [memoryview(_RECORD.pack(payload, crc) + bytes(table)), *views])
            if self.fsync:
                os.fsync(self._fd)
            length = _RECORD.size + payload
            self.size += length
            self.records += 1
            return offset, length

    def prepare(self, generation: int, keep: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int]]:
        """Write the next log, for the snapshot of ``generation``, beside this one (``<path>.new``):
        its header and the records at ``keep`` ((offset, length) pairs of this file: effects that
        snapshot does not hold), in order; return their places in it.  :meth:`commit` puts it in
        place once the snapshot is written, :meth:`abort` drops it."""
        with record_function("mxtorch/ps.wal.prepare"):
            self.abort()
            carried = []
            keep = list(keep)
            if keep:
                with open(self.path, "rb") as f:
                    for offset, length in keep:
                        f.seek(offset)
                        carried.append(f.read(length))
            fd = os.open(self.path + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            head = _HEADER.pack(WAL_MAGIC, generation, self.rank, 0)[:-4]
            _write_all(fd, head + struct.pack("<I", zlib.crc32(head)))
            size, placed = _HEADER.size, []
            for raw in carried:
                placed.append((size, len(raw)))
                _write_all(fd, raw)
                size += len(raw)
            if self.fsync:
                os.fsync(fd)
            self._next = (fd, generation, size, len(carried))
            return placed

    def commit(self) -> None:
        """The prepared log replaces this one (a rename: a killed process leaves one of them whole)."""
        assert self._next is not None
        os.replace(self.path + ".new", self.path)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self.generation, self.size, self.records = self._next
        self._next = None

    def abort(self) -> None:
        """Drop a prepared log (its snapshot was not written)."""
        if self._next is not None:
            os.close(self._next[0])
            self._next = None
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path + ".new")

    def reset(self, generation: int, keep: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int]]:
        """:meth:`prepare` and :meth:`commit`: start the log again after a snapshot of ``generation``."""
        placed = self.prepare(generation, keep)
        self.commit()
        return placed

    def close(self) -> None:
        self.abort()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_wal(path: str) -> tuple[int, list[WalRecord]] | None:
    """``(generation, records)`` of the log at ``path``; None when there is no file or its header
    was cut short (a log started just before the process was killed).  :class:`KVStoreError`
    naming the file for a log that is not one or is damaged (see the module docstring)."""
    with record_function("mxtorch/ps.wal.read"):
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                head = f.read(_HEADER.size)
                if len(head) < _HEADER.size:
                    return None
                magic, generation, _, crc = _HEADER.unpack(head)
                if magic != WAL_MAGIC or zlib.crc32(head[:-4]) != crc:
                    raise KVStoreError(f"{path} is not a parameter-server write-ahead log ({WAL_MAGIC!r} "
                                       "header with its checksum)")
                return generation, _read_records(f, path, size)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise KVStoreError(f"cannot read the parameter-server write-ahead log {path}: {e}") from e


def _read_records(f: Any, path: str, size: int) -> list[WalRecord]:
    records: list[WalRecord] = []
    offset = _HEADER.size
    while offset < size:
        prefix = f.read(_RECORD.size)
        if len(prefix) < _RECORD.size:
            _torn(path, offset, len(records))
            break
        length, crc = _RECORD.unpack(prefix)
        if length > size - offset - _RECORD.size:  # never allocate beyond the bytes the file holds
            _torn(path, offset, len(records))
            break
        payload = f.read(length)
        if len(payload) < length:  # the file shrank while being read
            _torn(path, offset, len(records))
            break
        where = f"{path}: record {len(records)} at byte {offset}"
        if zlib.crc32(payload) != crc:
            raise KVStoreError(f"{where} fails its checksum: the log is damaged; remove it to restart "
                               "from the snapshot alone")
        records.append(WalRecord(_parse(payload, where), offset, _RECORD.size + length))
        offset += _RECORD.size + length
    return records


def _torn(path: str, offset: int, count: int) -> None:
    _logger.warning("%s: the record at byte %d was cut short (the server was killed while writing it): "
                    "dropped; %d record(s) before it are replayed", path, offset, count)


def _parse(payload: bytes, where: str) -> Message:
    view = memoryview(payload)
    if len(view) < _COUNT.size:
        raise KVStoreError(f"{where} has no frame table")
    (n,) = _COUNT.unpack_from(view)
    if not 2 <= n <= _MAX_FRAMES:
        raise KVStoreError(f"{where} declares {n} frames (2..{_MAX_FRAMES} expected)")
    pos = _COUNT.size + n * _LENGTH.size
    if pos > len(view):
        raise KVStoreError(f"{where}: its frame table is longer than the record")
    lengths = struct.unpack_from(f"<{n}Q", view, _COUNT.size)
    if sum(lengths) != len(view) - pos:
        raise KVStoreError(f"{where}: its frames hold {sum(lengths)} bytes, the record {len(view) - pos}")
    frames = []
    for n_bytes in lengths:
        frames.append(view[pos:pos + n_bytes])
        pos += n_bytes
    try:
        return P.decode(frames)
    except ProtocolError as e:
        raise KVStoreError(f"{where} does not hold a parameter-server message: {e}") from e
