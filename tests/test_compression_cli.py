"""``mxtorch train --compression TYPE``: a real 2-worker job on the embedded subset, and the errors."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

import mxtorch as mx
from mxtorch.cli import train as train_cli
from mxtorch.cli.main import main

EMBEDDED = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT
needs_allreduce = pytest.mark.skipif(not mx.kv.is_registered("horovod"),
                                     reason="the 'horovod' (allreduce) KVStore is not registered")


def train_job(out, *extra, timeout=120):
    # a few batches: 10,000 images / global batch 1000 = 10 steps
    args = ["train", "--workers", "2", "--kvstore", "horovod", "--model", "mlp", "--data-root", EMBEDDED,
            "--epochs", "1", "--batch-size", "1000", "--lr", "0.1", "--output", str(out), "--no-progress",
            *extra]
    return subprocess.run([sys.executable, "-m", "mxtorch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "TMPDIR": str(out.parent)})


@needs_allreduce
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_two_worker_job_with_2bit_compression_records_it(tmp_path):
    out = tmp_path / "run"
    r = train_job(out, "--compression", "2bit", "--compression-threshold", "0.05")
    assert r.returncode == 0, r.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["config"]["compression"] == "2bit" and metrics["config"]["compression_threshold"] == 0.05
    comp = metrics["compression"]
    assert comp["params"] == {"type": "2bit", "threshold": 0.05, "residual_limit": 1.0}
    # 2bit packs 16 gradients into one int32 word; 10 steps, each payload sent to the one peer
    net = mx.gluon.model_zoo.vision.get_model("mlp", classes=10)
    net.initialize()
    net(torch.zeros(1, 1, 28, 28))
    words = sum(math.ceil(p.data().numel() / 16) for p in net.collect_params().values())
    assert comp["wire_bytes_sent"] == 10 * 4 * words
    assert 0.0 <= metrics["final_test_acc"] <= 1.0
    # the training statistics bypass the compressor: exact counts, not 2bit-quantized ones
    assert 0.0 <= metrics["epochs"][0]["train_acc"] <= 1.0 and metrics["epochs"][0]["train_loss"] > 0.1
    assert "compression: {'type': '2bit', 'threshold': 0.05, 'residual_limit': 1.0}" in r.stdout


@needs_allreduce
@pytest.mark.slow
@pytest.mark.parametrize("extra", [
    ["--compression", "1bit"], ["--compression", "fp16"], ["--compression", "bf16"],
    ["--compression", "topk", "--compression-ratio", "0.1"],
    ["--compression", "powersgd", "--compression-rank", "2"],
])
def test_every_compression_type_trains(tmp_path, extra):
    out = tmp_path / "run"
    r = train_job(out, *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["compression"]["params"]["type"] == extra[1]
    assert metrics["compression"]["wire_bytes_sent"] > 0


def test_compression_needs_several_workers():
    with pytest.raises(SystemExit, match="needs --workers 2|add --workers 2"):
        main(["train", "--compression", "2bit", "--epochs", "1"])


@pytest.mark.parametrize("argv, words", [
    (["--compression-threshold", "0.5"], "--compression-threshold needs --compression TYPE"),
    (["--compression", "2bit", "--compression-ratio", "0.1"], "--compression-ratio applies to --compression"),
    (["--compression", "topk", "--compression-rank", "2"], "--compression-rank applies to --compression "),
    (["--compression", "1bit", "--compression-residual-limit", "2"], "--compression-residual-limit applies"),
    (["--compression", "2bit", "--compression-residual-limit", "-1"], "residual_limit must be a finite"),
    (["--compression", "topk", "--compression-ratio", "2"], "topk ratio must be a number in"),
    (["--compression", "2bit", "--compression-threshold", "0"], "needs a threshold > 0"),
    (["--compression", "gzip"], ""),
])
def test_bad_compression_options_are_clear_errors(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--workers", "2", "--kvstore", "horovod", *argv])
    if words:
        assert words in str(e.value)
    else:  # argparse's own error names the choices
        assert "invalid choice: 'gzip'" in capsys.readouterr().err


def test_compression_params_from_config():
    cfg = train_cli.TrainConfig(compression="powersgd", compression_rank=4)
    assert train_cli.compression_params(cfg) == {"type": "powersgd", "rank": 4, "seed": 0}
    assert train_cli.compression_params(train_cli.TrainConfig()) is None
    # 2bit: a bounded residual unless told otherwise; 0 is MXNet's unbounded one
    two_bit = train_cli.TrainConfig(compression="2bit")
    assert train_cli.compression_params(two_bit) == {"type": "2bit", "threshold": 0.5, "residual_limit": 1.0}
    two_bit.compression_residual_limit = 0
    assert train_cli.compression_params(two_bit) == {"type": "2bit", "threshold": 0.5}


def test_the_plan_offers_zero_stages_that_can_apply_the_compressor():
    """A compressor whose payloads do not add up on the way to an owner (2bit, topk, ...) leaves the
    planner zero 0 and 1 only; a cast (fp16) every stage; no compressor every stage."""
    from mxtorch.cli.train_parallel import _zero_stages

    assert _zero_stages(train_cli.TrainConfig(compression="2bit")) == (0, 1)
    assert _zero_stages(train_cli.TrainConfig(compression="topk")) == (0, 1)
    assert _zero_stages(train_cli.TrainConfig(compression="fp16")) == (0, 1, 2, 3)
    assert _zero_stages(train_cli.TrainConfig()) == (0, 1, 2, 3)
