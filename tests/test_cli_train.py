import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import mxtorch as mx
from mxtorch.cli import train as train_cli
from mxtorch.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def test_train_mlp_on_embedded_subset(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["train", "--model", "mlp", "--data-root", mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT,
               "--epochs", "1", "--batch-size", "256", "--lr", "0.1", "--output", str(out), "--no-progress"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs"][0]["epoch"] == 1
    # a real model on real data learns: well above the 10 % of chance after one epoch
    assert metrics["final_test_acc"] > 0.6
    assert (out / "model.params").is_file()
    net = mx.gluon.model_zoo.vision.get_model("mlp", classes=10)
    net.load_parameters(str(out / "model.params"))
    text = capsys.readouterr().out
    assert "final held-out accuracy" in text and "Fashion-MNIST" in text


def test_train_two_contexts(tmp_path):
    cfg = train_cli.TrainConfig(model="mlp", data_root=mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT,
                                epochs=1, batch_size=256, ctx="cpu:0,cpu:1", output=str(tmp_path),
                                progress=False)
    result = train_cli.train(cfg)
    assert result["final_test_acc"] > 0.6


def test_default_dataset_falls_back_to_embedded(monkeypatch, tmp_path):
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "a"))
    monkeypatch.setenv("MXTORCH_HOME", str(tmp_path / "b"))
    from mxtorch.gluon.data.vision import datasets

    monkeypatch.setattr(datasets, "_SYSTEM_DIRS", {})
    cfg = train_cli.TrainConfig()
    _, test, desc = train_cli.load_datasets(cfg)
    assert "subset shipped with mxtorch" in desc and len(test) == 2000


def test_bad_flags():
    with pytest.raises(SystemExit):
        main(["train", "--ctx", "tpu:0", "--epochs", "1"])
    with pytest.raises(SystemExit):
        main(["train", "--dataset", "imagenet"])


def test_console_entry_point_help():
    r = subprocess.run([sys.executable, "-m", "mxtorch.cli.main", "train", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "--model" in r.stdout


def test_mxnet_lenet_script_runs_unchanged(monkeypatch, tmp_path):
    """examples/lenet_two_contexts.py is MXNet's script with only the import changed; run it on a
    small slice of the embedded data so the test stays fast."""
    vision = mx.gluon.data.vision
    real = vision.FashionMNIST

    def small(*args, **kwargs):
        kwargs.setdefault("root", vision.EMBEDDED_FASHION_MNIST_ROOT)
        return real(*args, **kwargs).take(512)

    monkeypatch.setattr(vision, "FashionMNIST", small)
    monkeypatch.chdir(tmp_path)
    g = runpy.run_path(str(ROOT / "examples" / "lenet_two_contexts.py"))
    assert (tmp_path / "lenet.params").is_file()
    net = g["net"]
    w = net[0].weight
    assert w.list_ctx() == [mx.cpu(0), mx.cpu(1)]
    import torch

    torch.testing.assert_close(w.data(mx.cpu(0)), w.data(mx.cpu(1)))  # replicas stay identical
