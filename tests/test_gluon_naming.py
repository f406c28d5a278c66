"""MXNet 1.x naming and sharing of Gluon blocks and parameters, and their save/load formats."""

import re
import threading

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import gluon
from mxtorch.base import MXNetError
from mxtorch.gluon import nn
from mxtorch.gluon.serialization import load_tensors, save_tensors


class TwoDense(gluon.Block):
    def __init__(self, in_units=0, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense0 = nn.Dense(5, in_units=in_units)
            self.dense1 = nn.Dense(5, in_units=in_units)

    def forward(self, x):
        return self.dense1(self.dense0(x))


class Shared(gluon.Block):
    """A block whose parameter comes from ``self.params`` (MXNet 1.x style)."""

    def __init__(self, params=None):
        super().__init__(params=params)
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(3, 3))


class Pair(gluon.Block):
    def __init__(self, b1, b2):
        super().__init__()
        self.b1 = b1
        self.b2 = b2


# ---- prefixes ---------------------------------------------------------------------------------
def test_automatic_prefixes_count_per_class_outside_scopes():
    a, b, c = nn.Dense(2), nn.Dense(2), nn.Conv2D(2, 3)
    na, nb = (int(re.fullmatch(r"dense(\d+)_", d.prefix).group(1)) for d in (a, b))
    assert nb == na + 1
    assert re.fullmatch(r"conv\d+_", c.prefix)  # MXNet names every convolution conv<n>_
    assert a.name == a.prefix[:-1]
    assert a.weight.name == a.prefix + "weight" and a.bias.name == a.prefix + "bias"


def test_name_scope_prefixes_children_and_counts_from_zero():
    net = TwoDense(prefix="model_")
    assert net.dense0.prefix == "model_dense0_" and net.dense1.prefix == "model_dense1_"
    assert net.dense1.weight.name == "model_dense1_weight"
    seq = nn.Sequential(prefix="seq_")
    with seq.name_scope():
        seq.add(nn.Dense(2), nn.Dense(2, prefix="out_"), TwoDense())
    assert [b.prefix for b in seq] == ["seq_dense0_", "seq_out_", "seq_twodense0_"]
    assert seq[2].dense1.weight.name == "seq_twodense0_dense1_weight"


def test_block_made_outside_the_parents_scope_keeps_its_own_prefix():
    seq = nn.Sequential(prefix="seq_")
    seq.add(nn.Dense(3, prefix="ones_", in_units=2))  # not inside seq.name_scope()
    assert list(seq.collect_params()) == ["ones_weight", "ones_bias"]


def test_empty_prefix_opens_no_scope():
    net = nn.HybridSequential(prefix="")
    with net.name_scope():
        net.add(nn.Dense(2, prefix="head_"))
    assert net.prefix == "" and net.name == ""
    assert net[0].prefix == "head_"  # top-level name: the empty-prefix parent adds nothing


def test_scope_is_per_thread():
    net = nn.Sequential(prefix="main_")
    seen = {}

    def other():
        seen["prefix"] = nn.Dense(2, prefix="t_").prefix

    with net.name_scope():
        t = threading.Thread(target=other)
        t.start()
        t.join()
        inside = nn.Dense(2, prefix="t_")
    assert seen["prefix"] == "t_" and inside.prefix == "main_t_"


def test_bad_prefix_and_params_types():
    with pytest.raises(TypeError, match="prefix must be a str"):
        nn.Dense(2, prefix=3)
    with pytest.raises(TypeError, match="params must be a ParameterDict"):
        nn.Dense(2, params={"w": 1})


# ---- collect_params -------------------------------------------------------------------------
def test_collect_params_order_of_addition_and_select():
    net = nn.Sequential(prefix="n_")
    for name in ("zeros_", "ones_"):
        net.add(nn.Dense(10, in_units=10, use_bias=False, prefix=name))
    assert list(net.collect_params()) == ["zeros_weight", "ones_weight"]
    assert list(net.collect_params("ones_.*")) == ["ones_weight"]
    assert net.collect_params().prefix == "n_"
    trainer = gluon.Trainer(net.collect_params(), "sgd")
    assert [p.name for p in trainer._params] == ["zeros_weight", "ones_weight"]


def test_two_parameters_with_one_name_is_an_error():
    net = nn.Sequential()
    net.add(nn.Dense(2, prefix="same_"), nn.Dense(2, prefix="same_"))
    with pytest.raises(MXNetError, match="two different Parameters are named 'same_weight'"):
        net.collect_params()


def test_torch_views_keep_attribute_paths():
    net = TwoDense(prefix="m_", in_units=4)
    net.initialize()
    assert list(dict(net.named_parameters())) == ["dense0.weight", "dense0.bias", "dense1.weight",
                                                  "dense1.bias"]
    assert list(net.state_dict()) == list(dict(net.named_parameters()))
    assert list(net._collect_params_with_prefix()) == list(dict(net.named_parameters()))


def test_standalone_parameter_joins_the_blocks_dict():
    class Scale(gluon.Block):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.alpha = gluon.Parameter("alpha", shape=(1,))

        def forward(self, x):
            return x * self.alpha.data()

    s = Scale(prefix="scale_")
    assert s.alpha.name == "scale_alpha" and s.params["scale_alpha"] is s.alpha
    net = nn.Sequential(prefix="seq_")
    with net.name_scope():
        net.add(Scale(), Scale())
    assert list(net.collect_params()) == ["seq_scale0_alpha", "seq_scale1_alpha"]


def test_assigning_another_blocks_parameter_replaces_the_own_one():
    a = nn.Dense(4, in_units=3, prefix="a_")
    b = nn.Dense(4, in_units=3, prefix="b_")
    b.weight = a.weight
    assert "b_weight" not in b.params
    assert list(b.collect_params()) == ["b_bias", "a_weight"]
    assert b.weight.name == "a_weight"  # a shared parameter keeps its name


# ---- ParameterDict and sharing ---------------------------------------------------------------
def test_parameterdict_get_creates_shares_and_checks_attributes():
    shared = gluon.ParameterDict("net_")
    w = shared.get("w", shape=(2, 0), init=mx.init.Constant(1.0))
    assert w.name == "net_w" and shared["net_w"] is w
    other = gluon.ParameterDict("net_", shared=shared)
    assert other.get("w", shape=(0, 3)) is w
    assert w.shape == (2, 3)  # unknown dimensions are filled in from either side
    assert other.get("w", init=mx.init.Constant(1.0)) is w  # equal initializers agree
    with pytest.raises(MXNetError, match="shape=\\(4, 3\\) was asked for"):
        other.get("w", shape=(4, 3))
    with pytest.raises(MXNetError, match="init=.* was asked for"):
        other.get("w", init=mx.init.Constant(2.0))
    with pytest.raises(MXNetError, match="dtype"):
        other.get("w", dtype="float16")
    assert other.get("w", dtype=np.float32) is w


def test_get_constant():
    d = gluon.ParameterDict("blk_")
    c = d.get_constant("c", [1.0, 2.0])
    assert isinstance(c, gluon.Constant) and c.name == "blk_c" and c.grad_req == "null"
    assert d.get_constant("c") is c
    assert torch.equal(c.value, torch.tensor([1.0, 2.0]))
    with pytest.raises(KeyError, match="give a value"):
        d.get_constant("missing")
    with pytest.raises(MXNetError, match="another value"):
        d.get_constant("c", [3.0, 4.0])
    d.get("p", shape=(1,))
    with pytest.raises(MXNetError, match="not a Constant"):
        d.get_constant("p", [1.0])
    c.initialize()
    assert torch.equal(c.data(), torch.tensor([1.0, 2.0]))


def test_params_argument_shares_parameters_between_blocks():
    net1 = TwoDense(prefix="net1_", in_units=5)
    net2 = TwoDense(prefix="net2_", params=net1.collect_params())
    assert net2.dense0.weight is net1.dense0.weight and net2.dense1.bias is net1.dense1.bias
    net1.collect_params().initialize()
    x = torch.randn(3, 5)
    torch.testing.assert_close(net2(x), net1(x))


def test_shared_parameter_keeps_its_non_default_initializer():
    class WithInit(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.param = self.params.get("param", shape=(1,), init=mx.init.Constant(-10.0))

    a = WithInit()
    b = WithInit(params=a.collect_params())
    c = WithInit()
    assert b.param is a.param and c.param is not a.param
    assert c.param.init == a.param.init
    b.initialize()
    assert float(a.param.data().detach()) == -10.0


def test_initializer_equality():
    assert mx.init.Constant(2.0) == mx.init.Constant(2.0)
    assert mx.init.Constant(2.0) != mx.init.Constant(3.0)
    assert mx.init.Uniform(0.1) != mx.init.Normal(0.1)
    assert len({mx.init.Xavier(), mx.init.Xavier()}) == 1


# ---- save / load ------------------------------------------------------------------------------
def test_structural_files_load_across_prefixes(tmp_path):
    net1 = TwoDense(prefix="net1_", in_units=5)
    net1.initialize()
    f = str(tmp_path / "net1.params")
    net1.save_parameters(f)
    assert sorted(load_tensors(f)) == ["dense0.bias", "dense0.weight", "dense1.bias", "dense1.weight"]
    net3 = TwoDense(prefix="net3_")  # deferred shapes, other prefix: filled from the file
    net3.load_parameters(f, mx.cpu())
    x = torch.randn(2, 5)
    torch.testing.assert_close(net3(x), net1(x))


def test_save_deduplicate_and_load_shared_blocks(tmp_path):
    b1 = Shared()
    c = Pair(b1, Shared(b1.collect_params()))
    c.initialize()
    once, twice = str(tmp_path / "once.params"), str(tmp_path / "twice.params")
    c.save_parameters(once, deduplicate=True)
    c.save_parameters(twice)
    assert list(load_tensors(once)) == ["b1.weight"]
    assert sorted(load_tensors(twice)) == ["b1.weight", "b2.weight"]
    for f in (once, twice):
        b1n = Shared()
        cn = Pair(b1n, Shared(b1n.collect_params()))
        cn.load_parameters(f)  # a shared parameter is present if any of its paths is
        torch.testing.assert_close(b1n.weight.data(), b1.weight.data())


def test_load_missing_and_extra_are_errors_unless_allowed(tmp_path):
    net = TwoDense(prefix="a_", in_units=2)
    net.initialize()
    f = str(tmp_path / "p.params")
    net.save_parameters(f)
    small = nn.Dense(5, in_units=2, prefix="s_")
    with pytest.raises(MXNetError, match="has 4 parameter\\(s\\) the model does not.*ignore_extra"):
        small.load_parameters(f, allow_missing=True)
    small.load_parameters(f, allow_missing=True, ignore_extra=True)
    tensors = load_tensors(f)
    save_tensors(f, {k: v for k, v in tensors.items() if k.startswith("dense0")})
    with pytest.raises(MXNetError, match="lacks 2 parameter\\(s\\).*dense1.weight.*allow_missing"):
        net.load_parameters(f)
    before = net.dense1.weight.data().clone()
    net.load_parameters(f, allow_missing=True)
    torch.testing.assert_close(net.dense1.weight.data(), before)


def test_legacy_save_params_uses_full_names(tmp_path):
    net = nn.HybridSequential(prefix="")
    with net.name_scope():
        net.add(nn.Dense(4, in_units=3, prefix="fc1_"), nn.Dense(2, in_units=4, prefix="fc2_"))
    net.initialize()
    f = str(tmp_path / "legacy.params")
    with pytest.warns(DeprecationWarning, match="save_parameters"):
        net.save_params(f)
    assert sorted(load_tensors(f)) == ["fc1_bias", "fc1_weight", "fc2_bias", "fc2_weight"]
    net2 = nn.HybridSequential(prefix="")
    with net2.name_scope():
        net2.add(nn.Dense(4, prefix="fc1_"), nn.Dense(2, prefix="fc2_"))
    with pytest.warns(DeprecationWarning, match="load_parameters"):
        net2.load_params(f, ctx=mx.cpu())
    x = torch.randn(2, 3)
    torch.testing.assert_close(net2(x), net(x))
    # load_parameters reads the legacy file too (names without '.', not attribute paths)
    net3 = nn.HybridSequential(prefix="")
    with net3.name_scope():
        net3.add(nn.Dense(4, prefix="fc1_"), nn.Dense(2, prefix="fc2_"))
    net3.load_parameters(f)
    torch.testing.assert_close(net3(x), net(x))


def test_legacy_save_strips_the_blocks_prefix(tmp_path):
    net = TwoDense(prefix="model_", in_units=3)
    net.initialize()
    f = str(tmp_path / "m.params")
    net.collect_params().save(f, strip_prefix="model_")
    assert sorted(load_tensors(f)) == ["dense0_bias", "dense0_weight", "dense1_bias", "dense1_weight"]
    other = TwoDense(prefix="other_", in_units=3)
    other.collect_params().load(f, restore_prefix="other_")
    torch.testing.assert_close(other.dense0.weight.data(), net.dense0.weight.data())
    with pytest.raises(ValueError, match="cannot strip prefix 'zzz_'"):
        net.collect_params().save(f, strip_prefix="zzz_")
    with pytest.raises(ValueError, match="restore_prefix is 'zzz_'"):
        other.collect_params().load(f, restore_prefix="zzz_")


def test_load_dict_drops_module_arg_aux_prefixes():
    d = gluon.ParameterDict("p_")
    w = d.get("w", shape=(2,))
    d.load_dict({"arg:p_w": torch.tensor([1.0, 2.0])}, ctx=mx.cpu())
    assert torch.equal(w.data(), torch.tensor([1.0, 2.0]))


def test_cast_dtype_current_and_saved(tmp_path):
    net = nn.Dense(3, in_units=3, prefix="d_")
    net.initialize()
    f = str(tmp_path / "d.params")
    net.cast("float16")
    net.save_parameters(f)
    net.cast("float32")
    with pytest.raises(MXNetError, match="dtype mismatch for parameter 'weight' \\(d_weight\\).*cast_dtype"):
        net.load_parameters(f)
    net.load_parameters(f, cast_dtype=True)  # 'current': the file's arrays become float32
    assert net.weight.dtype == np.float32 and net.weight.data().dtype == torch.float32
    net.load_parameters(f, cast_dtype=True, dtype_source="saved")  # the parameters become float16
    assert net.weight.dtype == np.float16 and net.weight.data().dtype == torch.float16
    with pytest.raises(ValueError, match="dtype_source"):
        net.load_parameters(f, cast_dtype=True, dtype_source="file")


def test_parameter_dtype_is_numpys():
    p = gluon.Parameter("p", shape=(2,), dtype="float16")
    assert p.dtype == np.float16 and p.dtype == "float16"
    p.dtype = "float64"  # setting casts, as MXNet
    assert p.dtype == np.float64
    assert gluon.Parameter("b", shape=(1,), dtype="bfloat16").dtype.names == ("bfloat16",)


def test_saved_value_is_the_mean_of_the_copies(tmp_path):
    net = nn.Dense(1, in_units=1, use_bias=False, prefix="m_")
    net.initialize(mx.init.One(), ctx=[mx.cpu(0), mx.cpu(1)])
    with torch.no_grad():
        net.weight.data(mx.cpu(1)).fill_(3.0)
    f = str(tmp_path / "m.params")
    net.save_parameters(f)
    assert float(load_tensors(f)["weight"]) == 2.0


# ---- rnn layers follow the same rule -----------------------------------------------------------
def test_rnn_layer_parameter_names():
    from mxtorch.gluon import rnn

    layer = rnn.LSTM(4, input_size=3, prefix="lstm_")
    assert list(layer.collect_params())[:2] == ["lstm_l0_i2h_weight", "lstm_l0_h2h_weight"]
    cell = rnn.GRUCell(4, input_size=3, prefix="g_")
    assert sorted(cell.collect_params()) == ["g_h2h_bias", "g_h2h_weight", "g_i2h_bias", "g_i2h_weight"]
