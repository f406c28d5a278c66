"""One state protocol (``state_dict`` / ``load_state_dict``) and the Trainer's public surface."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.amp import LossScaler
from mxtorch.checkpoint import CheckpointManager, RNGState
from mxtorch.contrib.pruning import Pruner
from mxtorch.gluon import nn
from mxtorch.gluon.data import ArrayDataset, DataLoader
from mxtorch.gluon.data.sampler import RandomSampler, SequentialSampler, SplitSampler
from mxtorch.stateful import Stateful, plain_state_problem


def _net(in_units: int | None = 4) -> nn.HybridSequential:
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=in_units or 0), nn.Dense(2, in_units=3 if in_units else 0))
    return net


def _step(net, trainer, x, batch_size=1):
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(batch_size)


def test_every_stateful_kind_satisfies_the_protocol():
    net = _net()
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loader = DataLoader(ArrayDataset(np.arange(8.0)), batch_size=2)
    objects = [net, net.collect_params(), trainer, loader, SequentialSampler(4), RandomSampler(4),
               SplitSampler(8, 2, 0), Pruner("l1", sparsity=0.5), LossScaler(), RNGState()]
    for obj in objects:
        assert isinstance(obj, Stateful), type(obj).__name__
    assert not isinstance(object(), Stateful)


def test_trainer_public_surface_follows_mxnet_rules():
    net = _net()
    net.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore="device")
    assert tr.kvstore is None and tr.update_on_kvstore is None  # set up at the first step, as MXNet
    x = torch.ones(2, 4)
    with autograd.record():
        losses = [net(d).sum() for d in gluon.utils.split_and_load(x, [mx.cpu(0), mx.cpu(1)])]
    autograd.backward(losses)
    tr.step(2)
    assert tr.kvstore is not None and tr.kvstore.type == "device"
    assert tr.update_on_kvstore is True  # the device store can run the optimizer
    assert tr.optimizer_state(net[0].weight) == []  # the store keeps the states

    one = _net()
    one.initialize()
    tr1 = gluon.Trainer(one.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore="device")
    _step(one, tr1, torch.ones(1, 4))
    assert tr1.kvstore is None and tr1.update_on_kvstore is None  # one context: no store


def test_optimizer_state_is_the_state_the_next_update_uses():
    net = _net()
    net.initialize()
    w = net[1].weight
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    x = torch.ones(1, 4)

    def backward() -> torch.Tensor:
        with autograd.record():
            loss = net(x).sum()
        loss.backward()
        return w.list_data()[0].grad.detach().clone()

    grad = backward()
    tr.step(1)
    (mom,) = tr.optimizer_state(w)
    # MXNet's SGD: mom = momentum * mom - lr * grad (zero to start); weight += mom
    torch.testing.assert_close(mom, -0.1 * grad)
    mom.zero_()  # changing it in place changes the next update: weight += 0.9 * 0 - 0.1 * grad
    grad = backward()
    before = w.data().detach().clone()
    tr.step(1)
    torch.testing.assert_close(w.data().detach(), before - 0.1 * grad)
    with pytest.raises(mx.MXNetError, match="not updated by this Trainer"):
        tr.optimizer_state(gluon.Parameter("other", shape=(1,)))


def test_trainer_state_dict_round_trips_without_pickle():
    torch.manual_seed(0)
    net = _net()
    net.initialize()
    tr = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    x = torch.randn(2, 4)
    _step(net, tr, x)
    state = tr.state_dict()
    assert plain_state_problem(state) is None
    buf = io.BytesIO()
    torch.save(state, buf)
    loaded = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)

    net2 = _net()
    net2.initialize()
    net2.load_state_dict(net.state_dict())
    tr2 = gluon.Trainer(net2.collect_params(), "adam", {"learning_rate": 0.01})
    tr2.load_state_dict(loaded)
    _step(net, tr, x)
    _step(net2, tr2, x)
    for a, b in zip(net.collect_params().values(), net2.collect_params().values()):
        torch.testing.assert_close(a.data(), b.data())
    assert tr2.optimizer.num_update == tr.optimizer.num_update == 2
    with pytest.raises(mx.MXNetError, match="format"):
        tr2.load_state_dict({"format": "something else"})


def test_block_load_state_dict_fills_every_context_and_deferred_parameters():
    net = _net()
    net.initialize()
    state = {k: torch.full_like(v, 0.5) for k, v in net.state_dict().items()}
    multi = _net()
    multi.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    multi.load_state_dict(state)
    for p in multi.collect_params().values():
        for d in p.list_data():
            assert torch.all(d == 0.5)
    deferred = _net(in_units=None)  # shapes wait for the first forward pass
    deferred.initialize()
    assert set(deferred.state_dict()) == {"0.bias", "1.bias"}  # the weights wait for their shape
    deferred.load_state_dict(state)
    assert all(torch.all(v == 0.5) for v in deferred.state_dict().values())
    assert len(deferred.state_dict()) == 4
    with pytest.raises(mx.MXNetError, match="shape mismatch"):
        _net(in_units=5).load_state_dict(state)
    missing = _net()
    missing.initialize()
    with pytest.raises(mx.MXNetError, match="lacks 1 parameter"):
        missing.load_state_dict({k: v for k, v in state.items() if k != "1.bias"})
    result = missing.load_state_dict({k: v for k, v in state.items() if k != "1.bias"}, strict=False)
    assert list(result.missing_keys) == ["1.bias"]


def test_parameter_dict_state_dict_uses_full_names():
    net = _net()
    net.initialize()
    params = net.collect_params()
    sd = params.state_dict()
    assert set(sd) == set(params.keys())
    other = _net()
    other.initialize()
    other.collect_params().load_state_dict({k2: sd[k1] for k1, k2 in zip(sd, other.collect_params())})
    for a, b in zip(params.values(), other.collect_params().values()):
        torch.testing.assert_close(a.data(), b.data())


def test_rng_state_restores_every_generator():
    rng = RNGState()
    saved = rng.state_dict()
    first = (random.random(), float(np.random.rand()), float(torch.rand(())))
    rng.load_state_dict(saved)
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == first
    with pytest.raises(mx.MXNetError, match="malformed RNG state"):
        RNGState("rng.json").load_state_dict({**saved, "torch": 3})


def test_checkpoint_manager_takes_only_stateful_objects(tmp_path):
    with CheckpointManager(str(tmp_path), async_save=False) as mgr:
        with pytest.raises(TypeError, match="trainer= must have state_dict"):
            mgr.save(1, trainer=object())
        with pytest.raises(TypeError, match="net= must have state_dict"):
            mgr.restore(net=object())


def test_parameter_reshape_release_and_deferred_callback():
    p = gluon.Parameter("w", shape=(2, 3))
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    p.replace_data(torch.ones(4, 3))
    assert p.shape == (4, 3) and all(d.shape == (4, 3) for d in p.list_data())
    with pytest.raises(mx.MXNetError, match="one per context"):
        p.replace_data([torch.ones(1), torch.ones(2)])
    p.release_data()
    assert not p.is_initialized and p.shape == (4, 3)
    seen = []
    q = gluon.Parameter("q", shape=(0, 3), allow_deferred_init=True)
    q.initialize()
    assert q.init_deferred
    q.on_deferred_init(lambda param: seen.append(tuple(param.shape)))
    q.infer_shape((5, 3))
    assert seen == [(5, 3)]
    with pytest.raises(mx.MXNetError, match="no deferred initialization"):
        q.on_deferred_init(lambda param: None)


def test_update_on_kvstore_env_is_read_in_one_place(monkeypatch):
    from mxtorch.kvstore.base import update_on_kvstore_from_env

    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "maybe")
    with pytest.raises(mx.MXNetError, match="MXNET_UPDATE_ON_KVSTORE='maybe' is not understood"):
        update_on_kvstore_from_env()
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    assert update_on_kvstore_from_env() is False


class _Counter:
    """A Stateful of the user's own: a tensor and a number."""

    def __init__(self) -> None:
        self.total = torch.zeros(3)
        self.seen = 0

    def state_dict(self):
        return {"total": self.total, "seen": self.seen}

    def load_state_dict(self, state):
        self.total, self.seen = state["total"].clone(), int(state["seen"])


def test_checkpoint_manager_keeps_any_stateful_by_name(tmp_path):
    scaler, counter = LossScaler(init_scale=64.0), _Counter()
    scaler.update_scale(True)  # an overflow halves the scale
    counter.total += torch.tensor([1.0, 2.0, 3.0])
    counter.seen = 7
    with CheckpointManager(str(tmp_path), async_save=True) as mgr:
        mgr.save(3, stateful={"scaler": scaler, "counter": counter})
        counter.total += 100  # after save: not in the checkpoint
        mgr.wait()
        assert sorted(p.name for p in (tmp_path / "step-3").iterdir() if p.name.startswith("state.")) == \
            ["state.counter.rank0.pt", "state.json", "state.scaler.rank0.pt"]
        scaler2, counter2 = LossScaler(), _Counter()
        assert mgr.restore(stateful={"scaler": scaler2, "counter": counter2}) == 3
    assert scaler2.state_dict() == scaler.state_dict() and scaler2.loss_scale == 32.0
    torch.testing.assert_close(counter2.total, torch.tensor([1.0, 2.0, 3.0]))
    assert counter2.seen == 7
    with CheckpointManager(str(tmp_path), async_save=False) as mgr:
        with pytest.raises(mx.MXNetError, match="holds no state 'other'"):
            mgr.restore(stateful={"other": _Counter()})
        with pytest.raises(ValueError, match="stateful name"):
            mgr.save(4, stateful={"../x": counter})
        bad = _Counter()
        bad.seen = object()  # type: ignore[assignment]
        with pytest.raises(TypeError, match=r"stateful\['bad'\].state_dict\(\)\['seen'\] is a object"):
            mgr.save(4, stateful={"bad": bad})
