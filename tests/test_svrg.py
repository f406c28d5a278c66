"""mx.contrib.svrg_optimization: SVRGModule's gradient g(w) - g(snapshot) + full gradient, checked
against a hand computation, and _SVRGOptimizer's routing of the ``*_full`` keys.

The model: pred = w * x (FullyConnected, no bias), LinearRegressionOutput against y = 2x, x = 1..4 in
two batches of two, w starting at 0, SGD lr 0.1 with rescale_grad 1/2.  The raw batch gradients at w
are sum((w x - y) x): at w = 0, -10 and -50, so the full gradient is -30.  Step 1 (batch 1, w = 0 =
snapshot): -10 + 10 - 30 = -30 -> w = 0 + 0.1 * 30 / 2 = 1.5.  Step 2 (batch 2, w = 1.5): g = (4.5-6)*3
+ (6-8)*4 = -12.5, minus the snapshot's -50, plus -30 = 7.5 -> w = 1.5 - 0.1 * 7.5 / 2 = 1.125.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.contrib.svrg_optimization import SVRGModule, _SVRGOptimizer


def _linear_job(context: Any) -> tuple[Any, SVRGModule]:
    x = np.arange(1, 5, dtype=np.float32).reshape(4, 1)
    it = mx.io.NDArrayIter(x, 2 * x[:, 0], batch_size=2, label_name="y")
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=1, no_bias=True, name="fc")
    sym = mx.sym.LinearRegressionOutput(fc, mx.sym.Variable("y"), name="lro")
    mod = SVRGModule(sym, data_names=["data"], label_names=["y"], context=context, update_freq=1)
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(initializer=mx.init.Zero())
    return it, mod


@pytest.mark.parametrize(
    "context,kvstore",
    [(mx.cpu(), "local"), (mx.cpu(), "kv-object"), ([mx.cpu(0), mx.cpu(1)], "local")],
    ids=["one-context", "store-object", "two-contexts"],
)
def test_svrg_steps_match_the_hand_computation(context: Any, kvstore: str) -> None:
    it, mod = _linear_job(context)
    kv: Any = mx.kv.create("local") if kvstore == "kv-object" else kvstore
    mod.init_optimizer(kvstore=kv, optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    mod.update_full_grads(it)
    full = mod._param_dict[0]["fc_weight"] * len(mod._param_dict)  # each context holds its share
    assert full.item() == pytest.approx(-30.0)
    it.reset()
    ws = []
    for batch in it:
        mod.forward_backward(batch)
        mod.update()
        ws.append(mod.get_params()[0]["fc_weight"].item())
    assert ws == pytest.approx([1.5, 1.125])


def test_fit_recomputes_the_full_gradient_each_update_freq_epochs() -> None:
    it, mod = _linear_job(mx.cpu())
    mod.fit(it, eval_metric="mse", optimizer="sgd", optimizer_params={"learning_rate": 0.1}, num_epoch=1,
            initializer=mx.init.Zero())
    assert mod.get_params()[0]["fc_weight"].item() == pytest.approx(1.125)
    assert type(mod._optimizer) is _SVRGOptimizer


def test_update_freq_must_be_a_positive_int() -> None:
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=1)
    with pytest.raises(TypeError, match="update_freq"):
        SVRGModule(sym, label_names=None, update_freq=None)
    with pytest.raises(ValueError, match="positive"):
        SVRGModule(sym, label_names=None, update_freq=0)


def test_svrg_optimizer_assigns_full_keys_and_steps_the_others() -> None:
    opt = _SVRGOptimizer(default_optimizer="sgd", learning_rate=0.5, param_idx2name={0: "w", 1: "w_full"})
    assert opt.default_opt.lr == 0.5 and type(opt.default_opt).__name__ == "SGD"
    upd = mx.optimizer.get_updater(opt)
    w, w_full = torch.ones(3), torch.ones(3)
    upd(0, torch.full((3,), 2.0), w)
    upd(1, torch.full((3,), 7.0), w_full)
    upd("w_full", torch.full((3,), 4.0), w_full)  # a store keyed by names passes the name
    assert w.tolist() == [0.0, 0.0, 0.0] and w_full.tolist() == [4.0, 4.0, 4.0]
    assert mx.optimizer.create("_svrgoptimizer", default_optimizer="sgd").default_opt.lr == 0.01
