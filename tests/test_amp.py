import math
import warnings

import pytest
import torch

import mxtorch as mx
from mxtorch import amp, autograd, gluon
from mxtorch.amp import LossScaler
from mxtorch.amp import amp as amp_impl
from mxtorch.base import MXNetError
from mxtorch.gluon import nn
from mxtorch.gluon.utils import clip_global_norm


@pytest.fixture(autouse=True)
def _amp_off():
    amp.reset()
    yield
    amp.reset()


def make_net(seed=0):
    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="tanh", in_units=4), nn.Dense(3, in_units=8))
    net.initialize(mx.init.Xavier())
    return net


def data(n=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g).float()


def make_trainer(net, scaler=None, lr=0.1, use_amp=True, **opt):
    params = {"learning_rate": lr, "momentum": 0.9}
    params.update(opt)
    tr = gluon.Trainer(net.collect_params(), "sgd", params)
    if use_amp:
        amp.init_trainer(tr, scaler)
    return tr


def backward(net, trainer, x, y, use_amp=True):
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with autograd.record():
        loss = loss_fn(net(x), y)
    if use_amp:
        with amp.scale_loss(loss, trainer) as scaled:
            autograd.backward(scaled)
    else:
        autograd.backward(loss)
    return loss


def weights(net):
    return [p.data().detach().clone() for p in net.collect_params().values()]


def momenta(trainer):
    st = trainer._updaters[0].states
    return {k: v.clone() for k, v in st.items() if v is not None}


# ---- LossScaler policy -----------------------------------------------------------------------
def test_loss_scaler_defaults_match_mxnet():
    s = LossScaler()
    assert s.loss_scale == 2.0 ** 16
    assert (s.scale_factor, s.scale_window, s.max_scale, s.min_scale) == (2.0, 2000, 2.0 ** 24, 1.0)
    for _ in range(1999):
        s.update_scale(False)
    assert s.loss_scale == 2.0 ** 16
    s.update_scale(False)
    assert s.loss_scale == 2.0 ** 17
    s.update_scale(True)
    assert s.loss_scale == 2.0 ** 16


def test_loss_scaler_cap_floor_and_state():
    s = LossScaler(init_scale=4.0, scale_window=2, max_scale=16.0, min_scale=2.0)
    for _ in range(20):
        s.update_scale(False)
    assert s.loss_scale == 16.0
    for _ in range(10):
        s.update_scale(True)
    assert s.loss_scale == 2.0 and s.num_overflows == 10
    s.update_scale(False)
    state = s.state_dict()
    t = LossScaler()
    t.load_state_dict(state)
    assert t.loss_scale == 2.0 and t.scale_window == 2 and t.max_scale == 16.0
    t.update_scale(False)  # the saved clean-step count carries over: this is the 2nd clean step
    assert t.loss_scale == 4.0
    with pytest.raises(MXNetError):
        t.load_state_dict({"nope": 1})


@pytest.mark.parametrize("kw", [{"init_scale": 0}, {"scale_window": 0}, {"scale_factor": 1.0},
                                {"max_scale": 1.0, "min_scale": 2.0}, {"init_scale": float("inf")},
                                {"init_scale": 2.0 ** 30}])
def test_loss_scaler_rejects_bad_settings(kw):
    with pytest.raises((ValueError, TypeError)):
        LossScaler(**kw)


def test_has_overflow_and_unscale():
    s = LossScaler(init_scale=4.0)
    clean = [torch.ones(3), torch.ones(2, dtype=torch.bfloat16)]
    assert not s.has_overflow(clean)
    assert clean[0].tolist() == [1.0, 1.0, 1.0]  # unchanged
    assert s.has_overflow([torch.ones(3), torch.tensor([1.0, float("inf")])])
    assert s.has_overflow([torch.tensor([float("nan")])])
    assert not s.has_overflow([])
    g = [torch.full((2,), 8.0)]
    assert not s.unscale_(g)
    assert g[0].tolist() == [2.0, 2.0]


# ---- Trainer integration -------------------------------------------------------------------
def test_scale_loss_multiplies_gradients():
    x, y = data()
    net_a, net_b = make_net(), make_net()
    tr = make_trainer(net_a, LossScaler(init_scale=1024.0))
    backward(net_a, tr, x, y)
    backward(net_b, None, x, y, use_amp=False)
    for pa, pb in zip(net_a.collect_params().values(), net_b.collect_params().values()):
        torch.testing.assert_close(pa.grad(), pb.grad() * 1024.0)
    with amp.scale_loss([torch.ones(2), torch.ones(1)], tr) as scaled:
        assert [t.tolist() for t in scaled] == [[1024.0, 1024.0], [1024.0]]


def test_amp_step_matches_plain_step():
    """The 1/scale folded into rescale_grad gives exactly the fp32 update."""
    x, y = data()
    net_a, net_b = make_net(), make_net()
    tr_a = make_trainer(net_a, LossScaler(init_scale=2.0 ** 10), wd=1e-3)
    tr_b = make_trainer(net_b, use_amp=False, wd=1e-3)
    for _ in range(3):
        backward(net_a, tr_a, x, y)
        tr_a.step(x.shape[0])
        backward(net_b, tr_b, x, y, use_amp=False)
        tr_b.step(x.shape[0])
    for a, b in zip(weights(net_a), weights(net_b)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_overflow_skips_update_and_halves_scale():
    x, y = data()
    net = make_net()
    scaler = LossScaler(init_scale=2.0 ** 8)
    tr = make_trainer(net, scaler)
    backward(net, tr, x, y)
    tr.step(x.shape[0])  # a clean step creates the momentum states
    w0, m0 = weights(net), momenta(tr)
    assert m0 and any(v.abs().sum() > 0 for v in m0.values())
    count = tr.optimizer.num_update
    backward(net, tr, x, y)
    first = next(iter(net.collect_params().values()))
    first.grad()[0, 0] = float("inf")
    tr.step(x.shape[0])
    assert scaler.loss_scale == 2.0 ** 7
    for a, b in zip(w0, weights(net)):
        assert torch.equal(a, b)
    m1 = momenta(tr)
    assert m0.keys() == m1.keys() and all(torch.equal(m0[k], m1[k]) for k in m0)
    assert tr.optimizer.num_update == count
    assert tr._amp_last_overflow
    # the next clean step trains normally (the discarded gradients do not leak into it)
    backward(net, tr, x, y)
    tr.step(x.shape[0])
    assert not tr._amp_last_overflow
    assert all(torch.isfinite(w).all() for w in weights(net))
    assert not all(torch.equal(a, b) for a, b in zip(w0, weights(net)))


def test_clean_steps_grow_scale_up_to_max():
    x, y = data()
    net = make_net()
    scaler = LossScaler(init_scale=4.0, scale_window=3, max_scale=16.0)
    tr = make_trainer(net, scaler, lr=0.01)
    seen = []
    for _ in range(12):
        backward(net, tr, x, y)
        tr.step(x.shape[0])
        seen.append(scaler.loss_scale)
    assert seen[:6] == [4.0, 4.0, 8.0, 8.0, 8.0, 16.0]
    assert seen[-1] == 16.0


def test_unscale_then_clip_sees_true_norm_and_step_does_not_unscale_again():
    x, y = data()
    net_a, net_b = make_net(), make_net()
    tr_a = make_trainer(net_a, LossScaler(init_scale=2.0 ** 12))
    tr_b = make_trainer(net_b, use_amp=False)
    backward(net_a, tr_a, x, y)
    backward(net_b, tr_b, x, y, use_amp=False)
    assert amp.unscale(tr_a) is False
    with pytest.raises(MXNetError, match="already unscaled"):
        amp.unscale(tr_a)
    grads_a = [p.grad() for p in net_a.collect_params().values()]
    grads_b = [p.grad() for p in net_b.collect_params().values()]
    for ga, gb in zip(grads_a, grads_b):
        torch.testing.assert_close(ga, gb)
    true_norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads_b))
    norm_a = clip_global_norm(grads_a, 0.1)
    norm_b = clip_global_norm(grads_b, 0.1)
    assert norm_a == pytest.approx(true_norm, rel=1e-5) and norm_b == pytest.approx(true_norm, rel=1e-5)
    tr_a.step(x.shape[0])
    tr_b.step(x.shape[0])
    for a, b in zip(weights(net_a), weights(net_b)):
        torch.testing.assert_close(a, b)
    # the flag is cleared: the next step unscales again through rescale_grad
    backward(net_a, tr_a, x, y)
    backward(net_b, tr_b, x, y, use_amp=False)
    tr_a.step(x.shape[0])
    tr_b.step(x.shape[0])
    for a, b in zip(weights(net_a), weights(net_b)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_allreduce_grads_update_path_skips_on_overflow():
    x, y = data()
    net = make_net()
    scaler = LossScaler(init_scale=8.0)
    tr = make_trainer(net, scaler)
    backward(net, tr, x, y)
    tr.allreduce_grads()
    w0 = weights(net)
    next(iter(net.collect_params().values())).grad()[0, 0] = float("nan")
    tr.update(x.shape[0])
    assert scaler.loss_scale == 4.0
    assert all(torch.equal(a, b) for a, b in zip(w0, weights(net)))


def test_trainer_errors():
    net = make_net()
    tr = make_trainer(net, use_amp=False)
    with pytest.raises(MXNetError, match="init_trainer"):
        with amp.scale_loss(torch.ones(1), tr):
            pass
    with pytest.raises(MXNetError, match="init_trainer"):
        amp.unscale(tr)
    amp.init_trainer(tr)
    with pytest.raises(MXNetError, match="already"):
        amp.init_trainer(tr)
    with pytest.raises(TypeError):
        amp.init_trainer(object())
    with pytest.raises(TypeError):
        with amp.scale_loss(3.0, tr):
            pass


# ---- autocast ------------------------------------------------------------------------------
class Probe(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, in_units=4)
        self.norm = nn.LayerNorm(in_channels=4)
        self.seen = {}

    def forward(self, x):
        h = self.fc(x)
        self.seen["dense"] = h.dtype
        self.seen["matmul"] = (x @ x.t()).dtype
        n = self.norm(h)
        self.seen["norm"] = n.dtype
        return self.fc(n)


def test_init_bf16_runs_matmuls_in_bf16_with_fp32_params():
    torch.manual_seed(0)
    net = Probe()
    net.initialize()
    x = torch.randn(2, 4)
    assert net(x).dtype == torch.float32
    amp.init("bfloat16")
    assert amp.is_initialized() and amp.target_dtype() == torch.bfloat16
    out = net(x)
    assert out.dtype == torch.bfloat16
    assert net.seen == {"dense": torch.bfloat16, "matmul": torch.bfloat16, "norm": torch.float32}
    assert all(p.data().dtype == torch.float32 for p in net.collect_params().values())
    assert not torch.is_autocast_enabled("cpu")  # the region closed with the call
    loss = gluon.loss.L2Loss()(out, torch.zeros(2, 4))
    assert loss.dtype == torch.float32  # losses run in float32
    # an exception inside forward still closes the region
    with pytest.raises((MXNetError, RuntimeError)):
        net(torch.randn(2, 5))
    assert not torch.is_autocast_enabled("cpu")
    amp.reset()
    assert net(x).dtype == torch.float32


def test_float16_on_cpu_warns_once_and_bad_dtype_raises():
    amp_impl._config["warned_cpu_fp16"] = False
    amp.init("float16")
    net = make_net()
    with pytest.warns(RuntimeWarning, match="bfloat16"):
        assert net(torch.randn(2, 4)).dtype == torch.float16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net(torch.randn(2, 4))
    with pytest.raises(ValueError, match="target_dtype"):
        amp.init("float64")
    with pytest.raises(ValueError, match="target_dtype"):
        amp.init("int8")


def test_autocast_context():
    net = make_net()
    with amp.autocast():
        assert net(torch.randn(2, 4)).dtype == torch.bfloat16
    assert net(torch.randn(2, 4)).dtype == torch.float32


def test_bf16_training_close_to_fp32():
    x, y = data(64)

    def run(use_amp):
        amp.reset()
        if use_amp:
            amp.init("bfloat16")
        net = make_net()
        tr = make_trainer(net, lr=0.2, use_amp=use_amp)
        losses = []
        for _ in range(8):
            loss = backward(net, tr, x, y, use_amp=use_amp)
            tr.step(x.shape[0])
            losses.append(float(loss.detach().mean()))
        return net, losses, tr

    net32, l32, _ = run(False)
    net16, l16, tr16 = run(True)
    assert tr16._amp_loss_scaler.loss_scale == 1.0  # bfloat16 needs no scaling by default
    assert l16[-1] < l16[0]
    assert l16 == pytest.approx(l32, rel=0.05, abs=0.02)
    for a, b in zip(weights(net16), weights(net32)):
        torch.testing.assert_close(a, b, rtol=0.05, atol=0.02)


# ---- convert_hybrid_block ------------------------------------------------------------------
def test_convert_hybrid_block_keeps_norm_params_fp32():
    torch.manual_seed(0)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=2), nn.BatchNorm(in_channels=4), nn.Activation("relu"),
            nn.Flatten(), nn.Dense(8, in_units=4 * 4 * 4), nn.LayerNorm(in_channels=8),
            nn.PReLU(), nn.Dense(2, in_units=8))
    net.initialize()
    x = torch.randn(3, 2, 6, 6)
    ref = net(x)
    out_net = amp.convert_hybrid_block(net, "bfloat16")
    assert out_net is net
    dtypes = {k: p.data().dtype for k, p in net._collect_params_with_prefix().items()}
    for k, dt in dtypes.items():
        if k.startswith(("1.", "5.")):  # BatchNorm (incl. running stats) and LayerNorm
            assert dt == torch.float32, k
        elif k.startswith("6."):  # PReLU's alpha is optional: kept float32 by default
            assert dt == torch.float32, k
        else:
            assert dt == torch.bfloat16, k
    assert dtypes["1.running_mean"] == dtypes["1.running_var"] == torch.float32
    with autograd.predict_mode():
        out = net(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, rtol=0.1, atol=0.1)
    amp.convert_hybrid_block(net, "bfloat16", cast_optional_params=True)
    assert net[6].alpha.data().dtype == torch.bfloat16
    assert net[1].gamma.data().dtype == torch.float32
    with pytest.raises(MXNetError, match="not supported"):
        amp.convert_hybrid_block(net, "bfloat16", fp32_ops=["softmax"])
    with pytest.raises(ValueError):
        amp.convert_hybrid_block(net, "float32")


@pytest.mark.parametrize("update_on_kvstore", [False, True])
def test_two_contexts_match_and_overflow_on_one_skips_all(update_on_kvstore):
    from mxtorch.gluon.utils import split_and_load

    ctx = [mx.cpu(0), mx.cpu(1)]
    x, y = data()

    def build(use_amp):
        torch.manual_seed(0)
        net = nn.HybridSequential()
        net.add(nn.Dense(8, activation="tanh", in_units=4), nn.Dense(3, in_units=8))
        net.initialize(mx.init.Xavier(), ctx=ctx)
        tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                           kvstore="device", update_on_kvstore=update_on_kvstore)
        scaler = amp.init_trainer(tr, LossScaler(init_scale=64.0)) if use_amp else None
        return net, tr, scaler

    def backward_all(net, tr, use_amp):
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(split_and_load(x, ctx), split_and_load(y, ctx))]
        if use_amp:
            with amp.scale_loss(losses, tr) as scaled:
                autograd.backward(scaled)
        else:
            autograd.backward(losses)

    net_a, tr_a, scaler = build(True)
    net_b, tr_b, _ = build(False)
    for _ in range(2):
        backward_all(net_a, tr_a, True)
        tr_a.step(x.shape[0])
        backward_all(net_b, tr_b, False)
        tr_b.step(x.shape[0])
    for pa, pb in zip(net_a.collect_params().values(), net_b.collect_params().values()):
        for c in ctx:
            torch.testing.assert_close(pa.data(c).detach(), pb.data(c).detach(), rtol=1e-5, atol=1e-6)
    before = [[d.detach().clone() for d in p.list_data()] for p in net_a.collect_params().values()]
    backward_all(net_a, tr_a, True)
    next(iter(net_a.collect_params().values())).grad(mx.cpu(1))[0, 0] = float("inf")
    tr_a.step(x.shape[0])
    assert scaler.loss_scale == 32.0
    after = [p.list_data() for p in net_a.collect_params().values()]
    assert all(torch.equal(b, a) for bs, as_ in zip(before, after) for b, a in zip(bs, as_))


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_compiled_hybridized_block_runs_under_amp():
    amp.init("bfloat16")
    try:
        net = nn.HybridSequential()
        net.add(nn.Dense(8, in_units=4), nn.Dense(2, in_units=8))
        net.initialize()
        net.hybridize(backend="aot_eager")
        x = torch.randn(3, 4)
        net(x)  # warm-up call (eager)
        out = net(x)  # compiled call
        assert not net._compile_failed
        assert out.dtype == torch.bfloat16
    finally:
        amp.reset()


def test_mxnet_1x_import_path_of_amp_is_the_same_api():
    # MXNet 1.x code imports AMP as ``from mxnet.contrib.amp import amp``
    from mxtorch.contrib.amp import amp as contrib_amp
    from mxtorch.contrib.amp import init_trainer

    assert contrib_amp is amp_impl and init_trainer is amp.init_trainer
    assert mx.contrib.amp.scale_loss is amp.scale_loss
