"""mxtorch.checkpoint.CheckpointManager: exact resume (parameters, momentum, lr schedule, every RNG,
the data position), plain paths and memory://, keep_last, atomic commits (a crash in the middle of
a save), corrupt files refused with a fallback, and background saving equal to saving in place."""

from __future__ import annotations

import itertools
import json
import os
import random
import uuid

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.checkpoint import MANIFEST, CheckpointError, CheckpointManager
from mxtorch.checkpoint import _storage as storage_mod
from mxtorch.gluon import nn
from mxtorch.gluon.data import ArrayDataset, DataLoader, SplitSampler

N_SAMPLES, BATCH = 40, 4  # 10 batches per epoch


def memory_uri() -> str:
    return f"memory://ckpt-tests/{uuid.uuid4().hex}"


def make_parts(seed: int, sampler: str = "random"):
    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=10), nn.Dropout(0.5), nn.Dense(4, in_units=16))
    net.initialize(mx.init.Xavier())
    sched = mx.lr_scheduler.FactorScheduler(step=5, factor=0.7, base_lr=0.1)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3, "lr_scheduler": sched})
    g = torch.Generator().manual_seed(123)  # the data itself is fixed
    data = ArrayDataset(torch.randn(N_SAMPLES, 10, generator=g),
                        torch.randint(0, 4, (N_SAMPLES,), generator=g))
    if sampler == "random":
        loader = DataLoader(data, batch_size=BATCH, shuffle=True)
    else:
        loader = DataLoader(data, batch_size=BATCH, sampler=SplitSampler(N_SAMPLES, 2, 1, seed=5))
    return net, trainer, loader


def train(net, trainer, loader, start: int, stop: int, mgr=None, save_at=()):
    """Steps start+1 .. stop over the loader's passes; every RNG is drawn from on each step."""
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    step = start
    while step < stop:
        for x, y in loader:
            step += 1
            noise = torch.from_numpy(np.random.normal(0, 0.01, x.shape).astype(np.float32))
            x = x + noise * random.random()
            with autograd.record():
                loss = loss_fn(net(x), y.float())
            loss.backward()
            trainer.step(x.shape[0])
            if step in save_at:
                mgr.save(step, net=net, trainer=trainer, loader=loader, epoch_note=f"step {step}")
            if step == stop:
                return


def weights(net):
    return [p.data().detach().clone() for p in net.collect_params().values()]


def momenta(trainer):
    return [v.clone() for _, v in sorted(trainer._updaters[0].states.items())]


def reseed(s: int) -> None:
    torch.manual_seed(s)
    np.random.seed(s)
    random.seed(s)


def uninterrupted(stop: int, sampler: str = "random"):
    reseed(7)
    net, trainer, loader = make_parts(0, sampler)
    train(net, trainer, loader, 0, stop)
    return weights(net), momenta(trainer)


@pytest.mark.parametrize("where,async_save,sampler", [("local", False, "random"), ("local", True, "split"),
                                                      ("memory", True, "random")])
def test_resume_is_bit_identical(tmp_path, where, async_save, sampler):
    """Save mid-epoch at step 7, run on (and 'crash'), restore into new objects, train to step 13
    (across an epoch boundary): parameters and momentum equal the uninterrupted run's bit for bit."""
    want_w, want_m = uninterrupted(13, sampler)

    uri = str(tmp_path / "run") if where == "local" else memory_uri()
    mgr = CheckpointManager(uri, async_save=async_save)
    reseed(7)
    net, trainer, loader = make_parts(0, sampler)
    train(net, trainer, loader, 0, 10, mgr, save_at={7})  # runs on past the save, then 'dies'
    mgr.wait()
    assert mgr.list() == [7] and mgr.latest() == 7

    reseed(99)  # a new process: other RNG states, other initial weights
    net2, trainer2, loader2 = make_parts(1, sampler)
    mgr2 = CheckpointManager(uri)
    assert mgr2.restore(net=net2, trainer=trainer2, loader=loader2) == 7
    assert mgr2.extra == {"epoch_note": "step 7"}
    train(net2, trainer2, loader2, 7, 13)
    for a, b in zip(want_w, weights(net2)):
        assert torch.equal(a, b)
    for a, b in zip(want_m, momenta(trainer2)):
        assert torch.equal(a, b)
    assert trainer2.optimizer.num_update == 13


def test_checkpoint_layout_and_manifest(tmp_path):
    net, trainer, loader = make_parts(0)
    train(net, trainer, loader, 0, 2)
    mgr = CheckpointManager(f"file://{tmp_path}/ck", async_save=False)
    mgr.save(2, net=net, trainer=trainer, loader=loader, lr=0.1)
    folder = tmp_path / "ck" / "step-2"
    names = sorted(os.listdir(folder))
    assert names == sorted(["params.safetensors", "trainer.rank0.states", "rng.rank0.json",
                            "loader.rank0.json", "state.json", MANIFEST])
    manifest = json.loads((folder / MANIFEST).read_text())
    assert (manifest["step"], manifest["world_size"], manifest["mxtorch_version"]) == (2, 1, mx.__version__)
    assert set(manifest["files"]) == set(names) - {MANIFEST}
    assert manifest["files"]["params.safetensors"]["size"] == (folder / "params.safetensors").stat().st_size
    # the files are the usual ones: load_parameters / load_states read them by hand
    net2, trainer2, _ = make_parts(1)
    net2.load_parameters(str(folder / "params.safetensors"))
    trainer2.load_states(str(folder / "trainer.rank0.states"))
    for a, b in zip(weights(net), weights(net2)):
        assert torch.equal(a, b)
    assert not [n for n in os.listdir(tmp_path / "ck") if n.startswith(".")]  # no temporary files left


def test_nothing_saved_restores_zero(tmp_path):
    net, trainer, loader = make_parts(0)
    mgr = CheckpointManager(tmp_path / "none")
    assert mgr.list() == [] and mgr.latest() is None
    before = weights(net)
    assert mgr.restore(net=net, trainer=trainer, loader=loader) == 0
    assert all(torch.equal(a, b) for a, b in zip(before, weights(net)))


def test_keep_last_and_policy():
    uri = memory_uri()
    mgr = CheckpointManager(uri, keep_last=2, every_n_steps=3, async_save=True)
    net, trainer, _ = make_parts(0)
    saved = [s for s in range(1, 13) if mgr.maybe_save(s, net=net, trainer=trainer)]
    mgr.wait()
    assert saved == [3, 6, 9, 12]
    assert mgr.list() == [9, 12]
    assert mgr.storage.listdir() == ["step-12", "step-9"]
    assert CheckpointManager(uri, keep_last=None).should_save(5)  # no policy: every step
    timed = CheckpointManager(memory_uri(), every_n_seconds=3600)
    assert not timed.should_save(1)
    timed._last_save -= 3601
    assert timed.should_save(2)
    with pytest.raises(ValueError, match="keep_last"):
        CheckpointManager(uri, keep_last=0)


def test_rollback_deletes_newer_checkpoints():
    mgr = CheckpointManager(memory_uri(), keep_last=None, async_save=False)
    for s in (10, 20, 30):
        mgr.save(s)
    with pytest.warns(UserWarning, match="step 30 .* newer than the step 21"):
        mgr.save(21)
    assert mgr.list() == [10, 20, 21]


@pytest.mark.parametrize("async_save", [False, True])
def test_crash_mid_write_keeps_previous(monkeypatch, async_save):
    uri = memory_uri()
    net, trainer, loader = make_parts(0)
    mgr = CheckpointManager(uri, async_save=async_save)
    mgr.save(1, net=net, trainer=trainer, loader=loader)
    mgr.wait()
    want = weights(net)
    train(net, trainer, loader, 1, 3)

    real_write = storage_mod.Storage.write

    def dying_write(self, rel, data):
        if not rel.endswith("params.safetensors"):
            raise OSError("disk gone (injected after the parameters were written)")
        real_write(self, rel, data)

    monkeypatch.setattr(storage_mod.Storage, "write", dying_write)
    if async_save:
        mgr.save(3, net=net, trainer=trainer, loader=loader)
        with pytest.raises(CheckpointError, match="step 3 .*disk gone"):
            mgr.wait()
    else:
        with pytest.raises(OSError, match="disk gone"):
            mgr.save(3, net=net, trainer=trainer, loader=loader)
    monkeypatch.undo()

    assert mgr.storage.exists("step-3/params.safetensors")  # written, but never committed
    assert mgr.list() == [1] and mgr.latest() == 1
    net2, trainer2, loader2 = make_parts(1)
    assert CheckpointManager(uri).restore(net=net2, trainer=trainer2, loader=loader2) == 1
    assert all(torch.equal(a, b) for a, b in zip(want, weights(net2)))
    mgr.save(4, net=net, trainer=trainer)  # the next commit removes the partial folder
    mgr.wait()
    assert mgr.storage.listdir() == ["step-1", "step-4"]


def test_corrupt_or_truncated_file_is_refused_with_fallback(tmp_path):
    net, trainer, loader = make_parts(0)
    mgr = CheckpointManager(tmp_path / "ck", keep_last=None, async_save=False)
    mgr.save(1, net=net, trainer=trainer, loader=loader)
    want = weights(net)
    train(net, trainer, loader, 1, 2)
    mgr.save(2, net=net, trainer=trainer, loader=loader)

    params = tmp_path / "ck" / "step-2" / "params.safetensors"
    raw = bytearray(params.read_bytes())
    raw[-3] ^= 0xFF  # same size, other bytes
    params.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"step 2 is corrupt: .*step-2/params.safetensors fails its"):
        mgr.verify(2)
    with pytest.warns(UserWarning, match="params.safetensors fails its sha256"):
        assert mgr.latest() == 1
    net2, trainer2, loader2 = make_parts(1)
    with pytest.warns(UserWarning, match=r"params.safetensors fails .*Falling back to checkpoint step 1"):
        assert mgr.restore(net=net2, trainer=trainer2, loader=loader2) == 1
    assert all(torch.equal(a, b) for a, b in zip(want, weights(net2)))

    states = tmp_path / "ck" / "step-1" / "trainer.rank0.states"
    states.write_bytes(states.read_bytes()[:100])  # truncated
    with pytest.raises(CheckpointError, match=r"no usable checkpoint.*step-1/trainer.rank0.states has 100 "):
        mgr.restore(net=net2, trainer=trainer2)
    with pytest.raises(CheckpointError, match="step 2 is corrupt"):
        mgr.restore(net=net2, step=2)  # an explicit step does not fall back
    (tmp_path / "ck" / "step-1" / "rng.rank0.json").unlink()
    with pytest.raises(CheckpointError, match="step 1 is incomplete: .*rng.rank0.json is missing"):
        mgr.verify(1)


def test_async_save_equals_sync_and_snapshots_at_save(tmp_path):
    net, trainer, loader = make_parts(0)
    train(net, trainer, loader, 0, 3)
    sync = CheckpointManager(tmp_path / "sync", async_save=False)
    asyn = CheckpointManager(tmp_path / "async", async_save=True)
    rng = mx.checkpoint.capture_rng()
    sync.save(3, net=net, trainer=trainer, loader=loader, note=1)
    mx.checkpoint.restore_rng(rng, "test")  # the same RNG states for the second save
    want = weights(net)
    asyn.save(3, net=net, trainer=trainer, loader=loader, note=1)
    with torch.no_grad():
        for p in net.collect_params().values():  # training goes on while the writer works
            p.data().add_(1.0)
    asyn.wait()
    assert asyn.last_save["step"] == 3 and asyn.last_save["bytes"] > 0
    a = json.loads((tmp_path / "sync" / "step-3" / MANIFEST).read_text())
    b = json.loads((tmp_path / "async" / "step-3" / MANIFEST).read_text())
    assert a["files"] == b["files"]  # byte-identical files
    net2, _, _ = make_parts(1)
    assert CheckpointManager(tmp_path / "async").restore(net=net2) == 3
    assert all(torch.equal(x, y) for x, y in zip(want, weights(net2)))


def test_second_async_save_waits_for_the_first(monkeypatch):
    import threading
    import time

    mgr = CheckpointManager(memory_uri(), keep_last=None, async_save=True)
    active, overlaps = [0], []
    lock = threading.Lock()
    real_write = storage_mod.Storage.write

    def slow_write(self, rel, data):
        with lock:
            active[0] += 1
            overlaps.append(active[0])
        time.sleep(0.01)
        real_write(self, rel, data)
        with lock:
            active[0] -= 1

    monkeypatch.setattr(storage_mod.Storage, "write", slow_write)
    for s in range(1, 4):
        mgr.save(s, value=s)
    mgr.wait()
    assert max(overlaps) == 1 and mgr.list() == [1, 2, 3]


def test_extra_must_be_json():
    mgr = CheckpointManager(memory_uri(), async_save=False)
    with pytest.raises(TypeError, match="extra value bad=.* not JSON"):
        mgr.save(1, bad=object())
    assert mgr.list() == []


# ---- the data position ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["random", "split", "rollover", "threads", "processes"])
def test_loader_state_resumes_mid_epoch(kind):
    data = list(range(23))

    def build():
        if kind == "random":
            return DataLoader(data, batch_size=4, shuffle=True)
        if kind == "split":
            return DataLoader(data, batch_size=3, sampler=SplitSampler(23, 2, 0, seed=3))
        if kind == "rollover":
            return DataLoader(data, batch_size=4, shuffle=True, last_batch="rollover")
        return DataLoader(data, batch_size=4, shuffle=True, num_workers=2, thread_pool=kind == "threads")

    def flat(batches):
        return [b.tolist() for b in batches]

    torch.manual_seed(0)
    ref = build()
    want = flat(itertools.islice(itertools.chain.from_iterable(iter(ref) for _ in range(8)), 30))

    torch.manual_seed(0)
    a = build()
    got = flat(itertools.islice(itertools.chain.from_iterable(iter(a) for _ in range(8)), 13))
    state = json.loads(json.dumps(a.state_dict()))  # JSON-able; in the middle of a pass
    rng = torch.get_rng_state()
    passes = {"split": (3, 1), "rollover": (2, 2)}.get(kind, (2, 1))  # (passes done, batches taken)
    assert (state["epoch"], state["batches"]) == passes

    torch.manual_seed(42)  # elsewhere: another generator state
    b = build()
    b.load_state_dict(state)
    torch.set_rng_state(rng)  # the checkpoint restores the global generator separately
    rest = flat(itertools.islice(itertools.chain.from_iterable(iter(b) for _ in range(8)), 30 - 13))
    assert got + rest == want


def test_loader_state_errors():
    a = DataLoader(list(range(10)), batch_size=2, sampler=SplitSampler(10, 2, 0))
    next(iter(a))
    state = a.state_dict()
    with pytest.raises(mx.MXNetError, match="another split .*num_parts: saved 2, now 3"):
        DataLoader(list(range(10)), batch_size=2, sampler=SplitSampler(10, 3, 0)).load_state_dict(state)
    with pytest.raises(mx.MXNetError, match="'SplitSampler' sampler into a RandomSampler"):
        DataLoader(list(range(10)), batch_size=2, shuffle=True).load_state_dict(state)
    with pytest.raises(mx.MXNetError, match="not a DataLoader state"):
        a.load_state_dict({"epoch": 1})


# ---- a job of two processes -------------------------------------------------------------------
def test_two_workers_resume_exactly_and_one_process_reads_it(tmp_path, run_ranks):
    """2 workers (allreduce, 2-bit compression: residuals are per worker; a sharded loader):
    each rank writes its own files, rank 0 commits one manifest; new processes restore and end
    bit-identical to the uninterrupted job.  One process can then restore the parameters."""
    import checkpoint_workers as cw

    uri = str(tmp_path / "job")
    first = run_ranks(cw.train_and_save, 2, uri, 5, 9, timeout=120)
    assert [(r["rank"], r["world"]) for r in first] == [(0, 2), (1, 2)]
    assert all(r["has_residuals"] for r in first)
    folder = tmp_path / "job" / "step-5"
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["world_size"] == 2
    for r in (0, 1):
        for name in (f"trainer.rank{r}.states", f"rng.rank{r}.json", f"loader.rank{r}.json"):
            assert name in manifest["files"]
    second = run_ranks(cw.restore_and_finish, 2, uri, 9, timeout=120)
    for before, after in zip(first, second):
        assert after["step"] == 5 and after["extra"] == {"world_note": "two"}
        for a, b in zip(before["want"], after["weights"]):
            assert torch.equal(a, b)

    # one process: the parameters and optimizer states load; what belonged to a worker is said
    net, trainer, loader = make_parts(1)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    with pytest.warns(UserWarning, match="saved by 2 worker.*this job has 1") as record:
        assert CheckpointManager(uri).restore(net=net, trainer=trainer, loader=loader) == 5
    assert any("data position is not carried over" in str(w.message) for w in record)
    assert trainer.optimizer.num_update == 5
