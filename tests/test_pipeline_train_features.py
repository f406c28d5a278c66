"""`mxtorch train --pp 2` with the features that need the whole network: a checkpointed pipelined job
killed mid-epoch (SIGKILL, the test-only hook MXTORCH_TEST_KILL_AT_STEP) and resumed ends with the same
whole-model file and statistics as an uninterrupted run; `--init-from` a whole-model file, `--freeze`
and `--prune` (layer by layer, each rank its stages) on a pipelined job.  The small MLP on the
embedded Fashion-MNIST subset, one epoch of 19 steps (512 a batch), two pipeline stages."""

from __future__ import annotations

import json

import pytest
import torch
from test_checkpoint_cli import killed, train_cli
from test_pruning_cli import pretrained_mlp

from mxtorch.cli.main import main

PIPELINED = ["--pp", "2", "--micro-batches", "2", "--schedule", "gpipe", "--epochs", "1",
             "--batch-size", "512"]


def tensors(path) -> dict[str, torch.Tensor]:
    from mxtorch.gluon.serialization import load_tensors

    return {k: torch.as_tensor(v) for k, v in load_tensors(str(path)).items()}


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
@pytest.mark.timeout(900)
def test_pipelined_job_killed_mid_epoch_resumes_exactly(tmp_path):
    plain = tmp_path / "plain"
    r = train_cli([*PIPELINED, "--output", str(plain), "--checkpoint-dir", str(tmp_path / "ck_plain"),
                   "--checkpoint-every", "5"])
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    out, ck = tmp_path / "resumed", tmp_path / "ck"
    cmd = [*PIPELINED, "--output", str(out), "--checkpoint-dir", str(ck), "--checkpoint-every", "5",
           "--resume"]
    r = train_cli(cmd, kill_at=12)  # after step 12: the checkpoints of steps 5 and 10 are committed
    assert killed(r), (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    assert not (out / "model.params").exists()
    saved = sorted(p.name for p in (ck / "step-10").iterdir())
    assert "params.safetensors" in saved  # the whole model, gathered from both stages
    assert {"trainer.rank0.states", "trainer.rank1.states", "loader.rank0.json",
            "loader.rank1.json"} <= set(saved)
    r = train_cli(cmd)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "resumed from checkpoint step 10" in r.stdout
    assert (plain / "model.params").read_bytes() == (out / "model.params").read_bytes()
    a, metrics = (json.loads((d / "metrics.json").read_text()) for d in (plain, out))
    for ea, eb in zip(a["epochs"], metrics["epochs"], strict=True):  # a pipeline counts no accuracy
        assert [ea[k] for k in ("epoch", "train_loss", "test_acc")] == [eb[k] for k in ("epoch", "train_loss",
                                                                                      "test_acc")]
    assert metrics["checkpoint"]["resumed_from_step"] == 10
    # the checkpoint's parameters are the whole model: the plain network loads them
    whole = tensors(ck / "step-10" / "params.safetensors")
    assert sorted(whole) == sorted(tensors(plain / "model.params"))


@pytest.mark.timeout(600)
def test_init_from_freeze_and_pruning_on_a_pipelined_job(tmp_path):
    f = tmp_path / "pretrained.params"
    pretrained_mlp(f)
    before = tensors(f)
    out = tmp_path / "run"
    r = train_cli([*PIPELINED, "--output", str(out), "--init-from", str(f), "--freeze", r"features\.1\.",
                   "--prune", "l1", "--sparsity", "0.5", "--prune-end-epoch", "1"])
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    metrics = json.loads((out / "metrics.json").read_text())
    assert sorted(metrics["transfer"]["init_from"]["loaded"]) == sorted(before)  # into both stages
    assert len(metrics["transfer"]["frozen"]) == 2
    assert metrics["pruning"]["scope"] == "layer"  # a pipelined job ranks each layer's weights
    after = tensors(out / "model.params")
    for name in ("features.1.weight", "features.2.weight", "output.weight"):  # on both ranks
        zeros = float((after[name] == 0).float().mean())
        assert abs(zeros - 0.5) < 0.01, (name, zeros)
    kept = after["features.1.weight"] != 0  # frozen on rank 0: the file's values where not pruned
    assert torch.equal(after["features.1.weight"][kept], before["features.1.weight"][kept])
    assert torch.equal(after["features.1.bias"], before["features.1.bias"])
    assert not torch.equal(after["output.bias"], before["output.bias"])  # loaded on rank 1, then trained
    assert abs(metrics["sparsity"]["total"] - 0.5) < 0.01  # over both stages' weights
    assert metrics["pruning"]["nonzero_parameters"] < metrics["pruning"]["parameters"]


@pytest.mark.parametrize("argv, words", [
    (["--prune", "structured", "--sparsity", "0.5"], "compacts the whole network"),
    (["--prune", "l1", "--sparsity", "0.5", "--prune-scope", "global"], "use --prune-scope layer"),
])
def test_pruning_a_pipelined_job_refuses_what_needs_every_stage(tmp_path, argv, words):
    from test_checkpoint_cli import BASE

    with pytest.raises(SystemExit, match=words):
        main([*BASE, "--pp", "2", "--output", str(tmp_path / "x"), *argv])
