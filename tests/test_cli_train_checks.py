"""`mxtorch train` refuses every user error before it loads data or writes anything: one line
`mxtorch train: error: ...` on stderr, exit status 2, no traceback (unless --debug /
MXTORCH_DEBUG=1).  Each case runs the real command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import mxtorch as mx
from mxtorch.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
DATA = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT
NO_GPU = f"gpu:{torch.cuda.device_count() if torch.cuda.is_available() else 0}"  # one past the last


def mxtorch(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    variables = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "mxtorch.cli.main", *argv], capture_output=True, text=True,
                          timeout=300, env=variables, cwd=ROOT)


def train(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return mxtorch("train", "--model", "mlp", "--data-root", DATA, "--epochs", "1", "--batch-size", "256",
                   "--no-progress", "--output", str(tmp_path / "out"), *argv, env=env)


def refused_at_once(r: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit 2, one line naming the problem, and nothing started: train prints a line ('data: ...')
    as soon as the data is loaded and writes its output folder at the end."""
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mxtorch train: error: "), r.stderr[-2000:]
    assert all(w in lines[0] for w in words), lines[0]
    assert r.stdout == ""


@pytest.mark.parametrize("argv, words", [
    (["--output", "/proc/mxtorch-x"], ["--output /proc/mxtorch-x", "cannot write"]),
    (["--checkpoint-dir", "/proc/mxtorch-ck"], ["--checkpoint-dir /proc/mxtorch-ck", "cannot write"]),
    (["--model", "resnet9000"], ["--model 'resnet9000'", "lenet"]),
    (["--optimizer", "sgdd"], ["--optimizer 'sgdd'", "sgd"]),
    (["--ctx", NO_GPU], [f"--ctx '{NO_GPU}'", "not available"]),
], ids=["output", "checkpoint-dir", "model", "optimizer", "ctx"])
def test_user_errors_are_one_line_before_any_work(tmp_path, argv, words):
    r = train(tmp_path, *argv)
    refused_at_once(r, *words)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, words", [
    (["--checkpoint-dir", "nosuchfs://bucket/run"], ["--checkpoint-dir nosuchfs://bucket/run"]),
    (["--kvstore", "nosuchstore"], ["--kvstore 'nosuchstore'"]),
    (["--lr", "nan"], ["--lr", "nan"]),
    (["--wd", "-1"], ["--wd", "-1"]),
    (["--epochs", "0"], ["--epochs must be >= 1"]),
    (["--num-workers", "-1"], ["--num-workers must be >= 0"]),
    (["--micro-batches", "8"], ["--micro-batches", "--pp"]),
    (["--plan-memory", "8GiB"], ["--plan-memory", "--plan auto"]),
    (["--workers", "2", "--kvstore", "device"], ["only reduces gradients inside one process"]),
    (["--data-root", "/nonexistent-mxtorch-data"], ["--data-root /nonexistent-mxtorch-data"]),
    (["--output", "{tmp}/file/run"], ["is a file, not a folder"]),
])
def test_more_user_errors_in_process(tmp_path, capsys, argv, words):
    """The same rule through main() in this process (cheaper than a process per case)."""
    (tmp_path / "file").write_text("")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as e:
        main(["train", "--model", "mlp", "--data-root", DATA, "--epochs", "1", "--no-progress", "--output",
              str(tmp_path / "out"), *argv])
    assert e.value.code == 2
    out, err = capsys.readouterr()
    refused_at_once(subprocess.CompletedProcess([], 2, out, err), *words)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_debug_shows_the_traceback(tmp_path):
    for r in (train(tmp_path, "--model", "resnet9000", "--debug"),
              train(tmp_path, "--model", "resnet9000", env={"MXTORCH_DEBUG": "1"})):
        assert r.returncode == 2
        assert "Traceback" in r.stderr
        assert r.stderr.splitlines()[-1].startswith("mxtorch train: error: --model 'resnet9000'")


def test_other_subcommands_report_the_same_way():
    r = mxtorch("plan", "--cores", "-1", "--bandwidth", "10Gbit")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith("mxtorch plan: error: --cores")


def test_the_write_probe_leaves_nothing(tmp_path):
    from mxtorch.cli.train_checks import check_writable_folder

    check_writable_folder("--output", str(tmp_path))
    check_writable_folder("--output", str(tmp_path / "a" / "b"))  # made later, by the run
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit, match="cannot write there"):
        check_writable_folder("--output", "/proc/mxtorch-x")
