"""A test-only plugin of ``mxtorch train``'s loops (``MXTORCH_TRAIN_HOOKS=train_probe_hooks``): it
records on every rank which hook calls the loop made, the steps it counted and the Trainer's update
hooks, and writes them to ``MXTORCH_TEST_PROBE_DIR/rank<r>.json`` at the end (and into metrics.json)."""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from mxtorch.cli.train_hooks import TrainHook

PROBE_DIR = "MXTORCH_TEST_PROBE_DIR"


class Probe(TrainHook):
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.calls: Counter[str] = Counter()
        self.steps: list[int] = []
        self.update_hooks: list[str] = []

    def on_start(self, run: Any) -> None:
        self.calls["on_start"] += 1
        self.update_hooks = [h.name for h in run.trainer.update_hooks]  # the features' hooks came first

    def on_shapes(self, run: Any, x: Any) -> None:
        self.calls["on_shapes"] += 1

    def on_step(self, run: Any) -> None:
        self.steps.append(run.step)

    def on_epoch_end(self, run: Any, record: dict[str, Any]) -> None:
        self.calls["on_epoch_end"] += 1
        record["probe_epoch"] = self.calls["on_epoch_end"]

    def on_end(self, run: Any) -> None:
        self.calls["on_end"] += 1

    def report(self, run: Any) -> dict[str, Any]:
        seen = {"calls": dict(self.calls), "steps": self.steps, "update_hooks": self.update_hooks,
                "rank": run.rank}
        with open(os.path.join(self.folder, f"rank{run.rank}.json"), "w") as f:
            json.dump(seen, f)
        return {"probe": seen}


def train_hooks(run: Any) -> list[TrainHook]:
    return [Probe(os.environ[PROBE_DIR])]
