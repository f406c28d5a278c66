"""MXNet's Block / HybridBlock / Parameter rules that MXNet code relies on: the private fields it
reads (``_children``, ``_reg_params``, ``_grad``, ``_deferred_init``), hook handles, what a
(hybridized) HybridBlock may be called with, and the errors MXNet raised as AssertionError."""

from __future__ import annotations

import warnings

import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon import Block, HybridBlock, Parameter, SymbolBlock, nn


def test_parameter_grad_field_follows_grad_req() -> None:
    p = Parameter("w", shape=(2, 3))
    assert p._grad is None  # no data yet
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    assert [tuple(g.shape) for g in p._grad] == [(2, 3), (2, 3)]
    p.grad_req = "null"
    assert p._grad is None
    p.grad_req = "write"
    assert p._grad is not None and float(p._grad[0].abs().sum()) == 0.0


def test_parameter_deferred_init_field() -> None:
    p = Parameter("w", shape=(0, 3), allow_deferred_init=True)
    assert p._deferred_init == ()
    p.initialize(init="ones", ctx=mx.cpu(0))
    init, ctx_list, _default, data = p._deferred_init
    assert init == "ones" and ctx_list == [mx.cpu(0)] and data is None
    p.shape = (4, 3)
    p._finish_deferred_init()
    assert p._deferred_init == () and float(p.data().detach().sum()) == 12.0


def test_copies_know_their_context() -> None:
    p = Parameter("w", shape=(2,))
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    assert p.data(mx.cpu(1)).context == mx.cpu(1)
    assert p.data(mx.cpu(0)).context == mx.cpu(0)
    p.reset_ctx([mx.cpu(2), mx.cpu(3)])
    assert [d.context for d in p.list_data()] == [mx.cpu(2), mx.cpu(3)]


def test_integer_parameters_hold_values_and_cast() -> None:
    p = Parameter("steps", shape=(3,), dtype="int8")
    p.initialize(mx.init.One())
    assert p.data().dtype == torch.int8 and p.data().tolist() == [1, 1, 1]
    p.cast("float64")
    assert p.data().dtype == torch.float64 and p.data().requires_grad
    p.cast("int32")
    assert p.data().dtype == torch.int32 and not p.data().requires_grad


@pytest.mark.parametrize("field", ["stype", "grad_stype"])
def test_invalid_storage_type_is_an_assertion_error(field: str) -> None:
    with pytest.raises(AssertionError, match="is not available"):
        Parameter("w", shape=(2, 2), **{field: "invalid"})
    with pytest.raises(MXNetError):
        Parameter("w", shape=(2, 2), **{field: "csr"})


def test_children_and_reg_params_are_views() -> None:
    b = Block()
    b.c = Block()
    c2 = Block()
    b.c = c2
    assert list(b._children.values()) == [c2]
    d = nn.Dense(3, in_units=2)
    assert list(d._reg_params) == ["weight", "bias"] and d._reg_params["weight"] is d.weight


def test_blocks_in_containers_warn_at_collect_params() -> None:
    class Hidden(Block):
        def __init__(self) -> None:
            super().__init__()
            self.layers = [nn.Dense(2), nn.Dense(0)]  # Dense(0) is accepted, as in MXNet
            self.table = {"a": "4"}

    class Registered(Block):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.Sequential()
            self.layers.add(nn.Dense(2))
            self.names = ["a", "b"]

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        Hidden().collect_params()
    assert any("Hidden.layers" in str(x.message) for x in w)
    assert not any("table" in str(x.message) for x in w)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        Registered().collect_params()
    assert not w


def test_sequential_of_hybrid_blocks_suggests_hybrid_sequential() -> None:
    net = nn.Sequential()
    net.add(nn.Dense(2))
    with pytest.warns(UserWarning, match="HybridSequential"):
        net.hybridize()
    mixed = nn.Sequential()
    mixed.add(nn.Dense(2), nn.Lambda(lambda x: x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mixed.hybridize()


def test_hook_handles_detach() -> None:
    calls: list[str] = []
    d = nn.Dense(2, in_units=3)
    d.initialize()
    post = d.register_forward_hook(lambda blk, inp, out: calls.append("post"))
    pre = d.register_forward_pre_hook(lambda blk, inp: calls.append("pre"))
    d(torch.ones(1, 3))
    post.detach()
    d(torch.ones(1, 3))
    with pre:
        pass  # leaving the with block detaches too
    d(torch.ones(1, 3))
    assert calls == ["pre", "post", "pre"]


def test_summary_refuses_a_hybridized_network() -> None:
    net = nn.HybridSequential()
    net.add(nn.Dense(2, in_units=3))
    net.initialize()
    assert "Dense" in net.summary(torch.ones(1, 3))
    net.hybridize()
    with pytest.raises(AssertionError, match="hybridized"):
        net.summary(torch.ones(1, 3))


class _Add(HybridBlock):
    def hybrid_forward(self, F, a, b=None):  # type: ignore[no-untyped-def]
        return a if b is None else a + b


def test_hybrid_block_needs_arrays_or_symbols_not_both() -> None:
    for hybridize in (False, True):
        blk = _Add()
        if hybridize:
            blk.hybridize()
        with pytest.raises(ValueError, match="at least one array"):
            blk(None, None)
    with pytest.raises(ValueError, match="mix arrays and Symbols"):
        _Add()(torch.ones(2), mx.sym.var("b"))
    with pytest.raises(ValueError, match="mix arrays and Symbols"):
        _Add()(mx.sym.var("a"), torch.ones(2))
    # not hybridized, any Python value works, as in a Block
    assert _Add()(torch.ones(2), 1).tolist() == [2.0, 2.0]


def test_hybridized_inputs_keep_their_first_structure() -> None:
    blk = _Add()
    blk.hybridize()
    with pytest.raises(ValueError, match="arrays, None or"):
        blk(torch.ones(2), 1)
    blk = _Add()
    blk.hybridize()
    assert blk(torch.ones(2)).tolist() == [1.0, 1.0]
    assert blk(torch.ones(2), None).tolist() == [1.0, 1.0]  # a trailing None: the default
    with pytest.raises(ValueError, match="first called with"):
        blk(torch.ones(2), torch.ones(2))
    blk.hybridize()  # a new graph: any structure again
    assert blk(torch.ones(2), torch.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="one context"):
        blk(mx.nd.ones((2,), ctx=mx.cpu(1)), mx.nd.ones((2,), ctx=mx.cpu(2)))


def test_symbol_block_refuses_sparse_parameters() -> None:
    data = mx.sym.var("data")
    out = mx.sym.dot(data, mx.sym.var("weight", stype="row_sparse"))
    with pytest.raises(AssertionError, match="dense parameters only"):
        SymbolBlock(out, data)
    dense = SymbolBlock(mx.sym.dot(data, mx.sym.var("weight")), data)
    assert "weight" in dense.collect_params()


def test_op_hook_reports_operators_with_mxnet_node_names() -> None:
    seen: list[tuple[str, str, tuple[int, ...]]] = []
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(nn.Dense(3, in_units=2), nn.Activation("relu"))
    net.initialize()
    net.hybridize()
    net.register_op_hook(lambda node, op, arr: seen.append((node, op, tuple(arr.shape))))
    net(torch.ones(4, 2))
    assert seen == [("net_dense0_fwd_output", "FullyConnected", (4, 3)),
                    ("net_relu0_fwd_output", "Activation", (4, 3))]
    seen.clear()
    net.register_op_hook(lambda node, op, arr: seen.append((node, op, tuple(arr.shape))), monitor_all=True)
    net(torch.ones(4, 2))
    names = [s[0] for s in seen]
    assert names == ["net_dense0_fwd_data", "net_dense0_fwd_weight", "net_dense0_fwd_bias",
                         "net_dense0_fwd_output", "net_relu0_fwd_input0", "net_relu0_fwd_output"]
    assert seen[1][2] == (3, 2) and names.count("net_dense0_fwd_output") == 1  # the hook was replaced
