"""`mxtorch train` as a job: the mode each configuration and process placement gets (one table),
the hook interface of the training loop (a plugin module named in MXTORCH_TRAIN_HOOKS sees every
step, epoch and the end, and adds to the metrics and checkpoints), its user errors, and that the
test-only kill/pause hooks live in tests/, not in the product."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mxtorch as mx
from mxtorch.cli.main import main
from mxtorch.cli.train_config import TrainConfig
from mxtorch.cli.train_hooks import TrainHook
from mxtorch.cli.train_job import MODES, Placement, TrainJob

ROOT = mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT
PACKAGE = Path(__file__).resolve().parents[1] / "mxtorch"


def _at(world: int | None = None, elastic: bool = False) -> Placement:
    return Placement(world=world, elastic=elastic, argv=("train",))


@pytest.mark.parametrize(("cfg", "at", "mode"), [
    (TrainConfig(), _at(), "single"),
    (TrainConfig(ctx="cpu:0, cpu:1"), _at(), "replicas"),
    (TrainConfig(workers=2, kvstore="horovod"), _at(), "workers"),
    (TrainConfig(kvstore="allreduce"), _at(world=2), "workers"),  # a worker of `mxtorch launch -n 2`
    (TrainConfig(workers=2, servers=1, kvstore="dist_sync"), _at(), "servers"),
    (TrainConfig(pp=2), _at(), "pipelined"),
    (TrainConfig(dp=2, pp=2), _at(world=4), "pipelined"),
    (TrainConfig(plan="auto", workers=2), _at(), "planned"),
    (TrainConfig(kvstore="horovod", checkpoint_dir="c", resume=True), _at(world=2, elastic=True), "elastic"),
])
def test_each_configuration_gets_one_mode_from_the_table(cfg, at, mode):
    assert TrainJob(cfg, at).mode == mode
    assert [name for name, _, _ in MODES] == ["elastic", "planned", "pipelined", "servers", "workers",
                                              "replicas", "single"]


def test_a_planned_job_outside_a_launch_needs_workers():
    with pytest.raises(SystemExit, match="--plan auto chooses how to split the job"):
        TrainJob(TrainConfig(plan="auto"), _at()).run()


def test_pipelined_stages_must_fill_the_launched_job():
    with pytest.raises(SystemExit, match=r"--dp 2 x --pp 2 = 4 processes, but the job has 3"):
        TrainJob(TrainConfig(dp=2, pp=2), _at(world=3)).run()


# ---- hooks ------------------------------------------------------------------------------------
CALLS: list[tuple[str, Any]] = []


class Recorder(TrainHook):
    """Records what the loop shows a plugin hook."""

    def on_start(self, run: Any) -> None:
        CALLS.append(("start", run.step))

    def on_step(self, run: Any) -> None:
        CALLS.append(("step", run.step))

    def on_epoch_end(self, run: Any, record: dict[str, Any]) -> None:
        record["probe"] = run.step
        CALLS.append(("epoch", record["epoch"]))

    def on_end(self, run: Any) -> None:
        CALLS.append(("end", run.step))

    def report(self, run: Any) -> dict[str, Any]:
        return {"probe": {"steps": run.step}}


def train_hooks(run: Any) -> list[TrainHook]:
    """This module is itself a plugin: MXTORCH_TRAIN_HOOKS=test_train_job."""
    return [Recorder()]


def test_a_plugin_hook_sees_every_step_epoch_and_the_end(tmp_path, monkeypatch):
    monkeypatch.setenv("MXTORCH_TRAIN_HOOKS", "test_train_job")
    CALLS.clear()
    out = tmp_path / "run"
    rc = main(["train", "--model", "mlp", "--data-root", ROOT, "--epochs", "2", "--batch-size", "1024",
               "--output", str(out), "--no-progress", "--threads", "1"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    steps = [s for kind, s in CALLS if kind == "step"]
    per_epoch = len(steps) // 2
    assert per_epoch > 0 and steps == list(range(1, 2 * per_epoch + 1))
    assert CALLS[0] == ("start", 0) and CALLS[-1] == ("end", 2 * per_epoch)
    assert [s for kind, s in CALLS if kind == "epoch"] == [1, 2]
    assert CALLS.index(("epoch", 1)) == per_epoch + 1  # after the epoch's last step
    assert [e["probe"] for e in metrics["epochs"]] == [per_epoch, 2 * per_epoch]  # a hook extends the record
    assert metrics["probe"] == {"steps": 2 * per_epoch}


@pytest.mark.parametrize(("value", "message"), [
    ("not a module!", "'not a module!' is not a module name"),
    ("mxtorch_no_such_module", "cannot import module 'mxtorch_no_such_module'"),
    ("json", "module 'json' has no function train_hooks(run)"),
])
def test_a_bad_plugin_is_one_line_before_training(tmp_path, monkeypatch, capsys, value, message):
    monkeypatch.setenv("MXTORCH_TRAIN_HOOKS", value)
    with pytest.raises(SystemExit) as e:
        main(["train", "--model", "mlp", "--data-root", ROOT, "--output", str(tmp_path), "--no-progress"])
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert err.startswith("mxtorch train: error: ") and "MXTORCH_TRAIN_HOOKS" in err and message in err
    assert "data:" not in out  # refused before any data was loaded


def test_the_test_only_hooks_are_not_in_the_product():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        for name in ("MXTORCH_TEST_KILL_AT_STEP", "MXTORCH_TEST_KILL_HOST_AT_STEP",
                     "MXTORCH_TEST_PAUSE_AT_STEP", "MXTORCH_TEST_SLOW_DATA"):
            assert name not in text, f"{path}: {name} is test code"
