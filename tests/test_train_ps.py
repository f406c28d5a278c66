"""``mxtorch train --workers N --servers M --kvstore dist_sync|dist_async``: training through the
parameter-server launch path (scheduler, servers and workers on this machine), on the embedded
Fashion-MNIST subset with a small MLP so that a run takes seconds."""

import json
import os
import subprocess
import sys

import pytest

import mxtorch as mx
from mxtorch.cli.main import main


def _has_ps() -> bool:
    try:
        import mxtorch.kvstore.ps  # noqa: F401
    except ImportError:
        return False
    return True


needs_ps = pytest.mark.skipif(not _has_ps(), reason="mxtorch.kvstore.ps (the parameter server) is missing")
FAST = ["--model", "mlp", "--data-root", mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT, "--epochs", "1",
        "--batch-size", "256", "--lr", "0.1", "--no-progress"]


def train_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "MXTORCH_DIST_TIMEOUT": "120"}
    return subprocess.run([sys.executable, "-m", "mxtorch.cli.main", "train", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@needs_ps
@pytest.mark.parametrize("kvstore", ["dist_sync", pytest.param("dist_async", marks=pytest.mark.slow)])
def test_train_two_workers_one_server(kvstore, tmp_path):
    out = tmp_path / "run"
    r = train_cli("--workers", "2", "--servers", "1", "--kvstore", kvstore, "--output", str(out), *FAST)
    assert r.returncode == 0, r.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["workers"] == 2 and metrics["config"]["servers"] == 1
    # it learned (chance is 0.1); asynchronous updates from stale weights learn more slowly
    assert metrics["final_test_acc"] > (0.6 if kvstore == "dist_sync" else 0.5)
    assert (out / "model.params").is_file()
    assert r.stdout.count("final held-out accuracy") == 1  # worker 0 alone reports
    assert f"workers: 2 x 128 ({kvstore} kvstore)" in r.stdout
    assert "did not exit" not in r.stderr  # the scheduler and server ended with the workers


def test_servers_need_a_parameter_server_kvstore():
    with pytest.raises(SystemExit, match="--servers 1 needs a parameter-server KVStore"):
        main(["train", "--workers", "2", "--servers", "1", "--kvstore", "allreduce", *FAST])


@needs_ps
def test_parameter_server_kvstore_needs_servers():
    with pytest.raises(SystemExit, match="--kvstore dist_sync needs parameter servers: add --servers"):
        main(["train", "--workers", "2", "--kvstore", "dist_sync", *FAST])


def test_servers_must_not_be_negative():
    with pytest.raises(SystemExit, match="--servers must be >= 0"):
        main(["train", "--servers", "-1", *FAST])
