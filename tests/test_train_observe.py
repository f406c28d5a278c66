"""What ``mxtorch train`` shows of a running job (issue 30): ``--tensorboard DIR`` event files read back
with tensorboard's EventAccumulator, ``steps.jsonl`` and the per-rank summary, a deliberately slowed
rank named with its reason, and the SpanClock that splits a step into data, communication and the rest."""

from __future__ import annotations

import gzip
import json
import math
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from train_test_hooks import SLOW_DATA
from train_test_hooks import env as hooks_env

import mxtorch as mx
from mxtorch.cli.main import main
from mxtorch.cli.train_steps import slow_ranks
from mxtorch.profiler import span
from mxtorch.profiler.clock import COMM_SPANS, DATA_SPANS, SpanClock

ROOT = Path(__file__).resolve().parents[1]
STEP_TAGS = {"train/loss", "train/lr", "train/samples_per_sec"}
EPOCH_TAGS = {"train/accuracy", "val/accuracy"}


def _rank_tags(r: int) -> set[str]:
    return {f"rank{r}/step_time", f"rank{r}/data_wait", f"rank{r}/comm_wait"}


def _scalars(folder: Path) -> dict[str, list[float]]:
    """The scalars of the event file directly in ``folder``, by tag."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@pytest.fixture(scope="module")
def small_data(tmp_path_factory) -> str:
    """The first 1,024 training and 256 test images of the embedded Fashion-MNIST subset: 8 steps an
    epoch at --batch-size 128, so that a job's test takes seconds."""
    src, out = Path(mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT), tmp_path_factory.mktemp("fmnist")
    for prefix, n in (("train", 1024), ("t10k", 256)):
        for kind, header, item in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
            name = f"{prefix}-{kind}-ubyte.gz"
            raw = gzip.decompress((src / name).read_bytes())
            head = bytearray(raw[:header])
            struct.pack_into(">I", head, 4, n)  # the count, after the magic number
            (out / name).write_bytes(gzip.compress(bytes(head) + raw[header:header + n * item]))
    return str(out)


def _train_args(data: str, out: Path, *extra: str) -> list[str]:
    return ["train", "--model", "mlp", "--data-root", data, "--epochs", "1", "--batch-size", "128",
            "--lr", "0.1", "--no-progress", "--output", str(out / "run"), *extra]


def _steps(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "run" / "steps.jsonl").read_text().splitlines()]


# ---- the clock -------------------------------------------------------------------------------------
def test_span_clock_sums_each_group_once_on_its_own_thread():
    t = [0.0]

    def work(seconds: float) -> None:  # time passes by hand: no timing on a busy machine
        t[0] += seconds

    clock = SpanClock({"data": DATA_SPANS, "comm": COMM_SPANS}, now=lambda: t[0])
    with clock:
        with span("data.wait"):
            work(1)
        with span("pushpull") as sp, span("ps.push"):  # nested in its group: counted once
            assert not sp  # falsy: callers skip computing the arguments, as when nothing records
            work(2)
        with span("trainer.step"):  # in no group
            work(4)
        other = threading.Thread(target=lambda: [span("allreduce").__enter__(), work(8)])
        other.start()
        other.join()  # another thread's communication is not a wait of this one
        with span("allreduce.wait"):
            work(16)
    with span("data.wait"):  # stopped: no longer timed
        work(32)
    assert clock.seconds == {"data": 1, "comm": 18}


def test_span_clock_refuses_a_span_in_two_groups():
    with pytest.raises(ValueError, match="'allreduce' is in two groups"):
        SpanClock({"a": ["allreduce"], "b": ["allreduce"]})


# ---- the verdict -----------------------------------------------------------------------------------
def _rank(r: int, step: float, data: float, comm: float) -> dict:
    return {"rank": r, "step_s": step, "data_wait_s": data, "comm_wait_s": comm,
            "compute_s": step - data - comm}


def test_slow_ranks_names_the_rank_and_why():
    # synchronous: every step lasts as long as the slowest rank's; the others wait in the collective
    data = [_rank(0, 1.0, 0.01, 0.69), _rank(1, 1.0, 0.70, 0.0), _rank(2, 1.0, 0.01, 0.69)]
    assert [(s["rank"], s["reason"]) for s in slow_ranks(data)] == [(1, "data")]
    compute = [_rank(0, 1.0, 0.01, 0.5), _rank(1, 1.0, 0.01, 0.49), _rank(2, 1.0, 0.01, 0.0)]
    assert [(s["rank"], s["reason"]) for s in slow_ranks(compute)] == [(2, "compute")]
    # asynchronous: rank 1's own work is ordinary, its steps are long because it waits for a server
    waiting = [_rank(0, 0.3, 0.01, 0.09), _rank(1, 0.9, 0.01, 0.69), _rank(2, 0.3, 0.01, 0.09)]
    [s] = slow_ranks(waiting)
    assert (s["rank"], s["reason"]) == (1, "waiting") and s["slower_by"] == pytest.approx(2.0)
    even = [_rank(0, 1.0, 0.1, 0.3), _rank(1, 1.0, 0.1, 0.32), _rank(2, 1.05, 0.1, 0.3)]
    assert slow_ranks(even) == [] and slow_ranks(data[:1]) == []


# ---- mxtorch train ---------------------------------------------------------------------------------
def test_tensorboard_profile_and_steps_of_a_one_process_run(tmp_path, small_data, capsys):
    tb, prof = tmp_path / "tb", tmp_path / "prof"
    assert main(_train_args(small_data, tmp_path, "--tensorboard", str(tb), "--profile", str(prof))) == 0
    # --profile: mx.profiler over the 5 steps after the first
    trace = json.loads((prof / "profile.json").read_text())
    assert len([e for e in trace["traceEvents"] if e.get("name") == "mxtorch/trainer.step"]) == 5
    scalars = _scalars(tb)
    assert STEP_TAGS | EPOCH_TAGS | _rank_tags(0) <= set(scalars)
    assert len(scalars["train/loss"]) == 8 and len(scalars["val/accuracy"]) == 1
    # the rate each step used: MXNet's cosine schedule from --lr 0.1 to 0 over the run's 8 updates
    assert scalars["train/lr"] == pytest.approx([0.05 * (1 + math.cos(math.pi * k / 8)) for k in range(1, 9)])
    assert min(scalars["rank0/step_time"]) > 0 and min(scalars["train/samples_per_sec"]) > 0
    assert scalars["val/accuracy"][0] > 0.3  # it learned (chance: 0.1)
    steps = _steps(tmp_path)
    assert [(s["step"], s["rank"], s["samples"]) for s in steps] == [(i, 0, 128) for i in range(1, 9)]
    assert [s["loss"] for s in steps] == pytest.approx(scalars["train/loss"])
    assert all(s["step_s"] >= s["data_wait_s"] > 0 and s["comm_wait_s"] == 0 for s in steps)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    [r0] = metrics["ranks"]
    assert r0["rank"] == 0 and r0["steps"] == 7 and metrics["slow_ranks"] == []  # the first step warms up


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_two_workers_each_rank_own_tags_and_a_slowed_rank_is_named(tmp_path, small_data):
    """A 2-worker horovod job in which rank 1 waits 0.5 s more for every batch (MXTORCH_TEST_SLOW_DATA),
    far more than a step of this model takes even on a loaded machine."""
    tb = tmp_path / "tb"
    env = {**os.environ, **hooks_env(**{SLOW_DATA: "1:0.5"}), "MXTORCH_DIST_TIMEOUT": "120"}
    r = subprocess.run([sys.executable, "-m", "mxtorch.cli.main",
                        *_train_args(small_data, tmp_path, "--workers", "2", "--kvstore", "horovod",
                                     "--tensorboard", str(tb))],
                       capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    rank0, rank1 = _scalars(tb), _scalars(tb / "rank1")
    assert STEP_TAGS | EPOCH_TAGS | _rank_tags(0) <= set(rank0) and set(rank1) == _rank_tags(1)
    assert len(rank1["rank1/data_wait"]) == 8 and min(rank1["rank1/data_wait"]) >= 0.5
    steps = _steps(tmp_path)
    assert sorted((s["step"], s["rank"]) for s in steps) == [(i, r) for i in range(1, 9) for r in (0, 1)]
    assert all(s["samples"] == 64 for s in steps)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert [r["rank"] for r in metrics["ranks"]] == [0, 1]
    assert [(s["rank"], s["reason"]) for s in metrics["slow_ranks"]] == [(1, "data")]
    assert "slow rank: rank 1 is" in r.stdout and "data: it waits for batches" in r.stdout
    # rank 0 waited for rank 1 in the allreduce: its communication wait shows it
    assert metrics["ranks"][0]["comm_wait_s"] > metrics["ranks"][1]["comm_wait_s"]


def test_tensorboard_folder_that_cannot_be_made_is_one_line(tmp_path, small_data):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = subprocess.run([sys.executable, "-m", "mxtorch.cli.main",
                        *_train_args(small_data, tmp_path, "--tensorboard", str(blocker / "tb"))],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mxtorch train: error: --tensorboard {blocker / 'tb'}")
    assert "is a file" in lines[0]


def test_parameter_server_job_writes_the_servers_load(tmp_path, small_data):
    pytest.importorskip("mxtorch.kvstore.ps")
    tb = tmp_path / "tb"
    r = subprocess.run([sys.executable, "-m", "mxtorch.cli.main",
                        *_train_args(small_data, tmp_path, "--workers", "2", "--servers", "1", "--kvstore",
                                     "dist_sync", "--tensorboard", str(tb))],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "MXTORCH_DIST_TIMEOUT": "120"})
    assert r.returncode == 0, r.stderr[-3000:]
    scalars = _scalars(tb)
    server = {f"server0/{k}" for k in ("requests", "bytes_in", "bytes_out", "busy_s", "queue_wait_s",
                                        "busy_fraction")}
    assert server | STEP_TAGS | _rank_tags(0) <= set(scalars)
    # 8 steps of 2 workers, each pushing and pulling every parameter (and the statistics' sums)
    assert scalars["server0/requests"][-1] >= 16 and scalars["server0/bytes_in"][-1] > 0
    assert set(_scalars(tb / "rank1")) == _rank_tags(1)
    assert all(s["comm_wait_s"] > 0 for s in _steps(tmp_path))  # every step pushes and pulls


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_pipelined_job_writes_its_tags_steps_and_traces(tmp_path, small_data):
    """--pp 2: the two stages' ranks run the same hooks; waiting for the other stage is communication."""
    tb, prof = tmp_path / "tb", tmp_path / "prof"
    r = subprocess.run([sys.executable, "-m", "mxtorch.cli.main",
                        *_train_args(small_data, tmp_path, "--pp", "2", "--tensorboard", str(tb),
                                     "--profile", str(prof))],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "MXTORCH_DIST_TIMEOUT": "120"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert STEP_TAGS | {"val/accuracy"} | _rank_tags(0) <= set(_scalars(tb))
    assert set(_scalars(tb / "rank1")) == _rank_tags(1)
    rows = sorted((s["step"], s["rank"]) for s in _steps(tmp_path))
    assert rows == [(i, r) for i in range(1, 9) for r in (0, 1)]
    assert all(s["comm_wait_s"] > 0 for s in _steps(tmp_path))  # every step sends and receives
    for rank in (0, 1):
        trace = json.loads((prof / f"profile.rank{rank}.json").read_text())
        assert len([e for e in trace["traceEvents"] if e.get("name") == "mxtorch/trainer.step"]) == 5
