"""Trainer.save_states/load_states: a versioned container with the optimizer states, this worker's
compression residuals and AMP's loss scaler; resuming from it continues a run exactly."""

import io
import os

import pytest
import torch

import mxtorch as mx
from mxtorch import amp, autograd, compression, gluon
from mxtorch.amp import LossScaler
from mxtorch.base import MXNetError
from mxtorch.distributed.testing import run_workers
from mxtorch.gluon import _trainer_states as states_io
from mxtorch.gluon import nn
from mxtorch.gluon.utils import split_and_load

LR = {"learning_rate": 0.1, "momentum": 0.9}
TWO_BIT = {"type": "2bit", "threshold": 0.05}


def make_net(seed=0):
    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="tanh", in_units=10), nn.Dense(4, in_units=16))
    net.initialize(mx.init.Xavier())
    return net


def batch(rank, step, n=8):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(n, 10, generator=g), torch.randint(0, 4, (n,), generator=g).float()


def train_steps(net, trainer, rank, start, count, use_amp=False, overflow_at=()):
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for step in range(start, start + count):
        x, y = batch(rank, step)
        with autograd.record():
            loss = loss_fn(net(x), y)
        if use_amp:
            with amp.scale_loss(loss, trainer) as scaled:
                autograd.backward(scaled)
        else:
            loss.backward()
        if step in overflow_at:  # as a float16 gradient that left its range
            next(iter(net.collect_params().values())).grad()[0, 0] = float("inf")
        trainer.step(x.shape[0])


def weights(net):
    return [p.data().detach().clone() for p in net.collect_params().values()]


# ---- rank functions (run in real processes by run_workers) ----------------------------------
def _residuals(trainer):
    return {k: v.clone() for k, v in trainer._kvstore.compressor.state_dict()["residuals"].items()}


def compressed_train_and_save(folder, params, before, after):
    """``before`` steps, save parameters and this worker's states, then ``after`` more steps."""
    rank = int(os.environ["RANK"])
    net = make_net(seed=rank)  # different on each rank: the Trainer broadcasts rank 0's
    trainer = gluon.Trainer(net.collect_params(), "sgd", LR, kvstore="horovod", compression_params=params)
    train_steps(net, trainer, rank, 0, before)
    if rank == 0:
        net.save_parameters(os.path.join(folder, "net.params"))
    trainer.save_states(os.path.join(folder, f"trainer.states.{rank}"))
    saved = _residuals(trainer)
    train_steps(net, trainer, rank, before, after)
    return {"weights": weights(net), "residuals": saved}


def compressed_resume(folder, params, before, after):
    """In new processes: resume from the files (residuals restored, then residuals dropped), and
    check the loads that must fail."""
    rank = int(os.environ["RANK"])
    mine = os.path.join(folder, f"trainer.states.{rank}")
    out = {}

    def resume(load):
        net = make_net(seed=50 + rank)
        net.load_parameters(os.path.join(folder, "net.params"))
        trainer = gluon.Trainer(net.collect_params(), "sgd", LR, kvstore="horovod", compression_params=params)
        load(trainer)
        loaded = _residuals(trainer)
        train_steps(net, trainer, rank, before, after)
        return weights(net), loaded, trainer

    out["weights"], out["loaded"], trainer = resume(lambda t: t.load_states(mine))
    assert trainer.optimizer.num_update == before + after

    def drop_residuals(t):
        t.load_states(mine)
        t._kvstore.compressor.reset()

    out["weights_without_residuals"], _, _ = resume(drop_residuals)

    errors = {}
    net = make_net()
    plain = gluon.Trainer(net.collect_params(), "sgd", LR, kvstore="horovod")
    with pytest.raises(MXNetError) as e:
        plain.load_states(mine)
    errors["no_compression"] = str(e.value)
    plain.load_states(mine, strict=False)
    assert plain.optimizer.num_update == before
    other = gluon.Trainer(make_net().collect_params(), "sgd", LR, kvstore="horovod",
                          compression_params={"type": "1bit"})
    with pytest.raises(MXNetError) as e:
        other.load_states(mine)
    errors["other_type"] = str(e.value)
    net = make_net()
    swapped = gluon.Trainer(net.collect_params(), "sgd", LR, kvstore="horovod", compression_params=params)
    train_steps(net, swapped, rank, 0, 1)  # some residuals of its own
    with pytest.raises(MXNetError) as e:
        swapped.load_states(os.path.join(folder, f"trainer.states.{1 - rank}"))
    errors["other_rank"] = str(e.value)
    swapped.load_states(os.path.join(folder, f"trainer.states.{1 - rank}"), strict=False)
    errors["other_rank_relaxed_residuals"] = len(_residuals(swapped))
    out["errors"] = errors
    return out


# ---- compression residuals across real processes -------------------------------------------
def test_compressed_job_resumes_exactly_with_each_workers_residuals(tmp_path):
    before, after = 4, 3
    first = run_workers(compressed_train_and_save, 2, str(tmp_path), TWO_BIT, before, after, timeout=120)
    # the file is the versioned container and reads without unpickling
    blob = torch.load(tmp_path / "trainer.states.1", weights_only=True)
    assert blob["format"] == states_io.FORMAT and blob["version"] == states_io.VERSION
    section = blob["compression"]
    assert section["type"] == "2bit" and section["params"] == {"threshold": 0.05}
    assert (section["rank"], section["num_workers"]) == (1, 2)

    second = run_workers(compressed_resume, 2, str(tmp_path), TWO_BIT, before, after, timeout=120)
    for rank in (0, 1):
        saved, resumed = first[rank], second[rank]
        # every worker got back its own, non-trivial residuals, bit for bit
        assert saved["residuals"].keys() == resumed["loaded"].keys() and saved["residuals"]
        assert any(r.abs().sum() > 0 for r in saved["residuals"].values())
        for k, r in saved["residuals"].items():
            assert torch.equal(r, resumed["loaded"][k])
        # ... so the resumed job continues exactly as the uninterrupted one
        for a, b in zip(saved["weights"], resumed["weights"]):
            assert torch.equal(a, b)
        # and the residuals matter: without them the same steps give other weights
        dropped = resumed["weights_without_residuals"]
        assert not all(torch.equal(a, b) for a, b in zip(saved["weights"], dropped))
        errors = resumed["errors"]
        assert "does not compress" in errors["no_compression"] and "strict=False" in errors["no_compression"]
        assert "'2bit'" in errors["other_type"] and "'1bit'" in errors["other_type"]
        assert f"rank {1 - rank} (of 2), but this is rank {rank}" in errors["other_rank"]
        assert errors["other_rank_relaxed_residuals"] == 0  # another worker's residuals are never used


# ---- AMP's loss scaler ----------------------------------------------------------------------
def amp_trainer(net, scaler=None):
    trainer = gluon.Trainer(net.collect_params(), "sgd", LR)
    amp.init_trainer(trainer, scaler)
    return trainer


def test_amp_loss_scale_survives_save_and_load(tmp_path):
    # A scale at float32's limit overflows as float16 does: the first step is skipped and halves
    # it, clean steps grow it again after scale_window steps (and overflow again).
    def scaler():
        return LossScaler(init_scale=2.0 ** 127, max_scale=2.0 ** 127, scale_window=3)

    net = make_net()
    trainer = amp_trainer(net, scaler())
    train_steps(net, trainer, 0, 0, 8, use_amp=True, overflow_at=(5,))
    state = trainer._amp_loss_scaler.state_dict()
    assert state["num_overflows"] >= 2 and state["loss_scale"] < 2.0 ** 127
    net.save_parameters(str(tmp_path / "net.params"))
    trainer.save_states(str(tmp_path / "t.states"))
    train_steps(net, trainer, 0, 8, 6, use_amp=True, overflow_at=(10,))
    expected, expected_scale = weights(net), trainer._amp_loss_scaler.loss_scale

    blob = torch.load(tmp_path / "t.states", weights_only=True)
    assert blob["hooks"]["amp"]["loss_scaler"] == state and blob["compression"] is None

    def resume(load):
        net2 = make_net(seed=9)
        net2.load_parameters(str(tmp_path / "net.params"))
        # MXNet's default scaler: the file brings back the scale, its clean-step count and settings
        if load:
            tr2 = amp_trainer(net2)
            tr2.load_states(str(tmp_path / "t.states"))
            assert tr2._amp_loss_scaler.state_dict() == state
        else:  # optimizer states only; the scaler starts over
            tr2 = gluon.Trainer(net2.collect_params(), "sgd", LR)
            tr2.load_states(str(tmp_path / "t.states"), strict=False)
            amp.init_trainer(tr2, scaler())
        train_steps(net2, tr2, 0, 8, 6, use_amp=True, overflow_at=(10,))
        return weights(net2), tr2._amp_loss_scaler.loss_scale

    got, got_scale = resume(load=True)
    assert got_scale == expected_scale
    assert all(torch.equal(a, b) for a, b in zip(expected, got))
    # a scaler that starts over skips other steps (here: the first one): the run diverges
    fresh, _ = resume(load=False)
    assert not all(torch.equal(a, b) for a, b in zip(expected, fresh))


def test_amp_state_needs_amp_on_the_loading_trainer(tmp_path):
    net = make_net()
    trainer = amp_trainer(net, LossScaler(init_scale=8.0))
    train_steps(net, trainer, 0, 0, 2, use_amp=True)
    f = str(tmp_path / "t.states")
    trainer.save_states(f)
    plain = gluon.Trainer(make_net().collect_params(), "sgd", LR)
    with pytest.raises(MXNetError, match=r"'amp' update hook.*init_trainer\(trainer\) before load_states"):
        plain.load_states(f)
    assert plain.optimizer.num_update == 0  # a refused load changes nothing
    plain.load_states(f, strict=False)
    assert plain.optimizer.num_update == 2
    # the other way round: a file without AMP state leaves the scaler as it is
    f2 = str(tmp_path / "plain.states")
    plain.save_states(f2)
    tr = amp_trainer(make_net(), LossScaler(init_scale=32.0))
    tr.load_states(f2)
    assert tr._amp_loss_scaler.loss_scale == 32.0 and tr.optimizer.num_update == 2


# ---- the container itself ------------------------------------------------------------------
def test_old_bare_optimizer_files_still_load(tmp_path):
    net = make_net()
    trainer = gluon.Trainer(net.collect_params(), "sgd", LR)
    train_steps(net, trainer, 0, 0, 3)
    f = tmp_path / "old.states"
    f.write_bytes(trainer._updaters[0].get_states(dump_optimizer=True))  # what save_states wrote before
    tr = amp_trainer(make_net(), LossScaler(init_scale=16.0))
    tr.load_states(str(f))
    assert tr.optimizer.num_update == 3 and tr._amp_loss_scaler.loss_scale == 16.0
    for k, v in trainer._updaters[0].states.items():
        assert torch.equal(v, tr._updaters[0].states[k])


def test_update_on_kvstore_states_go_into_the_container(tmp_path):
    ctx = [mx.cpu(0), mx.cpu(1)]

    def build():
        torch.manual_seed(0)
        net = nn.Dense(3, in_units=4)
        net.initialize(mx.init.Xavier(), ctx=ctx)
        tr = gluon.Trainer(net.collect_params(), "sgd", LR, kvstore="device", update_on_kvstore=True)
        amp.init_trainer(tr, LossScaler(init_scale=4.0))
        return net, tr

    net, tr = build()
    x = torch.randn(4, 4)
    for _ in range(2):
        with autograd.record():
            losses = [net(part).sum() for part in split_and_load(x, ctx)]
        with amp.scale_loss(losses, tr) as scaled:
            autograd.backward(scaled)
        tr.step(8)
    f = str(tmp_path / "kv.states")
    tr.save_states(f)
    assert torch.load(f, weights_only=True)["format"] == states_io.FORMAT
    _, tr2 = build()
    tr2.load_states(f)
    assert tr2.optimizer.num_update == 2


def test_bad_files_give_clear_errors(tmp_path):
    tr = gluon.Trainer(make_net().collect_params(), "sgd", LR)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not a states file")
    with pytest.raises(MXNetError, match="not a file written by Trainer.save_states"):
        tr.load_states(str(garbage))
    newer = tmp_path / "newer"
    buf = io.BytesIO()
    torch.save({"format": states_io.FORMAT, "version": states_io.VERSION + 1}, buf)
    newer.write_bytes(buf.getvalue())
    with pytest.raises(MXNetError, match="newer mxtorch.*upgrade"):
        tr.load_states(str(newer))
    other = tmp_path / "other"
    buf = io.BytesIO()
    torch.save({"format": "something else"}, buf)
    other.write_bytes(buf.getvalue())
    with pytest.raises(MXNetError, match="format 'something else'"):
        tr.load_states(str(other))


def test_restore_rules_for_compression_sections():
    two_bit = compression.create(TWO_BIT)
    two_bit.compress(torch.randn(20), key=0)
    sec = states_io.compression_section(two_bit, rank=1, num_workers=4)
    states = states_io.decode(states_io.encode(states_io.TrainerStates(b"", compression=sec)), "f")

    def check(comp, rank, strict=True):
        return states_io.check_restorable(states, comp, {}, rank, strict, "f")

    # another threshold is fine: a residual is gradient not sent yet, whatever the threshold
    assert check(compression.create({"type": "2bit", "threshold": 0.5}), 1) == (True, [])
    for comp, rank, words in [(None, 1, "does not compress"),
                              (compression.create({"type": "topk"}), 1, "'topk'"),
                              (compression.create(TWO_BIT), 0, r"rank 1 \(of 4\), but this is rank 0")]:
        with pytest.raises(MXNetError, match=words):
            check(comp, rank)
        assert check(comp, rank, strict=False) == (False, [])


def test_powersgd_state_round_trips_through_the_container():
    a = compression.create({"type": "powersgd", "rank": 2})
    g = [torch.randn(12, 9, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    a.compress(g[0], "w")
    sec = states_io.compression_section(a, rank=0, num_workers=2)
    states = states_io.decode(states_io.encode(states_io.TrainerStates(b"", compression=sec)), "f")
    b = compression.create({"type": "powersgd", "rank": 2})
    b.load_state_dict(states.compression["state"])
    for t in g[1:]:
        pa, ca = a.compress(t, "w")
        pb, cb = b.compress(t, "w")
        assert all(torch.equal(x, y) for x, y in zip(pa, pb))


# ---- the update hook AMP uses is a documented Trainer feature --------------------------------
class SkipOddSteps:
    """A minimal UpdateHook: skips every other update, halves the gradients of the others."""

    name = "skip_odd"

    def __init__(self):
        self.calls = 0

    def before_reduce(self, trainer, grads):
        return True

    def before_update(self, trainer, grads):
        self.calls += 1
        return None if self.calls % 2 == 0 else 0.5

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = int(state["calls"])


def test_custom_update_hook_skips_scales_and_is_saved(tmp_path):
    net_a, net_b = make_net(), make_net()
    tr_a = gluon.Trainer(net_a.collect_params(), "sgd", {"learning_rate": 0.1})
    tr_b = gluon.Trainer(net_b.collect_params(), "sgd", {"learning_rate": 0.05})
    hook = SkipOddSteps()
    tr_a.set_update_hook(hook)
    assert tr_a.update_hook is hook
    train_steps(net_a, tr_a, 0, 0, 2)  # step 0 applied at half the gradient, step 1 skipped
    train_steps(net_b, tr_b, 0, 0, 1)
    assert all(torch.equal(a, b) for a, b in zip(weights(net_a), weights(net_b)))
    assert tr_a.optimizer.num_update == 1
    f = str(tmp_path / "t.states")
    tr_a.save_states(f)
    tr_c = gluon.Trainer(make_net().collect_params(), "sgd", {"learning_rate": 0.1})
    tr_c.set_update_hook(SkipOddSteps())
    tr_c.load_states(f)
    assert tr_c.update_hook.calls == 2
    with pytest.raises(MXNetError, match="already has the update hook 'skip_odd'"):
        tr_a.set_update_hook(SkipOddSteps())
    tr_a.set_update_hook(None)
    with pytest.raises(TypeError, match="before_reduce"):
        tr_a.set_update_hook(object())
