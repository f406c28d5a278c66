"""`mxtorch train --prune/--sparsity/--prune-*` and `--init-from/--freeze` on the embedded
Fashion-MNIST subset with the small MLP (one epoch: a few seconds each)."""

from __future__ import annotations

import json

import pytest
import torch

import mxtorch as mx
from mxtorch.cli import train as train_cli
from mxtorch.cli.main import main
from mxtorch.contrib import pruning

ROOT = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT
BASE = ["train", "--model", "mlp", "--data-root", ROOT, "--epochs", "1", "--batch-size", "256", "--lr", "0.1",
        "--no-progress"]


def saved_mlp(path, classes: int = 10) -> mx.gluon.HybridBlock:
    net = mx.gluon.model_zoo.vision.get_model("mlp", classes=classes)
    net.load_parameters(str(path))
    return net


def pretrained_mlp(path, classes: int = 10) -> mx.gluon.HybridBlock:
    """An initialized MLP, saved to ``path`` (a whole-model file for --init-from)."""
    net = mx.gluon.model_zoo.vision.get_model("mlp", classes=classes)
    net.initialize(mx.init.Xavier())
    net(torch.zeros(1, 1, 28, 28))
    net.save_parameters(str(path))
    return net


def tensors(net) -> dict[str, torch.Tensor]:
    return {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()}


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_prune_l1_reports_sparsity_and_saves_zeros(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*BASE, "--output", str(out), "--prune", "l1", "--sparsity", "0.8", "--prune-scope",
                 "layer"]) == 0  # the per-layer scope, by name (the default is global)
    metrics = json.loads((out / "metrics.json").read_text())
    sp = metrics["sparsity"]
    assert sp["total"] == pytest.approx(0.8, abs=1e-4)
    weights = [k for k in sp if k != "total"]
    assert len(weights) == 3 and all(v == pytest.approx(0.8, abs=1e-4) for k, v in sp.items())
    assert metrics["epochs"][0]["sparsity"] == pytest.approx(0.8, abs=1e-4)
    rep = metrics["pruning"]
    assert rep["method"] == "l1" and rep["begin_step"] == 0 and rep["end_step"] == rep["steps"] == 39
    assert rep["frequency"] == 1  # 39 steps: max(39 // 20, 1)
    # the saved file holds the zeros: 80% of every Dense weight
    net = saved_mlp(out / "model.params")
    for k, w in tensors(net).items():
        if k.endswith("weight"):
            assert float((w == 0).float().mean()) == pytest.approx(0.8, abs=1e-4), k
    assert rep["nonzero_parameters"] == sum(int((w != 0).sum()) for w in tensors(net).values())
    # an 80% sparse MLP still learns in one epoch (the dense one reaches ~0.68 here)
    assert metrics["final_test_acc"] > 0.6
    text = capsys.readouterr().out
    assert "pruning: l1 (layer) to sparsity 0.8" in text and "sparsity: 0.8000" in text


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_prune_global_scope_is_the_default(tmp_path, capsys):
    """One threshold over all weights (the default scope of l1/l2/random): 80% in all, the small
    output layer keeps more of its weights."""
    out = tmp_path / "run"
    assert main([*BASE, "--output", str(out), "--prune", "l1", "--sparsity", "0.8"]) == 0
    assert "pruning: l1 (global) to sparsity 0.8" in capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    sp = metrics["sparsity"]
    assert sp["total"] == pytest.approx(0.8, abs=1e-4) and metrics["pruning"]["scope"] == "global"
    per_layer = sorted(v for k, v in sp.items() if k != "total")
    assert per_layer[0] < 0.75 and per_layer[-1] > 0.8


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_gradual_schedule_during_training(tmp_path, monkeypatch):
    """The masks follow the polynomial schedule step by step: nothing before --prune-begin-step,
    updates every --prune-frequency steps, the final sparsity at the end of --prune-end-epoch,
    and they stay through the following epoch."""
    seen: list[tuple[int, float, float]] = []
    real_after_step = pruning.PruningUpdateHook.after_step

    def after_step(self, trainer, updated):  # the Trainer's update hook steps the attached Pruner
        real_after_step(self, trainer, updated)
        p = self.pruner
        seen.append((p.num_update, p.target_sparsity(), pruning.sparsity(p._net)["total"]))

    monkeypatch.setattr(pruning.PruningUpdateHook, "after_step", after_step)
    cfg = train_cli.TrainConfig(model="mlp", data_root=ROOT, epochs=2, batch_size=256, lr=0.1,
                                output=str(tmp_path), progress=False, prune="l2", sparsity=0.6,
                                prune_begin_step=5, prune_frequency=4)
    result = train_cli.train(cfg)
    assert [t for t, _, _ in seen] == list(range(1, 79))  # 39 steps an epoch, 2 epochs
    current = 0.0
    for t, target, total in seen:
        if t < 5:
            assert total == 0.0, t
        elif t <= 39 and ((t - 5) % 4 == 0 or t == 39):  # a mask update: the schedule's value
            current = target
        assert total == pytest.approx(current, abs=2e-4), t
    assert 0.0 < seen[12][2] < 0.6  # step 13: part of the way
    assert seen[38][2] == pytest.approx(0.6, abs=1e-4) and seen[-1][2] == pytest.approx(0.6, abs=1e-4)
    assert [e["sparsity"] for e in result["epochs"]] == pytest.approx([0.6, 0.6], abs=1e-4)
    assert result["pruning"]["end_step"] == 39  # --prune-end-epoch defaults to epochs - 1


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.timeout(600)
def test_prune_structured_compacts(tmp_path):
    out = tmp_path / "run"
    assert main([*BASE, "--output", str(out), "--prune", "structured", "--sparsity", "0.5"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    net = saved_mlp(out / "model.params")
    w = tensors(net)
    for k, rows in (("features.1", 256), ("features.2", 128)):  # half of the rows, with their biases
        dead = (w[f"{k}.weight"] == 0).all(1) & (w[f"{k}.bias"] == 0)
        assert int(dead.sum()) == rows // 2, k
    assert not bool((w["output.weight"] == 0).any())  # the network's outputs are never pruned
    x = torch.rand(4, 1, 28, 28)
    small = pruning.compact(net, x)
    n_small = sum(p.data().numel() for p in small.collect_params().values())
    assert metrics["pruning"]["compact_parameters"] == n_small
    assert n_small < 0.5 * metrics["pruning"]["parameters"]
    torch.testing.assert_close(small(x), net(x), atol=1e-5, rtol=1e-5)
    assert metrics["final_test_acc"] > 0.6


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_prune_on_two_contexts(tmp_path):
    cfg = train_cli.TrainConfig(model="mlp", data_root=ROOT, epochs=1, batch_size=256, lr=0.1,
                                ctx="cpu:0,cpu:1", output=str(tmp_path), progress=False, prune="l1",
                                sparsity=0.7)
    result = train_cli.train(cfg)
    assert result["sparsity"]["total"] == pytest.approx(0.7, abs=1e-4)
    net = saved_mlp(tmp_path / "model.params")
    assert pruning.sparsity(net)["total"] == pytest.approx(0.7, abs=1e-4)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("store", ["horovod", pytest.param("dist_sync", marks=pytest.mark.slow)])
def test_prune_with_two_workers(tmp_path, store):
    out = tmp_path / "run"
    extra = ["--servers", "1"] if store == "dist_sync" else []
    assert main([*BASE, "--output", str(out), "--prune", "l1", "--sparsity", "0.8", "--workers", "2",
                 "--kvstore", store, *extra]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["workers"] == 2
    assert metrics["sparsity"]["total"] == pytest.approx(0.8, abs=1e-4)
    assert pruning.sparsity(saved_mlp(out / "model.params"))["total"] == pytest.approx(0.8, abs=1e-4)
    assert metrics["final_test_acc"] > 0.6


@pytest.mark.timeout(600)
def test_init_from_with_another_class_count_and_freeze(tmp_path, capsys):
    f = tmp_path / "pretrained.params"
    src = pretrained_mlp(f, classes=5)  # another task's output layer
    before = tensors(src)
    out = tmp_path / "run"
    assert main([*BASE, "--output", str(out), "--init-from", str(f), "--freeze", r"features\.1\."]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    info = metrics["transfer"]["init_from"]
    assert sorted(info["loaded"]) == sorted(k for k in before if k.startswith("features."))
    assert info["shape_differs"] == {"output.weight": {"file": [5, 128], "model": [10, 128]},
                                     "output.bias": {"file": [5], "model": [10]}}
    assert sorted(info["kept"]) == ["output.bias", "output.weight"]
    frozen = metrics["transfer"]["frozen"]
    assert len(frozen) == 2 and all("dense0" in n for n in frozen)
    after = tensors(saved_mlp(out / "model.params"))
    assert torch.equal(after["features.1.weight"], before["features.1.weight"])  # frozen: unchanged
    assert torch.equal(after["features.1.bias"], before["features.1.bias"])
    assert not torch.equal(after["features.2.weight"], before["features.2.weight"])  # loaded, then trained
    assert after["output.weight"].shape == (10, 128)
    assert metrics["final_test_acc"] > 0.5
    text = capsys.readouterr().out
    assert "init: 4 of 6 parameters" in text and "output.weight (file (5, 128), model (10, 128))" in text


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.timeout(600)
def test_freeze_by_full_name_keeps_the_loaded_values(tmp_path):
    first = tmp_path / "a"
    assert main([*BASE, "--output", str(first)]) == 0
    out = tmp_path / "b"
    assert main([*BASE, "--output", str(out), "--init-from", str(first / "model.params"),
                 "--freeze", ".*_dense[01]_"]) == 0
    a, b = tensors(saved_mlp(first / "model.params")), tensors(saved_mlp(out / "model.params"))
    for k in ("features.1.weight", "features.1.bias", "features.2.weight", "features.2.bias"):
        assert torch.equal(a[k], b[k]), k
    assert not torch.equal(a["output.weight"], b["output.weight"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["transfer"]["frozen"]) == 4 and metrics["transfer"]["init_from"]["kept"] == []
    assert metrics["final_test_acc"] > 0.6  # a trained MLP's features, its head trained again


@pytest.mark.timeout(600)
def test_bad_flags(tmp_path):
    def refused(*argv: str, match: str) -> None:
        with pytest.raises(SystemExit, match=match):
            main([*BASE, "--output", str(tmp_path / "x"), *argv])

    refused("--sparsity", "0.8", match="needs --prune")
    refused("--prune-begin-step", "3", match="needs --prune")
    refused("--prune-scope", "global", match="needs --prune")
    refused("--prune", "structured", "--sparsity", "0.5", "--prune-scope", "global",
            match="within each layer")
    refused("--prune", "l1", match="needs --sparsity")
    refused("--prune", "l1", "--sparsity", "1.0", match=r"in \[0, 1\)")
    refused("--prune", "l1", "--sparsity", "0.5", "--prune-end-epoch", "2", match="between 1 and --epochs 1")
    refused("--prune", "l1", "--sparsity", "0.5", "--prune-frequency", "0", match="frequency")
    refused("--prune", "l1", "--sparsity", "0.5", "--prune-begin-step", "39", match="not before the end")
    refused("--prune", "l1", "--sparsity", "0.5", "--kvstore", "dist_async", "--workers", "2", "--servers",
            "1", match="asynchronous")
    refused("--prune", "l1", "--sparsity", "0.5", "--pp", "2", "--prune-scope", "global", match="pipelined")
    refused("--init-from", str(tmp_path / "nothing.params"), match="no such file")
    refused("--freeze", "(", match="not a regular expression")
    refused("--freeze", "nothing_matches", match="matches no parameter")
    refused("--freeze", ".*", match="matches every parameter")
    other = mx.gluon.nn.Dense(3, in_units=2)
    other.initialize()
    f = tmp_path / "other.params"
    other.save_parameters(str(f))
    refused("--init-from", str(f), match="none of its 2 parameters")
    with pytest.raises(SystemExit):  # argparse: an unknown method
        main([*BASE, "--prune", "l3", "--sparsity", "0.5"])
