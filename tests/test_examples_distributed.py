"""examples/: one script per way of running distributed, each run through the real launcher
(``mxtorch launch ...``) exactly as its docstring tells a user, with its result checked: every
worker ends with the same weights, and a job that was disturbed (a killed worker, a lost host)
ends with the weights of an undisturbed run.

Marked slow: the five jobs start 15 processes, over 20 s together on this 2-core machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PY = sys.executable
TRUE_WEIGHT = [(i + 1) / 8 for i in range(8)]  # the examples' generated regression: y = X w + noise

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def run(*argv: str, tmp: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MXTORCH_TEST_")}
    env.update(TMPDIR=str(tmp), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run([PY, *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return done


def launch(*argv: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    return run("-m", "mxtorch.cli.main", "launch", *argv, tmp=tmp)


def lines(out: str, prefix: str) -> list[dict[str, str]]:
    """The ``key=value`` fields of each printed line that starts with ``prefix`` (after the launcher's
    ``[worker0]:`` label)."""
    found = []
    for line in out.splitlines():
        text = line.partition("]:")[2] if line.startswith("[") else line
        if text.startswith(prefix):
            found.append(dict(part.split("=", 1) for part in text.split() if "=" in part))
    return found


def weights(fields: dict[str, str]) -> list[float]:
    return [float(v) for v in fields["weight"].split(",")]


def check_trained_alike(out: str, workers: int) -> None:
    """Every worker printed its final weights; they agree and approach the generating weights."""
    finals = [f for f in lines(out, "rank=") if "weight" in f]
    assert sorted(int(f["rank"]) for f in finals) == list(range(workers)), out
    assert len({f["weight"] for f in finals}) == 1, finals
    assert max(abs(a - b) for a, b in zip(weights(finals[0]), TRUE_WEIGHT)) < 0.05, finals[0]
    losses = [float(f["loss"]) for f in lines(out, "rank=0 epoch=")]
    assert losses[-1] < losses[0] / 10, losses


def test_horovod(tmp_path: Path) -> None:
    done = launch("-n", "2", "python", "examples/horovod.py", tmp=tmp_path)
    check_trained_alike(done.stdout, 2)


def test_dist_sync_parameter_server(tmp_path: Path) -> None:
    done = launch("-n", "2", "-s", "1", "python", "examples/dist_sync.py", tmp=tmp_path)
    check_trained_alike(done.stdout, 2)
    finals = [f for f in lines(done.stdout, "rank=") if "type" in f]
    assert all(f["type"] == "dist_sync" and f["servers"] == "1" for f in finals)


def test_pipeline_times_data(tmp_path: Path) -> None:
    done = launch("-n", "4", "python", "examples/pipeline_data.py", "--output",
                  str(tmp_path / "whole.params"), tmp=tmp_path)
    epochs = lines(done.stdout, "dp_rank=")
    assert sorted((f["dp_rank"], f["pp_rank"]) for f in epochs if f["epoch"] == "0") == [
        ("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    for epoch in ("0", "1", "2"):  # train_step returns the global batch's mean loss on every rank
        assert len({f["loss"] for f in epochs if f["epoch"] == epoch}) == 1, epochs
    (whole,) = lines(done.stdout, "whole model:")
    assert whole["stages"] == "2" and whole["replicas"] == "2"
    assert float(whole["accuracy"]) > 0.9, whole


def _undisturbed(script: str, tmp: Path) -> list[float]:
    """The script's result in one process without the launcher: the reference."""
    done = run(f"examples/{script}", "--checkpoint-dir", str(tmp / "alone"), tmp=tmp)
    (final,) = [f for f in lines(done.stdout, "rank=") if "weight" in f]
    return weights(final)


def test_resume_after_a_kill(tmp_path: Path) -> None:
    reference = _undisturbed("resume.py", tmp_path)
    done = launch("-n", "2", "--max-restarts", "1", "python", "examples/resume.py", "--checkpoint-dir",
                  str(tmp_path / "ckpt"), "--crash-at-step", "13", tmp=tmp_path)
    starts = lines(done.stdout, "rank=")
    assert sorted(f["start_step"] for f in starts if "start_step" in f) == ["0", "0", "10", "10"], done.stdout
    finals = [f for f in starts if "weight" in f]
    assert len(finals) == 2 and all(f["end_step"] == "24" for f in finals)
    for final in finals:
        assert weights(final) == pytest.approx(reference, abs=1e-5)


def test_elastic_job_loses_a_worker(tmp_path: Path) -> None:
    reference = _undisturbed("elastic.py", tmp_path)
    done = launch("--elastic", "1:2", "-n", "2", "--rendezvous-timeout", "120", "python",
                  "examples/elastic.py", "--checkpoint-dir", str(tmp_path / "ckpt"), "--lose-worker-at-step",
                  "12", tmp=tmp_path)
    out = done.stdout + done.stderr
    starts = [(f["workers"], f["start_step"]) for f in lines(out, "rank=") if "start_step" in f]
    assert starts.count(("2", "0")) == 2 and ("1", "10") in starts, out[-5000:]
    assert "lost on the way: a1 (killed by SIGKILL)" in out
    (final,) = [f for f in lines(out, "rank=") if "weight" in f]
    assert final["workers"] == "1" and final["end_step"] == "24"
    assert weights(final) == pytest.approx(reference, abs=1e-5)
