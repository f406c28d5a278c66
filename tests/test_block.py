import os
import warnings

import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.base import DeferredInitializationError, MXNetError
from mxtorch.gluon import block as block_module
from mxtorch.gluon import nn
from mxtorch.gluon.utils import split_and_load


def mlp():
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.Dense(3))
    return net


def test_collect_params_names_and_select():
    net = nn.HybridSequential(prefix="mlp_")
    with net.name_scope():
        net.add(nn.Dense(8, activation="relu"), nn.Dense(3))
    names = list(net.collect_params())
    assert names == ["mlp_dense0_weight", "mlp_dense0_bias", "mlp_dense1_weight", "mlp_dense1_bias"]
    assert list(net.collect_params(".*weight")) == ["mlp_dense0_weight", "mlp_dense1_weight"]
    assert list(net.collect_params("mlp_dense1_.*")) == ["mlp_dense1_weight", "mlp_dense1_bias"]
    # attribute paths, as save_parameters and torch's named_parameters use them
    assert list(net._collect_params_with_prefix()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_deferred_init_infers_shape_on_first_forward():
    net = mlp()
    net.initialize()
    w = net[0].weight
    assert w.shape == (8, 0)
    with pytest.raises(DeferredInitializationError, match="forward pass"):
        w.data()
    net(torch.randn(2, 5))
    assert w.shape == (8, 5)
    assert w.data().shape == (8, 5)
    # torch sees the parameter after deferred init
    assert dict(net.named_parameters())["0.weight"] is w.data()


def test_use_before_initialize_is_a_clear_error():
    net = nn.Dense(3, in_units=4)
    with pytest.raises(MXNetError, match="has not been initialized.*initialize"):
        net(torch.randn(2, 4))


def test_initialize_keeps_values_unless_force_reinit():
    net = nn.Dense(3, in_units=4)
    net.initialize(mx.init.One())
    net.initialize(mx.init.Zero())  # no effect: already initialized
    assert float(net.weight.data().sum()) == 12.0
    net.initialize(mx.init.Zero(), force_reinit=True)
    assert float(net.weight.data().abs().sum()) == 0.0


def test_own_initializer_wins_over_global():
    net = nn.Dense(3, in_units=4, weight_initializer=mx.init.One(), bias_initializer=mx.init.Constant(2.0))
    net.initialize(mx.init.Zero())
    assert torch.all(net.weight.data() == 1)
    assert torch.all(net.bias.data() == 2)


def test_multi_context_copies_and_split_and_load():
    ctx = [mx.cpu(0), mx.cpu(1)]
    net = mlp()
    net.initialize(mx.init.Xavier(), ctx=ctx)
    x = torch.randn(6, 5)
    net(x[:1].clone())  # complete deferred init on ctx 0 input
    w = net[0].weight
    assert w.list_ctx() == ctx
    d0, d1 = w.list_data()
    assert d0 is not d1 and torch.equal(d0, d1)
    parts = split_and_load(x, ctx)
    with autograd.record():
        outs = [net(p) for p in parts]
    for o in outs:
        o.backward()
    g0, g1 = w.grad(mx.cpu(0)), w.grad(mx.cpu(1))
    # each context's copy received the gradient of its own slice
    ref = torch.nn.functional.relu(
        torch.nn.functional.linear(x[:3], d0.detach(), net[0].bias.data().detach()))
    assert not torch.equal(g0, g1)
    assert ref.shape == (3, 8)
    with pytest.raises(MXNetError, match="not initialized on context gpu"):
        w.data(mx.gpu(0))


def test_grad_req_add_accumulates_and_zero_grad():
    net = nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(mx.init.One())
    net.collect_params().setattr("grad_req", "add")
    x = torch.tensor([[1.0, 2.0]])
    for _ in range(2):
        with autograd.record():
            y = net(x)
        y.backward()
    torch.testing.assert_close(net.weight.grad(), torch.tensor([[2.0, 4.0]]))
    net.collect_params().zero_grad()
    torch.testing.assert_close(net.weight.grad(), torch.zeros(1, 2))


def test_grad_req_null_freezes():
    net = nn.Dense(1, in_units=2)
    net.initialize()
    net.weight.grad_req = "null"
    assert not net.weight.data().requires_grad
    with pytest.raises(MXNetError, match="grad_req='null'"):
        net.weight.grad()
    with pytest.raises(ValueError, match="grad_req must be one of"):
        net.weight.grad_req = "sometimes"


def test_set_data_and_shape_check():
    p = gluon.Parameter("w", shape=(2, 2))
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    p.set_data(torch.ones(2, 2))
    assert all(torch.equal(d, torch.ones(2, 2)) for d in p.list_data())
    with pytest.raises(MXNetError, match="set_data got shape"):
        p.set_data(torch.ones(3))


def test_weight_sharing_by_assignment_and_1x_params():
    a = nn.Dense(4, in_units=3)
    b = nn.Dense(4, in_units=3)
    b.weight = a.weight
    net = nn.Sequential()
    net.add(a, b)
    net.initialize()
    assert b.weight.data() is a.weight.data()
    assert len(net.collect_params()) == 3  # shared weight counted once
    c = nn.Dense(4, in_units=3, params=a.params)
    assert isinstance(c.params, gluon.ParameterDict)


def test_save_load_round_trip(tmp_path):
    net = mlp()
    net.initialize(mx.init.Xavier())
    x = torch.randn(2, 5)
    y = net(x)
    f = tmp_path / "net.params"
    net.save_parameters(str(f))
    net2 = mlp()
    net2.load_parameters(str(f))
    torch.testing.assert_close(net2(x), y)
    # loading into an initialized model of other values overwrites them
    net3 = mlp()
    net3.initialize(mx.init.Zero())
    net3(x)
    net3.load_parameters(str(f))
    torch.testing.assert_close(net3(x), y)


def test_load_errors_name_the_parameter(tmp_path):
    net = mlp()
    net.initialize()
    net(torch.randn(1, 5))
    f = str(tmp_path / "a.params")
    net.save_parameters(f)
    other = nn.HybridSequential()
    other.add(nn.Dense(8, in_units=6), nn.Dense(3, in_units=8))
    other.initialize()
    with pytest.raises(MXNetError, match=r"shape mismatch for parameter '0.weight'.*\(8, 6\).*\(8, 5\)"):
        other.load_parameters(f)
    # the failed load changed nothing
    assert other[0].weight.shape == (8, 6)
    bigger = nn.HybridSequential()
    bigger.add(nn.Dense(8, in_units=5), nn.Dense(3, in_units=8), nn.Dense(2, in_units=3))
    bigger.initialize()
    with pytest.raises(MXNetError, match="lacks 2 parameter"):
        bigger.load_parameters(f)
    bigger.load_parameters(f, allow_missing=True)
    smaller = nn.HybridSequential()
    smaller.add(nn.Dense(8, in_units=5))
    smaller.initialize()
    with pytest.raises(MXNetError, match="does not"):
        smaller.load_parameters(f)
    smaller.load_parameters(f, ignore_extra=True)
    torch.testing.assert_close(smaller[0].weight.data(), net[0].weight.data())


def test_load_dtype_mismatch_and_cast(tmp_path):
    net = nn.Dense(2, in_units=2)
    net.initialize()
    f = str(tmp_path / "h.params")
    net.cast("float16")
    assert net.weight.data().dtype == torch.float16
    net.save_parameters(f)
    net32 = nn.Dense(2, in_units=2)
    net32.initialize()
    with pytest.raises(MXNetError, match="dtype mismatch.*cast_dtype"):
        net32.load_parameters(f)
    net32.load_parameters(f, cast_dtype=True)
    assert net32.weight.data().dtype == torch.float32
    torch.testing.assert_close(net32.weight.data(), net.weight.data().float())


def test_corrupt_parameter_file(tmp_path):
    f = tmp_path / "bad.params"
    f.write_bytes(b"\x00\x01garbage" * 10)
    net = nn.Dense(2, in_units=2)
    with pytest.raises(MXNetError, match="not a valid safetensors file"):
        net.load_parameters(str(f))
    with pytest.raises(MXNetError, match="does not exist"):
        net.load_parameters(str(tmp_path / "missing.params"))


def test_hybrid_forward_1x_style():
    class Scale(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.alpha = gluon.Parameter("alpha", shape=(1,), init=mx.init.Constant(3.0))

        def hybrid_forward(self, F, x, alpha):
            return F.broadcast_mul(x, alpha)

    blk = Scale()
    blk.initialize()
    torch.testing.assert_close(blk(torch.ones(2)), torch.full((2,), 3.0))


def test_hybridize_eager_policy_matches(monkeypatch):
    net = mlp()
    net.initialize()
    x = torch.randn(4, 5)
    ref = net(x)
    net.hybridize()  # auto policy on CPU: eager
    torch.testing.assert_close(net(x), ref)
    torch.testing.assert_close(net(x), ref)
    assert net._compiled is None
    monkeypatch.setenv("MXTORCH_HYBRIDIZE", "bogus")
    with pytest.raises(MXNetError, match="MXTORCH_HYBRIDIZE"):
        net(x)


class _FakeClock:
    """The hybridize trial's clock: it moves only when a forward "takes" time, so the choice does not
    depend on how busy the machine is (a real sleep lost its 4 ms margin on an oversubscribed host)."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class _Sleepy(nn.HybridBlock):
    """Dense whose eager forward takes ``delay`` seconds on ``clock`` (not inside the fake compiled call)."""

    def __init__(self, delay, clock):
        super().__init__()
        self.delay, self.clock, self.in_compiled = delay, clock, False
        self.fc = nn.Dense(3, in_units=5)

    def forward(self, x):
        if not self.in_compiled:
            self.clock.now += self.delay
        return self.fc(x)


@pytest.mark.parametrize("eager_delay,compiled_delay,choice",
                         [(0.0, 0.004, "eager"), (0.004, 0.0, "compiled")])
def test_hybridize_measure_keeps_the_faster_forward(monkeypatch, eager_delay, compiled_delay, choice):
    """The 'measure' policy (auto's on CUDA) times both forwards and keeps the faster one."""
    monkeypatch.setenv("MXTORCH_HYBRIDIZE", "measure")
    clock = _FakeClock()
    monkeypatch.setattr(block_module, "time", clock)
    net = _Sleepy(eager_delay, clock)
    net.initialize()
    calls = []

    def fake_compile(fn, **kw):  # no compiler: a wrapper that counts its calls and sleeps
        def run(*a, **k):
            calls.append(1)
            clock.now += compiled_delay
            net.in_compiled = True
            try:
                return fn(*a, **k)
            finally:
                net.in_compiled = False
        return run

    monkeypatch.setattr(torch, "compile", fake_compile)
    x = torch.randn(4, 5)
    ref = net.fc(x)
    net.hybridize()
    for _ in range(12):  # warm-up, compile, 5 + 5 timed calls interleaved, then the choice
        torch.testing.assert_close(net(x), ref)
    assert net._trial is None and net._hybrid_choice == choice
    assert len(calls) == 6  # the compiling call and five timed ones
    for _ in range(3):
        torch.testing.assert_close(net(x), ref)
    assert len(calls) == (6 if choice == "eager" else 9)
    net.hybridize()  # a new hybridize() measures again
    assert net._hybrid_choice is None and net._compiled is None


def test_hybridize_compile_falls_back_cleanly(monkeypatch):
    net = mlp()
    net.initialize()
    x = torch.randn(4, 5)
    ref = net(x)
    with pytest.raises(ValueError, match="unknown backend 'no_such_backend'"):
        net.hybridize(backend="no_such_backend")

    def broken_compile(fn, **kwargs):
        def run(*a, **k):
            raise RuntimeError("no C++ compiler")
        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    net.hybridize(backend="inductor")
    net(x)  # warm-up call runs eagerly
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = net(x)
    torch.testing.assert_close(out, ref)
    assert any("torch.compile failed" in str(i.message) for i in w)


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.skipif(os.environ.get("MXTORCH_TEST_COMPILE", "1") == "0", reason="compile tests disabled")
def test_hybridize_compile_gives_same_result_and_gradients():
    torch.manual_seed(0)
    net = mlp()
    net.initialize(mx.init.Xavier())
    x = torch.randn(4, 5)
    with autograd.record():
        ref = net(x)
    ref.backward()
    gref = net[0].weight.grad().clone()
    net[0].weight.data().grad = None
    net.hybridize(backend="inductor")
    net(x)
    with autograd.record():
        out = net(x)
    out.backward()
    assert net._compiled is not None and not net._compile_failed
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(net[0].weight.grad(), gref)


def test_plain_torch_module_inside_gluon_and_trainer():
    net = nn.Sequential(prefix="net_")
    with net.name_scope():
        net.add(torch.nn.Linear(4, 3), nn.Dense(2, in_units=3))
    net.initialize(mx.init.One())
    params = net.collect_params()
    # a torch module's parameters: the enclosing block's prefix, then their attribute path
    assert list(params) == ["net_0.weight", "net_0.bias", "net_dense0_weight", "net_dense0_bias"]
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.1})
    before = net[0].weight.detach().clone()
    with autograd.record():
        y = net(torch.ones(2, 4)).sum()
    y.backward()
    trainer.step(1)
    assert not torch.equal(net[0].weight.detach(), before)


def test_summary_prints_table(capsys):
    net = mlp()
    net.initialize()
    text = net.summary(torch.randn(2, 5))
    assert "Output Shape" in text and "(2, 3)" in text
    assert "Trainable params: 75" in text  # 8*5+8 + 3*8+3


def test_block_is_a_torch_module_state_dict():
    net = mlp()
    net.initialize()
    net(torch.randn(1, 5))
    sd = net.state_dict()
    assert set(sd) == {"0.weight", "0.bias", "1.weight", "1.bias"}
    net2 = mlp()
    net2.initialize()
    net2(torch.randn(1, 5))
    net2.load_state_dict(sd)
    torch.testing.assert_close(net2[0].weight.data(), net[0].weight.data())
