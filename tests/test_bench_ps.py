"""Smoke runs of bench/ps.py with tiny sizes: every part prints its table (no timings are checked)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench", "ps.py")
MXNET_PYTHON = os.path.join(ROOT, ".venv-mxnet", "bin", "python")
TINY = ["--size-mib", "2", "--keys", "2,1", "--servers", "1", "--rounds", "1", "--reps", "1",
        "--frame-mib", "0.5", "--timeout", "90"]


def _run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "MXTORCH_PS_"))}
    r = subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, timeout=150, env=env,
                       cwd=ROOT)
    assert r.returncode == 0, f"bench/ps.py failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.mark.slow  # a benchmark's end-to-end run (bench/ps.py); the store itself is tested elsewhere
def test_bandwidth_table_and_a_missing_mxnet_venv_left_out() -> None:
    out = _run(*TINY, "--parts", "bw", "--mxnet-python", os.path.join(ROOT, "no-such-venv", "bin", "python"))
    assert "(a) push+pull of a 2 MiB fp32 model" in out
    rows = [ln.split() for ln in out.splitlines() if ln.split()[:2] in (["1", "2"], ["1", "1"])]
    # servers, keys, data frames per push, largest frame (MiB)
    assert [r[:4] for r in rows] == [["1", "2", "2", "1.0"], ["1", "1", "1", "2.0"]], out
    assert "MXNet column left out" in out and "MXNet ms" not in out


@pytest.mark.slow  # a benchmark's end-to-end run (bench/ps.py); the store itself is tested elsewhere
def test_training_and_slowed_worker_tables() -> None:
    out = _run(*TINY, "--parts", "train,slow", "--steps", "1", "--warmup", "1", "--slow-steps", "2",
               "--slow-ms", "5", "--train-servers", "1")
    assert "(b) training step, mlp" in out and "ratio dist_sync/horovod" in out and "why:" in out
    stores = [ln.split()[0] for ln in out.splitlines() if ln.split()[:1] in (["dist_sync"], ["dist_async"])]
    assert stores == ["dist_sync", "dist_sync", "dist_async"], out
    assert "dist_async/dist_sync total throughput" in out


@pytest.mark.skipif(not os.path.exists(MXNET_PYTHON), reason="no .venv-mxnet with MXNet 1.9.1 here")
def test_mxnet_column_where_its_venv_exists() -> None:
    out = _run(*TINY, "--parts", "bw", "--keys", "2")
    assert "MXNet ms" in out and "MXNet column" not in out, out


@pytest.mark.slow  # a benchmark's end-to-end run (bench/ps.py --parts curve)
def test_curve_table_prints_both_transports_and_their_ratio() -> None:
    out = _run("--parts", "curve", "--curve-kib", "4,64", "--rounds", "1", "--timeout", "90")
    assert "(d) ZeroMQ CURVE encryption against plain ZeroMQ" in out
    rows = [ln.split() for ln in out.splitlines() if ln.split()[1:2] == ["KiB"]]
    assert [r[:2] for r in rows[:2]] == [["4", "KiB"], ["64", "KiB"]], out
    assert all(len(r) == 8 and float(r[5]) > 0 for r in rows), out  # plain, CURVE, ratio, latencies


@pytest.mark.slow  # a benchmark's end-to-end run (bench/ps.py --parts wal: 4 jobs)
def test_wal_table_prints_both_settings_and_their_ratio() -> None:
    out = _run("--parts", "wal", "--wal-rounds", "1", "--steps", "2", "--warmup", "1", "--wal-mib", "1",
               "--train-servers", "1", "--timeout", "90")
    assert "(e) write-ahead log on/off" in out
    for line in ("off", "on", "ratio on/off"):
        assert sum(ln.split()[0] == line.split()[0] for ln in out.splitlines() if ln.strip()) == 2, out
