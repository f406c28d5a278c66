import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.base import MXNetError
from mxtorch.gluon import nn
from mxtorch.gluon.utils import split_and_load


def make_net(seed=0):
    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(6, activation="tanh", in_units=4), nn.Dense(3, in_units=6))
    return net


def data(n=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g).float()


def train(ctx, steps=3, update_on_kvstore=None, kvstore="device", optimizer="sgd", opt_params=None):
    net = make_net()
    net.initialize(mx.init.Xavier(), ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), optimizer,
                            opt_params or {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3},
                            kvstore=kvstore, update_on_kvstore=update_on_kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = data()
    for _ in range(steps):
        xs, ys = split_and_load(x, ctx), split_and_load(y, ctx)
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
        for l in losses:
            l.backward()
        trainer.step(x.shape[0])
    return net, trainer


def test_sgd_step_matches_formula():
    net = nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(mx.init.One())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5, "wd": 0.1})
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    with autograd.record():
        y = net(x)
    y.backward()
    trainer.step(2)
    grad = x.sum(0) / 2  # rescale_grad = 1/batch
    expected = torch.ones(2) - 0.5 * (grad + 0.1 * torch.ones(2))
    torch.testing.assert_close(net.weight.data().detach()[0], expected)
    assert net.weight.data().grad is None  # grad_req='write': reset for the next step


@pytest.mark.parametrize("update_on_kvstore", [None, False])
@pytest.mark.parametrize("optimizer,params", [
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3}),
    ("adam", {"learning_rate": 0.01}),
])
def test_two_contexts_equal_one_context(update_on_kvstore, optimizer, params):
    ref, _ = train([mx.cpu(0)], optimizer=optimizer, opt_params=params)
    got, trainer = train([mx.cpu(0), mx.cpu(1)], update_on_kvstore=update_on_kvstore, optimizer=optimizer,
                         opt_params=params)
    assert trainer._kvstore is not None
    assert trainer._update_on_kvstore == (update_on_kvstore is None)
    for (k, p_ref), p in zip(ref.collect_params().items(), got.collect_params().values()):
        for d in p.list_data():
            torch.testing.assert_close(d.detach(), p_ref.data().detach(), rtol=1e-5, atol=1e-6, msg=k)
    # step counts are counted once per step, not once per context
    assert trainer.optimizer.num_update == 3


def test_local_kvstore_name_works_too():
    ref, _ = train([mx.cpu(0)])
    got, _ = train([mx.cpu(0), mx.cpu(1)], kvstore="local")
    torch.testing.assert_close(got[0].weight.data(mx.cpu(1)).detach(), ref[0].weight.data().detach(),
                               rtol=1e-5, atol=1e-6)


def test_grad_req_add_accumulates_over_batches():
    net = nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(mx.init.One())
    net.collect_params().setattr("grad_req", "add")
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0})
    x = torch.tensor([[1.0, 1.0]])
    for _ in range(3):
        with autograd.record():
            y = net(x)
        y.backward()
    trainer.step(3)
    torch.testing.assert_close(net.weight.data().detach(), torch.zeros(1, 2))
    torch.testing.assert_close(net.weight.grad(), torch.ones(1, 2) * 3)  # kept until zero_grad


def test_stale_gradient_error_and_ignore():
    a, b = nn.Dense(2, in_units=2), nn.Dense(2, in_units=2)
    net = nn.Sequential()
    net.add(a, b)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    with autograd.record():
        y = a(torch.ones(1, 2)).sum()
    y.backward()
    with pytest.raises(MXNetError, match=f"'{b.weight.name}' was not computed by backward"):
        trainer.step(1)
    w_before = b.weight.data().detach().clone()
    trainer.step(1, ignore_stale_grad=True)
    torch.testing.assert_close(b.weight.data().detach(), w_before)


def test_lr_mult_and_wd_mult():
    net = nn.Dense(1, in_units=1, use_bias=False)
    net.initialize(mx.init.One())
    net.weight.lr_mult = 0.0
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0})
    with autograd.record():
        y = net(torch.ones(1, 1))
    y.backward()
    trainer.step(1)
    torch.testing.assert_close(net.weight.data().detach(), torch.ones(1, 1))


def test_learning_rate_property_and_setter():
    net = nn.Dense(1, in_units=1)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.3})
    assert trainer.learning_rate == pytest.approx(0.3)
    trainer.set_learning_rate(0.01)
    assert trainer.learning_rate == pytest.approx(0.01)


def test_save_load_states_continue_identically(tmp_path):
    net, trainer = train([mx.cpu(0)], optimizer="adam", opt_params={"learning_rate": 0.01})
    f = str(tmp_path / "t.states")
    trainer.save_states(f)
    p = str(tmp_path / "n.params")
    net.save_parameters(p)

    def one_step(n, t):
        x, y = data(seed=7)
        with autograd.record():
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(n(x), y)
        loss.backward()
        t.step(x.shape[0])

    one_step(net, trainer)
    net2 = make_net()
    net2.load_parameters(p)
    trainer2 = gluon.Trainer(net2.collect_params(), "adam", {"learning_rate": 0.01})
    trainer2.load_states(f)
    assert trainer2.optimizer.num_update == 3
    one_step(net2, trainer2)
    for a, b in zip(net.collect_params().values(), net2.collect_params().values()):
        torch.testing.assert_close(a.data().detach(), b.data().detach())


def test_save_load_states_multi_context(tmp_path):
    _, trainer = train([mx.cpu(0), mx.cpu(1)])
    f = str(tmp_path / "kv.states")
    trainer.save_states(f)
    _, trainer2 = train([mx.cpu(0), mx.cpu(1)], steps=1)
    trainer2.load_states(f)
    assert trainer2.optimizer.num_update == 3


def test_bad_names_are_listed():
    net = nn.Dense(1, in_units=1)
    net.initialize()
    with pytest.raises(ValueError, match="sgd"):
        gluon.Trainer(net.collect_params(), "sgdd")
    with pytest.raises(MXNetError, match=r"unknown kvstore 'dist_nope'.*device"):
        gluon.Trainer(net.collect_params(), "sgd", kvstore="dist_nope")


def test_step_before_initialize_is_clear():
    net = nn.Dense(1, in_units=1)
    trainer = gluon.Trainer(net.collect_params(), "sgd")
    with pytest.raises(MXNetError, match="has not been initialized"):
        trainer.step(1)


def test_allreduce_then_update_for_clipping():
    ctx = [mx.cpu(0), mx.cpu(1)]
    net = make_net()
    net.initialize(ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, update_on_kvstore=False)
    x, y = data()
    with autograd.record():
        losses = [gluon.loss.SoftmaxCrossEntropyLoss()(net(a), b)
                  for a, b in zip(split_and_load(x, ctx), split_and_load(y, ctx))]
    for l in losses:
        l.backward()
    trainer.allreduce_grads()
    g0, g1 = net[0].weight.grad(mx.cpu(0)), net[0].weight.grad(mx.cpu(1))
    torch.testing.assert_close(g0, g1)
    grads = [p.grad(mx.cpu(0)) for p in net.collect_params().values()]
    gluon.utils.clip_global_norm(grads, 1e-3)
    trainer.update(x.shape[0])
    on_kv = gluon.Trainer(net.collect_params(), "sgd", update_on_kvstore=True)
    with pytest.raises(MXNetError, match="update_on_kvstore=False"):
        on_kv.allreduce_grads()


def test_compression_needs_a_store():
    net = nn.Dense(1, in_units=1)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", compression_params={"type": "2bit"})
    with autograd.record():
        y = net(torch.ones(1, 1))
    y.backward()
    with pytest.raises(MXNetError, match="compression_params need a KVStore"):
        trainer.step(1)


def test_torch_parameters_accepted():
    lin = torch.nn.Linear(2, 1)
    trainer = gluon.Trainer(lin.parameters(), "sgd", {"learning_rate": 1.0})
    before = lin.weight.detach().clone()
    lin(torch.ones(1, 2)).sum().backward()
    trainer.step(1)
    torch.testing.assert_close(lin.weight.detach(), before - 1.0)
