"""Tests of mxtorch.initializer: distributions, name dispatch, registry."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import torch

import mxtorch.initializer as init
from mxtorch.initializer import InitDesc


def _filled(
    initializer: init.Initializer,
    shape: tuple[int, ...],
    name: str = "fc_weight",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    torch.manual_seed(seed)
    arr = torch.full(shape, float("nan"), dtype=dtype)
    initializer(name, arr)
    return arr


# ------------------------------------------------------------------------------------------ distributions
def test_uniform_bounds_mean_std() -> None:
    w = _filled(init.Uniform(), (1000, 500))
    assert w.min() >= -0.07 and w.max() <= 0.07
    assert abs(w.mean().item()) < 1e-3
    assert w.std().item() == pytest.approx(0.07 / math.sqrt(3), rel=0.01)
    w2 = _filled(init.Uniform(scale=2.0), (1000, 100))
    assert w2.abs().max() <= 2.0 and w2.abs().max() > 1.99


def test_normal_mean_std() -> None:
    w = _filled(init.Normal(), (1000, 500))
    assert abs(w.mean().item()) < 1e-4
    assert w.std().item() == pytest.approx(0.01, rel=0.01)
    assert _filled(init.Normal(sigma=3.0), (1000, 100)).std().item() == pytest.approx(3.0, rel=0.01)


_SHAPE = (256, 128, 3, 3)  # fan_in = 128*9, fan_out = 256*9


@pytest.mark.parametrize("factor_type", ["avg", "in", "out"])
@pytest.mark.parametrize("rnd_type", ["uniform", "gaussian"])
def test_xavier(rnd_type: str, factor_type: str) -> None:
    fan_in, fan_out = 128 * 9, 256 * 9
    factor = {"avg": (fan_in + fan_out) / 2, "in": fan_in, "out": fan_out}[factor_type]
    scale = math.sqrt(3 / factor)
    w = _filled(init.Xavier(rnd_type=rnd_type, factor_type=factor_type), _SHAPE)
    assert abs(w.mean().item()) < 0.01 * scale
    if rnd_type == "uniform":
        assert w.abs().max() <= scale
        assert w.std().item() == pytest.approx(scale / math.sqrt(3), rel=0.01)
    else:
        assert w.std().item() == pytest.approx(scale, rel=0.01)


def test_xavier_2d_magnitude_and_errors() -> None:
    w = _filled(init.Xavier(magnitude=6, factor_type="in"), (400, 1000))
    assert w.std().item() == pytest.approx(math.sqrt(6 / 1000) / math.sqrt(3), rel=0.01)
    with pytest.raises(ValueError, match=r"\(10,\).*2 dimensions"):
        init.Xavier()("fc_weight", torch.empty(10))
    with pytest.raises(ValueError, match="factor_type"):
        init.Xavier(factor_type="sum")
    with pytest.raises(ValueError, match="rnd_type"):
        init.Xavier(rnd_type="laplace")


def test_msra_prelu() -> None:
    w = _filled(init.MSRAPrelu(), _SHAPE)
    fan_avg = (128 * 9 + 256 * 9) / 2
    assert w.std().item() == pytest.approx(math.sqrt(2 / (1 + 0.25**2) / fan_avg), rel=0.01)
    w_in = _filled(init.MSRAPrelu(factor_type="in", slope=0.0), _SHAPE)
    assert w_in.std().item() == pytest.approx(math.sqrt(2 / (128 * 9)), rel=0.01)  # He init
    assert json.loads(init.MSRAPrelu().dumps()) == ["msraprelu", {"factor_type": "avg", "slope": 0.25}]


@pytest.mark.parametrize("rand_type", ["uniform", "normal"])
def test_orthogonal(rand_type: str) -> None:
    scale = 1.414
    w = _filled(init.Orthogonal(rand_type=rand_type), (64, 64))
    torch.testing.assert_close(w @ w.T, scale**2 * torch.eye(64), atol=1e-4, rtol=0)
    wide = _filled(init.Orthogonal(scale=1.0, rand_type=rand_type), (8, 4, 2, 2)).reshape(8, 16)
    torch.testing.assert_close(wide @ wide.T, torch.eye(8), atol=1e-5, rtol=0)
    tall = _filled(init.Orthogonal(scale=0.5, rand_type=rand_type), (50, 10))
    torch.testing.assert_close(tall.T @ tall, 0.25 * torch.eye(10), atol=1e-5, rtol=0)


def test_reproducible_and_keeps_dtype() -> None:
    a = _filled(init.Xavier(), (32, 16), seed=7)
    b = _filled(init.Xavier(), (32, 16), seed=7)
    c = _filled(init.Xavier(), (32, 16), seed=8)
    assert torch.equal(a, b) and not torch.equal(a, c)
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        for initializer in (init.Uniform(), init.Normal(), init.Xavier(), init.Orthogonal()):
            w = _filled(initializer, (8, 8), dtype=dtype)
            assert w.dtype == dtype and torch.isfinite(w).all() and w.abs().sum() > 0
    with pytest.raises(TypeError, match="int64"):
        init.Uniform()("fc_weight", torch.zeros(3, 3, dtype=torch.int64))


def test_in_place_on_leaf_requiring_grad() -> None:
    p = torch.nn.Parameter(torch.zeros(4, 4))
    init.One()("fc_weight", p)
    assert p.requires_grad and torch.equal(p.detach(), torch.ones(4, 4))


# ------------------------------------------------------------------------------------------- deterministic
def test_zero_one_constant() -> None:
    assert torch.equal(_filled(init.Zero(), (3, 2)), torch.zeros(3, 2))
    assert torch.equal(_filled(init.One(), (3, 2)), torch.ones(3, 2))
    assert torch.equal(_filled(init.Constant(2.5), (3, 2)), torch.full((3, 2), 2.5))
    row = _filled(init.Constant(np.array([1.0, 2.0])), (3, 2))
    assert torch.equal(row, torch.tensor([[1.0, 2.0]] * 3))
    with pytest.raises(ValueError, match=r"\(3,\).*\(3, 2\)"):
        init.Constant(torch.ones(3))("fc_weight", torch.empty(3, 2))
    assert json.loads(init.Constant(np.array([1.0, 2.0])).dumps()) == ["constant", {"value": [1.0, 2.0]}]


def test_bilinear() -> None:
    w = _filled(init.Bilinear(), (2, 1, 4, 4))
    k = torch.tensor([0.25, 0.75, 0.75, 0.25])
    torch.testing.assert_close(w, torch.outer(k, k).expand(2, 1, 4, 4))
    w3 = _filled(init.Bilinear(), (1, 1, 3, 3))
    k3 = torch.tensor([0.25, 0.75, 0.75])  # f = 2, c = 0.75: 1 - |x/2 - 0.75|
    torch.testing.assert_close(w3[0, 0], torch.outer(k3, k3))
    with pytest.raises(ValueError, match="4-D"):
        init.Bilinear()("up_weight", torch.empty(3, 3))
    legacy = torch.empty(1, 1, 4, 4)
    init.Uniform()("upsampling0_weight", legacy)  # plain-string names starting 'upsampling' get bilinear
    torch.testing.assert_close(legacy[0, 0], torch.outer(k, k))


def test_lstm_bias() -> None:
    b = torch.full((20,), 7.0)
    init.LSTMBias(forget_bias=1.0)(InitDesc("lstm_i2h_bias", {"__init__": init.LSTMBias(1.0)}), b)
    expected = torch.zeros(20)
    expected[5:10] = 1.0
    assert torch.equal(b, expected)
    with pytest.raises(ValueError, match="divisible by 4"):
        init.LSTMBias()._init_weight("b", torch.empty(6))


# --------------------------------------------------------------------------------------------- dispatch
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("dense0_bias", 0.0),
        ("batchnorm0_gamma", 1.0),
        ("batchnorm0_beta", 0.0),
        ("batchnorm0_running_mean", 0.0),
        ("batchnorm0_running_var", 1.0),
        ("bn_moving_mean", 0.0),
        ("bn_moving_var", 1.0),
    ],
)
def test_name_suffix_dispatch(name: str, value: float) -> None:
    for desc in (name, InitDesc(name)):
        arr = torch.full((5,), 42.0)
        init.Uniform()(desc, arr)
        assert torch.equal(arr, torch.full((5,), value)), (desc, arr)


def test_weight_dispatch_and_unknown_name() -> None:
    w = _filled(init.Uniform(scale=0.5), (100, 10), name="conv0_weight")
    assert w.abs().max() <= 0.5 and w.abs().max() > 0.4
    # MXNet semantics: One() only sets weights; a bias still gets 0
    b = torch.full((3,), 9.0)
    init.One()("fc_bias", b)
    assert torch.equal(b, torch.zeros(3))
    with pytest.raises(ValueError, match="'mystery_param'.*explicit initializer"):
        init.Uniform()("mystery_param", torch.empty(3))
    with pytest.raises(NotImplementedError):
        init.Initializer()("fc_weight", torch.empty(3))


def test_init_desc_attrs_override_and_global_init() -> None:
    default = init.Uniform()
    desc = InitDesc("dense0_bias", {"__init__": init.Constant(3.0)})
    arr = torch.zeros(4)
    default(desc, arr)
    assert torch.equal(arr, torch.full((4,), 3.0))
    assert desc.global_init is default and isinstance(desc, str) and desc == "dense0_bias"
    by_name = InitDesc("gamma_like", {"__init__": "ones"})
    arr2 = torch.zeros(2)
    default(by_name, arr2)
    assert torch.equal(arr2, torch.ones(2))
    by_spec = InitDesc("x", {"__init__": init.Constant(5).dumps()})
    arr3 = torch.zeros(2)
    default(by_spec, arr3)
    assert torch.equal(arr3, torch.full((2,), 5.0))


def test_mixed() -> None:
    mixed = init.Mixed(["conv.*", "fc.*", ".*"], [init.Constant(0.5), "ones", init.Zero()])
    names = ("conv1_weight", "fc_weight", "fcconv_weight", "dense_weight")
    arrs = {name: torch.full((2, 2), 9.0) for name in names}
    for name, arr in arrs.items():
        mixed(name, arr)
    assert torch.equal(arrs["conv1_weight"], torch.full((2, 2), 0.5))
    assert torch.equal(arrs["fc_weight"], torch.ones(2, 2))  # 'fc.*' comes before '.*'
    assert torch.equal(arrs["fcconv_weight"], torch.ones(2, 2))  # patterns match from the start of the name
    assert torch.equal(arrs["dense_weight"], torch.zeros(2, 2))
    b2 = torch.empty(3)
    mixed(InitDesc("fc_bias", {"__init__": "zeros"}), b2)  # the desc is passed on: its __init__ wins
    assert torch.equal(b2, torch.zeros(3))
    strict = init.Mixed(["conv.*"], [init.One()])
    with pytest.raises(ValueError, match="'fc_weight' did not match"):
        strict("fc_weight", torch.empty(2))
    with pytest.raises(ValueError, match="2 patterns"):
        init.Mixed(["a", "b"], [init.One()])
    rebuilt = init.create(mixed.dumps())
    assert isinstance(rebuilt, init.Mixed) and rebuilt.dumps() == mixed.dumps()


def test_load() -> None:
    loader = init.Load({"arg:fc_weight": torch.arange(6.0).reshape(2, 3)}, default_init=init.One())
    w, b = torch.zeros(2, 3), torch.zeros(2)
    loader("fc_weight", w)
    loader("fc_gamma", b)
    assert torch.equal(w, torch.arange(6.0).reshape(2, 3)) and torch.equal(b, torch.ones(2))
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        loader("fc_weight", torch.zeros(3, 2))
    with pytest.raises(ValueError, match="not found"):
        init.Load({})("fc_weight", torch.zeros(1))


# --------------------------------------------------------------------------------------------- registry
@pytest.mark.parametrize(
    ("name", "klass"),
    [
        ("zeros", init.Zero),
        ("zero", init.Zero),
        ("ones", init.One),
        ("One", init.One),
        ("uniform", init.Uniform),
        ("NORMAL", init.Normal),
        ("xavier", init.Xavier),
        ("msraprelu", init.MSRAPrelu),
        ("orthogonal", init.Orthogonal),
        ("bilinear", init.Bilinear),
        ("lstmbias", init.LSTMBias),
    ],
)
def test_create_by_name(name: str, klass: type) -> None:
    assert type(init.create(name)) is klass


def test_create_forms_and_errors() -> None:
    const = init.create("constant", value=2.0)
    assert isinstance(const, init.Constant) and const.value == 2.0
    mixed = init.create("mixed", patterns=[".*"], initializers=["zeros"])
    assert isinstance(mixed, init.Mixed) and isinstance(mixed.map[0][1], init.Zero)
    x = init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2)
    assert init.create(x) is x
    normal = init.create(init.Normal, sigma=0.5)
    assert isinstance(normal, init.Normal) and normal.sigma == 0.5
    assert json.loads(x.dumps()) == ["xavier", {"rnd_type": "gaussian", "factor_type": "in", "magnitude": 2}]
    rebuilt = init.create(x.dumps())
    assert isinstance(rebuilt, init.Xavier) and rebuilt.dumps() == x.dumps()
    assert json.loads(init.Uniform().dumps()) == ["uniform", {"scale": 0.07}]
    with pytest.raises(ValueError, match=r"'glorot'.*xavier"):
        init.create("glorot")
    with pytest.raises(TypeError):
        init.create(3)
    with pytest.raises(TypeError):
        init.Uniform()("fc_weight", np.zeros(3))  # type: ignore[arg-type]


def test_registering_a_taken_name_warns_and_replaces_as_mxnet() -> None:
    class Uniform(init.Initializer):
        def _init_weight(self, _: str, arr: torch.Tensor) -> None:
            arr.fill_(3.0)

    original, ones = init.create("uniform").__class__, init.create("ones").__class__
    try:
        with pytest.warns(UserWarning, match=r"initializer 'uniform': .*Uniform replaces"):
            init.register(Uniform)
        with pytest.warns(UserWarning, match=r"initializer 'ones': .*Uniform replaces .*One"):
            init.alias("ones")(Uniform)
        arr = torch.zeros(2)
        init.create("ONES")("fc_weight", arr)
        assert arr.tolist() == [3.0, 3.0]
    finally:
        for name, klass in (("uniform", original), ("ones", ones)):
            init._REGISTRY.remove(name)
            init._REGISTRY.add(name, klass)
    with pytest.raises(TypeError, match="only Initializer subclasses"):
        init.register(int)
    with pytest.raises(ValueError, match=r"unknown initializer 'glorotx': known initializers are .*'xavier'"):
        init.create("glorotx")


# ----------------------------------------------------------------------------------------- MXNet 1.9 rules
def test_constant_array_dumps_round_trip() -> None:
    value = torch.arange(6.0).reshape(2, 3)
    c = init.Constant(value)
    assert c.dumps() == json.dumps(["constant", c._kwargs])  # _kwargs is JSON-ready, as MXNet's
    assert json.loads(c.dumps()) == ["constant", {"value": [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]}]
    assert init.Constant(1).dumps() == '["constant", {"value": 1}]'
    assert init.Constant(np.ones((2,))).dumps() == '["constant", {"value": [1.0, 1.0]}]'
    w = torch.empty(2, 3)
    init.create(c.dumps())("w_weight", w)
    torch.testing.assert_close(w, value)


def test_verbose_logs_root_mean_square(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        init.One().set_verbosity(True)("fc_weight", torch.empty(2, 2))
    assert "Initialized fc_weight as One()" in caplog.text and ": 1.0" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO):
        init.Constant(3.0).set_verbosity(True, lambda a: "custom")("b_bias", torch.empty(4))
    assert "Initialized b_bias as bias: custom" in caplog.text


class _Tagger(init.Initializer):
    """Fills every weight view with a distinct number and records the names it saw."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, tuple[int, ...]]] = []

    def _init_weight(self, name: str, arr: torch.Tensor) -> None:
        self.seen.append((str(name), tuple(arr.shape)))
        arr.fill_(len(self.seen))

    def _init_bias(self, name: str, arr: torch.Tensor) -> None:
        self.seen.append((str(name), tuple(arr.shape)))
        arr.fill_(-len(self.seen))


def test_fused_rnn_lstm_layout_and_forget_bias() -> None:
    h, n_in = 2, 3
    tagger = _Tagger()
    fused = init.FusedRNN(tagger, num_hidden=h, num_layers=1, mode="lstm", forget_bias=0.5)
    flat = torch.zeros(4 * h * (n_in + h + 2))  # 4 gates x (i2h weight, h2h weight, 2 biases)
    fused._init_weight(init.InitDesc("lstm_parameters"), flat)
    gates = ["i", "f", "c", "o"]
    expected = [(f"l0_i2h_{g}_weight", (h, n_in)) for g in gates]
    expected += [(f"l0_h2h_{g}_weight", (h, h)) for g in gates]
    expected += [(f"l0_{k}_{g}_bias", (h,)) for k in ("i2h", "h2h") for g in gates if g != "f"]
    assert sorted(tagger.seen) == sorted(expected)
    # weights first, in order, each a contiguous block of the flat vector
    w = flat[: 4 * h * (n_in + h)]
    assert w[: h * n_in].eq(1).all() and w[h * n_in : 2 * h * n_in].eq(2).all()
    bias = flat[4 * h * (n_in + h):].reshape(2, 4, h)  # (i2h, h2h) x gates
    assert bias[:, 1].eq(0.5).all()  # forget gate of both i2h and h2h
    assert (bias[:, [0, 2, 3]] < 0).all()


def test_fused_rnn_sizes_global_fallback_and_dumps() -> None:
    # 2 layers, bidirectional GRU: layer 1 reads both directions (2h inputs)
    h, n_in = 3, 4
    size = 2 * 3 * h * (n_in + h + 2 + (2 * h + h + 2))
    fused = init.FusedRNN(None, h, 2, "gru", bidirectional=True)
    flat = torch.full((size,), 7.0)
    desc = init.InitDesc("gru_parameters", global_init=init.One())
    fused._init_weight(desc, flat)
    n_weights = 2 * 3 * h * (n_in + h) + 2 * 3 * h * (2 * h + h)
    assert flat[:n_weights].eq(1).all() and flat[n_weights:].eq(0).all()  # One: weights 1, biases 0
    assert json.loads(init.FusedRNN(init.Xavier(), 2, 1, "lstm").dumps())[1]["init"] == init.Xavier().dumps()
    assert isinstance(init.create(fused.dumps()), init.FusedRNN)
    with pytest.raises(ValueError, match="does not fit"):
        fused._init_weight(desc, torch.zeros(size + 1))
    with pytest.raises(ValueError, match="global initializer"):
        fused._init_weight(init.InitDesc("p"), torch.zeros(size))
    with pytest.raises(ValueError, match="mode"):
        init.FusedRNN(None, 2, 1, "rnn")
