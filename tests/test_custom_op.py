"""MXNet's Python custom operators (mx.operator.CustomOp / CustomOpProp / register) in symbolic graphs
(executor, Module.fit, shape/type inference, JSON) and imperatively (mx.nd.Custom under autograd).

Reference numbers: the built-in SoftmaxOutput Module job (itself checked against Gluon in
test_module.py) and torch autograd of the same computation written directly.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from torch.testing import assert_close

import mxtorch as mx
from mxtorch import autograd
from mxtorch.base import MXNetError

# ---- operators used by the tests -------------------------------------------------------------------


class _SoftmaxLoss(mx.operator.CustomOp):
    """Softmax forward; backward is softmax - onehot(label), ignoring the head gradient."""

    def forward(self, is_train, req, in_data, out_data, aux):
        scores = in_data[0].asnumpy()
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        self.assign(out_data[0], req[0], mx.nd.array(e / e.sum(axis=1, keepdims=True)))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        label = in_data[1].asnumpy().astype(np.int64).ravel()
        grad = out_data[0].asnumpy().copy()
        grad[np.arange(len(label)), label] -= 1.0
        self.assign(in_grad[0], req[0], mx.nd.array(grad))
        self.assign(in_grad[1], req[1], 0)


@mx.operator.register("test_softmax_loss")
class _SoftmaxLossProp(mx.operator.CustomOpProp):
    def __init__(self) -> None:
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def infer_shape(self, in_shape):
        return [in_shape[0], (in_shape[0][0],)], [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _SoftmaxLoss()


class _ScaledProduct(mx.operator.CustomOp):
    """out = scale * lhs * rhs (elementwise); records the reqs it is given."""

    def __init__(self, scale: float, log: list[Any]) -> None:
        self.scale, self.log = scale, log

    def forward(self, is_train, req, in_data, out_data, aux):
        self.log.append(("forward", is_train, list(req)))
        self.assign(out_data[0], req[0], self.scale * in_data[0] * in_data[1])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.log.append(("backward", list(req)))
        self.assign(in_grad[0], req[0], self.scale * in_data[1] * out_grad[0])
        self.assign(in_grad[1], req[1], self.scale * in_data[0] * out_grad[0])


PRODUCT_LOG: list[Any] = []
PROP_KWARGS: list[dict[str, Any]] = []


@mx.operator.register("test_scaled_product")
class _ScaledProductProp(mx.operator.CustomOpProp):
    def __init__(self, scale: str = "1.0") -> None:
        super().__init__(need_top_grad=True)
        PROP_KWARGS.append({"scale": scale})
        self.scale = float(scale)

    def list_arguments(self):
        return ["lhs", "rhs"]

    def create_operator(self, ctx, shapes, dtypes):
        PRODUCT_LOG.append(("create", [tuple(s) for s in shapes], list(dtypes), ctx))
        return _ScaledProduct(self.scale, PRODUCT_LOG)


class _SumDiff(mx.operator.CustomOp):
    """Two outputs (a + b, a - b) and an aux state counting training forwards."""

    def forward(self, is_train, req, in_data, out_data, aux):
        a, b = in_data
        self.assign(out_data[0], req[0], a + b)
        self.assign(out_data[1], req[1], a - b)
        if is_train:
            aux[0] += 1

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        gs, gd = out_grad
        self.assign(in_grad[0], req[0], gs + gd)
        self.assign(in_grad[1], req[1], gs - gd)


@mx.operator.register("test_sum_diff")
class _SumDiffProp(mx.operator.CustomOpProp):
    def list_arguments(self):
        return ["a", "b"]

    def list_outputs(self):
        return ["sum", "diff"]

    def list_auxiliary_states(self):
        return ["count"]

    def infer_shape(self, in_shape):
        return [in_shape[0], in_shape[0]], [in_shape[0], in_shape[0]], [(1,)]

    def infer_type(self, in_type):
        return [in_type[0]] * 2, [np.float64, in_type[0]], [np.float32]

    def create_operator(self, ctx, shapes, dtypes):
        return _SumDiff()


class _TypedSumDiff(_SumDiff):
    def forward(self, is_train, req, in_data, out_data, aux):
        assert out_data[0].dtype == torch.float64
        super().forward(is_train, req, in_data, out_data, aux)


# ---- a loss: Module.fit equals SoftmaxOutput ------------------------------------------------------


def _mlp(head: str) -> Any:
    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = mx.sym.FullyConnected(act, num_hidden=3, name="fc2")
    if head == "custom":
        return mx.sym.Custom(fc2, op_type="test_softmax_loss", name="softmax")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def _init_params() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    shapes = {"fc1_weight": (8, 5), "fc1_bias": (8,), "fc2_weight": (3, 8), "fc2_bias": (3,)}
    return {k: torch.randn(s, generator=g) * 0.5 for k, s in shapes.items()}


def _fit(head: str, context: Any) -> tuple[dict[str, torch.Tensor], float]:
    rng = np.random.RandomState(4)
    x, y = rng.randn(24, 5).astype(np.float32), rng.randint(0, 3, size=24).astype(np.float32)
    mod = mx.mod.Module(_mlp(head), context=context)
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=8), num_epoch=3, kvstore="local", optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4},
            arg_params={k: v.clone() for k, v in _init_params().items()})
    acc = mod.score(mx.io.NDArrayIter(x, y, batch_size=8), "acc")[0][1]
    return {k: v.detach().clone() for k, v in mod.get_params()[0].items()}, acc


@pytest.mark.parametrize("context", [mx.cpu(0), [mx.cpu(0), mx.cpu(1)]], ids=["one", "two-contexts"])
def test_custom_softmax_loss_trains_like_softmax_output(context):
    sym = _mlp("custom")
    assert sym.list_arguments() == [
        "data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "softmax_label"]
    assert sym.list_outputs() == ["softmax_output"]
    got, got_acc = _fit("custom", context)
    want, want_acc = _fit("builtin", context)
    assert sorted(got) == sorted(want)
    for k in want:
        assert_close(got[k], want[k], atol=1e-5, rtol=1e-5, msg=k)
    assert got_acc == want_acc
    assert not torch.allclose(got["fc1_weight"], _init_params()["fc1_weight"], atol=1e-3)


def test_loss_head_needs_no_head_gradient_and_other_heads_do():
    x = mx.sym.Variable("x")
    loss = mx.sym.Custom(x, op_type="test_softmax_loss", name="sm")
    xv = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    ex = loss.bind(mx.cpu(), {"x": xv, "sm_label": torch.tensor([2.0, 0.0])},
                   args_grad={"x": torch.zeros(2, 3)}, grad_req={"x": "write"})
    ex.forward(is_train=True)
    ex.backward()  # a loss (need_top_grad=False): no head gradient needed
    want = torch.softmax(xv, dim=1) - torch.nn.functional.one_hot(torch.tensor([2, 0]), 3)
    assert_close(ex.outputs[0], torch.softmax(xv, dim=1))
    assert_close(ex.grad_dict["x"], want)

    prod = mx.sym.Custom(x, x, op_type="test_scaled_product", name="p")
    ex = prod.bind(mx.cpu(), {"x": xv}, args_grad={"x": torch.zeros(2, 3)})
    ex.forward(is_train=True)
    with pytest.raises(MXNetError, match="p_output"):
        ex.backward()


# ---- an elementwise op inside a graph: gradients vs torch autograd --------------------------------


@pytest.mark.parametrize("req", ["write", "add"])
def test_custom_op_in_a_graph_matches_torch_autograd(req):
    data, v = mx.sym.Variable("data"), mx.sym.Variable("v")
    fc = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    out = mx.sym.tanh(mx.sym.Custom(fc, v, op_type="test_scaled_product", scale=2.5, name="prod"))
    assert out.list_arguments() == ["data", "fc_weight", "fc_bias", "v"]
    g = torch.Generator().manual_seed(5)
    vals = {"data": torch.randn(3, 6, generator=g), "fc_weight": torch.randn(4, 6, generator=g),
            "fc_bias": torch.randn(4, generator=g), "v": torch.randn(3, 4, generator=g)}
    head = torch.randn(3, 4, generator=g)
    grads = {k: torch.full_like(t, 0.5) for k, t in vals.items()}  # 'add' adds to what is there
    reqs = {"data": "null", "fc_weight": req, "fc_bias": req, "v": req}
    ex = out.bind(mx.cpu(), {k: t.clone() for k, t in vals.items()},
                  args_grad={k: t.clone() for k, t in grads.items()}, grad_req=reqs)
    PRODUCT_LOG.clear()
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward(head)
    # the CustomOp is made once per bound graph and shape, as in MXNet
    assert [e[0] for e in PRODUCT_LOG] == ["create", "forward", "backward", "forward", "backward"]
    assert PRODUCT_LOG[0][1] == [(3, 4), (3, 4)] and PRODUCT_LOG[0][2] == [np.float32, np.float32]
    assert PRODUCT_LOG[1][1] is True and PRODUCT_LOG[2][1] == ["write", "write"]

    t = {k: x.clone().requires_grad_(k != "data") for k, x in vals.items()}
    want_out = torch.tanh(2.5 * (t["data"] @ t["fc_weight"].T + t["fc_bias"]) * t["v"])
    want_out.backward(head)
    assert_close(ex.outputs[0], want_out.detach())
    for k in ("fc_weight", "fc_bias", "v"):
        want = t[k].grad if req == "write" else grads[k] + 2 * t[k].grad
        assert_close(ex.grad_dict[k], want, msg=k)
    assert_close(ex.grad_dict["data"], grads["data"])  # grad_req 'null': untouched


def test_only_inputs_that_need_a_gradient_get_req_write():
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    s = mx.sym.Custom(a, b, op_type="test_scaled_product", name="p")
    ex = s.simple_bind(mx.cpu(), grad_req={"a": "write", "b": "null"}, a=(2,), b=(2,))
    ex.arg_dict["a"][:] = torch.tensor([1.0, 2.0])
    ex.arg_dict["b"][:] = torch.tensor([3.0, 4.0])
    PRODUCT_LOG.clear()
    ex.forward(is_train=True)
    ex.backward(torch.tensor([1.0, 10.0]))
    assert PRODUCT_LOG[-1] == ("backward", ["write", "null"])
    assert_close(ex.grad_dict["a"], torch.tensor([3.0, 40.0]))
    ex.forward(is_train=False)
    assert PRODUCT_LOG[-1] == ("forward", False, ["write"])


def test_assign_follows_req():
    op = mx.operator.CustomOp()
    dst = torch.tensor([1.0, 2.0])
    op.assign(dst, "write", torch.tensor([5.0, 6.0]))
    assert dst.tolist() == [5.0, 6.0]
    op.assign(dst, "add", np.array([1.0, 1.0]))
    assert dst.tolist() == [6.0, 7.0]
    op.assign(dst, "inplace", 0)
    assert dst.tolist() == [0.0, 0.0]
    op.assign(dst, "null", torch.tensor([9.0, 9.0]))
    assert dst.tolist() == [0.0, 0.0]
    with pytest.raises(MXNetError, match="req"):
        op.assign(dst, "overwrite", dst)


# ---- imperative: mx.nd.Custom ----------------------------------------------------------------------


def test_nd_custom_under_autograd_record():
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g)
    a.attach_grad()
    b.attach_grad()
    PRODUCT_LOG.clear()
    with autograd.record():
        y = mx.nd.Custom(a, b, op_type="test_scaled_product", scale="3")
        loss = (y * y).sum()
    loss.backward()
    assert PRODUCT_LOG[1][:2] == ("forward", True)
    ta, tb = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ((3 * ta * tb) ** 2).sum().backward()
    assert_close(y.detach(), 3 * a.detach() * b.detach())
    assert_close(a.grad, ta.grad)
    assert_close(b.grad, tb.grad)
    # outside record: predict mode
    with autograd.pause():
        mx.nd.Custom(a, b, op_type="test_scaled_product")
    assert PRODUCT_LOG[-1][:2] == ("forward", False)


def test_nd_custom_several_outputs_and_aux_state():
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 4.0])
    count = torch.zeros(1)
    a.attach_grad()
    with autograd.record():
        s, d = mx.nd.Custom(a, b, count, op_type="test_sum_diff")
        (s * 2 + d * 5).sum().backward()
    assert s.dtype == torch.float64  # infer_type's output type
    assert_close(s, torch.tensor([1.5, 6.0], dtype=torch.float64))
    assert_close(d, torch.tensor([0.5, -2.0]))
    assert_close(a.grad, torch.tensor([7.0, 7.0]))
    assert count.tolist() == [1.0]


# ---- several outputs and an aux state in a graph ---------------------------------------------------


def test_graph_with_several_outputs_and_an_aux_state():
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    sd = mx.sym.Custom(a, b, op_type="test_sum_diff", name="sd")
    assert sd.list_outputs() == ["sd_sum", "sd_diff"]
    assert sd.list_arguments() == ["a", "b"] and sd.list_auxiliary_states() == ["sd_count"]
    assert sd.infer_shape(a=(2, 3)) == ([(2, 3), (2, 3)], [(2, 3), (2, 3)], [(1,)])
    assert sd.infer_type(a=np.float32) == ([np.float32] * 2, [np.float64, np.float32], [np.float32])
    net = mx.sym.Group([sd[0] * 2, mx.sym.square(sd["sd_diff"])])
    g = torch.Generator().manual_seed(7)
    av, bv = torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g)
    heads = [torch.randn(2, 3, generator=g, dtype=torch.float64), torch.randn(2, 3, generator=g)]
    ex = net.bind(mx.cpu(), {"a": av, "b": bv}, args_grad={"a": torch.zeros(2, 3), "b": torch.zeros(2, 3)},
                  aux_states={"sd_count": torch.zeros(1)})
    for _ in range(3):
        ex.forward(is_train=True)
    ex.backward(heads)
    ex.forward(is_train=False)
    assert ex.aux_dict["sd_count"].tolist() == [3.0]
    ta, tb = av.clone().requires_grad_(), bv.clone().requires_grad_()
    outs = [(ta + tb).double() * 2, (ta - tb) ** 2]
    torch.autograd.backward(outs, heads)
    assert_close(ex.outputs[0], outs[0].detach())
    assert_close(ex.outputs[1], outs[1].detach())
    assert_close(ex.grad_dict["a"], ta.grad)
    assert_close(ex.grad_dict["b"], tb.grad)


# ---- JSON round trip and registration errors -------------------------------------------------------


def test_json_round_trip_keeps_op_type_and_string_kwargs(tmp_path):
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    PROP_KWARGS.clear()
    s = mx.sym.Custom(x, y, op_type="test_scaled_product", scale=0.5, name="p") + 1
    node = [n for n in json.loads(s.tojson())["nodes"] if n["op"] == "Custom"][0]
    assert node["name"] == "p" and node["attrs"] == {"op_type": "test_scaled_product", "scale": "0.5"}
    s.save(str(tmp_path / "net-symbol.json"))
    back = mx.sym.load(str(tmp_path / "net-symbol.json"))
    assert back.list_arguments() == s.list_arguments() == ["x", "y"]
    assert back.infer_shape(x=(2, 2), y=(2, 2)) == s.infer_shape(x=(2, 2), y=(2, 2))
    out = back.eval(x=torch.tensor([[1.0, 2.0], [3.0, 4.0]]), y=torch.full((2, 2), 2.0))[0]
    assert_close(out, torch.tensor([[2.0, 3.0], [4.0, 5.0]]))
    assert PROP_KWARGS and all(kw == {"scale": "0.5"} for kw in PROP_KWARGS)  # strings, as in MXNet
    assert back.tojson() == s.tojson()


def test_unregistered_op_type_is_a_clear_error():
    x = mx.sym.Variable("x")
    with pytest.raises(MXNetError, match=r"unknown custom operator 'no_such_op'.*import"):
        mx.sym.Custom(x, op_type="no_such_op")
    with pytest.raises(MXNetError, match=r"unknown custom operator 'no_such_op'"):
        mx.nd.Custom(torch.ones(2), op_type="no_such_op")
    js = mx.sym.Custom(x, op_type="test_scaled_product", name="p").tojson().replace(
        "test_scaled_product", "no_such_op")
    with pytest.raises(MXNetError, match=r"node 2 \('p'\).*unknown custom operator 'no_such_op'.*register"):
        mx.sym.load_json(js)
    with pytest.raises(MXNetError, match="op_type is required"):
        mx.sym.Custom(x)
    # the same file loads once a module registers the operator
    late = js.replace("no_such_op", "test_registered_late")
    with pytest.raises(MXNetError, match="test_registered_late"):
        mx.sym.load_json(late)
    mx.operator.register("test_registered_late")(_ScaledProductProp)
    back = mx.sym.load_json(late)
    assert back.list_arguments() == ["x", "p_rhs"]  # the missing input became a variable, as in MXNet
    assert_close(back.eval(x=torch.tensor([3.0]), p_rhs=torch.tensor([4.0]))[0], torch.tensor([12.0]))


def test_register_checks_the_class_and_warns_when_replacing():
    with pytest.raises(MXNetError, match="CustomOpProp"):
        mx.operator.register("test_bad")(object)  # type: ignore[arg-type]

    class One(mx.operator.CustomOpProp):
        def create_operator(self, ctx, shapes, dtypes):
            return _SumDiff()

    class Two(One):
        pass

    mx.operator.register("test_replaced")(One)
    with pytest.warns(UserWarning, match="test_replaced"):
        mx.operator.register("test_replaced")(Two)
    assert "test_replaced" in mx.operator.get_all_registered_operators()
    op = mx.sym.Custom(mx.sym.Variable("x"), op_type="test_replaced")
    assert op.list_outputs() == [f"{op.name}_output"]


# ---- Gluon: F.Custom in hybrid_forward, export and SymbolBlock.imports ------------------------------


def test_hybridized_block_with_custom_exports_and_imports(tmp_path):
    from mxtorch import gluon

    class Net(gluon.HybridBlock):
        def __init__(self) -> None:
            super().__init__()
            self.fc = gluon.nn.Dense(3, in_units=4)

        def hybrid_forward(self, F, x, v):
            return F.Custom(self.fc(x), v, op_type="test_scaled_product", scale=2)

    net = Net()
    net.initialize()
    g = torch.Generator().manual_seed(8)
    x, v = torch.randn(2, 4, generator=g), torch.randn(2, 3, generator=g)
    w, b = net.fc.weight.data().detach(), net.fc.bias.data().detach()
    want = 2 * (x @ w.T + b) * v
    assert_close(net(x, v), want)
    net.hybridize()
    assert_close(net(x, v), want)
    net.export(str(tmp_path / "m"))
    graph = json.loads((tmp_path / "m-symbol.json").read_text())
    assert [n["attrs"] for n in graph["nodes"] if n["op"] == "Custom"] == [
        {"op_type": "test_scaled_product", "scale": "2"}]
    sb = gluon.SymbolBlock.imports(str(tmp_path / "m-symbol.json"), ["data0", "data1"],
                                   str(tmp_path / "m-0000.params"))
    xg = x.clone()
    xg.attach_grad()
    with autograd.record():
        out = sb(xg, v)
    out.backward()
    assert_close(out.detach(), want)
    assert_close(xg.grad, (2 * v) @ w)  # d sum(2 * (x W^T + b) * v) / dx
