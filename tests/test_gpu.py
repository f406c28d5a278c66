"""CUDA: NDArray methods, Gluon training, two contexts, AMP float16, hybridize, Module, NCCL/gloo.

Skipped where torch sees no GPU (CI); run on a GPU machine with ``pytest -m gpu tests``.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import amp, autograd, gluon
from mxtorch.amp import LossScaler
from mxtorch.gluon import nn
from mxtorch.gluon.utils import split_and_load

sys.path.insert(0, os.path.dirname(__file__))
import gpu_workers  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture(autouse=True)
def _amp_off():
    amp.reset()
    yield
    amp.reset()


def data(n=32, d=6, k=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), torch.randint(0, k, (n,), generator=g).float()


def build(ctx, seed=0, hybridize=False):
    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=6), nn.Dense(3, in_units=16))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    if hybridize:
        net.hybridize()
    return net


def train(net, ctx_list, x, y, steps=5, kvstore="device", use_amp=False, scaler=None):
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4},
                       kvstore=kvstore)
    if use_amp:
        amp.init_trainer(tr, scaler)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for _ in range(steps):
        with autograd.record():
            pairs = zip(split_and_load(x, ctx_list), split_and_load(y, ctx_list))
            ls = [loss_fn(net(a), b) for a, b in pairs]
        if use_amp:
            with amp.scale_loss(ls, tr) as scaled:
                autograd.backward(scaled)
        else:
            autograd.backward(ls)
        tr.step(x.shape[0])
        losses.append(sum(float(v.sum()) for v in ls) / x.shape[0])
    return tr, losses


def first_weights(net, ctx):
    return [p.data(ctx).detach().cpu() for p in net.collect_params().values()]


def test_ndarray_methods_on_gpu():
    g = mx.gpu(0)
    a = mx.nd.array([1.0, 2.0, 3.0], ctx=g)
    assert a.is_cuda and a.context == g
    np.testing.assert_array_equal(a.asnumpy(), [1, 2, 3])
    b = a.as_in_context(mx.cpu())
    assert b.context == mx.cpu() and not b.is_cuda
    c = mx.nd.zeros((3,), ctx=g)
    a.copyto(c)
    assert c.context == g and torch.equal(c.cpu(), b)
    d = a.copyto(mx.gpu(0))
    assert d.is_cuda and d.data_ptr() != a.data_ptr()
    assert mx.nd.ones((1,), ctx=g).asscalar() == 1.0
    h = a.astype(np.float16)
    assert h.dtype == torch.float16 and h.is_cuda and h.asnumpy().dtype == np.float16
    assert mx.nd.dot(mx.nd.ones((2, 3), ctx=g), mx.nd.ones((3, 4), ctx=g)).context == g


def test_gluon_training_on_gpu_matches_cpu():
    x, y = data()
    net_c, net_g = build(mx.cpu()), build(mx.gpu(0))
    for pc, pg in zip(net_c.collect_params().values(), net_g.collect_params().values()):
        assert pg.data().is_cuda
        torch.testing.assert_close(pc.data(), pg.data().cpu())
    _, lc = train(net_c, [mx.cpu()], x, y)
    _, lg = train(net_g, [mx.gpu(0)], x, y)
    assert lg[-1] < lg[0]
    np.testing.assert_allclose(lc, lg, rtol=1e-4, atol=1e-5)
    for a, b in zip(first_weights(net_c, mx.cpu()), first_weights(net_g, mx.gpu(0))):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("update_on_kvstore", [False, True])
def test_gpu_and_cpu_contexts_through_device_store_match_one_context(update_on_kvstore):
    """A heterogeneous pair (GPU + CPU) summed by the 'device' store trains like one context."""
    x, y = data()
    ctxs = [mx.gpu(0), mx.cpu()]
    net_two, net_one = build(ctxs), build(mx.cpu())
    tr = gluon.Trainer(net_two.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                       kvstore="device", update_on_kvstore=update_on_kvstore)
    tr1 = gluon.Trainer(net_one.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(4):
        with autograd.record():
            ls = [loss_fn(net_two(a), b) for a, b in zip(split_and_load(x, ctxs), split_and_load(y, ctxs))]
        autograd.backward(ls)
        tr.step(x.shape[0])
        with autograd.record():
            l1 = loss_fn(net_one(x), y)
        l1.backward()
        tr1.step(x.shape[0])
    for p2, p1 in zip(net_two.collect_params().values(), net_one.collect_params().values()):
        g, c = p2.data(mx.gpu(0)), p2.data(mx.cpu())
        assert g.is_cuda and not c.is_cuda
        torch.testing.assert_close(g.cpu(), c, rtol=1e-5, atol=1e-6)  # the copies agree
        torch.testing.assert_close(c, p1.data(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("split", [False, True])
def test_device_store_sums_gpu_values_into_a_cpu_key_completely(split):
    """A GPU-to-CPU copy must finish before the CPU adds it (no early read of pinned memory)."""
    n = 1 << 24
    kv = mx.kv.create("device")
    kv.init("w", torch.zeros(n))
    for step in range(3):
        on_gpu = torch.full((n,), float(step + 1), device="cuda") * 2  # queued behind a kernel
        vals = [on_gpu, torch.ones(n)]
        if split:
            vals = split_and_load(torch.cat([on_gpu.view(1, n), torch.ones(1, n, device="cuda")]),
                                  [mx.cpu(), mx.cpu(1)])
            vals = [v.view(n) for v in vals]
        kv.push("w", vals)
        out = torch.empty(n)
        kv.pull("w", out=out)
        assert torch.all(out == 2 * (step + 1) + 1).item(), f"step {step}: incomplete sum"


def test_amp_float16_on_cuda_trains_and_overflow_skips_the_step():
    amp.init("float16")
    x, y = data(n=64)
    g = mx.gpu(0)
    net = build(g)
    out = net(x.to(g.torch_device))
    assert out.dtype == torch.float16  # Dense runs in float16 under AMP
    assert all(p.data().dtype == torch.float32 for p in net.collect_params().values())
    scaler = LossScaler(init_scale=2.0 ** 10)
    tr, losses = train(net, [g], x, y, steps=20, use_amp=True, scaler=scaler)
    assert losses[-1] < 0.8 * losses[0]
    assert all(np.isfinite(losses))
    before = [p.data().detach().clone() for p in net.collect_params().values()]
    scale = scaler.loss_scale
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    xg, yg = x.to(g.torch_device), y.to(g.torch_device)
    with autograd.record():
        loss = loss_fn(net(xg), yg)
    with amp.scale_loss(loss, tr) as scaled:
        autograd.backward(scaled)
    next(iter(net.collect_params().values())).grad()[0, 0] = float("inf")
    tr.step(x.shape[0])
    assert scaler.loss_scale == scale / 2
    assert all(torch.equal(a, p.data()) for a, p in zip(before, net.collect_params().values()))


def test_amp_float16_matches_torch_autocast_and_gradscaler():
    """Same net, same data: mxtorch AMP and torch.autocast + GradScaler give the same weights."""
    amp.init("float16")
    x, y = data(n=64)
    dev = torch.device("cuda", 0)
    net = build(mx.gpu(0))
    ref = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(dev)
    with torch.no_grad():
        params = list(net.collect_params().values())
        for (w, b), m in zip([(params[0], params[1]), (params[2], params[3])], [ref[0], ref[2]]):
            m.weight.copy_(w.data())
            m.bias.copy_(b.data())
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    gs = torch.amp.GradScaler("cuda", init_scale=2.0 ** 10, growth_interval=2000)
    xg, yg = x.to(dev), y.to(dev).long()
    for _ in range(5):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(ref(xg), yg, reduction="sum") / x.shape[0]
        gs.scale(loss).backward()
        gs.step(opt)
        gs.update()
        opt.zero_grad()
    scaler = LossScaler(init_scale=2.0 ** 10)
    train(net, [mx.gpu(0)], x, y, steps=5, kvstore=None, use_amp=True, scaler=scaler)
    torch.testing.assert_close(params[0].data(), ref[0].weight.detach(), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(params[2].data(), ref[2].weight.detach(), rtol=2e-3, atol=2e-3)


def test_hybridize_on_gpu_matches_eager():
    x, _ = data()
    xg = x.cuda()
    eager, hyb = build(mx.gpu(0)), build(mx.gpu(0), hybridize=True)
    for _ in range(13):  # warm-up, compile, the measured calls (auto measures on CUDA), then the choice
        torch.testing.assert_close(hyb(xg), eager(xg), rtol=1e-4, atol=1e-5)
    assert hyb._hybrid_choice in ("compiled", "eager") and hyb._trial is None


def test_symbolic_module_fits_on_gpu():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(6, 3, generator=g)
    xs = torch.randn(400, 6, generator=g)
    ys = (xs @ w).argmax(1).float()
    data_sym = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data_sym, num_hidden=3, name="fc")
    out = mx.sym.SoftmaxOutput(fc, name="softmax")
    it = mx.io.NDArrayIter(xs.numpy(), ys.numpy(), batch_size=40, shuffle=True)
    mod = mx.mod.Module(out, context=mx.gpu(0))
    mod.fit(it, optimizer="sgd", optimizer_params={"learning_rate": 0.5}, num_epoch=8, eval_metric="acc")
    arg, _ = mod.get_params()
    assert arg["fc_weight"].shape == (3, 6)
    score = dict(mod.score(mx.io.NDArrayIter(xs.numpy(), ys.numpy(), batch_size=40), "acc"))
    assert score["accuracy"] > 0.9
    assert mod._exec_group.execs[0].arg_dict["fc_weight"].is_cuda


def test_allreduce_store_sums_cuda_tensors_in_one_process(run_ranks):
    (res,) = run_ranks(gpu_workers.allreduce_cuda_tensors, 1, "nccl", backend=None, timeout=120)
    assert "nccl" in res["backend"]
    assert res["devices"] == ["cuda:0"] * 3
    assert res["small_ok"] and res["big_ok"] and res["half_ok"]


def test_two_ranks_on_one_gpu_fall_back_to_gloo_and_sum_cuda_tensors(run_ranks):
    """Two local ranks, one GPU: NCCL cannot put two ranks on one device, so gloo carries CUDA tensors."""
    res = run_ranks(gpu_workers.allreduce_cuda_tensors, 2, "allreduce", backend=None, timeout=120)
    for r in res:
        assert r["backend"] == "gloo"
        assert r["devices"] == ["cuda:0"] * 3 and r["dtypes"][2] == "torch.float16"
        assert r["small_ok"] and r["big_ok"] and r["half_ok"]


def test_horovod_trainer_on_cuda_keeps_ranks_identical(run_ranks):
    a, b = run_ranks(gpu_workers.hvd_trainer_on_cuda, 2, backend=None, timeout=120)
    np.testing.assert_allclose(a, b, rtol=0, atol=0)
