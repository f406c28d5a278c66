"""tests/fake_store.py drives gluon.Trainer: the same weights as the local store, the calls the
Trainer makes through the public store interface, and a missing capability refused clearly."""

from __future__ import annotations

import pytest
import torch
from fake_store import FakeStore

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.gluon.trainer import TrainerConfigError
from mxtorch.kvstore import Capability

CTXS = [mx.cpu(0), mx.cpu(1)]


def _train(store, update_on_kvstore=None, steps=3):
    torch.manual_seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, activation="tanh", in_units=4), gluon.nn.Dense(2, in_units=5))
    net.initialize(mx.init.Xavier(), ctx=CTXS)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore=store, update_on_kvstore=update_on_kvstore)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 4, generator=g), torch.randint(0, 2, (8,), generator=g)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        with autograd.record():
            losses = [loss_fn(net(xs), ys) for xs, ys in zip(gluon.utils.split_and_load(x, CTXS),
                                                            gluon.utils.split_and_load(y, CTXS))]
        autograd.backward(losses)
        trainer.step(8)
    return [p.list_data()[0].detach().clone() for p in net.collect_params().values()]


def test_fake_store_is_a_store_and_sums_pushed_values():
    store = FakeStore()
    store.init("w", torch.zeros(3))
    store.push("w", [torch.ones(3), 2 * torch.ones(3)])
    out = torch.empty(3)
    store.pull("w", out=out)
    torch.testing.assert_close(out, torch.full((3,), 3.0))
    assert [m for m, _ in store.calls] == ["init", "push", "pull"]
    assert not store.is_capable("optimizer") and not store.is_capable(Capability.OVERLAP)


def test_trainer_with_the_fake_store_matches_the_local_store():
    reference = _train("local", update_on_kvstore=False)
    store = FakeStore()
    got = _train(store)
    for a, b in zip(got, reference):
        torch.testing.assert_close(a, b)
    # weights are initialized with broadcast, gradients reduced with pushpull, nothing else
    assert store.called("broadcast") >= 1 and store.called("pushpull") >= 3
    assert {m for m, _ in store.calls} <= {"broadcast", "pushpull"}


def test_update_on_the_fake_store_runs_its_optimizer():
    reference = _train("local", update_on_kvstore=False)
    store = FakeStore(capabilities=[Capability.OPTIMIZER])
    got = _train(store, update_on_kvstore=True)
    assert store.optimizer is not None and store.called("set_optimizer") == 1
    for a, b in zip(got, reference):
        torch.testing.assert_close(a, b)


def test_update_on_a_store_without_optimizer_is_refused():
    message = "'fakestore' cannot run the optimizer: create the Trainer with update_on_kvstore=False"
    with pytest.raises(TrainerConfigError, match=message):
        _train(FakeStore(), update_on_kvstore=True, steps=1)
