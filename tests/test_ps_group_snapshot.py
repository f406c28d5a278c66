"""Server snapshots with the optimizers of worker groups (one per pipeline stage), in process:
the groups' optimizers and states come back after a restart, and a snapshot written before
group optimizers existed (one optimizer, slices without group fields) still loads."""

from __future__ import annotations

import torch

from mxtorch import optimizer
from mxtorch.kvstore.ps.config import PSConfig
from mxtorch.kvstore.ps.server import ParameterServer
from mxtorch.kvstore.ps.shard import KeyShard
from mxtorch.kvstore.ps.slice_optimizer import SliceOptimizer
from mxtorch.kvstore.ps.snapshot import read_snapshot, snapshot_path, write_snapshot


def _server(folder: str) -> ParameterServer:
    server = ParameterServer(PSConfig(role="server", root_uri="127.0.0.1", root_port=1, num_servers=1,
                                      num_workers=4, snapshot_dir=folder))
    server.rank, server.num_workers = 0, 4
    return server


def _shard(key, workers=None, group=None, index=None) -> KeyShard:
    sh = KeyShard(key, 0, 1, (3,), torch.float32, 0, 3)
    sh.workers, sh.group, sh.index = workers, group, index
    sh.value = torch.zeros(3)
    return sh


def _stepped(server: ParameterServer, sh: KeyShard, lr: float) -> SliceOptimizer:
    updater = SliceOptimizer(optimizer.SGD(learning_rate=lr, momentum=0.9))
    updater.step(sh, torch.ones(3), sh.writable_value())
    server.shards[(sh.key, sh.shard)] = sh
    return updater


def test_group_optimizers_survive_a_restart(tmp_path):
    server = _server(str(tmp_path))
    try:
        job = _shard(0)
        a, b = _shard("pp0/0", frozenset({0, 1}), "pp0/", 0), _shard("pp1/0", frozenset({2, 3}), "pp1/", 0)
        server.updater = _stepped(server, job, 0.1)
        server.group_updaters = {"pp0/": _stepped(server, a, 0.2), "pp1/": _stepped(server, b, 0.3)}
        server.write_snapshot()
    finally:
        server.ctx.term()
    back = _server(str(tmp_path))
    try:
        back._restore()
        assert sorted(back.group_updaters) == ["pp0/", "pp1/"]
        assert back.updater is not None and back.updater.optimizer.lr == 0.1
        for prefix, key, lr in (("pp0/", "pp0/0", 0.2), ("pp1/", "pp1/0", 0.3)):
            upd = back.group_updaters[prefix]
            assert upd.optimizer.lr == lr and upd.counts == {(key, 0): 1}
            torch.testing.assert_close(upd.states[(key, 0)], torch.ones(3) * -lr)  # SGD momentum buffer
            sh = back.shards[(key, 0)]
            assert (sh.group, sh.index, sh.own_key) == (prefix, 0, 0)
            torch.testing.assert_close(sh.value, torch.full((3,), -lr))
        assert set(back.updater.states) == {(0, 0)} and back.shards[(0, 0)].group is None
        # the next update of a group key continues from its restored momentum, under its own optimizer
        sh = back.shards[("pp0/0", 0)]
        back._apply(sh, torch.ones(3))
        torch.testing.assert_close(sh.value, torch.full((3,), -0.2 - 0.2 * 1.9))
    finally:
        back.ctx.term()


def test_a_snapshot_without_group_optimizers_still_loads(tmp_path):
    server = _server(str(tmp_path))
    try:
        job = _shard("w")
        server.updater = _stepped(server, job, 0.1)
        server.write_snapshot()
    finally:
        server.ctx.term()
    path = snapshot_path(str(tmp_path), 0)
    meta, tensors = read_snapshot(path)
    del meta["group_optimizers"], meta["format"]
    for s in meta["shards"]:
        del s["group"], s["index"]
    write_snapshot(path, meta, tensors)  # as the servers wrote it before worker groups had optimizers
    back = _server(str(tmp_path))
    try:
        back._restore()
        assert back.group_updaters == {} and back.updater is not None
        assert back.updater.counts == {("w", 0): 1}
        sh = back.shards[("w", 0)]
        assert (sh.group, sh.index, sh.own_key) == (None, None, "w")
        back._apply(sh, torch.ones(3))
        torch.testing.assert_close(sh.value, torch.full((3,), -0.1 - 0.1 * 1.9))
    finally:
        back.ctx.term()
