"""The Executor (``Symbol.bind`` / ``simple_bind``): graphs real MXNet 1.9.1 saved compute MXNet's
outputs, gradients and moving statistics (tests/data/symbol); gradients agree with torch autograd;
grad_req write/add/null, aux states, reshape, copy_params_from, loss outputs, group2ctx, errors."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "symbol")
_spec = importlib.util.spec_from_file_location(
    "symbol_fixtures", os.path.join(HERE, "make_symbol_fixtures.py")
)
assert _spec is not None and _spec.loader is not None
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)

S = mx.sym
T = torch.as_tensor


def _close(got: Any, want: Any, what: str = "", rtol: float = 1e-5, atol: float = 1e-6) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol, err_msg=what)


def _mlp_params() -> dict[str, torch.Tensor]:
    return {
        "data": T(fx.values((4, 6), 0.0)),
        "fc1_weight": T(fx.values((8, 6), 1.0)),
        "fc1_bias": T(fx.values((8,), 2.0)),
        "fc2_weight": T(fx.values((3, 8), 3.0)),
        "fc2_bias": T(fx.values((3,), 4.0)),
    }


def _mlp_head() -> Any:
    """The MLP without its loss: a plain output whose gradient needs head gradients."""
    return fx.build_mlp(mx).get_internals()["fc2_output"]


def _torch_mlp(p: dict[str, torch.Tensor]) -> torch.Tensor:
    h = torch.relu(p["data"] @ p["fc1_weight"].T + p["fc1_bias"])
    return h @ p["fc2_weight"].T + p["fc2_bias"]


# ------------------------------------------------------------------------------ MXNet's graphs


@pytest.mark.parametrize("name", sorted(fx.GRAPHS))
def test_mxnet_graph_computes_mxnets_outputs_gradients_and_moving_stats(name: str) -> None:
    sym = S.load(os.path.join(HERE, f"{name}-symbol.json"))
    saved = mx.nd.load(os.path.join(HERE, f"{name}-arrays.nd"))
    args = {k[4:]: v.clone() for k, v in saved.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in saved.items() if k.startswith("aux:")}
    grads = {n: torch.zeros_like(v) for n, v in args.items()}
    ex = sym.bind(mx.cpu(), args=args, args_grad=grads, aux_states={n: v.clone() for n, v in aux.items()})
    for i, out in enumerate(ex.forward(is_train=False)):
        _close(out, saved[f"out:{i}"], f"{name} output {i}")
    for n, v in ex.aux_dict.items():  # inference leaves the moving statistics alone
        _close(v, saved[f"aux:{n}"], n)
    outs = ex.forward(is_train=True)
    n_out = len(sym.list_outputs())
    ex.backward([saved[f"out_grad:{i}"] for i in range(n_out)])
    for i, out in enumerate(outs):
        _close(out, saved[f"train_out:{i}"], f"{name} training output {i}")
    for n, g in ex.grad_dict.items():
        _close(g, saved[f"grad:{n}"], f"{name} gradient of {n}", rtol=1e-4, atol=1e-5)
    if aux:  # moving = moving * momentum + batch statistic * (1 - momentum), biased variance
        conv = saved["internal:conv_output"].numpy()
        mean, var = conv.mean(axis=(0, 2, 3)), conv.var(axis=(0, 2, 3))
        _close(ex.aux_dict["bn_moving_mean"], 0.8 * aux["bn_moving_mean"].numpy() + 0.2 * mean, rtol=1e-5)
        _close(ex.aux_dict["bn_moving_var"], 0.8 * aux["bn_moving_var"].numpy() + 0.2 * var, rtol=1e-5)


def test_batchnorm_inference_uses_the_moving_statistics() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2) / 7
    bn = S.BatchNorm(S.Variable("x"), fix_gamma=False, eps=1e-3, name="bn")
    gamma, beta = np.array([1.0, 2.0, -1.0], np.float32), np.array([0.5, 0.0, 1.0], np.float32)
    mean, var = np.array([0.2, 1.0, 2.0], np.float32), np.array([1.0, 4.0, 0.25], np.float32)
    ex = bn.bind(
        mx.cpu(),
        {"x": T(x), "bn_gamma": T(gamma), "bn_beta": T(beta)},
        aux_states={"bn_moving_mean": T(mean.copy()), "bn_moving_var": T(var.copy())},
    )
    c = (slice(None), None, None)
    want = (x - mean[c]) / np.sqrt(var[c] + 1e-3) * gamma[c] + beta[c]
    _close(ex.forward()[0], want, rtol=1e-5)
    # training normalizes by the batch statistics and moves the moving ones by momentum 0.9
    out = ex.forward(is_train=True)[0]
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    _close(out, (x - bm[c]) / np.sqrt(bv[c] + 1e-3) * gamma[c] + beta[c], rtol=1e-4, atol=1e-5)
    _close(ex.aux_dict["bn_moving_mean"], 0.9 * mean + 0.1 * bm, rtol=1e-5)
    _close(ex.aux_dict["bn_moving_var"], 0.9 * var + 0.1 * bv, rtol=1e-5)
    # and the next inference uses the moved statistics
    mm, mv = 0.9 * mean + 0.1 * bm, 0.9 * var + 0.1 * bv
    _close(ex.forward()[0], (x - mm[c]) / np.sqrt(mv[c] + 1e-3) * gamma[c] + beta[c], rtol=1e-5)


def test_batchnorm_mean_var_outputs_are_mean_and_inverse_std() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    bn = S.BatchNorm(S.Variable("x"), output_mean_var=True, fix_gamma=False, name="bn")
    assert bn.list_outputs() == ["bn_output", "bn_mean", "bn_var"]
    ex = bn.bind(
        mx.cpu(),
        {"x": T(x), "bn_gamma": torch.ones(3), "bn_beta": torch.zeros(3)},
        aux_states={"bn_moving_mean": torch.full((3,), 0.5), "bn_moving_var": torch.full((3,), 2.0)},
    )
    _, mean, inv_std = ex.forward()  # inference: the moving statistics (MXNet gives 1/sqrt(var + eps))
    _close(mean, [0.5] * 3)
    _close(inv_std, [1 / np.sqrt(2.001)] * 3)
    _, mean, inv_std = ex.forward(is_train=True)
    _close(mean, x.mean(axis=(0, 2)))
    _close(inv_std, 1 / np.sqrt(x.var(axis=(0, 2)) + 1e-3), rtol=1e-5)


# ------------------------------------------------------------------------------ bind and gradients


def test_bind_with_lists_matches_torch_autograd() -> None:
    p = _mlp_params()
    head = _mlp_head()
    names = head.list_arguments()
    assert names == ["data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    grads = [torch.zeros_like(p[n]) for n in names]
    ex = head.bind(mx.cpu(), [p[n].clone() for n in names], args_grad=grads)
    out_grad = T(fx.values((4, 3), 7.0))
    out = ex.forward(is_train=True)[0]
    ex.backward(out_grad)
    leaves = {n: p[n].clone().requires_grad_(True) for n in names}
    ref = _torch_mlp(leaves)
    ref.backward(out_grad)
    _close(out, ref.detach())
    for n, g in zip(names, ex.grad_arrays, strict=True):
        _close(g, leaves[n].grad, n)
    assert ex.grad_arrays[0] is grads[0]  # gradients land in the arrays given to bind
    assert ex.outputs[0] is out and list(ex.output_dict) == ["fc2_output"]
    assert list(ex.arg_dict) == names and ex.arg_dict["fc1_weight"] is ex.arg_arrays[1]
    bound = ex.arg_arrays[2]
    bound += 1.0  # the executor computes with the very arrays it was bound to
    _close(ex.forward()[0], _torch_mlp({**p, "fc1_bias": p["fc1_bias"] + 1.0}))


def test_grad_req_write_add_null_per_argument() -> None:
    p = _mlp_params()
    head = _mlp_head()
    grads = {n: torch.full_like(v, 5.0) for n, v in p.items() if n != "data"}
    req = {"fc1_weight": "add", "fc1_bias": "null", "fc2_weight": "write", "fc2_bias": "add"}
    ex = head.bind(mx.cpu(), {n: v.clone() for n, v in p.items()}, args_grad=grads, grad_req=req)
    leaves = {n: v.clone().requires_grad_(True) for n, v in p.items()}
    _torch_mlp(leaves).sum().backward()
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward(torch.ones(4, 3))
    _close(grads["fc1_weight"], 5.0 + 2 * leaves["fc1_weight"].grad, "add")
    _close(grads["fc2_bias"], 5.0 + 2 * leaves["fc2_bias"].grad, "add")
    _close(grads["fc2_weight"], leaves["fc2_weight"].grad, "write")
    _close(grads["fc1_bias"], torch.full((8,), 5.0), "null leaves the array alone")
    assert ex.grad_dict["data"] is None


def test_forward_keywords_copy_into_the_arguments() -> None:
    p = _mlp_params()
    head = _mlp_head()
    ex = head.bind(mx.cpu(), {n: v.clone() for n, v in p.items()})
    new = T(fx.values((4, 6), 9.0))
    out = ex.forward(data=new)[0]
    _close(ex.arg_dict["data"], new)
    _close(out, _torch_mlp({**p, "data": new}))
    _close(ex.forward(data=new.numpy())[0], out)
    with pytest.raises(MXNetError, match=r"'data' has shape \(2, 6\) but was bound with shape \(4, 6\)"):
        ex.forward(data=torch.zeros(2, 6))
    with pytest.raises(MXNetError, match="'nope' is not an argument"):
        ex.forward(nope=new)
    with pytest.raises(TypeError, match="must be an NDArray"):
        ex.forward(data=[[1.0]])


def test_backward_after_inference_forward_computes_gradients() -> None:
    # MXNet's executor computes gradients after forward(is_train=False) too (test_bind relies on it)
    x = S.Variable("x")
    g = torch.full((2,), 3.0)
    ex = (x * 2).bind(mx.cpu(), {"x": torch.ones(2)}, args_grad={"x": g})
    ex.backward(torch.ones(2))  # no forward yet: MXNet 1.9.1 differentiates at the bound arrays
    _close(g, [2.0, 2.0])
    g.fill_(3.0)
    ex.forward(is_train=False)
    ex.backward(torch.ones(2))
    _close(g, [2.0, 2.0])
    g.fill_(3.0)
    ex.backward(torch.ones(2))  # a second backward computes again (grad_req 'write': the same)
    _close(g, [2.0, 2.0])
    ex.forward(is_train=True)
    with pytest.raises(MXNetError, match="2 head gradients for 1 outputs"):
        ex.backward([torch.ones(2), torch.ones(2)])
    ex.backward(torch.tensor([1.0, -1.0]))
    _close(g, [2.0, -2.0])
    # dot's gradients (MXNet's test_dot): d(x.w)/dx = g w^T, d/dw = x^T g
    a, b = torch.arange(6.0).reshape(2, 3), torch.arange(12.0).reshape(3, 4) / 10
    ga, gb = torch.empty(2, 3), torch.empty(3, 4)
    ex = S.dot(S.Variable("a"), S.Variable("b")).bind(mx.cpu(), [a, b], args_grad=[ga, gb])
    ex.forward()
    ex.backward([torch.ones(2, 4)])
    _close(ga, (torch.ones(2, 4) @ b.T).numpy())
    _close(gb, (a.T @ torch.ones(2, 4)).numpy())


def test_reshape_shares_memory_as_mxnet() -> None:
    x = S.Variable("x")
    y = S.FullyConnected(x, num_hidden=4, name="fc")
    exe = y.simple_bind(mx.cpu(), x=(5, 4), grad_req="null")
    exe.arg_arrays[0][:] = 1
    exe.arg_arrays[1][:] = torch.ones(4, 4)
    small = exe.reshape(x=(3, 4))  # shrinking: views of the first elements, outputs too
    assert small.arg_arrays[0].data_ptr() == exe.arg_arrays[0].data_ptr()
    small.forward()
    _close(small.outputs[0], np.full((3, 4), 4.0))
    _close(exe.outputs[0][:3], np.full((3, 4), 4.0))
    big = exe.reshape(allow_up_sizing=True, x=(6, 4))  # growing: new memory for x only
    big.arg_arrays[0][:] = 0
    _close(exe.arg_arrays[0], np.ones((5, 4)))
    assert big.arg_arrays[1] is exe.arg_arrays[1]


def test_simple_bind_allocates_from_shapes_and_types() -> None:
    net = fx.build_convbn(mx)
    ex = net.simple_bind(mx.cpu(), data=(2, 3, 6, 6))
    shapes = dict(zip(net.list_arguments(), net.infer_shape(data=(2, 3, 6, 6))[0], strict=True))
    assert {n: tuple(a.shape) for n, a in ex.arg_dict.items()} == shapes
    assert all(float(a.abs().sum()) == 0 for a in ex.arg_arrays)
    assert {n: tuple(g.shape) for n, g in ex.grad_dict.items()} == shapes  # type: ignore[union-attr]
    assert {n: tuple(a.shape) for n, a in ex.aux_dict.items()} == {
        "bn_moving_mean": (4,),
        "bn_moving_var": (4,),
    }
    null = net.simple_bind(mx.cpu(), grad_req="null", data=(1, 3, 4, 4))
    assert all(g is None for g in null.grad_arrays)
    f64 = _mlp_head().simple_bind(mx.cpu(), type_dict={"data": "float64"}, data=(2, 6))
    assert all(a.dtype == torch.float64 for a in f64.arg_arrays)
    assert f64.forward()[0].dtype == torch.float64
    with pytest.raises(MXNetError, match=r"cannot infer the shapes of \['data'"):
        net.simple_bind(mx.cpu())
    with pytest.raises(MXNetError, match=r"\['dta'\] are not inputs"):
        net.simple_bind(mx.cpu(), dta=(1, 2))


def test_simple_bind_gives_aux_states_the_inferred_type() -> None:
    bn = S.BatchNorm(S.Variable("d"), name="bn")
    ex = bn.simple_bind(mx.cpu(), type_dict={"d": "float64"}, d=(2, 3))
    assert [a.dtype for a in ex.aux_arrays] == [torch.float64, torch.float64]
    assert [a.dtype for a in ex.arg_arrays] == [torch.float64] * 3
    assert ex.forward(is_train=True)[0].dtype == torch.float64


def test_loss_and_blocked_heads_in_one_group() -> None:
    x = S.Variable("x")
    fc = S.FullyConnected(x, num_hidden=3, name="f")
    net = S.Group([S.SoftmaxOutput(fc, name="sm"), S.BlockGrad(fc * 2, name="bg")])
    ex = net.simple_bind(mx.cpu(), grad_req={"f_weight": "add", "f_bias": "write"}, x=(2, 4))
    xv, w = T(fx.values((2, 4), 1.0)), T(fx.values((3, 4), 2.0))
    ex.copy_params_from({"f_weight": w, "f_bias": torch.zeros(3)})
    ex.arg_dict["sm_label"][:] = torch.tensor([1.0, 2.0])
    for _ in range(2):
        outs = ex.forward(is_train=True, x=xv)
        ex.backward()  # no head gradients: the loss makes its own, BlockGrad passes none
    logits = xv @ w.T
    _close(outs[1], 2 * logits)
    dlogits = torch.softmax(logits, dim=1) - torch.eye(3)[[1, 2]]
    _close(ex.grad_dict["f_weight"], 2 * dlogits.T @ xv)
    _close(ex.grad_dict["f_bias"], dlogits.sum(0))
    assert ex.grad_dict["x"] is None and ex.grad_dict["sm_label"] is None


def test_simple_bind_trains_like_torch() -> None:
    head = _mlp_head()
    ex = head.simple_bind(mx.cpu(), data=(4, 6))
    p = _mlp_params()
    ex.copy_params_from({n: v for n, v in p.items() if n != "data"})
    ex.forward(is_train=True, data=p["data"])
    ex.backward(torch.ones(4, 3))
    leaves = {n: v.clone().requires_grad_(True) for n, v in p.items()}
    _torch_mlp(leaves).sum().backward()
    for n, g in ex.grad_dict.items():
        _close(g, leaves[n].grad, n)


def test_copy_params_from() -> None:
    ex = _mlp_head().simple_bind(mx.cpu(), data=(4, 6))
    w = T(fx.values((8, 6), 5.0))
    ex.copy_params_from({"fc1_weight": w}, allow_extra_params=True)
    _close(ex.arg_dict["fc1_weight"], w)
    assert ex.arg_dict["fc1_weight"] is not w  # copied, not shared
    ex.copy_params_from({"fc1_bias": np.ones(8, np.float32), "other": w}, allow_extra_params=True)
    _close(ex.arg_dict["fc1_bias"], np.ones(8))
    with pytest.raises(MXNetError, match="'other', which the executor does not have"):
        ex.copy_params_from({"other": w})
    with pytest.raises(MXNetError, match=r"'fc1_weight' has shape \(6, 8\), the executor's array \(8, 6\)"):
        ex.copy_params_from({"fc1_weight": w.T})
    bn = S.BatchNorm(S.Variable("x"), name="bn").simple_bind(mx.cpu(), x=(2, 3))
    bn.copy_params_from({}, {"bn_moving_var": torch.full((3,), 2.0)})
    _close(bn.aux_dict["bn_moving_var"], [2.0, 2.0, 2.0])


def test_reshape_shares_parameters_and_checks_sizes() -> None:
    ex = _mlp_head().simple_bind(mx.cpu(), data=(4, 6))
    ex.copy_params_from({n: v for n, v in _mlp_params().items() if n != "data"})
    small = ex.reshape(data=(2, 6))
    assert small.arg_dict["fc1_weight"] is ex.arg_dict["fc1_weight"]
    assert small.grad_dict["fc1_weight"] is ex.grad_dict["fc1_weight"]
    assert tuple(small.arg_dict["data"].shape) == (2, 6)
    x = T(fx.values((2, 6), 4.0))
    _close(small.forward(data=x)[0], _torch_mlp({**_mlp_params(), "data": x}))
    with pytest.raises(MXNetError, match="would grow .* allow_up_sizing=True"):
        ex.reshape(data=(8, 6))
    big = ex.reshape(allow_up_sizing=True, data=(8, 6))
    assert tuple(big.forward()[0].shape) == (8, 3)
    with pytest.raises(MXNetError, match="'fc1_weight' would change .* partial_shaping=True"):
        ex.reshape(data=(4, 3))
    assert tuple(ex.reshape(partial_shaping=True, data=(4, 3)).arg_dict["fc1_weight"].shape) == (8, 3)


# ------------------------------------------------------------------------------ loss outputs


LOSSES = mx.nd.load(os.path.join(HERE, "losses.nd"))


@pytest.mark.parametrize("case", sorted(fx.LOSS_CASES))
def test_loss_outputs_match_mxnets_gradients(case: str) -> None:
    data, label = fx.loss_inputs(case)
    sym = fx.build_loss(mx, case)
    args = {"data": T(data), "w": torch.ones(data.shape)}
    if label is not None:
        args["label"] = T(label)
    grads = {"w": torch.zeros(data.shape)}
    ex = sym.bind(mx.cpu(), args=args, args_grad=grads, grad_req={"w": "write"})
    out = ex.forward(is_train=True)[0]
    ex.backward([torch.ones(out.shape) * 7])
    _close(out, LOSSES[f"{case}:out"], f"{case} output")
    _close(grads["w"], LOSSES[f"{case}:grad"], f"{case} gradient", rtol=1e-5, atol=1e-6)


def test_softmax_output_gradient_by_hand() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    label = torch.tensor([2.0, 0.0])
    sym = S.SoftmaxOutput(S.Variable("x"), S.Variable("y"), normalization="batch", name="sm")
    g = torch.zeros(2, 3)
    ex = sym.bind(mx.cpu(), {"x": x, "y": label}, args_grad={"x": g}, grad_req={"x": "write", "y": "null"})
    p = ex.forward(is_train=True)[0]
    ex.backward()
    _close(p, torch.softmax(x, dim=1))
    _close(g, (torch.softmax(x, dim=1) - torch.eye(3)[[2, 0]]) / 2)


# ------------------------------------------------------------------------------ group2ctx


def _grouped() -> Any:
    with mx.name.NameManager():
        with mx.AttrScope(ctx_group="dev1"):
            h = S.Activation(S.FullyConnected(S.Variable("data"), num_hidden=8, name="fc1"), act_type="tanh")
        with mx.AttrScope(ctx_group="dev2"):
            return S.FullyConnected(h, num_hidden=3, name="fc2")


def test_group2ctx_gives_the_outputs_and_gradients_of_one_context() -> None:
    net = _grouped()
    assert net.attr_dict()["fc1"]["__ctx_group__"] == "dev1" and net.attr("ctx_group") == "dev2"
    p = _mlp_params()
    results = []
    for group2ctx in (None, {"dev1": mx.cpu(0), "dev2": mx.cpu(1)}):
        grads = {n: torch.zeros_like(v) for n, v in p.items()}
        ex = net.bind(mx.cpu(), {n: v.clone() for n, v in p.items()}, args_grad=grads, group2ctx=group2ctx)
        out = ex.forward(is_train=True)[0]
        ex.backward(torch.ones(4, 3))
        results.append((out, grads))
    _close(results[1][0], results[0][0])
    for n in p:
        _close(results[1][1][n], results[0][1][n], n)
    leaves = {n: v.clone().requires_grad_(True) for n, v in p.items()}
    ref = torch.tanh(leaves["data"] @ leaves["fc1_weight"].T + leaves["fc1_bias"])
    (ref @ leaves["fc2_weight"].T + leaves["fc2_bias"]).sum().backward()
    _close(results[0][1]["fc1_weight"], leaves["fc1_weight"].grad)
    simple = net.simple_bind(mx.cpu(), group2ctx={"dev1": mx.cpu(0), "dev2": mx.cpu(1)}, data=(4, 6))
    assert tuple(simple.forward()[0].shape) == (4, 3)


# ------------------------------------------------------------------------------ errors


def test_bind_errors_are_clear() -> None:
    head = _mlp_head()
    p = _mlp_params()
    with pytest.raises(MXNetError, match=r"args lacks \['fc2_bias'\]"):
        head.bind(mx.cpu(), {n: v for n, v in p.items() if n != "fc2_bias"})
    with pytest.raises(MXNetError, match="args has 4 arrays for 5 names"):
        head.bind(mx.cpu(), list(p.values())[:4])
    # MXNet's bind takes only the names the symbol has from a dict: the others are ignored
    head.bind(mx.cpu(), {**p, "extra": torch.ones(1), "scalar": 9})
    with pytest.raises(MXNetError, match="args is missing"):
        head.bind(mx.cpu(), None)
    with pytest.raises(TypeError, match="must be a list or a dict"):
        head.bind(mx.cpu(), "data")
    with pytest.raises(TypeError, match=r"args\['data'\] must be an NDArray"):
        head.bind(mx.cpu(), {**p, "data": [[1.0]]})
    bad = {**p, "fc2_bias": torch.zeros(5)}
    with pytest.raises(MXNetError, match=r"bind: .*'fc2' \(FullyConnected\) needs its bias of shape \(3,\)"):
        head.bind(mx.cpu(), bad)
    with pytest.raises(
        MXNetError,
        match=r"bind: .*'fc1' \(FullyConnected\) needs its weight of shape \(8, 5\) for data of shape "
        r"\(4, 5\), got \(8, 6\)",
    ):
        head.bind(mx.cpu(), {**p, "data": torch.zeros(4, 5)})
    grads = {"fc1_weight": torch.zeros(6, 8)}
    with pytest.raises(
        MXNetError, match=r"gradient array of 'fc1_weight' has shape \(6, 8\), the argument \(8, 6\)"
    ):
        head.bind(mx.cpu(), p, args_grad=grads)
    with pytest.raises(MXNetError, match="grad_req 'sometimes' for 'data' is not one of"):
        head.bind(mx.cpu(), p, args_grad={n: torch.zeros_like(v) for n, v in p.items()}, grad_req="sometimes")
    with pytest.raises(MXNetError, match="grad_req has 2 entries for 5 arguments"):
        head.bind(mx.cpu(), p, grad_req=["write", "null"])
    with pytest.raises(TypeError, match="grad_req must be a str, list or dict"):
        head.bind(mx.cpu(), p, grad_req=3)
    bn = S.BatchNorm(S.Variable("x"), name="bn")
    with pytest.raises(MXNetError, match=r"aux_states is missing; the symbol needs \['bn_moving_mean'"):
        bn.bind(mx.cpu(), {"x": torch.ones(2, 3), "bn_gamma": torch.ones(3), "bn_beta": torch.ones(3)})


def test_operator_failure_in_forward_names_the_node() -> None:
    f = S.FullyConnected(S.Variable("x"), num_hidden=2, no_bias=True, name="f")
    ex = f.bind(mx.cpu(), {"x": torch.ones(3, 4, dtype=torch.int64), "f_weight": torch.ones(2, 4)})
    with pytest.raises(
        MXNetError, match=r"operator 'f' \(FullyConnected\) failed on inputs of shapes \[\(3, 4\), \(2, 4\)\]"
    ):
        ex.forward()
