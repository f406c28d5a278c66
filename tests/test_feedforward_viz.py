"""mx.model.FeedForward (a thin layer over Module) and mx.viz."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError


def _mlp() -> mx.sym.Symbol:
    data = mx.sym.var("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = mx.sym.FullyConnected(act, num_hidden=2, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    x = rng.randn(200, 4).astype("float32")
    return x, (x[:, 0] + x[:, 1] > 0).astype("float32")


def test_feedforward_fits_predicts_scores_saves_and_loads(tmp_path: Path) -> None:
    x, y = _data()
    model = mx.model.FeedForward.create(_mlp(), x, y, num_epoch=10, numpy_batch_size=40,
                                        initializer=mx.init.Xavier(), learning_rate=0.5)
    prob = model.predict(x)
    assert prob.shape == (200, 2)
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-5)
    acc = float((prob.argmax(axis=1) == y).mean())
    assert acc > 0.9  # a linearly separable problem
    model_score = mx.model.FeedForward(_mlp(), arg_params=model.arg_params, aux_params=model.aux_params)
    assert model_score.score(mx.io.NDArrayIter(x, y, batch_size=50)) == pytest.approx(acc)
    model.save(str(tmp_path / "ff"))
    again = mx.model.FeedForward.load(str(tmp_path / "ff"), 10)
    np.testing.assert_allclose(again.predict(x), prob, rtol=1e-6)
    # the same computation by hand from the saved parameters
    arg = again.arg_params
    h = torch.relu(torch.as_tensor(x) @ arg["fc1_weight"].T + arg["fc1_bias"])
    want = torch.softmax(h @ arg["fc2_weight"].T + arg["fc2_bias"], dim=1)
    np.testing.assert_allclose(prob, want.numpy(), rtol=1e-5, atol=1e-6)


def test_feedforward_errors() -> None:
    x, _ = _data()
    model = mx.model.FeedForward(_mlp(), num_epoch=1)
    with pytest.raises(MXNetError, match="fit\\(\\) or load\\(\\)"):
        model.predict(x)
    with pytest.raises(MXNetError, match="y is required"):
        model.fit(x)


def test_print_summary_lists_layers_shapes_and_parameter_counts() -> None:
    text = mx.viz.print_summary(_mlp(), shape={"data": (5, 4)})
    lines = text.splitlines()
    fc1 = next(line for line in lines if line.startswith("fc1(FullyConnected)")).split()
    assert fc1[1:] == ["(5,", "16)", "80", "data"]  # 4*16 weights + 16 biases
    fc2 = next(line for line in lines if line.startswith("fc2(FullyConnected)")).split()
    assert fc2[1:] == ["(5,", "2)", "34", "relu1"]
    soft = next(line for line in lines if line.startswith("softmax(SoftmaxOutput)")).split()
    assert soft[-2:] == ["0", "fc2"]  # the label is not a parameter
    assert lines[-2] == f"Total params: {4 * 16 + 16 + 16 * 2 + 2}"


def test_plot_network_draws_the_graph(tmp_path: Path) -> None:
    pytest.importorskip("graphviz")  # a dependency of mxtorch (as of MXNet)
    dot = mx.viz.plot_network(_mlp(), shape={"data": (5, 4)})
    src = dot.source
    assert "FullyConnected" in src and "SoftmaxOutput" in src and "Activation" in src
    assert "fc1_weight" not in src and "data" in src  # weights hidden, inputs shown
    assert src.count("->") == 5  # data->fc1->relu1->fc2->softmax, softmax_label->softmax
    assert "softmax_label" in src
    assert 'label=16' in src  # the edge fc1 -> relu1 carries its shape (batch left out)


def test_plot_network_without_graphviz_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "graphviz", None)  # import fails as if not installed
    with pytest.raises(MXNetError, match="pip install graphviz"):
        mx.viz.plot_network(_mlp())
