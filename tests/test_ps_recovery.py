"""A server's snapshot + write-ahead log, in process: what a restarted server restores equals what
the killed one held (values, versions, optimizer states, the round in progress), including when it
was killed between a snapshot and the switch to the log that follows it, and a damaged log."""

from __future__ import annotations

import dataclasses
import logging
import os

import pytest
import torch

from mxtorch import optimizer
from mxtorch.kvstore.ps.config import PSConfig
from mxtorch.kvstore.ps.optimizer_spec import describe_optimizer
from mxtorch.kvstore.ps.protocol import Command, Message
from mxtorch.kvstore.ps.server import ParameterServer
from mxtorch.kvstore.ps.shard import KeyShard
from mxtorch.kvstore.ps.slice_optimizer import SliceOptimizer
from mxtorch.kvstore.ps.wal import WriteAheadLog, wal_path

WORKERS = 2


def _server(folder, every: int = 0, log_bytes: int | None = None) -> ParameterServer:
    server = ParameterServer(PSConfig(role="server", root_uri="127.0.0.1", root_port=1, num_servers=1,
                                      num_workers=WORKERS, snapshot_dir=str(folder), snapshot_every=every,
                                      wal_max_bytes=log_bytes))
    server.rank, server.num_workers = 0, WORKERS
    return server


def _started(folder, every: int = 0, log_bytes: int | None = None) -> tuple[ParameterServer, KeyShard]:
    """A server whose log has started, with SGD momentum declared and key 'w' initialized."""
    server = _server(folder, every, log_bytes)
    server.journal.start(restarted=False)
    opt = optimizer.SGD(learning_rate=0.1, momentum=0.9)
    server.set_updater(None, SliceOptimizer(opt))
    server.journal.log_control(Message(Command.SET_OPTIMIZER, meta={"optimizer": describe_optimizer(opt)}))
    sh = KeyShard("w", 0, 1, (3,), torch.float32, 0, 3)
    sh.set_value(torch.tensor([1.0, 2.0, 3.0]))
    sh.inited_by = set(range(WORKERS))
    server.shards[("w", 0)] = sh
    server.journal.log_init(sh)
    return server, sh


def _push(server: ParameterServer, sh: KeyShard, worker: int, seq: int) -> None:
    """What a dist_sync PUSH does to the server's state and log (ParameterServer._take_push)."""
    grad = torch.full((3,), 0.5 * seq + worker)
    target = sh.add_push(worker, grad, None, seq)
    if target == seq and not sh.round_complete(WORKERS):
        server.journal.log_push(sh, worker, grad, seq)
    server._complete_rounds(sh)


def _state(server: ParameterServer):
    sh = server.shards[("w", 0)]
    upd = server.updater
    assert upd is not None
    agg = None if sh.agg is None else sh.agg.clone()
    return (sh.version, sh.value.clone(), upd.states[("w", 0)].clone(), upd.counts[("w", 0)],
            upd.optimizer.num_update, sorted(sh.round), agg)


def _same(a, b) -> None:
    assert (a[0], a[3], a[4], a[5]) == (b[0], b[3], b[4], b[5])
    for x, y in ((a[1], b[1]), (a[2], b[2])):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    assert (a[6] is None) == (b[6] is None)
    if a[6] is not None:
        torch.testing.assert_close(a[6], b[6], rtol=0, atol=0)


def _killed(server: ParameterServer) -> None:
    """The process is gone: it writes nothing more (its state stays, to compare with)."""
    server.journal.close()
    server.config = dataclasses.replace(server.config, snapshot_dir=None)


def _restored(folder) -> ParameterServer:
    back = _server(folder)
    back.journal.start(restarted=True)
    return back


@pytest.mark.parametrize("every", [0, 2])
def test_a_restored_server_holds_what_the_killed_one_held(tmp_path, every):
    """Rounds 1-5 complete and worker 0's push of round 6 open, with snapshots every 2 rounds or
    only the first: the snapshot + log restore it all, and round 6 completes on the restored
    server with worker 1's push alone (worker 0's came back from the log)."""
    server, sh = _started(tmp_path, every)
    for seq in range(1, 6):
        _push(server, sh, 0, seq)
        _push(server, sh, 1, seq)
    _push(server, sh, 0, 6)
    want = _state(server)
    _killed(server)
    back = _restored(tmp_path)
    _same(_state(back), want)
    for s in (server, back):
        _push(s, s.shards[("w", 0)], 1, 6)
    _same(_state(back), _state(server))
    # the restarted server's own log holds the open push too: a second restart still has it
    _push(back, back.shards[("w", 0)], 0, 7)
    again = _restored(tmp_path)
    _same(_state(again), _state(back))


def test_a_server_killed_between_a_snapshot_and_its_log_switch(tmp_path, monkeypatch):
    server, sh = _started(tmp_path)
    for seq in (1, 2):
        _push(server, sh, 0, seq)
        _push(server, sh, 1, seq)
    _push(server, sh, 1, 3)  # open: the snapshot does not hold it, the next log must

    def killed(self):
        raise KeyboardInterrupt  # the process dies after the snapshot's rename, before the log's

    monkeypatch.setattr(WriteAheadLog, "commit", killed)
    with pytest.raises(KeyboardInterrupt):
        server.write_snapshot()
    monkeypatch.undo()
    assert (tmp_path / "server-0.wal.new").exists()
    back = _restored(tmp_path)
    _same(_state(back), _state(server))
    assert not (tmp_path / "server-0.wal.new").exists()


def test_a_damaged_log_is_moved_aside_and_the_snapshot_serves(tmp_path, caplog):
    server, sh = _started(tmp_path)
    _push(server, sh, 0, 1)
    _push(server, sh, 1, 1)
    server.write_snapshot()
    at_snapshot = _state(server)
    _push(server, sh, 0, 2)
    _push(server, sh, 1, 2)
    _killed(server)
    path = wal_path(str(tmp_path), 0)
    with open(path, "r+b") as f:  # a byte of the round's record flipped
        f.seek(-5, 2)
        byte = f.read(1)
        f.seek(-5, 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    with caplog.at_level(logging.ERROR, logger="mxtorch.kvstore.ps.recovery"):
        back = _restored(tmp_path)
    assert "fails its checksum" in caplog.text and "server-0.wal" in caplog.text
    assert (tmp_path / "server-0.wal.damaged").exists()
    _same(_state(back), at_snapshot)  # the snapshot alone: round 2 was lost (and said so)


def test_the_log_is_compacted_past_its_bound(tmp_path):
    """No automatic snapshots (MXTORCH_PS_SNAPSHOT_EVERY=0), a 2 KiB bound on the log: rounds keep
    compacting it into snapshots, its size stays within the bound plus a record, and a restart
    still restores everything."""
    server, sh = _started(tmp_path, log_bytes=2048)
    path = wal_path(str(tmp_path), 0)
    sizes = []
    for seq in range(1, 21):
        _push(server, sh, 0, seq)
        _push(server, sh, 1, seq)
        sizes.append(os.path.getsize(path))
    assert max(sizes) < 2048 + 1024 and min(sizes) < 1024, sizes
    _push(server, sh, 0, 21)
    want = _state(server)
    _killed(server)
    _same(_state(_restored(tmp_path)), want)
