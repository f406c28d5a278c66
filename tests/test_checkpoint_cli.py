"""`mxtorch train --checkpoint-dir URI --checkpoint-every N --resume`: a run killed with SIGKILL
mid-epoch (the test-only hook MXTORCH_TEST_KILL_AT_STEP) and run again with --resume ends with a
model.params byte-identical to an uninterrupted run of the same command: one process, two horovod
workers, and two dist_sync workers with 2-bit compression and a parameter server (whose optimizer
states are in the checkpoint).  The small MLP on the embedded Fashion-MNIST subset, 2 epochs of
39 steps (256 a batch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
import train_test_hooks  # tests/ is on sys.path

import mxtorch as mx
from mxtorch.cli.main import main

ROOT = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT
BASE = ["train", "--model", "mlp", "--data-root", ROOT, "--epochs", "2", "--batch-size", "256", "--lr", "0.1",
        "--no-progress", "--threads", "1"]


def train_cli(args: list[str], kill_at: int | None = None, timeout: float = 240) -> Any:
    """``mxtorch train BASE args``; with ``args`` starting ``launch ... --``, the workers of
    ``mxtorch launch ...`` run it."""
    env = dict(os.environ)
    env.pop("MXTORCH_TEST_KILL_AT_STEP", None)
    if kill_at is not None:  # the test-only hook, loaded by every worker
        env.update(train_test_hooks.env(MXTORCH_TEST_KILL_AT_STEP=str(kill_at)))
    cli = [sys.executable, "-m", "mxtorch.cli.main"]
    if args[:1] == ["launch"]:
        cut = args.index("--")
        cmd = [*cli, *args[:cut], *cli, *BASE, *args[cut + 1:]]
    else:
        cmd = [*cli, *BASE, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def killed(r: subprocess.CompletedProcess) -> bool:
    return r.returncode in (-9, 137) or (r.returncode != 0 and "SIGKILL" in r.stdout + r.stderr)


def check_same_run(plain, resumed) -> dict:
    """model.params byte-identical, and the same per-epoch statistics in metrics.json."""
    assert (plain / "model.params").read_bytes() == (resumed / "model.params").read_bytes()
    a = json.loads((plain / "metrics.json").read_text())
    b = json.loads((resumed / "metrics.json").read_text())
    for ea, eb in zip(a["epochs"], b["epochs"], strict=True):
        for k in ("epoch", "train_loss", "train_acc", "test_acc"):
            assert ea[k] == eb[k], (k, ea, eb)
    return b


def run_killed_and_resumed(tmp_path, extra: list[str], kills: list[int], every: int = 10) -> tuple[dict, str]:
    """The same command (with --resume from the first run on) killed at each step of ``kills``,
    then run to the end; returns the last run's metrics and output."""
    out, ck = tmp_path / "resumed", tmp_path / "ckpt"
    cmd = [*extra, "--output", str(out), "--checkpoint-dir", str(ck), "--checkpoint-every", str(every),
           "--resume"]
    for k in kills:
        r = train_cli(cmd, kill_at=k)
        assert killed(r), (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
        assert not (out / "model.params").exists()
    r = train_cli(cmd)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    return json.loads((out / "metrics.json").read_text()), r.stdout


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_single_process_killed_twice_resumes_exactly(tmp_path):
    plain = tmp_path / "plain"
    r = train_cli(["--output", str(plain)])  # no checkpoints at all: saving must not change training
    assert r.returncode == 0, r.stderr[-3000:]
    # killed in epoch 1 (resumes from step 20 across the epoch boundary), then at step 53 in epoch 2
    metrics, text = run_killed_and_resumed(tmp_path, [], kills=[25, 53])
    assert "resumed from checkpoint step 50" in text and "(epoch 2, batch 11 of 39)" in text
    check_same_run(plain, tmp_path / "resumed")
    ck = metrics["checkpoint"]
    assert ck["resumed_from_step"] == 50 and ck["every_steps"] == 10 and ck["steps"] == [50, 60, 70]
    assert len(metrics["epochs"]) == 2


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_two_horovod_workers_killed_mid_epoch_resume_exactly(tmp_path):
    workers = ["launch", "-n", "2", "--", "--kvstore", "horovod"]  # mxtorch launch -n 2 mxtorch train ...
    plain = tmp_path / "plain"
    r = train_cli([*workers, "--output", str(plain)])
    assert r.returncode == 0, r.stderr[-3000:]
    metrics, text = run_killed_and_resumed(tmp_path, workers, kills=[45])
    assert "resumed from checkpoint step 40" in text
    check_same_run(plain, tmp_path / "resumed")
    assert metrics["workers"] == 2


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_dist_sync_2bit_with_a_server_killed_resumes_exactly(tmp_path):
    """The servers' optimizer states (momentum) and every worker's 2-bit residuals are restored."""
    job = ["launch", "-n", "2", "-s", "1", "--", "--kvstore", "dist_sync", "--compression", "2bit"]
    plain = tmp_path / "plain"
    r = train_cli([*job, "--output", str(plain)])
    assert r.returncode == 0, r.stderr[-3000:]
    metrics, text = run_killed_and_resumed(tmp_path, job, kills=[35])  # resumes from 30, in epoch 1
    assert "resumed from checkpoint step 30" in text
    check_same_run(plain, tmp_path / "resumed")
    assert metrics["compression"]["params"]["type"] == "2bit"


@pytest.mark.timeout(300)
def test_resume_falls_back_past_a_corrupt_checkpoint(tmp_path, capsys):
    """One epoch in this process; the newest checkpoint's parameters are corrupted, --resume
    says so, resumes from the one before and still ends with the same parameters."""
    one = [*BASE, "--epochs", "1"]
    ck = tmp_path / "ckpt"
    assert main([*one, "--output", str(tmp_path / "a"), "--checkpoint-dir", str(ck), "--checkpoint-every",
                 "10"]) == 0
    assert sorted(os.listdir(ck)) == ["step-10", "step-20", "step-30"]
    params = ck / "step-30" / "params.safetensors"
    data = bytearray(params.read_bytes())
    data[-1] ^= 0xFF
    params.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="step-30/params.safetensors fails its sha256.*Falling back to "
                                         "checkpoint step 20"):
        assert main([*one, "--output", str(tmp_path / "b"), "--checkpoint-dir", str(ck), "--resume"]) == 0
    assert "resumed from checkpoint step 20" in capsys.readouterr().out
    assert (tmp_path / "a" / "model.params").read_bytes() == (tmp_path / "b" / "model.params").read_bytes()


@pytest.mark.timeout(600)
@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_pruning_job_killed_mid_schedule_resumes_exactly(tmp_path):
    """--prune's masks and schedule position travel in the checkpoint: killed while the sparsity is
    still rising (epoch 1 of 2), the resumed run ends byte-identical to an uninterrupted one."""
    prune = ["--prune", "l1", "--sparsity", "0.6"]
    plain = tmp_path / "plain"
    r = train_cli([*prune, "--output", str(plain)])
    assert r.returncode == 0, r.stderr[-3000:]
    metrics, text = run_killed_and_resumed(tmp_path, prune, kills=[25])
    assert "resumed from checkpoint step 20" in text
    b = check_same_run(plain, tmp_path / "resumed")
    assert b["sparsity"] == json.loads((plain / "metrics.json").read_text())["sparsity"]
    assert metrics["sparsity"]["total"] > 0.3
    # the checkpoint's pruning state is refused by a run with other settings, and required by --prune
    other = [*BASE, "--output", str(tmp_path / "x"), "--checkpoint-dir", str(tmp_path / "ckpt"), "--resume"]
    with pytest.raises(SystemExit, match="other pruning settings"):
        main([*other, "--prune", "l1", "--sparsity", "0.7"])


@pytest.mark.parametrize("argv, words", [
    (["--resume"], "--resume needs --checkpoint-dir"),
    (["--checkpoint-every", "5"], "--checkpoint-every needs --checkpoint-dir"),
    (["--checkpoint-dir", "x", "--checkpoint-every", "0"], "--checkpoint-every must be >= 1"),
    (["--checkpoint-dir", "x", "--checkpoint-keep", "0"], "--checkpoint-keep must be >= 1"),
])
def test_option_errors(argv, words):
    with pytest.raises(SystemExit, match=words):
        main([*BASE, *argv])
