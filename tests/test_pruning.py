"""mxtorch.contrib.pruning: each method's masks, the polynomial schedule, masks that survive
optimizer steps / save-load / hybridize, compact(), and identical masks on 2 horovod workers."""

from __future__ import annotations

import io

import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.base import MXNetError
from mxtorch.contrib import pruning
from mxtorch.gluon import nn
from mxtorch.gluon.model_zoo import vision

X = torch.randn(8, 1, 28, 28, generator=torch.Generator().manual_seed(0))
Y = torch.arange(8) % 10


def mlp(seed: int = 0) -> nn.HybridSequential:
    mx.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu", in_units=20), nn.Dense(24, activation="relu", in_units=32),
            nn.Dense(10, in_units=24))
    net.initialize(mx.init.Xavier())
    return net


def lenet_bn(seed: int = 0) -> gluon.HybridBlock:
    mx.random.seed(seed)
    net = vision.lenet_bn()
    net.initialize(mx.init.Xavier())
    net(X)
    return net


def weights(net: gluon.Block) -> dict[str, torch.Tensor]:
    return {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()}


def train(net: gluon.Block, trainer: gluon.Trainer, x: torch.Tensor, y: torch.Tensor, steps: int,
          pruner: pruning.Pruner | None = None) -> None:
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])
        if pruner is not None:
            pruner.step()


def zeros_at(net: gluon.Block, masks: dict[str, torch.Tensor]) -> bool:
    params = net._collect_params_with_prefix()
    return all(bool((params[k].data()[~m] == 0).all()) for k, m in masks.items())


# ---- methods -------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["l1", "l2", "random"])
def test_unstructured_per_layer(method):
    net = mlp()
    before = weights(net)
    pruner = pruning.Pruner(method)
    assert pruner.apply(net, sparsity=0.7) is net
    sp = pruning.sparsity(net)
    for name, p in net.collect_params(".*weight").items():
        n = p.data().numel()
        assert sp[name] == round(0.7 * n) / n
    assert sp["total"] == pytest.approx(0.7, abs=1e-3)
    assert not any("bias" in k for k in pruner.masks)
    if method != "random":  # magnitude: every kept weight is at least as large as every pruned one
        for k, m in pruner.masks.items():
            w = before[k].abs()
            assert w[m].min() >= w[~m].max()


def test_random_is_seeded_and_differs_from_magnitude():
    a, b, c = mlp(), mlp(), mlp()
    pa = pruning.Pruner("random", seed=3)
    pa.apply(a, sparsity=0.5)
    pb = pruning.Pruner("random", seed=3)
    pb.apply(b, sparsity=0.5)
    pc = pruning.Pruner("l1")
    pc.apply(c, sparsity=0.5)
    for k in pa.masks:
        assert torch.equal(pa.masks[k], pb.masks[k])
        assert not torch.equal(pa.masks[k], pc.masks[k])


def test_global_magnitude_uses_one_threshold():
    net = mlp()
    net[2].weight.set_data(net[2].weight.data() * 100)  # the last layer's weights are the largest
    before = weights(net)
    pruner = pruning.Pruner("l1", scope="global")
    pruner.apply(net, sparsity=0.5)
    sp = pruning.sparsity(net)
    assert sp["total"] == pytest.approx(0.5, abs=1e-3)
    assert sp[net[2].weight.name] < 0.05 < 0.5 < sp[net[0].weight.name]
    kept = torch.cat([before[k].abs()[m] for k, m in pruner.masks.items()])
    cut = torch.cat([before[k].abs()[~m] for k, m in pruner.masks.items()])
    assert kept.min() >= cut.max()


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_structured_channels(norm):
    net = lenet_bn()
    conv = net.features[0]
    w = conv.weight.data().detach().clone().reshape(32, -1)
    score = w.abs().sum(1) if norm == "l1" else w.pow(2).sum(1).sqrt()
    pruner = pruning.Pruner("structured", norm=norm)
    pruner.apply(net, sparsity=0.5)
    dead = (conv.weight.data().reshape(32, -1) == 0).all(1)
    assert int(dead.sum()) == 16
    assert set(dead.nonzero().reshape(-1).tolist()) == set(torch.argsort(score)[:16].tolist())
    bn = net.features[1]
    assert (bn.gamma.data()[dead] == 0).all() and (bn.beta.data()[dead] == 0).all()
    assert (bn.gamma.data()[~dead] != 0).all()
    sp = pruning.sparsity(net)
    assert sp[net.features[4].weight.name] == 0.5 and sp[net.features[9].weight.name] == 0.5
    assert sp[net.output.weight.name] == 0.0  # the network's outputs are never removed


def test_errors():
    with pytest.raises(MXNetError, match="unknown method"):
        pruning.Pruner("l3")
    with pytest.raises(MXNetError, match="end_epoch and steps_per_epoch"):
        pruning.Pruner("l1", schedule="polynomial", sparsity=0.5)
    with pytest.raises(MXNetError, match="give the sparsity"):
        pruning.Pruner("l1").apply(mlp())
    with pytest.raises(MXNetError, match="apply"):
        pruning.Pruner("l1").step()
    net = nn.Dense(4)
    net.initialize()
    with pytest.raises(MXNetError, match="forward pass"):
        pruning.Pruner("l1").apply(net, sparsity=0.5)


# ---- the schedule --------------------------------------------------------------------------------
def test_polynomial_schedule_values():
    s_f, s_i, t0, spe, end_epoch, freq = 0.8, 0.1, 4, 5, 4, 2
    pruner = pruning.Pruner("l1", schedule="polynomial", sparsity=s_f, initial_sparsity=s_i,
                            begin_step=t0, end_epoch=end_epoch, steps_per_epoch=spe, frequency=freq)
    end = end_epoch * spe

    def formula(t: int) -> float:
        return s_f + (s_i - s_f) * (1 - (t - t0) / (end - t0)) ** 3

    net = mlp()
    pruner.apply(net)
    assert pruning.sparsity(net)["total"] == 0.0
    n = {name: p.data().numel() for name, p in net.collect_params(".*weight").items()}
    seen = {}
    for t in range(1, end + 3):
        pruner.step()
        seen[t] = pruning.sparsity(net)
        if t < t0:
            assert seen[t]["total"] == 0.0, t  # nothing pruned before begin_step
    for t in (t0, t0 + 8, end):  # begin, an update step in the middle, end
        want = formula(t)
        assert pruner.target_sparsity(t) == pytest.approx(want, abs=1e-12)
        for name, k in n.items():
            assert seen[t][name] == round(want * k) / k, (t, name)
    assert pruner.target_sparsity(t0 + 8) == pytest.approx(formula(t0 + 8))
    assert pruner.target_sparsity(t0 - 1) == 0.0 and pruner.target_sparsity(end + 5) == s_f
    assert seen[t0 + 9] == seen[t0 + 8]  # masks change every `frequency` steps only
    assert seen[end + 2]["total"] == pytest.approx(s_f, abs=1e-3)


# ---- masks stay applied --------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer,params", [
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-2}),
    ("nag", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-2}),
    ("adam", {"learning_rate": 0.01, "wd": 1e-2}),
])
def test_masks_survive_optimizer_steps(optimizer, params):
    net = mlp()
    x, y = torch.randn(16, 20), torch.arange(16) % 10
    trainer = gluon.Trainer(net.collect_params(), optimizer, params)
    train(net, trainer, x, y, 3)  # momentum/moments built up before the masks exist
    pruner = pruning.Pruner("l1")
    pruner.apply(net, sparsity=0.6)
    masks = pruner.masks
    before = weights(net)
    train(net, trainer, x, y, 3)  # trainer.step alone keeps pruned weights at exactly zero
    assert zeros_at(net, masks)
    after = weights(net)
    assert all(not torch.equal(before[k][m], after[k][m]) for k, m in masks.items())  # the rest trains
    train(net, trainer, x, y, 2, pruner)
    assert zeros_at(net, masks)
    assert pruning.sparsity(net)["total"] == pytest.approx(0.6, abs=1e-3)


def test_masks_survive_save_and_load(tmp_path):
    net = lenet_bn()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3})
    pruner = pruning.Pruner("l1")
    pruner.apply(net, sparsity=0.8)
    train(net, trainer, X, Y, 2, pruner)
    f = str(tmp_path / "net.params")
    net.save_parameters(f)
    buf = io.BytesIO()
    torch.save(pruner.state_dict(), buf)
    masks = pruner.masks
    # a new process: a fresh net loads the parameters, a new Pruner the masks (no pickles)
    net2 = lenet_bn(seed=5)
    net2.load_parameters(f)
    assert zeros_at(net2, masks)
    trainer2 = gluon.Trainer(net2.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9,
                                                            "wd": 1e-3})
    pruner2 = pruning.Pruner("l1")
    pruner2.apply(net2, sparsity=0.8)
    buf.seek(0)
    pruner2.load_state_dict(torch.load(buf, weights_only=True))
    assert pruner2.num_update == 2 and all(torch.equal(pruner2.masks[k], m) for k, m in masks.items())
    train(net2, trainer2, X, Y, 2, pruner2)
    assert zeros_at(net2, masks)
    # loading dense values into the pruned net: pruner.step() writes the masks again
    dense = lenet_bn(seed=9)
    g = str(tmp_path / "dense.params")
    dense.save_parameters(g)
    net.load_parameters(g)
    pruner.step()
    assert zeros_at(net, masks)
    train(net, trainer, X, Y, 1)
    assert zeros_at(net, masks)


def test_masks_survive_hybridize():
    net = mlp()
    net.hybridize(backend="aot_eager")  # compiled (dynamo + AOT autograd), without inductor's codegen
    x, y = torch.randn(16, 20), torch.arange(16) % 10
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-2})
    train(net, trainer, x, y, 2)
    assert net._compiled is not None
    pruner = pruning.Pruner("l2")
    pruner.apply(net, sparsity=0.5)
    masks = pruner.masks
    train(net, trainer, x, y, 3)
    assert zeros_at(net, masks)
    out = net(x)
    ref = mlp()
    for k, p in ref._collect_params_with_prefix().items():
        p.set_data(net._collect_params_with_prefix()[k].data())
    torch.testing.assert_close(out, ref(x))  # the compiled graph reads the masked weights


# ---- compact ---------------------------------------------------------------------------------------
def test_compact_lenet_bn_equals_masked():
    net = lenet_bn()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})
    pruner = pruning.Pruner("structured")
    pruner.apply(net, sparsity=0.5)
    train(net, trainer, X, Y, 3, pruner)  # BatchNorm statistics move; pruned channels stay zero
    small = pruning.compact(net, X)
    count = lambda n: sum(p.data().numel() for p in n.collect_params().values())  # noqa: E731
    assert count(small) < 0.3 * count(net)
    assert small.features[0].weight.shape == (16, 1, 3, 3)
    assert small.features[4].weight.shape == (32, 16, 3, 3)
    assert small.features[9].weight.shape == (128, 32 * 7 * 7) and small.output.weight.shape == (10, 128)
    assert small.features[1].running_var.shape == (16,)
    with autograd.predict_mode():
        torch.testing.assert_close(small(X), net(X), rtol=1e-5, atol=1e-5)
    # the original is untouched, and the compact net trains on its own
    assert net.features[0].weight.shape == (32, 1, 3, 3)
    t2 = gluon.Trainer(small.collect_params(), "sgd", {"learning_rate": 0.05})
    train(small, t2, X, Y, 1)


def test_compact_mlp_and_refusals():
    net = mlp()
    pruning.Pruner("structured", norm="l2").apply(net, sparsity=0.25)
    small = pruning.compact(net, torch.randn(4, 20))
    assert [tuple(small[i].weight.shape) for i in range(3)] == [(24, 20), (18, 24), (10, 18)]
    x = torch.randn(5, 20)
    torch.testing.assert_close(small(x), net(x))
    # a sigmoid maps a zero channel to 0.5: such channels are kept, the result still equal
    sig = nn.HybridSequential()
    sig.add(nn.Dense(8, activation="sigmoid", in_units=4), nn.Dense(3, in_units=8))
    sig.initialize()
    pruning.Pruner("structured").apply(sig, sparsity=0.5)
    small = pruning.compact(sig, torch.randn(2, 4))
    assert small[0].weight.shape == (8, 4)

    class Residual(gluon.HybridBlock):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Dense(4, in_units=4)
            self.b = nn.Dense(4, in_units=4)

        def forward(self, x):
            return self.b(self.a(x) + x)

    res = Residual()
    res.initialize()
    pruning.Pruner("structured").apply(res, sparsity=0.5)  # 'a' feeds the add: its channels stay
    x = torch.randn(2, 4)
    small = pruning.compact(res, x)
    assert small.a.weight.shape == (4, 4)
    torch.testing.assert_close(small(x), res(x))
    with pytest.raises(MXNetError, match=f"{res.a.name} .*residual"):
        pruning.compact(res, x, strict=True)


# ---- distributed -----------------------------------------------------------------------------------
def test_identical_masks_on_two_horovod_workers(run_ranks):
    import pruning_workers as w

    r0, r1 = run_ranks(w.gradual_horovod, 2, 8, timeout=90)
    assert len(r0["masks"]) == 8
    for step, (m0, m1) in enumerate(zip(r0["masks"], r1["masks"])):
        assert m0.keys() == m1.keys(), step
        for k in m0:
            assert torch.equal(m0[k], m1[k]), (step, k)
    for k in r0["weights"]:
        assert torch.equal(r0["weights"][k], r1["weights"][k]), k
    assert r0["sparsity"] == pytest.approx(0.75, abs=1e-2)
    final = r0["masks"][-1]
    assert all(bool((r0["weights"][k][~m] == 0).all()) for k, m in final.items())


# ---- transfer learning (what already works) ----------------------------------------------------
class FineTune(gluon.HybridBlock):
    """lenet_bn's features with a new 5-class head under another attribute name."""

    def __init__(self) -> None:
        super().__init__()
        with self.name_scope():
            self.features = vision.lenet_bn().features
            self.head = nn.Dense(5, in_units=256)

    def forward(self, x):
        return self.head(self.features(x))


def test_transfer_load_freeze_and_lr_mult(tmp_path):
    src = lenet_bn()
    f = str(tmp_path / "pretrained.params")
    src.save_parameters(f)
    net = FineTune()
    with pytest.raises(MXNetError):
        net.load_parameters(f)  # 'output.*' is extra, 'head.*' missing
    net.load_parameters(f, allow_missing=True, ignore_extra=True)
    net.head.initialize()
    for k, v in weights(src).items():
        if k.startswith("features."):
            assert torch.equal(weights(net)[k], v)
    # freeze the features by regex on the full names, train the head only
    frozen = net.collect_params(".*lenet.*")  # the features' names: 'finetune0_lenet0_conv0_weight' ...
    frozen.setattr("grad_req", "null")
    assert set(frozen.keys()) == set(net.features.collect_params().keys())
    before = weights(net)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    train(net, trainer, X, Y % 5, 1)
    after = weights(net)
    # (BatchNorm's running statistics still follow the batches in training mode, as in MXNet)
    assert all(torch.equal(before[k], after[k]) for k in before
               if k.startswith("features.") and "running" not in k)
    assert not torch.equal(before["head.weight"], after["head.weight"])
    # lr_mult: plain SGD moves a parameter with lr_mult=2 twice as far
    a, b = mlp(), mlp()
    b[0].weight.lr_mult = 2.0
    x, y = torch.randn(16, 20), torch.arange(16) % 10
    deltas = []
    for n in (a, b):
        w0 = n[0].weight.data().detach().clone()
        train(n, gluon.Trainer(n.collect_params(), "sgd", {"learning_rate": 0.1}), x, y, 1)
        deltas.append(n[0].weight.data().detach() - w0)
    torch.testing.assert_close(deltas[1], 2 * deltas[0])
