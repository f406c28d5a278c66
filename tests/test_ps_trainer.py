"""gluon.Trainer on the parameter server: dist_sync equals one process on the whole batch, in
both update modes; dist_async converges; optimizer states save and load across modes."""

from __future__ import annotations

import io

import ps_workers as w  # noqa: I001  (tests/ is on sys.path)
import pytest
import torch
from torch.testing import assert_close

import mxtorch as mx
from mxtorch.kvstore.ps.snapshot import read_snapshot
from mxtorch.kvstore.ps.testing import run_ps_job

STEPS = 4
# the 8x5 weight is above the bound: cut into 4 slices of 40 bytes, 2 on each server, each with
# its own optimizer state and update count
BOUND = {"MXNET_KVSTORE_BIGARRAY_BOUND": "16", "MXTORCH_PS_PIECE_BYTES": "40"}


@pytest.fixture(scope="module")
def server_update_job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("states")
    env = {**BOUND, "MXTORCH_PS_SNAPSHOT_DIR": str(folder / "snap"), "MXTORCH_PS_SNAPSHOT_EVERY": "2"}
    return folder, run_ps_job(w.trainer_sync, 2, 2, True, STEPS, str(folder), timeout=120, env=env)


def _assert_equals_one_process(results):
    reference = w.train_steps(None, None, STEPS, None, 2)
    for res in results:
        assert len(res["params"]) == len(reference)
        for got, want in zip(res["params"], reference):
            assert_close(got, want)


def test_sync_workers_updating_on_the_servers_equal_one_process(server_update_job):
    _assert_equals_one_process(server_update_job[1])


def test_sync_workers_updating_locally_equal_one_process():
    _assert_equals_one_process(run_ps_job(w.trainer_sync, 2, 2, False, STEPS, timeout=120, env=BOUND))


def test_async_training_converges():
    first, last = run_ps_job(w.trainer_async_converges, 2, 1, 60, timeout=120)[0]
    assert last < 0.05 * first


def _states(path):
    with open(path, "rb") as f:
        return torch.load(io.BytesIO(f.read()), weights_only=True)


def _assert_states_equal(a, b):
    assert a["format"] == b["format"]
    assert a["index_update_count"] == b["index_update_count"] and a["num_update"] == b["num_update"]
    assert sorted(a["states"]) == sorted(b["states"])
    for k in a["states"]:
        assert_close(a["states"][k], b["states"][k], rtol=0, atol=0)


def test_optimizer_states_save_train_load(server_update_job):
    tmp_path, results = server_update_job
    paths = [r["states"] for r in results]
    first = _states(paths[0]["first"])
    assert first["num_update"] == STEPS and set(first["index_update_count"].values()) == {STEPS}
    assert first["optimizer"]["name"] == "sgd"
    assert all(s is not None and s.shape == first["states"][k].shape for k, s in first["states"].items())
    for p in paths:
        moved = _states(p["moved"])
        assert moved["num_update"] == STEPS + 2
        assert not torch.equal(moved["states"][0], first["states"][0])
        _assert_states_equal(_states(p["again"]), first)  # Trainer.load_states restored them
        _assert_states_equal(_states(p["again_kv"]), first)  # so did kv.load_optimizer_states
        _assert_states_equal(_states(p["roundtrip"]), _states(p["local"]))  # a local file, via the servers
    # a file saved in distributed mode loads into a local Updater (and a local Trainer)
    updater = mx.optimizer.Updater(mx.optimizer.SGD(momentum=0.9))
    with open(paths[0]["first"], "rb") as f:
        updater.set_states(f.read())
    assert updater.optimizer.num_update == STEPS and updater.optimizer.momentum == 0.9
    for k, v in first["states"].items():
        assert_close(updater.states[k], v, rtol=0, atol=0)
    net = w._net(3)
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"momentum": 0.9}, kvstore=None)
    trainer.load_states(paths[0]["trainer"])
    assert trainer.optimizer.num_update == STEPS
    # MXTORCH_PS_SNAPSHOT_EVERY=2: the servers wrote snapshots on their own, every 2 updates of every key
    for rank in range(2):
        meta, tensors = read_snapshot(str(tmp_path / "snap" / f"server-{rank}.safetensors"))
        assert meta["server_rank"] == rank and meta["optimizer"]["optimizer"]["name"] == "sgd"
        versions = [s["version"] for s in meta["shards"]]
        assert versions and min(versions) >= 2 and min(versions) % 2 == 0
        assert all(tensors[s["tensor"]].numel() == s["numel"] for s in meta["shards"])
