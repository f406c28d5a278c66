"""mx.recordio against files written by real MXNet 1.9.1 (tests/data/recordio, made by
tools/make_recordio_fixtures.py): MXNet's files read here, and our writes are byte-identical."""

from __future__ import annotations

import json
import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mxtorch as mx
from mxtorch.recordio import MAGIC, RecordIOError, encode_record

DATA = Path(__file__).parent / "data" / "recordio"
EXPECTED = json.loads((DATA / "expected.json").read_text())
MAGIC_BYTES = struct.pack("<I", MAGIC)
FEW = settings(max_examples=60, deadline=None, database=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _read_all(reader: mx.recordio.MXRecordIO) -> list[bytes]:
    out = []
    while (rec := reader.read()) is not None:
        out.append(rec)
    return out


def test_reads_mxnet_plain_records_including_split_ones() -> None:
    r = mx.recordio.MXRecordIO(DATA / "plain.rec", "r")
    assert _read_all(r) == [bytes.fromhex(p) for p in EXPECTED["plain"]]
    assert r.read() is None  # stays at the end
    r.reset()
    assert r.read() == b""
    r.close()


def test_writes_the_same_bytes_as_mxnet(tmp_path: Path) -> None:
    w = mx.recordio.MXRecordIO(tmp_path / "x.rec", "w")
    for p in EXPECTED["plain"]:
        w.write(bytes.fromhex(p))
    w.close()
    assert (tmp_path / "x.rec").read_bytes() == (DATA / "plain.rec").read_bytes()


def test_indexed_images_read_here_and_written_identically(tmp_path: Path) -> None:
    r = mx.recordio.MXIndexedRecordIO(DATA / "images.idx", DATA / "images.rec", "r")
    assert r.keys == list(range(len(EXPECTED["images"])))
    w = mx.recordio.MXIndexedRecordIO(tmp_path / "i.idx", tmp_path / "i.rec", "w")
    for key in reversed(r.keys):  # random access, out of order
        header, payload = mx.recordio.unpack(r.read_idx(key))
        assert list(header) == EXPECTED["images"][key]
        assert payload[:8] == b"\x89PNG\r\n\x1a\n"
    for key in r.keys:
        header, payload = mx.recordio.unpack(r.read_idx(key))
        w.write_idx(key, mx.recordio.pack(mx.recordio.IRHeader(*EXPECTED["images"][key]), payload))
    w.close()
    r.close()
    assert (tmp_path / "i.rec").read_bytes() == (DATA / "images.rec").read_bytes()
    assert (tmp_path / "i.idx").read_bytes() == (DATA / "images.idx").read_bytes()


def test_label_vectors_round_trip_as_mxnet() -> None:
    r = mx.recordio.MXRecordIO(DATA / "multilabel.rec", "r")
    records = _read_all(r)
    assert len(records) == len(EXPECTED["multilabel"])
    for rec, want in zip(records, EXPECTED["multilabel"], strict=True):
        header, payload = mx.recordio.unpack(rec)
        assert header.flag == len(want["label"]) and (header.id, header.id2) == (want["id"], want["id2"])
        np.testing.assert_array_equal(header.label, np.asarray(want["label"], np.float32))
        again = mx.recordio.pack(mx.recordio.IRHeader(0, want["label"], want["id"], want["id2"]), payload)
        assert again == rec


def test_tell_seek_and_modes(tmp_path: Path) -> None:
    w = mx.recordio.MXIndexedRecordIO(tmp_path / "a.idx", tmp_path / "a.rec", "w")
    offsets = []
    for i in range(5):
        offsets.append(w.tell())
        w.write_idx(i, b"record_%d" % i)
    assert offsets == [0, 16, 32, 48, 64]  # 8 header bytes + 8 payload bytes each
    with pytest.raises(RecordIOError, match="opened for writing"):
        w.read()
    w.close()
    r = mx.recordio.MXIndexedRecordIO(tmp_path / "a.idx", tmp_path / "a.rec", "r")
    assert r.read_idx(3) == b"record_3" and r.read() == b"record_4" and r.read() is None
    r.seek(1)
    assert r.read() == b"record_1"
    with pytest.raises(RecordIOError, match="opened for reading"):
        r.write(b"x")
    with pytest.raises(KeyError):
        r.read_idx(99)
    r.close()
    with pytest.raises(RecordIOError, match="closed"):
        r.read()
    with pytest.raises(ValueError, match="flag"):
        mx.recordio.MXRecordIO(tmp_path / "a.rec", "a")


def test_a_pickled_reader_reopens_its_file() -> None:
    r = mx.recordio.MXIndexedRecordIO(DATA / "images.idx", DATA / "images.rec", "r")
    copy = pickle.loads(pickle.dumps(r))
    assert copy.read_idx(2) == r.read_idx(2)
    copy.close()
    r.close()


def _corrupt(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "bad.rec"
    p.write_bytes(data)
    return p


def test_corrupt_and_truncated_records_name_the_file_and_offset(tmp_path: Path) -> None:
    good = (DATA / "plain.rec").read_bytes()
    bad_magic = bytearray(good)
    bad_magic[8:12] = b"\0\0\0\0"  # the first record is empty: the second starts at offset 8
    r = mx.recordio.MXRecordIO(_corrupt(tmp_path, bytes(bad_magic)), "r")
    assert r.read() == b""
    with pytest.raises(RecordIOError, match=r"bad\.rec: record at offset 8 is corrupt"):
        r.read()
    r = mx.recordio.MXRecordIO(_corrupt(tmp_path, good[:-5]), "r")
    with pytest.raises(RecordIOError, match=r"bad\.rec: record at offset \d+ is truncated"):
        _read_all(r)
    huge = MAGIC_BYTES + struct.pack("<I", (1 << 29) - 1)  # 512 MiB announced, 0 present
    r = mx.recordio.MXRecordIO(_corrupt(tmp_path, huge), "r")
    with pytest.raises(RecordIOError, match="offset 0 is truncated"):
        r.read()
    middle_first = MAGIC_BYTES + struct.pack("<I", (2 << 29) | 4) + b"abcd"
    r = mx.recordio.MXRecordIO(_corrupt(tmp_path, middle_first), "r")
    with pytest.raises(RecordIOError, match="continuation flag 2"):
        r.read()


def test_bad_index_lines_are_refused(tmp_path: Path) -> None:
    rec = tmp_path / "a.rec"
    rec.write_bytes((DATA / "plain.rec").read_bytes())
    for text, why in [("0\t0\n1\n", "line 2"), ("x\t0\n", "line 1"), ("0\t99999999\n", "outside"),
                      ("0\t-4\n", "outside")]:
        (tmp_path / "a.idx").write_text(text)
        with pytest.raises(RecordIOError, match=why):
            mx.recordio.MXIndexedRecordIO(tmp_path / "a.idx", rec, "r")


def test_unpack_refuses_short_or_overclaiming_headers() -> None:
    with pytest.raises(RecordIOError, match="at least 24 bytes"):
        mx.recordio.unpack(b"short")
    with pytest.raises(RecordIOError, match="announces 1000 labels"):
        mx.recordio.unpack(struct.pack("IfQQ", 1000, 0.0, 0, 0) + b"abcd")


@FEW
@given(st.lists(st.lists(st.sampled_from([b"a", b"bc", MAGIC_BYTES, b"\x0a\x23", b"\xd7\xce", b""]),
                         max_size=12).map(b"".join), max_size=6))
def test_any_payload_round_trips(payloads: list[bytes]) -> None:
    blob = b"".join(encode_record(p) for p in payloads)
    assert len(blob) % 4 == 0
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"mxtorch-rt-{os.getpid()}.rec"
    path.write_bytes(blob)
    try:
        r = mx.recordio.MXRecordIO(path, "r")
        assert _read_all(r) == payloads
        r.close()
    finally:
        path.unlink()


@FEW
@given(st.binary(max_size=200), st.integers(0, 3))
def test_hostile_bytes_give_records_or_recordio_errors(junk: bytes, prefix_records: int) -> None:
    blob = b"".join(encode_record(b"ok%d" % i) for i in range(prefix_records)) + junk
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"mxtorch-hostile-{os.getpid()}.rec"
    path.write_bytes(blob)
    try:
        r = mx.recordio.MXRecordIO(path, "r")
        try:
            records = _read_all(r)
            assert len(records) >= prefix_records
        except RecordIOError as e:
            assert str(path) in str(e) and "offset" in str(e)
        r.close()
    finally:
        path.unlink()
