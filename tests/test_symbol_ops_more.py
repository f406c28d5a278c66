"""Symbolic operators beyond the model-zoo set: SVMOutput (against hand-derived hinge gradients) and
Crop (against numpy slicing)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError

RNG = np.random.default_rng(0)


# ---- SVMOutput ---------------------------------------------------------------------------------
def _hinge_grad(scores: np.ndarray, labels: np.ndarray, margin: float, coef: float, linear: bool) -> Any:
    """d/dscores of coef * sum_j max(0, margin - y_j s_j)^p (p = 1 or 2), y_j = +1 for the true
    class and -1 for the others, written out element by element."""
    grad = np.zeros_like(scores)
    for r in range(scores.shape[0]):
        for j in range(scores.shape[1]):
            y = 1.0 if j == int(labels[r]) else -1.0
            slack = margin - y * scores[r, j]
            if slack > 0:
                grad[r, j] = coef * (-y if linear else -2.0 * y * slack)
    return grad


@pytest.mark.parametrize("margin,coef,linear", [(1.0, 1.0, False), (0.5, 2.0, False), (1.5, 0.3, True)])
def test_svm_output_forward_is_identity_backward_is_hinge(margin: float, coef: float, linear: bool) -> None:
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    svm = mx.sym.SVMOutput(fc, margin=margin, regularization_coefficient=coef, use_linear=linear, name="svm")
    assert svm.list_arguments() == ["data", "fc_weight", "fc_bias", "svm_label"]
    arg_shapes, out_shapes, _ = svm.infer_shape(data=(6, 3))
    assert arg_shapes[-1] == (6,) and out_shapes == [(6, 4)]
    x = RNG.standard_normal((6, 3)).astype(np.float32)
    w = RNG.standard_normal((4, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    labels = np.array([0, 3, 1, 2, 2, 0], np.float32)
    args = {"data": x, "fc_weight": w, "fc_bias": b, "svm_label": labels}
    grads = {k: torch.zeros(v.shape) for k, v in args.items() if k != "svm_label"}
    ex = svm.bind(mx.cpu(), {k: torch.as_tensor(v) for k, v in args.items()}, args_grad=grads)
    (out,) = ex.forward(is_train=True)
    scores = x @ w.T + b
    np.testing.assert_allclose(out.numpy(), scores, rtol=1e-5, atol=1e-6)
    ex.backward()  # a loss head: no head gradient needed, and one given would be ignored
    g = _hinge_grad(scores.astype(np.float64), labels, margin, coef, linear)
    assert np.count_nonzero(g) and np.count_nonzero(g) < g.size  # some hinges active, some not
    np.testing.assert_allclose(grads["fc_bias"].numpy(), g.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads["fc_weight"].numpy(), g.T @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads["data"].numpy(), g @ w, rtol=1e-5, atol=1e-5)


def test_svm_output_on_3d_scores_and_in_json() -> None:
    s = mx.sym.SVMOutput(mx.sym.var("x"), mx.sym.var("y"), margin=0.5)
    assert s.infer_shape(x=(2, 3, 5))[0] == [(2, 3, 5), (2, 3)]
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    y = RNG.integers(0, 5, (2, 3)).astype(np.float32)
    grads = {"x": torch.zeros(2, 3, 5)}
    back = mx.sym.load_json(s.tojson())
    node = [n for n in json.loads(s.tojson())["nodes"] if n["op"] == "SVMOutput"][0]
    assert node["attrs"] == {"margin": "0.5"}
    ex = back.bind(mx.cpu(), {"x": torch.as_tensor(x), "y": torch.as_tensor(y)}, args_grad=grads,
                   grad_req={"x": "write"})  # fmt: skip
    ex.forward(is_train=True)
    ex.backward()
    want = _hinge_grad(x.reshape(6, 5).astype(np.float64), y.reshape(6), 0.5, 1.0, False).reshape(2, 3, 5)
    np.testing.assert_allclose(grads["x"].numpy(), want, rtol=1e-5, atol=1e-6)


def test_svm_output_trains_a_linear_classifier_with_module() -> None:
    # two separable blobs: a few SGD epochs of the squared hinge separate them
    x = np.concatenate([RNG.normal(-2, 0.5, (32, 2)), RNG.normal(2, 0.5, (32, 2))]).astype(np.float32)
    y = np.repeat([0.0, 1.0], 32).astype(np.float32)
    net = mx.sym.SVMOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2, name="fc"), name="svm")
    it = mx.io.NDArrayIter(x, y, batch_size=16, shuffle=True, label_name="svm_label")
    mod = mx.mod.Module(net, data_names=["data"], label_names=["svm_label"], context=mx.cpu())
    mod.fit(it, optimizer="sgd", optimizer_params={"learning_rate": 0.05}, num_epoch=5,
            initializer=mx.init.Xavier())  # fmt: skip
    assert mod.score(mx.io.NDArrayIter(x, y, batch_size=16, label_name="svm_label"), "acc")[0][1] == 1.0


# ---- Crop ----------------------------------------------------------------------------------------
def _crop_case(kind: str) -> tuple[mx.sym.Symbol, dict[str, tuple[int, ...]], tuple[int, int, int, int]]:
    """(symbol, input shapes, (y, x, h, w) of the window the result must be)."""
    a, like = mx.sym.var("a"), mx.sym.var("like")
    big = (2, 3, 5, 6)
    if kind == "h_w":
        return mx.sym.Crop(a, h_w=(3, 2), name="c"), {"a": big}, (0, 0, 3, 2)
    if kind == "offset":
        return mx.sym.Crop(a, h_w=(3, 2), offset=(2, 4), name="c"), {"a": big}, (2, 4, 3, 2)
    if kind == "like":
        return mx.sym.Crop(a, like, offset=(1, 2), name="c"), {"a": big, "like": (7, 1, 4, 3)}, (1, 2, 4, 3)
    # centred: (5 - 2) // 2 = 1, (6 - 3) // 2 = 1
    return mx.sym.Crop(a, like, center_crop=True, name="c"), {"a": big, "like": (1, 1, 2, 3)}, (1, 1, 2, 3)


@pytest.mark.parametrize("kind", ["h_w", "offset", "like", "center"])
def test_crop_window_and_gradient(kind: str) -> None:
    s, shapes, (y, x, h, w) = _crop_case(kind)
    assert json.loads(s.tojson())["nodes"][-1]["attrs"]["num_args"] == str(len(shapes))
    arg_shapes, out_shapes, _ = s.infer_shape(**shapes)
    assert out_shapes == [(shapes["a"][0], shapes["a"][1], h, w)]
    args = {n: torch.as_tensor(RNG.standard_normal(shape).astype(np.float32)) for n, shape in shapes.items()}
    grads = {n: torch.full(shape, 7.0) for n, shape in shapes.items()}
    ex = mx.sym.load_json(s.tojson()).bind(mx.cpu(), args, args_grad=grads)
    (out,) = ex.forward(is_train=True)
    a = args["a"].numpy()
    np.testing.assert_array_equal(out.numpy(), a[:, :, y : y + h, x : x + w])
    head = torch.as_tensor(RNG.standard_normal(out.shape).astype(np.float32))
    ex.backward(head)
    want = np.zeros_like(a)
    want[:, :, y : y + h, x : x + w] = head.numpy()
    np.testing.assert_array_equal(grads["a"].numpy(), want)
    if "like" in grads:  # read for its shape only: MXNet writes it a zero gradient
        assert float(grads["like"].abs().sum()) == 0.0


def test_crop_errors_and_crop_alias() -> None:
    a = mx.sym.var("a")
    with pytest.raises(MXNetError, match="window does not fit"):
        mx.sym.Crop(a, h_w=(6, 2)).infer_shape(a=(1, 1, 5, 5))
    with pytest.raises(MXNetError, match="offset"):
        mx.sym.Crop(a, h_w=(3, 3), offset=(3, 0)).infer_shape(a=(1, 1, 5, 5))
    with pytest.raises(MXNetError, match="4-d"):
        mx.sym.Crop(a, h_w=(1, 1)).infer_shape(a=(5, 5))
    # lower-case crop is MXNet's alias of slice, not Crop
    s = mx.sym.crop(a, begin=(1, 0), end=(3, 2))
    assert json.loads(s.tojson())["nodes"][-1]["op"] == "slice"
    assert s.infer_shape(a=(4, 4))[1] == [(2, 2)]


# ---- infer_shape_partial with MXNet's 0 = unknown dimension ----------------------------------------
def test_partial_shapes_flow_through_an_mlp() -> None:
    x = mx.sym.Variable("x", shape=(0, 10))
    net = mx.sym.SoftmaxOutput(
        mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=5, name="fc"), act_type="relu"), name="sm"
    )
    assert net.list_arguments() == ["x", "fc_weight", "fc_bias", "sm_label"]
    # the weight needs only the features (10); the batch (0) stays unknown in the data, label and output
    assert net.infer_shape_partial() == ([(0, 10), (5, 10), (5,), (0,)], [(0, 5)], [])
    assert net.infer_shape_partial(x=(4, 0)) == ([(4, 0), (5, 0), (5,), (4,)], [(4, 5)], [])
    with pytest.warns(UserWarning, match="do not determine"):
        assert net.infer_shape() == (None, None, None)
    assert net.infer_shape(x=(4, 10)) == ([(4, 10), (5, 10), (5,), (4,)], [(4, 5)], [])
    with pytest.raises(MXNetError, match=r"cannot infer the shapes of \['x', 'sm_label'\]"):
        net.simple_bind(mx.cpu())  # arrays need whole shapes


def test_partial_shapes_of_windows_and_recurrent_layers() -> None:
    d = mx.sym.var("d")
    conv = mx.sym.Convolution(d, kernel=(3, 3), stride=(2, 2), num_filter=4, name="c")
    # (8 - 3) // 2 + 1 = 3 along x; y and the batch unknown
    want = ([(0, 3, 0, 8), (4, 3, 3, 3), (4,)], [(0, 4, 0, 3)], [])
    assert conv.infer_shape_partial(d=(0, 3, 0, 8)) == want
    pool = mx.sym.Pooling(d, kernel=(2, 2), stride=(2, 2), pool_type="max")
    assert pool.infer_shape_partial(d=(2, 3, 0, 9))[1] == [(2, 3, 0, 4)]
    assert mx.sym.Flatten(d).infer_shape_partial(d=(0, 3, 4))[1] == [(0, 12)]
    assert mx.sym.Flatten(d).infer_shape_partial(d=(5, 0, 4))[1] == [(5, 0)]
    r = mx.sym.RNN(d, state_size=4, mode="lstm", name="r")
    # the packed parameters depend on the features only: 4 * 4 * (3 + 4) + 2 * 4 * 4 = 144
    assert r.infer_shape_partial(d=(5, 0, 3)) == ([(5, 0, 3), (144,), (1, 0, 4), (1, 0, 4)], [(5, 0, 4)], [])


def test_partial_shapes_of_same_shape_operators_combine() -> None:
    a, b = mx.sym.var("a"), mx.sym.var("b", shape=(0, 3))
    assert (a + b).infer_shape_partial() == ([(0, 3), (0, 3)], [(0, 3)], [])
    a = mx.sym.var("a", shape=(2, 0))
    # (2, 0) and (0, 3) together are (2, 3): whole shapes, so infer_shape succeeds too
    assert (a + b).infer_shape() == ([(2, 3), (2, 3)], [(2, 3)], [])
    with pytest.raises(MXNetError, match=r"'b' would need both shape \(0, 3\) and \(2, 4\)"):
        (mx.sym.var("a", shape=(2, 4)) + b).infer_shape_partial()
    fc = mx.sym.FullyConnected(mx.sym.var("x"), mx.sym.var("w", shape=(5, 7)), num_hidden=5, no_bias=True)
    with pytest.raises(MXNetError, match="needs its weight of shape"):
        fc.infer_shape_partial(x=(0, 10))
