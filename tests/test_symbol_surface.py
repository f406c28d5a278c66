"""MXNet's symbolic surface that MXNet code reads: top-level names, Symbol methods, composition
and inference rules (values from MXNet's API reference or worked out by hand)."""

from __future__ import annotations

import numpy as np

import mxtorch as mx


def test_top_level_np_shape_names_and_base_names() -> None:
    # MXNet's top level re-exports mxnet.util's NumPy-semantics switches
    assert mx.np_shape is mx.util.np_shape and mx.is_np_shape is mx.util.is_np_shape
    assert {"np_shape", "use_np", "set_np_shape", "is_np_array"} <= set(dir(mx))
    with mx.np_shape(True):
        assert mx.is_np_shape()
    assert not mx.is_np_shape()
    assert mx.base.mx_real_t is np.float32


S = mx.sym


def test_compose_names_the_head_and_children_of_a_split() -> None:
    net2 = S.FullyConnected(S.Activation(S.FullyConnected(name="fc3", num_hidden=10), act_type="relu"),
                            name="fc4", num_hidden=20)
    src = S.FullyConnected(S.var("data"), name="fc1", num_hidden=10)
    composed = net2(fc3_data=src, name="composed")
    assert composed.name == "composed" and net2.name == "fc4"  # the original graph is unchanged
    assert composed.list_arguments()[:3] == ["data", "fc1_weight", "fc1_bias"]
    split = S.SliceChannel(S.var("data"), num_outputs=3, name="slice")
    children = split.get_children()
    assert children is not None and children.list_outputs() == ["data"]  # one node, not three


def test_gen_atomic_symbol_keeps_op_and_attributes() -> None:
    s = S.RNN(S.var("data"), S.var("p"), S.var("h0"), S.var("h1"), state_size=10, num_layers=2,
              bidirectional=True, state_outputs=True, mode="lstm", name="rnn")
    atom = s._gen_atomic_symbol()
    assert atom.list_arguments() == [] and len(atom) == len(s)
    assert atom[0].attr("state_size") == "10" and atom[0].attr("mode") == "lstm"


def test_infer_type_partial_leaves_undetermined_types_none() -> None:
    data = S.var("data")
    fc = S.FullyConnected(S.Cast(data, dtype="float32"), num_hidden=4, name="fc")
    mlp = S.SoftmaxOutput(fc, name="sm")
    arg, out, aux = mlp.infer_type_partial()
    assert arg == [None, np.float32, np.float32, np.float32] and out == [np.float32] and aux == []
    assert mlp.infer_type(data=np.float16)[0][0] is np.float16


def test_tojson_marks_numpy_shape_graphs() -> None:
    import json

    assert "is_np_shape" not in json.loads(S.var("x").tojson())["attrs"]
    with mx.np_shape(True):
        assert json.loads(S.var("x").tojson())["attrs"]["is_np_shape"] == ["int", 1]


def _shapes(sym: mx.sym.Symbol, **given: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    arg, _, _ = sym.infer_shape(**given)
    assert arg is not None
    return dict(zip(sym.list_arguments(), arg, strict=True))


def test_backward_inference_from_known_outputs() -> None:
    # FullyConnected: the batch size of its data from its output (made known by the addition)
    a, c = S.var("a", shape=(0, 10)), S.var("c", shape=(5, 0))
    got = _shapes(S.FullyConnected(a, num_hidden=21, name="fc") + c)
    assert got["a"] == (5, 10) and got["c"] == (5, 21)
    # a split's input from one output; Concat's shared batch size from its output
    part = S.SliceChannel(S.var("a", shape=(0, 15, 0)), num_outputs=3)[1]
    got = _shapes(part + S.var("c", shape=(3, 5, 2)))
    assert got["a"] == (3, 15, 2)
    cat = S.Concat(S.var("a", shape=(0, 10)), S.var("b", shape=(0, 5)), num_args=2, dim=1)
    got = _shapes(S.var("d", shape=(2, 0)) + cat)
    assert got == {"d": (2, 15), "a": (2, 10), "b": (2, 5)}
    # a stride-1 convolution with padding 1 keeps the spatial size: 32x32 out means 32x32 in
    conv = S.Convolution(S.var("a", shape=(0, 3, 0, 0)), num_filter=4, kernel=(3, 3), pad=(1, 1), name="cv")
    assert _shapes(conv + S.var("c", shape=(2, 4, 32, 32)))["a"] == (2, 3, 32, 32)
    # a parameter behind an operator: the FullyConnected weight's shape reaches w through the shape
    # constraint of _identity_with_attr_like_rhs
    w = S.var("w")
    wt = S._internal._identity_with_attr_like_rhs(S.broadcast_add(w, S.var("ws", shape=(1,))), w)
    fc = S.FullyConnected(S.var("data"), weight=wt, num_hidden=11, no_bias=True)
    assert _shapes(fc, data=(7, 100))["w"] == (11, 100)


def test_partial_shapes_in_legacy_and_numpy_semantics() -> None:
    z = S.dot(S.var("x"), S.var("y"))
    assert z.infer_shape_partial(x=(0, 3, 4), y=(4, 5))[1] == [(0, 3, 5)]
    assert S.sin(S.var("d")).infer_shape_partial()[0] == [()]
    with mx.np_shape(True):
        assert z.infer_shape_partial(x=(-1, 3, 4), y=(4, 5))[1] == [(-1, 3, 5)]
        assert S.sin(S.var("d")).infer_shape_partial()[0] == [None]
    # where infers nothing until its condition's shape is known in full
    w = S.where(S.var("cond"), S.var("x"), S.var("y"))
    assert w.infer_shape_partial(cond=(0, 2), x=(0, 2), y=(0, 2))[1] == [()]


def test_batch_take_values_and_no_gradient() -> None:
    import torch

    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out = S.batch_take(S.var("a"), S.var("i")).eval(a=x, i=torch.tensor([0, 1, 5]))[0]
    assert out.tolist() == [1.0, 4.0, 6.0]  # the last index is clipped into range


def test_binding_a_gradient_through_an_operator_without_one_fails() -> None:
    import pytest
    import torch

    x, idx = S.var("x"), S.var("idx")
    y = S.batch_take(x, idx)
    types = {"x": np.float32, "idx": np.int32}
    with pytest.raises(mx.MXNetError, match=r"\(batch_take\) has no gradient"):
        y.simple_bind(mx.cpu(), x=(4, 3), idx=(4,), type_dict=types)
    y.simple_bind(mx.cpu(), x=(4, 3), idx=(4,), type_dict=types, grad_req="null")  # nothing to differentiate
    exe = S.stop_gradient(y).simple_bind(mx.cpu(), x=(4, 3), idx=(4,), type_dict=types)
    exe.grad_dict["idx"][:] = 7  # an integer argument's gradient array is written zeros
    exe.forward(is_train=True)
    exe.backward()
    assert exe.grad_dict["idx"].tolist() == [0, 0, 0, 0] and exe.grad_dict["idx"].dtype == torch.int32


def test_get_optimized_symbol_merges_common_expressions(monkeypatch: object) -> None:
    import pytest

    a, b = S.var("a"), S.var("b")

    def optimized(sym: mx.sym.Symbol) -> mx.sym.Symbol:
        shapes = {n: (2, 3) for n in sym.list_inputs()}
        return sym.simple_bind(mx.cpu(), **shapes).get_optimized_symbol()  # type: ignore[no-any-return]

    assert len(optimized((a + b) + (a + b)).get_internals()) == 4  # a, b, one a+b, the sum
    assert len(optimized((a + 1) + (a + 2)).get_internals()) == 4  # different scalars: nothing merges
    d = a + 1
    grp = optimized(S.Group([a * d + b, a * d + b]))  # one a*d+b, then a copy for the second output
    assert len(grp.get_internals()) == 6 and grp.list_outputs()[1].endswith("_output")
    assert len(optimized(S.Dropout(a) + S.Dropout(a)).get_internals()) == 4  # random: kept apart
    mp: pytest.MonkeyPatch = monkeypatch  # type: ignore[assignment]
    mp.setenv("MXNET_ELIMINATE_COMMON_EXPR", "0")
    assert len(optimized((a + b) + (a + b)).get_internals()) == 5


def test_two_variables_of_one_name_keep_their_own_shapes() -> None:
    import warnings

    import pytest

    # two layers both named 'fc' create two variables named fc_weight: shapes are per node, as in MXNet
    net = S.FullyConnected(S.var("data"), name="fc", num_hidden=128)
    net = S.FullyConnected(S.Activation(net, act_type="relu"), name="fc", num_hidden=10)
    _, out, _ = net.get_internals().infer_shape(data=(100, 200))
    assert out is not None and out[-1] == (100, 10)
    assert net.list_arguments() == ["data", "fc_weight", "fc_bias", "fc_weight", "fc_bias"]
    pytest.importorskip("graphviz")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mx.viz.plot_network(net, shape={"data": (100, 200)})
    assert len(caught) == 1 and "multiple variables with the same name" in str(caught[0].message)
    assert "fc_weight" in str(caught[0].message)


def test_debug_str_reports_the_intermediate_memory() -> None:
    import re

    data = S.var("data")
    x = data
    for _ in range(4):
        x = x * x
    shape = (256, 1024)  # float32: 1 MiB per intermediate

    def total(sym: mx.sym.Symbol, req: str) -> int:
        exe = sym.simple_bind(mx.cpu(), data=shape, grad_req=req)
        m = re.search(r"Total (\d+) MB allocated", exe.debug_str())
        assert m is not None
        return int(m.group(1))

    # training keeps all four products for the backward; without gradients at most two live at
    # once besides the output (two intermediates + the output: 3 MiB)
    assert total(x, "write") == 4
    assert total(x, "null") == 3
    assert total(S.stop_gradient(x), "write") == 3  # nothing to differentiate: as without gradients


def test_infer_type_is_none_when_incomplete_as_mxnet() -> None:
    import warnings

    import pytest

    fc = S.FullyConnected(S.var("x"), num_hidden=3, name="fc")
    with pytest.warns(UserWarning, match=r"do not determine the types of \['x', 'fc_weight', 'fc_bias'\]"):
        assert fc.infer_type() == (None, None, None)
    assert fc.infer_type_partial() == ([None, None, None], [None], [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fc.infer_type(x="float16")[1] == [np.float16]
    exe = fc.simple_bind(mx.cpu(), x=(2, 4))  # simple_bind's default: float32 arguments
    assert str(exe.arg_dict["fc_weight"].dtype) == "torch.float32"


def test_sym_sparse_namespace_builds_the_same_operators() -> None:
    import torch

    x = S.var("data", stype="csr")
    w = S.var("weight", shape=(4, 2), init=mx.init.Constant(2.0), stype="row_sparse")
    dot = S.sparse.dot(x, w)
    import json

    assert json.loads(dot.tojson())["nodes"][-1]["op"] == "dot"  # the same operator as mx.sym.dot
    mod = mx.mod.Module(dot, label_names=None)
    mod.bind(data_shapes=[("data", (3, 4))])
    mod.init_params()
    assert torch.equal(mod.get_params()[0]["weight"], torch.full((4, 2), 2.0))
    mod.forward(mx.io.DataBatch([mx.nd.sparse.csr_matrix(np.eye(3, 4, dtype=np.float32))]), is_train=False)
    assert mod.get_outputs()[0].tolist() == [[2.0, 2.0]] * 3
