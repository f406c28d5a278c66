"""mx.mod.Module: training equals the same job written with Gluon, the fit/score/predict loop, callbacks,
parameters, checkpoints (including one written by real MXNet 1.9.1) and clear errors.

Reference numbers come from a torch forward of the parameters (softmax of a two-layer MLP), torch
autograd, a Gluon Trainer job and MXNet 1.9.1's own files (tests/data/module/make_module_fixture.py).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.testing import assert_close

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.base import MXNetError
from mxtorch.module.executor_group import split_input_slice

FIXTURES = Path(__file__).resolve().parent / "data" / "module"
PARAMS = ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias")
SGD = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4}


# ---- helpers -------------------------------------------------------------------------------------
def mlp(fc1_weight: Any = None, **fc2_attr: str) -> Any:
    """data -> FullyConnected(8) -> relu -> FullyConnected(3) -> SoftmaxOutput."""
    data = mx.sym.Variable("data")
    kw = {} if fc1_weight is None else {"weight": fc1_weight}
    fc1 = mx.sym.FullyConnected(data, num_hidden=8, name="fc1", **kw)
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = mx.sym.FullyConnected(act, num_hidden=3, name="fc2", attr=fc2_attr or None)
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def dataset(n: int = 24, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    return rng.randn(n, 5).astype(np.float32), rng.randint(0, 3, size=n).astype(np.float32)


def initial_params(seed: int = 2) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shapes = {"fc1_weight": (8, 5), "fc1_bias": (8,), "fc2_weight": (3, 8), "fc2_bias": (3,)}
    return {k: torch.randn(s, generator=g) * 0.5 for k, s in shapes.items()}


def probs(params: dict[str, torch.Tensor], x: Any) -> torch.Tensor:
    """The MLP's softmax, computed directly with torch."""
    x = torch.as_tensor(np.asarray(x))
    h = torch.relu(x @ params["fc1_weight"].T + params["fc1_bias"])
    return torch.softmax(h @ params["fc2_weight"].T + params["fc2_bias"], dim=1)


def torch_grads(params: dict[str, torch.Tensor], x: Any,
                y: Any) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Gradients of the batch's summed cross-entropy (SoftmaxOutput's gradient is softmax - onehot for
    each row) with respect to the parameters and to the data, by torch autograd."""
    xt = torch.as_tensor(np.asarray(x)).clone().requires_grad_()
    p = {k: v.clone().requires_grad_() for k, v in params.items()}
    h = torch.relu(xt @ p["fc1_weight"].T + p["fc1_bias"])
    torch.nn.functional.cross_entropy(h @ p["fc2_weight"].T + p["fc2_bias"],
                                      torch.as_tensor(np.asarray(y)).long(), reduction="sum").backward()
    return {k: v.grad for k, v in p.items()}, xt.grad


def clone(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in params.items()}


def bound_module(batch: int = 4, init: dict[str, torch.Tensor] | None = None, **kwargs: Any) -> Any:
    mod = mx.mod.Module(mlp(), **kwargs)
    mod.bind(data_shapes=[("data", (batch, 5))], label_shapes=[("softmax_label", (batch,))])
    mod.init_params(arg_params=clone(init if init is not None else initial_params()))
    return mod


def module_job(context: Any, kvstore: Any, epochs: int = 3, batch: int = 8,
               **fit: Any) -> dict[str, torch.Tensor]:
    x, y = dataset()
    mod = mx.mod.Module(mlp(), context=context)
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=batch), num_epoch=epochs, arg_params=clone(initial_params()),
            kvstore=kvstore, optimizer="sgd", optimizer_params=SGD, **fit)
    return clone(mod.get_params()[0])


def gluon_job(epochs: int = 3, batch: int = 8) -> dict[str, torch.Tensor]:
    """The same training written with Gluon.  MXNet's Module optimizer gets the parameter names and
    then decays only ``*_weight``/``*_gamma`` (biases have wd_mult 0); Gluon's default is wd_mult 1
    for every parameter, so the biases are given wd_mult 0 here to be the same job."""
    x, y = dataset()
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(8, activation="relu", in_units=5), gluon.nn.Dense(3, in_units=8))
    net.initialize()
    init = initial_params()
    for p, name in zip(net.collect_params().values(), PARAMS, strict=True):
        p.set_data(init[name].clone())
        if name.endswith("_bias"):
            p.wd_mult = 0.0
    trainer = gluon.Trainer(net.collect_params(), "sgd", dict(SGD))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(epochs):
        for i in range(0, len(x), batch):
            xb, yb = torch.as_tensor(x[i : i + batch]), torch.as_tensor(y[i : i + batch])
            with autograd.record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            trainer.step(batch)
    values = net.collect_params().values()
    return {name: p.data().detach().clone() for p, name in zip(values, PARAMS, strict=True)}


def assert_params_close(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], **tol: Any) -> None:
    assert sorted(got) == sorted(want)
    for k in want:
        assert_close(got[k].float(), want[k].float(), msg=k, **(tol or {"atol": 1e-5, "rtol": 1e-5}))


# ---- Module == Gluon -----------------------------------------------------------------------------
@pytest.mark.parametrize("context,kvstore", [
    (mx.cpu(0), "local"),
    ([mx.cpu(0), mx.cpu(1)], "local"),
    ([mx.cpu(0), mx.cpu(1)], "device"),
], ids=["one-context", "two-contexts-local", "two-contexts-device"])
def test_module_training_equals_gluon(context, kvstore):
    want = gluon_job()
    got = module_job(context, kvstore)
    assert_params_close(got, want)
    # and training did move the parameters
    assert not torch.allclose(got["fc1_weight"], initial_params()["fc1_weight"], atol=1e-3)


def test_two_contexts_update_on_workers_equals_one_context(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    assert_params_close(module_job([mx.cpu(0), mx.cpu(1)], "local"), gluon_job())


def test_update_on_kvstore_rules(monkeypatch):
    one = bound_module()
    one.init_optimizer(kvstore="local", optimizer_params=SGD)
    assert one._kvstore is None and not one._update_on_kvstore  # one context: no store, as MXNet
    two = bound_module(context=[mx.cpu(0), mx.cpu(1)])
    two.init_optimizer(kvstore="device", optimizer_params=SGD)
    assert two._kvstore is not None and two._kvstore.type == "device" and two._update_on_kvstore
    assert two._optimizer.rescale_grad == 1 / 4
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "yes")
    three = bound_module(context=[mx.cpu(0), mx.cpu(1)])
    with pytest.raises(MXNetError, match="MXNET_UPDATE_ON_KVSTORE='yes'.*set it to 1"):
        three.init_optimizer(kvstore="local")
    monkeypatch.delenv("MXNET_UPDATE_ON_KVSTORE")
    with pytest.raises(TypeError, match="kvstore must be a name, a KVStore or None"):
        bound_module(context=[mx.cpu(0), mx.cpu(1)]).init_optimizer(kvstore=3)


# ---- the fit loop, metrics and callbacks ---------------------------------------------------------
def accuracy(prob: torch.Tensor, label: Any) -> float:
    return float((prob.argmax(1).float() == torch.as_tensor(np.asarray(label))).float().mean())


def cross_entropy(prob: torch.Tensor, label: Any) -> float:
    lab = torch.as_tensor(np.asarray(label)).long()
    return float(-torch.log(prob[torch.arange(len(lab)), lab]).mean())


def test_fit_speedometer_metric_and_checkpoint_callbacks(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    x, y = dataset()
    mod = mx.mod.Module(mlp())
    batches: list[tuple[int, int, torch.Tensor, np.ndarray]] = []
    epoch_params: dict[int, dict[str, torch.Tensor]] = {}

    def record(param: Any) -> None:  # runs after update: the outputs are those the metric saw
        batches.append((param.epoch, param.nbatch, mod.get_outputs()[0].clone(),
                        y[param.nbatch * 4 : param.nbatch * 4 + 4]))

    def keep(epoch: int, sym: Any, arg: dict[str, torch.Tensor], aux: dict[str, torch.Tensor]) -> None:
        assert sym is mod.symbol and aux == {}
        epoch_params[epoch] = clone(arg)

    prefix, mprefix = str(tmp_path / "net"), str(tmp_path / "mod")
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=4), num_epoch=2, arg_params=clone(initial_params()),
            optimizer_params=SGD,
            batch_end_callback=[record, mx.callback.Speedometer(4, frequent=2)],
            epoch_end_callback=[keep, mx.callback.do_checkpoint(prefix),
                                mx.callback.module_checkpoint(mod, mprefix, period=2,
                                                              save_optimizer_states=True)])
    assert [(e, n) for e, n, _, _ in batches] == [(e, n) for e in range(2) for n in range(6)]
    # Speedometer: a line at batches 2 and 4 of each epoch with the accuracy since the last line
    lines = [r.getMessage() for r in caplog.records if "Speed:" in r.getMessage()]
    assert len(lines) == 4, lines
    spans = {0: (0, 3), 1: (3, 5)}  # [0-2] covers batches 0..2 (the metric was reset after batch 2)
    for i, line in enumerate(lines):
        epoch, part = divmod(i, 2)
        lo, hi = spans[part]
        m = re.fullmatch(r"Epoch\[(\d)\] Batch \[(\d)-(\d)\]\tSpeed: [0-9.]+ samples/sec"
                         r"\taccuracy=([0-9.]+)", line)
        assert m, line
        assert (int(m[1]), int(m[2]), int(m[3])) == (epoch, 2 * part, 2 * part + 2)
        seen = [b for b in batches if b[0] == epoch and lo <= b[1] < hi]
        want = accuracy(torch.cat([b[2] for b in seen]), np.concatenate([b[3] for b in seen]))
        assert float(m[4]) == pytest.approx(want, abs=1e-6)
    # the epoch line reports the whole epoch (global values survive Speedometer's local resets)
    for epoch in range(2):
        seen = [b for b in batches if b[0] == epoch]
        want = accuracy(torch.cat([b[2] for b in seen]), np.concatenate([b[3] for b in seen]))
        msg = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"Epoch[{epoch}] Train-")]
        assert msg == [f"Epoch[{epoch}] Train-accuracy={want:f}"]
    # do_checkpoint numbers files from 1; module_checkpoint every 2 epochs, with optimizer states
    assert sorted(os.listdir(tmp_path)) == ["mod-0002.params", "mod-0002.states", "mod-symbol.json",
                                            "net-0001.params", "net-0002.params", "net-symbol.json"]
    for epoch in range(2):
        sym, arg, aux = mx.model.load_checkpoint(prefix, epoch + 1)
        assert sym.tojson() == mod.symbol.tojson() and aux == {}
        assert_params_close(arg, epoch_params[epoch], atol=0, rtol=0)


def test_begin_epoch_and_validation_metric(caplog):
    caplog.set_level(logging.INFO)
    x, y = dataset()
    vx, vy = dataset(10, seed=5)
    mod = mx.mod.Module(mlp())
    epochs: list[int] = []
    params: list[dict[str, torch.Tensor]] = []
    scores: list[tuple[int, list[tuple[str, float]]]] = []
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=8), eval_data=mx.io.NDArrayIter(vx, vy, batch_size=4),
            eval_metric="acc", validation_metric="ce", begin_epoch=2, num_epoch=4,
            arg_params=clone(initial_params()), optimizer_params=SGD,
            epoch_end_callback=lambda e, s, a, x_: (epochs.append(e), params.append(clone(a))),
            eval_end_callback=lambda p: scores.append((p.epoch, p.eval_metric.get_name_value())))
    assert epochs == [2, 3]  # begin_epoch=2, num_epoch=4: two epochs, numbered 2 and 3
    assert [e for e, _ in scores] == [2, 3]
    for (_, got), arg in zip(scores, params, strict=True):
        # the padded last validation batch repeats rows; MXNet's metric counts them (12 rows)
        rows = np.r_[np.arange(10), np.arange(2)]
        assert got[0][0] == "cross-entropy"
        assert got[0][1] == pytest.approx(cross_entropy(probs(arg, vx[rows]), vy[rows]), rel=1e-5)
    text = caplog.text
    assert "Epoch[2] Train-accuracy=" in text and "Epoch[3] Validation-cross-entropy=" in text
    assert "Epoch[0]" not in text and "Epoch[1]" not in text
    # the training matches two plain epochs from the same start
    assert_params_close(params[-1], module_job(mx.cpu(), "local", epochs=2))


def test_score_predict_and_iter_predict_drop_padding():
    init = initial_params()
    mod = bound_module(batch=4, init=init)
    x, y = dataset(10, seed=3)
    want = probs(init, x)
    it = mx.io.NDArrayIter(x, y, batch_size=4)  # batches of 4, 4 and 2 + 2 padding rows
    assert_close(mod.predict(it), want)
    outs = list(mod.iter_predict(it))
    assert [(len(o), o[0].shape, i, b.pad) for o, i, b in outs] == [
        (1, (4, 3), 0, 0), (1, (4, 3), 1, 0), (1, (2, 3), 2, 2)]
    assert_close(torch.cat([o[0] for o, _, _ in outs]), want)
    per_batch = mod.predict(it, merge_batches=False)
    assert [p[0].shape[0] for p in per_batch] == [4, 4, 2]
    assert_close(mod.predict(it, num_batch=1), want[:4])
    listed = mod.predict(it, always_output_list=True)
    assert isinstance(listed, list) and len(listed) == 1
    assert_close(listed[0], want)
    # a plain array is one batch (the executors are rebound for its 10 rows)
    assert_close(mod.predict(torch.as_tensor(x)), want)
    assert_close(mod.predict(x[:3]), want[:3])
    # score: the metric over every row the iterator gives (the padded batch is counted whole)
    rows = np.r_[np.arange(10), np.arange(2)]
    got = dict(mod.score(it, ["acc", "ce"]))
    assert got["accuracy"] == pytest.approx(accuracy(probs(init, x[rows]), y[rows]))
    assert got["cross-entropy"] == pytest.approx(cross_entropy(probs(init, x[rows]), y[rows]), rel=1e-5)
    seen: list[int] = []
    ends: list[int] = []
    mod.score(it, mx.metric.Accuracy(), num_batch=2, batch_end_callback=lambda p: seen.append(p.nbatch),
              score_end_callback=lambda p: ends.append(p.nbatch))
    assert seen == [0, 1] and ends == [2]


def test_predict_with_two_contexts_and_uneven_work_load():
    init = initial_params()
    mod = bound_module(batch=8, init=init, context=[mx.cpu(0), mx.cpu(1)], work_load_list=[1, 3])
    assert mod._exec_group.slices == [slice(0, 2), slice(2, 8)]
    x, y = dataset(8)
    assert_close(mod.predict(mx.io.NDArrayIter(x, y, batch_size=8)), probs(init, x))
    outs = mod.get_outputs(merge_multi_context=False)
    assert [o.shape[0] for o in outs[0]] == [2, 6]
    # the metric gets each context's outputs with its slice of the labels
    got = dict(mod.score(mx.io.NDArrayIter(x, y, batch_size=8), ["acc", "ce"]))
    assert got["accuracy"] == pytest.approx(accuracy(probs(init, x), y))
    assert got["cross-entropy"] == pytest.approx(cross_entropy(probs(init, x), y), rel=1e-5)


def test_split_input_slice_follows_mxnet_rounding():
    # MXNet: round(w * batch / total) per context, the last one takes what is left
    assert split_input_slice(10, [1, 1, 1]) == [slice(0, 3), slice(3, 6), slice(6, 10)]
    assert split_input_slice(9, [1, 2]) == [slice(0, 3), slice(3, 9)]
    assert split_input_slice(7, [0.5, 0.5]) == [slice(0, 4), slice(4, 7)]
    with pytest.raises(MXNetError, match="cannot be split over 3 contexts.*would get 0 samples"):
        split_input_slice(2, [1, 1, 1])
    with pytest.raises(MXNetError, match="must have a positive sum"):
        split_input_slice(4, [0, 0])


def test_work_load_list_training_equals_gluon():
    x, y = dataset()
    mod = mx.mod.Module(mlp(), context=[mx.cpu(0), mx.cpu(1)], work_load_list=[3, 1])
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=8), num_epoch=3, arg_params=clone(initial_params()),
            kvstore="local", optimizer_params=SGD)
    assert mod._exec_group.slices == [slice(0, 6), slice(6, 8)]
    assert_params_close(clone(mod.get_params()[0]), gluon_job())


# ---- parameters ----------------------------------------------------------------------------------
def test_get_params_and_set_params():
    init = initial_params()
    mod = bound_module(init=init, context=[mx.cpu(0), mx.cpu(1)])
    arg, aux = mod.get_params()
    assert_params_close(arg, init, atol=0, rtol=0)
    assert aux == {}
    arg["fc1_weight"] += 1.0  # a copy: the module is unchanged until set_params
    x, y = dataset(4)
    assert_close(mod.predict(torch.as_tensor(x)), probs(init, x))
    new = initial_params(seed=9)
    mod.set_params(clone(new), {})
    assert_close(mod.predict(torch.as_tensor(x)), probs(new, x))
    assert_params_close(mod.get_params()[0], new, atol=0, rtol=0)
    # allow_missing: only the given names change; extra names need allow_extra (MXNet ignores them)
    mod.set_params({"fc2_bias": torch.full((3,), 7.0)}, {}, allow_missing=True)
    got = mod.get_params()[0]
    assert_close(got["fc2_bias"], torch.full((3,), 7.0))
    assert_close(got["fc1_weight"], new["fc1_weight"])
    mod.set_params({**clone(new), "unused": torch.zeros(2)}, {})
    assert "unused" not in mod.get_params()[0]
    with pytest.raises(MXNetError, match=r"arg_params lacks 'fc1_weight'; pass allow_missing=True"):
        mod.set_params({"fc2_bias": torch.zeros(3)}, {})
    with pytest.raises(MXNetError, match=r"arg_params\['fc2_bias'\] has shape \(4,\), the module needs "
                                         r"\(3,\)"):
        mod.set_params({**clone(new), "fc2_bias": torch.zeros(4)}, {})
    with pytest.warns(UserWarning, match="already initialized and force_init=False"):
        mod.set_params(clone(init), {}, force_init=False)
    assert_params_close(mod.get_params()[0], new, atol=0, rtol=0)


def test_init_params_initializer_attributes_and_force_init():
    data = mx.sym.Variable("data")
    bias = mx.sym.Variable("fc1_bias", init=mx.init.Constant(0.5))  # its own initializer wins
    fc1 = mx.sym.FullyConnected(data, bias=bias, num_hidden=4, name="fc1")
    bn = mx.sym.BatchNorm(fc1, name="bn")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(bn, num_hidden=3, name="fc2"), name="softmax")
    mod = mx.mod.Module(net)
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_params(mx.init.Constant(0.25))
    arg, aux = mod.get_params()
    # what MXNet 1.9.1 gives for the same call: Constant fills weights; biases/beta 0, gamma 1,
    # moving mean 0 and moving var 1 by name; the variable's __init__ attribute overrides
    want = {"fc1_weight": 0.25, "fc1_bias": 0.5, "bn_gamma": 1.0, "bn_beta": 0.0, "fc2_weight": 0.25,
            "fc2_bias": 0.0}
    assert {k: torch.unique(v).tolist() for k, v in arg.items()} == {k: [v] for k, v in want.items()}
    assert {k: torch.unique(v).tolist() for k, v in aux.items()} == {"bn_moving_mean": [0.0],
                                                                     "bn_moving_var": [1.0]}
    with pytest.warns(UserWarning, match="init_params call ignored"):
        mod.init_params(mx.init.Constant(3.0))
    assert torch.unique(mod.get_params()[0]["fc1_weight"]).tolist() == [0.25]
    # force_init, values from arg_params where given and the initializer for the rest
    given = {"fc2_weight": torch.full((3, 4), 2.0)}
    with pytest.raises(MXNetError, match="arg_params lacks 'fc1_weight'; pass allow_missing=True"):
        mod.init_params(mx.init.Constant(3.0), arg_params=given, force_init=True)
    mod.init_params(mx.init.Constant(3.0), arg_params=given, allow_missing=True, force_init=True)
    arg, aux = mod.get_params()
    assert torch.unique(arg["fc2_weight"]).tolist() == [2.0]
    assert torch.unique(arg["fc1_weight"]).tolist() == [3.0]
    assert torch.unique(arg["fc1_bias"]).tolist() == [0.5]
    x = torch.randn(4, 5)
    mod.forward(mx.io.DataBatch([x], [torch.zeros(4)]), is_train=False)
    h = x @ arg["fc1_weight"].T + 0.5
    h = (h - 0) / torch.sqrt(torch.tensor(1.0 + 1e-3))  # inference BatchNorm with the moving stats
    assert_close(mod.get_outputs()[0], torch.softmax(h @ arg["fc2_weight"].T, 1))


def test_default_initializer_is_uniform_001():
    mod = mx.mod.Module(mlp())
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_params()
    arg = mod.get_params()[0]
    assert float(arg["fc1_weight"].abs().max()) <= 0.01 and float(arg["fc1_weight"].abs().max()) > 0
    assert torch.count_nonzero(arg["fc1_bias"]) == 0


def test_fixed_param_names_are_not_updated():
    x, y = dataset()
    init = initial_params()
    mod = mx.mod.Module(mlp(), fixed_param_names=["fc1_weight", "fc1_bias"])
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=8), num_epoch=2, arg_params=clone(init), optimizer_params=SGD)
    arg = mod.get_params()[0]
    assert_close(arg["fc1_weight"], init["fc1_weight"], atol=0, rtol=0)
    assert_close(arg["fc1_bias"], init["fc1_bias"], atol=0, rtol=0)
    assert not torch.allclose(arg["fc2_weight"], init["fc2_weight"], atol=1e-3)
    assert mod._exec_group.execs[0].grad_dict.get("fc1_weight") is None
    # the free layer trained exactly as plain SGD with momentum on the fixed features
    feats = torch.relu(torch.as_tensor(x) @ init["fc1_weight"].T + init["fc1_bias"])
    w = init["fc2_weight"].clone().requires_grad_()
    b = init["fc2_bias"].clone().requires_grad_()
    opt = torch.optim.SGD([{"params": [w], "weight_decay": 1e-4}, {"params": [b], "weight_decay": 0.0}],
                          lr=0.1, momentum=0.9)
    for _ in range(2):
        for i in range(0, 24, 8):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(feats[i : i + 8] @ w.T + b,
                                                     torch.as_tensor(y[i : i + 8]).long(), reduction="mean")
            loss.backward()
            opt.step()
    assert_close(arg["fc2_weight"], w.detach(), atol=1e-5, rtol=1e-5)
    assert_close(arg["fc2_bias"], b.detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("context", [mx.cpu(), [mx.cpu(0), mx.cpu(1)]], ids=["one", "two"])
def test_inputs_need_grad_gives_the_gradient_of_the_summed_loss(context):
    init = initial_params()
    mod = mx.mod.Module(mlp(), context=context)
    mod.bind([("data", (6, 5))], [("softmax_label", (6,))], inputs_need_grad=True)
    mod.init_params(arg_params=clone(init))
    x, y = dataset(6)
    mod.forward_backward(mx.io.DataBatch([torch.as_tensor(x)], [torch.as_tensor(y)]))
    grads, data_grad = torch_grads(init, x, y)
    (grad,) = mod.get_input_grads()
    assert_close(grad, data_grad)
    split = mod.get_input_grads(merge_multi_context=False)
    assert len(split[0]) == (2 if isinstance(context, list) else 1)
    for name in PARAMS:  # the parameter gradients, summed over the contexts
        got = sum(g.to("cpu") for g in mod._exec_group.grad_arrays[PARAMS.index(name)])
        assert_close(got, grads[name], msg=name)
    plain = bound_module()
    with pytest.raises(MXNetError, match="bind the module with inputs_need_grad=True"):
        plain.get_input_grads()


def test_lr_mult_and_wd_mult_from_symbol_attributes():
    """One SGD step by hand: w - lr * lr_mult * (grad / batch + wd * wd_mult * w)."""
    fc1_weight = mx.sym.Variable("fc1_weight", lr_mult=0.0)  # frozen through its attribute
    net = mlp(fc1_weight, __lr_mult__="3", __wd_mult__="2")   # fc2's weight and bias
    init = initial_params()
    mod = mx.mod.Module(net)
    mod.bind([("data", (6, 5))], [("softmax_label", (6,))])
    mod.init_params(arg_params=clone(init))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "wd": 0.01})
    assert mod._optimizer.lr_mult == {"fc1_weight": 0.0, "fc2_weight": 3.0, "fc2_bias": 3.0}
    assert mod._optimizer.wd_mult == {"fc1_bias": 0.0, "fc2_weight": 2.0, "fc2_bias": 2.0}
    x, y = dataset(6)
    grads, _ = torch_grads(init, x, y)
    mod.forward_backward(mx.io.DataBatch([torch.as_tensor(x)], [torch.as_tensor(y)]))
    mod.update()
    got = mod.get_params()[0]
    mults = {"fc1_weight": (0.0, 1.0), "fc1_bias": (1.0, 0.0), "fc2_weight": (3.0, 2.0),
             "fc2_bias": (3.0, 2.0)}
    for name, (lr_mult, wd_mult) in mults.items():
        w = init[name]
        want = w - 0.1 * lr_mult * (grads[name] / 6 + 0.01 * wd_mult * w)
        assert_close(got[name], want, msg=name)


# ---- checkpoints ---------------------------------------------------------------------------------
@pytest.mark.parametrize("context,kvstore", [
    (mx.cpu(), "local"),                      # the optimizer runs in the module (an updater)
    ([mx.cpu(0), mx.cpu(1)], "local"),        # the optimizer runs in the store
], ids=["updater", "store"])
def test_reload_with_optimizer_states_continues_identically(tmp_path, context, kvstore):
    x, y = dataset()
    prefix = str(tmp_path / "ck")

    def train(mod: Any, begin: int, end: int, **kw: Any) -> None:
        mod.fit(mx.io.NDArrayIter(x, y, batch_size=8), begin_epoch=begin, num_epoch=end, kvstore=kvstore,
                optimizer_params=SGD, **kw)

    straight = mx.mod.Module(mlp(), context=context)
    train(straight, 0, 4, arg_params=clone(initial_params()))
    first = mx.mod.Module(mlp(), context=context)
    train(first, 0, 2, arg_params=clone(initial_params()))
    first.save_checkpoint(prefix, 2, save_optimizer_states=True)
    assert {"ck-symbol.json", "ck-0002.params", "ck-0002.states"} <= set(os.listdir(tmp_path))
    resumed = mx.mod.Module.load(prefix, 2, load_optimizer_states=True, context=context)
    with pytest.warns(UserWarning, match="init_params call ignored"):  # as MXNet: the loaded values stay
        train(resumed, 2, 4)
    assert_params_close(resumed.get_params()[0], straight.get_params()[0], atol=1e-6, rtol=1e-6)
    # without the momentum buffers the run differs: the states were really used
    fresh = mx.mod.Module.load(prefix, 2, context=context)
    with pytest.warns(UserWarning, match="init_params call ignored"):
        train(fresh, 2, 4)
    assert not torch.allclose(fresh.get_params()[0]["fc1_weight"], straight.get_params()[0]["fc1_weight"],
                              atol=1e-4)


def test_model_save_and_load_checkpoint(tmp_path):
    sym = mlp()
    arg = initial_params()
    aux = {"bn_moving_var": torch.rand(4)}
    prefix = str(tmp_path / "m")
    mx.model.save_checkpoint(prefix, 12, sym, arg, aux)
    assert sorted(os.listdir(tmp_path)) == ["m-0012.params", "m-symbol.json"]
    sym2, arg2, aux2 = mx.model.load_checkpoint(prefix, 12)
    assert sym2.tojson() == sym.tojson()
    assert_params_close(arg2, arg, atol=0, rtol=0)
    assert_params_close(aux2, aux, atol=0, rtol=0)
    raw = mx.nd.load(f"{prefix}-0012.params")
    assert sorted(raw) == sorted([f"arg:{k}" for k in arg] + ["aux:bn_moving_var"])
    with pytest.raises(MXNetError, match=r"'.*m-0003.params' does not exist"):
        mx.model.load_checkpoint(prefix, 3)
    mx.nd.save(str(tmp_path / "bad-0001.params"), {"weight": torch.zeros(2)})
    with pytest.raises(MXNetError, match="has key 'weight'; a checkpoint has 'arg:NAME' / 'aux:NAME'"):
        mx.model.load_params(str(tmp_path / "bad"), 1)
    mx.nd.save(str(tmp_path / "list-0001.params"), [torch.zeros(2)])
    with pytest.raises(MXNetError, match="holds a list of arrays"):
        mx.model.load_params(str(tmp_path / "list"), 1)


def test_save_params_and_load_params(tmp_path):
    mod = bound_module()
    fname = str(tmp_path / "p.params")
    mod.save_params(fname)
    other = bound_module(init=initial_params(seed=5))
    other.load_params(fname)
    assert_params_close(other.get_params()[0], initial_params(), atol=0, rtol=0)
    mx.nd.save(str(tmp_path / "odd.params"), {"w": torch.zeros(2)})
    with pytest.raises(MXNetError, match="has key 'w'; expected 'arg:NAME' or 'aux:NAME'"):
        other.load_params(str(tmp_path / "odd.params"))


def test_checkpoint_written_by_mxnet_loads_and_predicts_what_mxnet_predicted():
    prefix = str(FIXTURES / "mxnet_mlp")
    with open(f"{prefix}-0001.params", "rb") as f:
        assert f.read(8) == (0x112).to_bytes(8, "little")  # MXNet's binary list magic, not safetensors
    ref = np.load(f"{prefix}-predict.npz")
    mod = mx.mod.Module.load(prefix, 1)
    assert mod.data_names == ["data"] and mod.label_names == ["softmax_label"]
    assert mod._param_names == ["fc1_weight", "fc1_bias", "bn_gamma", "bn_beta", "fc2_weight", "fc2_bias"]
    assert mod._aux_names == ["bn_moving_mean", "bn_moving_var"]
    batch = int(ref["batch_size"])
    mod.bind(data_shapes=[("data", (batch, 5))], label_shapes=[("softmax_label", (batch,))],
             for_training=False)
    test_x = ref["data"]
    got = mod.predict(mx.io.NDArrayIter(test_x, np.zeros(len(test_x), np.float32), batch_size=batch))
    assert got.shape == ref["prob"].shape
    assert_close(got, torch.as_tensor(ref["prob"]), atol=1e-5, rtol=1e-5)
    # the moving statistics were really used (they are far from the initial 0 / 1)
    aux = mod.get_params()[1]
    assert float((aux["bn_moving_var"] - 1).abs().max()) > 0.05


# ---- errors --------------------------------------------------------------------------------------
def test_unbound_and_uninitialized_modules_are_clear_errors():
    mod = mx.mod.Module(mlp())
    batch = mx.io.DataBatch([torch.zeros(4, 5)], [torch.zeros(4)])
    for call in (lambda: mod.forward(batch), lambda: mod.init_params(), lambda: mod.get_params(),
                 lambda: mod.init_optimizer(), lambda: mod.data_shapes,
                 lambda: mod.predict(mx.io.NDArrayIter(np.zeros((4, 5), np.float32), batch_size=4))):
        with pytest.raises(MXNetError, match=r"call bind\(\) first"):
            call()
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    for call in (lambda: mod.forward(batch), lambda: mod.get_params(), lambda: mod.init_optimizer(),
                 lambda: mod.score(mx.io.NDArrayIter(np.zeros((4, 5), np.float32), batch_size=4), "acc")):
        with pytest.raises(MXNetError, match=r"call init_params\(\) \(or set_params\) first"):
            call()
    mod.init_params()
    with pytest.raises(MXNetError, match=r"update: call init_optimizer\(\) first"):
        mod.update()
    with pytest.raises(MXNetError, match=r"save_optimizer_states: call init_optimizer\(\) first"):
        mod.save_optimizer_states("x.states")
    with pytest.raises(MXNetError, match="fit: num_epoch is required"):
        mod.fit(mx.io.NDArrayIter(np.zeros((4, 5), np.float32), np.zeros(4), batch_size=4))
    infer = mx.mod.Module(mlp())
    infer.bind([("data", (4, 5))], [("softmax_label", (4,))], for_training=False)
    infer.init_params()
    infer.forward(batch, is_train=False)
    with pytest.raises(MXNetError, match="bound with for_training=False"):
        infer.backward()


def test_wrong_names_and_shapes_are_clear_errors():
    with pytest.raises(ValueError, match=r"data name 'x' is not an argument of the symbol; its arguments"):
        mx.mod.Module(mlp(), data_names=["x"])
    with pytest.warns(UserWarning, match="label name 'lbl' is not an argument"):
        mx.mod.Module(mlp(), label_names=["lbl", "softmax_label"])
    with pytest.raises(TypeError, match="Module needs an mx.sym.Symbol, got str"):
        mx.mod.Module("net")
    with pytest.raises(TypeError, match="context must be mx.cpu"):
        mx.mod.Module(mlp(), context="cpu")
    with pytest.raises(MXNetError, match="work_load_list has 1 entries for 2 contexts"):
        mx.mod.Module(mlp(), context=[mx.cpu(0), mx.cpu(1)], work_load_list=[1])
    mod = mx.mod.Module(mlp())
    with pytest.raises(MXNetError, match=r"data_shapes name \['x'\], the module's data names are \['data'\]"):
        mod.bind([("x", (4, 5))], [("softmax_label", (4,))])
    with pytest.raises(MXNetError, match=r"label_shapes name \['y'\], the module's label names are"):
        mod.bind([("data", (4, 5))], [("y", (4,))])
    with pytest.raises(TypeError, match="expected \\(name, shape\\) pairs or DataDesc, got 5"):
        mod.bind([5])
    mod = bound_module(batch=4)
    # another input shape rebinds (MXNet's reshape), which must keep every parameter's shape
    with pytest.raises(MXNetError, match=r"need parameter 'fc1_weight' of shape \(\d+, 6\), but the module's "
                                         r"has \(\d+, 5\)"):
        mod.forward(mx.io.DataBatch([torch.zeros(4, 6)], [torch.zeros(4)]))
    with pytest.raises(MXNetError, match=r"the batch has 2 data arrays, the module takes 1 \(\['data'\]\)"):
        mod.forward(mx.io.DataBatch([torch.zeros(4, 5), torch.zeros(4, 5)], [torch.zeros(4)]))
    with pytest.raises(TypeError, match="optimizer must be a name or an mx.optimizer.Optimizer, got int"):
        mod.init_optimizer(optimizer=3)
    with pytest.raises(MXNetError, match=r"load_optimizer_states: call init_optimizer\(\) first"):
        mod.load_optimizer_states("nothing.states")
    mod.init_optimizer()
    with pytest.raises(MXNetError, match="'nothing.states' does not exist"):
        mod.load_optimizer_states("nothing.states")


def test_mismatched_manual_optimizer_rescale_grad_warns():
    mod = bound_module(batch=4)
    with pytest.warns(UserWarning, match=r"rescale_grad is 1.0, not 1/batch_size = 0.25"):
        mod.init_optimizer(optimizer=mx.optimizer.SGD(learning_rate=0.1))
    assert mod._optimizer.idx2name == dict(enumerate(PARAMS))


def test_a_smaller_last_batch_rebinds_and_keeps_parameters():
    init = initial_params()
    mod = bound_module(batch=4, init=init)
    x, y = dataset(3)
    mod.forward(mx.io.DataBatch([torch.as_tensor(x)], [torch.as_tensor(y)]), is_train=False)
    assert_close(mod.get_outputs()[0], probs(init, x))


def test_validation_batches_of_another_size_do_not_disturb_training():
    # scoring rebinds the executors for batches of 4 each epoch; training goes back to 8
    x, y = dataset()
    vx, vy = dataset(12, seed=4)
    mod = mx.mod.Module(mlp(), context=[mx.cpu(0), mx.cpu(1)])
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=8), eval_data=mx.io.NDArrayIter(vx, vy, batch_size=4),
            num_epoch=3, arg_params=clone(initial_params()), kvstore="local", optimizer_params=SGD)
    assert_params_close(clone(mod.get_params()[0]), gluon_job())


def test_two_contexts_without_a_store_update_each_copy_on_its_own_slice():
    # MXNet: with kvstore=None every context applies the optimizer to its own gradient
    init = initial_params()
    mod = bound_module(batch=8, init=init, context=[mx.cpu(0), mx.cpu(1)])
    mod.init_optimizer(kvstore=None, optimizer_params={"learning_rate": 0.1})
    assert mod._kvstore is None and mod._optimizer.rescale_grad == 1 / 8
    x, y = dataset(8)
    mod.forward_backward(mx.io.DataBatch([torch.as_tensor(x)], [torch.as_tensor(y)]))
    mod.update()
    for k, rows in enumerate((slice(0, 4), slice(4, 8))):
        grads, _ = torch_grads(init, x[rows], y[rows])
        for i, name in enumerate(PARAMS):
            assert_close(mod._exec_group.param_arrays[i][k], init[name] - 0.1 * grads[name] / 8, msg=name)


def test_speedometer_without_auto_reset_reports_from_the_epoch_start(caplog):
    caplog.set_level(logging.INFO)
    x, y = dataset()
    mod = mx.mod.Module(mlp())
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=4), num_epoch=1, arg_params=clone(initial_params()),
            batch_end_callback=mx.callback.Speedometer(4, frequent=2, auto_reset=False))
    lines = [r.getMessage() for r in caplog.records if "Speed:" in r.getMessage()]
    assert [line.split("\t")[0] for line in lines] == ["Epoch[0] Batch [0-2]", "Epoch[0] Batch [0-4]"]


def test_log_train_metric_and_progress_bar(caplog, capsys):
    caplog.set_level(logging.INFO)
    metric = mx.metric.Accuracy()
    metric.update([torch.tensor([0.0, 1.0])], [torch.tensor([[0.9, 0.1], [0.8, 0.2]])])
    cb = mx.callback.log_train_metric(2, auto_reset=True)
    cb(mx.model.BatchEndParam(epoch=1, nbatch=1, eval_metric=metric, locals=None))
    assert caplog.text == ""
    cb(mx.model.BatchEndParam(epoch=1, nbatch=2, eval_metric=metric, locals=None))
    assert "Iter[1] Batch[2] Train-accuracy=0.500000" in caplog.text
    assert metric.get_name_value() == [("accuracy", 0.0)] or np.isnan(metric.get_name_value()[0][1])
    mx.callback.ProgressBar(total=4, length=8)(mx.model.BatchEndParam(0, 1, None, None))
    assert capsys.readouterr().out == "[==------] 25%\r"


def test_predict_of_an_array_gives_the_first_output_as_mxnet():
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    net = mx.sym.Group([mx.sym.SoftmaxOutput(fc, name="softmax"), mx.sym.relu(fc)])
    mod = mx.mod.Module(net)
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))], for_training=False)
    mod.init_params(mx.init.Constant(0.1))
    x = np.random.randn(6, 5).astype(np.float32)
    logits = torch.as_tensor(x) @ torch.full((3, 5), 0.1).T
    got = mod.predict(x)
    assert isinstance(got, torch.Tensor)
    assert_close(got, torch.softmax(logits, 1))
    it = mx.io.NDArrayIter(x, np.zeros(6, np.float32), batch_size=4)
    both = mod.predict(it)  # an iterator: every output, padding removed
    assert len(both) == 2
    assert_close(both[1], torch.relu(logits))


def test_batchnorm_module_equals_gluon_with_moving_statistics():
    """Auxiliary states: BatchNorm's moving mean/var are updated by training forwards and come back
    from get_params.  The symbol's BatchNorm has eps 1e-3 (Gluon's default is 1e-5, set here);
    Module's optimizer does not decay beta (not ``*_weight``/``*_gamma``)."""
    x, y = dataset()
    d = mx.sym.Variable("data")
    bn = mx.sym.BatchNorm(mx.sym.FullyConnected(d, num_hidden=8, name="fc1"), fix_gamma=False, name="bn")
    fc2 = mx.sym.FullyConnected(mx.sym.Activation(bn, act_type="relu"), num_hidden=3, name="fc2")
    init = initial_params()
    init.update(bn_gamma=torch.rand(8) + 0.5, bn_beta=torch.randn(8) * 0.1)
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(fc2, name="softmax"))
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=8), num_epoch=2, arg_params=clone(init), optimizer_params=SGD)
    arg, aux = mod.get_params()
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(8, in_units=5), gluon.nn.BatchNorm(in_channels=8, epsilon=1e-3),
            gluon.nn.Activation("relu"), gluon.nn.Dense(3, in_units=8))
    net.initialize()
    names = ["fc1_weight", "fc1_bias", "bn_gamma", "bn_beta", "bn_moving_mean", "bn_moving_var", "fc2_weight",
             "fc2_bias"]
    params = list(net.collect_params().values())
    for p, n in zip(params, names, strict=True):
        if n in init:
            p.set_data(init[n].clone())
        if n.endswith(("_bias", "_beta")):
            p.wd_mult = 0.0
    trainer = gluon.Trainer(net.collect_params(), "sgd", dict(SGD))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(2):
        for i in range(0, 24, 8):
            with autograd.record():
                loss = loss_fn(net(torch.as_tensor(x[i : i + 8])), torch.as_tensor(y[i : i + 8]))
            loss.backward()
            trainer.step(8)
    want = {n: p.data().detach() for p, n in zip(params, names, strict=True)}
    assert_params_close({**arg, **aux}, want)
    assert float((aux["bn_moving_var"] - 1).abs().max()) > 0.05  # the statistics did move
