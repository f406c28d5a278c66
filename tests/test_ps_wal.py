"""The parameter server's write-ahead log: a server killed in the middle of a step comes back
exactly where it was (real processes, SIGKILL), and log files are read as hostile bytes."""

from __future__ import annotations

import os
import struct
import time
import zlib

import ps_wal_workers as ww  # noqa: I001  (tests/ is on sys.path)
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ps_failure import _restart_server_0_and_finish

from mxtorch.kvstore import KVStoreError
from mxtorch.kvstore.ps.protocol import Command, Flag, Message
from mxtorch.kvstore.ps.snapshot import read_snapshot
from mxtorch.kvstore.ps.testing import ps_cluster, run_ps_job
from mxtorch.kvstore.ps.wal import WriteAheadLog, read_wal

STEPS, KILLS, HYPER_STEP = 9, [5, 7], 6


def _env(folder) -> dict[str, str]:
    # a snapshot every 4 rounds (step 4), one when worker 1 asks mid-step 5, one at each restart
    return {"MXTORCH_PS_SNAPSHOT_DIR": str(folder), "MXTORCH_PS_SNAPSHOT_EVERY": "4",
            "MXNET_KVSTORE_BIGARRAY_BOUND": "20",
            "MXTORCH_PS_HEARTBEAT_S": "0.3", "MXTORCH_PS_DEAD_S": "30", "MXTORCH_DIST_TIMEOUT": "60"}


def _wait_mid_step(c, folder, step: int) -> None:
    deadline = time.monotonic() + 120
    while not (folder / f"mid-step-{step}").exists():
        assert time.monotonic() < deadline, c.stderr("worker 1")
        assert all(p.exitcode is None for p in c.workers), c.stderr("worker 0") + c.stderr("worker 1")
        time.sleep(0.05)
    time.sleep(1.0)  # worker 0's push of 'p' and pushpull of 'big' reach server 0 and wait


def _run(tmp_path, name: str, kill: bool):
    """The job's worker results (and server 0's log): undisturbed, or with server 0 killed mid-step."""
    folder = tmp_path / name
    folder.mkdir()
    args = (str(folder), STEPS, KILLS if kill else [], HYPER_STEP)
    if not kill:
        return run_ps_job(ww.steps_across_a_server_kill, 2, 2, *args, timeout=150,
                          env=_env(folder / "snap")), ""
    with ps_cluster(2, 2, env=_env(folder / "snap"), timeout=180) as c:
        c.start_workers(ww.steps_across_a_server_kill, *args)
        for step in KILLS[:-1]:
            _wait_mid_step(c, folder, step)
            c.kill_server(0)
            c.start_server(0)
            (folder / f"restarted-{step}").write_text("yes")
        _wait_mid_step(c, folder, KILLS[-1])
        outcomes = _restart_server_0_and_finish(c, folder)
        return [o.value for o in outcomes], c.stderr("server 0")


def _server_state(path: str) -> dict:
    """Every value, version, optimizer state tensor and update count a snapshot holds, by slice."""
    meta, tensors = read_snapshot(path)
    out = {}
    for s in meta["shards"]:
        out[("value", s["key"][1], s["shard"])] = (s["version"], tensors[s["tensor"]])
    opt = meta["optimizer"]
    for key, shard, tree in opt["states"]:
        out[("state", key[1], shard)] = [tensors[f"state/{leaf['t']}"] for leaf in _leaves(tree)]
    for key, shard, count in opt["counts"]:
        out[("count", key[1], shard)] = count
    out["num_update"] = opt["num_update"]
    out["scheduler"] = opt["optimizer"]["lr_scheduler"]
    out["rescale_grad"] = opt["optimizer"]["params"]["rescale_grad"]
    return out


def _leaves(tree):
    if "tuple" in tree:
        return [leaf for t in tree["tuple"] for leaf in _leaves(t)]
    return [tree] if "t" in tree else []


def _assert_same(got, want) -> None:
    assert got.keys() == want.keys()
    for k, w in want.items():
        g = got[k]
        if isinstance(w, tuple):
            assert g[0] == w[0], k
            torch.testing.assert_close(g[1], w[1], rtol=0, atol=0, msg=str(k))
        elif isinstance(w, list):
            assert len(g) == len(w), k
            for a, b in zip(g, w):
                torch.testing.assert_close(a, b, rtol=0, atol=0, msg=str(k))
        else:
            assert g == w, k


def test_a_server_killed_mid_step_resumes_bit_identical(tmp_path):
    """Server 0 is SIGKILLed halfway through steps 5 and 7: 'a''s round of that step is complete (both
    workers read it), worker 0's PUSH of 'p' was acknowledged, its pushpull of 'big' waits.  Before
    the first kill a snapshot was taken mid-step (the new log must carry the open push of 'p'); before
    the second the last snapshot is the restart's, rounds of steps 5-7 and the rescale_grad change of
    step 6 came after it.  Each restarted server replays its log: the job ends with values, Adam
    states, update counts and scheduler bit-identical to an undisturbed run's.  (Without the log, the
    snapshot alone loses those rounds.)"""
    want, _ = _run(tmp_path, "undisturbed", kill=False)
    got, log = _run(tmp_path, "killed", kill=True)
    assert "write-ahead log" in log and "restored" in log, log
    for g, w in zip(got, want):
        for k in ww.SHAPES:
            torch.testing.assert_close(g["values"][k], w["values"][k], rtol=0, atol=0, msg=k)
    for g_path, w_path in zip(got[0]["snapshots"], want[0]["snapshots"]):
        _assert_same(_server_state(g_path), _server_state(w_path))


# ---- the file, read as hostile bytes --------------------------------------------------------------
def _log_with_records(path, n: int = 3) -> WriteAheadLog:
    wal = WriteAheadLog(str(path), rank=0)
    wal.reset(1234)
    for i in range(n):
        wal.append(Message(Command.STATES, key="w", shard=0, arg=i + 1, meta={"version": i + 1},
                           tensors=[torch.full((5,), float(i)), torch.arange(3)]))
    wal.append(Message(Command.PUSH, key=7, shard=1, flags=Flag.ROW_SPARSE, arg=4, meta={"worker": 1},
                       tensors=[torch.tensor([0, 2]), torch.ones(2, 3, dtype=torch.float16)]))
    return wal


def test_records_read_back_as_written(tmp_path):
    path = tmp_path / "server-0.wal"
    wal = _log_with_records(path)
    wal.close()
    generation, records = read_wal(str(path))
    assert generation == 1234 and len(records) == 4
    for i, rec in enumerate(records[:3]):
        m = rec.message
        assert (m.command, m.key, m.arg, m.meta) == (Command.STATES, "w", i + 1, {"version": i + 1})
        torch.testing.assert_close(m.tensors[0], torch.full((5,), float(i)), rtol=0, atol=0)
    push = records[3].message
    assert (push.key, push.shard, push.flags & Flag.ROW_SPARSE, push.tensors[1].dtype) == \
        (7, 1, Flag.ROW_SPARSE, torch.float16)
    assert records[-1].offset + records[-1].length == os.path.getsize(path)


def test_a_reset_carries_the_records_it_is_asked_to_keep(tmp_path):
    path = tmp_path / "server-0.wal"
    wal = _log_with_records(path)
    _, records = read_wal(str(path))
    placed = wal.reset(99, [(records[3].offset, records[3].length)])
    wal.close()
    generation, again = read_wal(str(path))
    assert generation == 99 and len(again) == 1 and (again[0].offset, again[0].length) == placed[0]
    assert again[0].message.meta == {"worker": 1}


def test_a_record_cut_short_at_the_end_is_dropped(tmp_path):
    path = tmp_path / "server-0.wal"
    _log_with_records(path).close()
    whole = path.read_bytes()
    _, records = read_wal(str(path))
    last = records[-1]
    for cut in (1, 11, 12, 40, last.length - 1):  # inside its prefix, its frame table, its tensors
        path.write_bytes(whole[:last.offset + cut])
        generation, kept = read_wal(str(path))
        assert len(kept) == 3, cut
    path.write_bytes(whole[:10])  # a header cut short: a log started as the process died
    assert read_wal(str(path)) is None
    assert read_wal(str(tmp_path / "absent.wal")) is None


def test_damage_before_the_end_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "server-0.wal"
    _log_with_records(path).close()
    whole = bytearray(path.read_bytes())
    _, records = read_wal(str(path))
    flipped = bytearray(whole)
    flipped[records[1].offset + 30] ^= 0xFF  # a payload byte: its checksum fails
    path.write_bytes(bytes(flipped))
    with pytest.raises(KVStoreError, match=r"server-0\.wal: record 1 at byte \d+ fails its checksum"):
        read_wal(str(path))
    path.write_bytes(b"NOTAWAL!" + bytes(whole[8:]))
    with pytest.raises(KVStoreError, match=r"server-0\.wal is not a parameter-server write-ahead log"):
        read_wal(str(path))


def _record(payload: bytes) -> bytes:
    return struct.pack("<QI", len(payload), zlib.crc32(payload)) + payload


@pytest.mark.parametrize("payload, match", [
    (b"", "no frame table"),
    (struct.pack("<H", 1), "declares 1 frames"),
    (struct.pack("<H", 3) + struct.pack("<Q", 0), "frame table is longer"),
    (struct.pack("<H", 2) + struct.pack("<2Q", 5, 5) + b"x", "frames hold 10 bytes"),
    (struct.pack("<H", 2) + struct.pack("<2Q", 3, 0) + b"abc", "does not hold a parameter-server message"),
])
def test_well_checksummed_nonsense_is_refused(tmp_path, payload, match):
    path = tmp_path / "server-0.wal"
    WriteAheadLog(str(path), rank=0).reset(5)
    with open(path, "ab") as f:
        f.write(_record(payload))
    with pytest.raises(KVStoreError, match=match):
        read_wal(str(path))


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=400), cut=st.integers(min_value=0, max_value=2000))
def test_any_bytes_give_records_none_or_the_logs_error(tmp_path_factory, data, cut):
    """Random bytes after a valid header, or a valid log with bytes spliced in: read_wal returns
    records, None, or raises KVStoreError naming the file; nothing else, and never more memory than
    the file holds."""
    folder = tmp_path_factory.mktemp("wal")
    path = folder / "server-0.wal"
    _log_with_records(path, n=2).close()
    whole = path.read_bytes()
    for blob in (whole[:20] + data, whole[:min(cut, len(whole))] + data + whole[min(cut, len(whole)):]):
        path.write_bytes(blob)
        try:
            read_wal(str(path))
        except KVStoreError as e:
            assert "server-0.wal" in str(e)
