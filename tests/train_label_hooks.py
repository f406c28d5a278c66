"""A test-only hook of ``mxtorch train`` (loaded through ``MXTORCH_TRAIN_HOOKS=train_label_hooks``):
every worker writes the labels of the training batches it got, per epoch, to
``$MXTORCH_TEST_LABELS_DIR/rank<r>.json``, so that a test can see which records each worker read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from mxtorch.cli.train_hooks import TrainHook

LABELS_DIR = "MXTORCH_TEST_LABELS_DIR"


class _RecordingLoader:
    """The run's training loader, noting each batch's labels."""

    def __init__(self, loader: Any, epochs: list[list[int]]) -> None:
        self.loader, self.epochs = loader, epochs

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        seen: list[int] = []
        self.epochs.append(seen)
        for data, label in self.loader:
            seen.extend(int(v) for v in label.reshape(-1).tolist())
            yield data, label


class RecordLabels(TrainHook):
    def __init__(self, folder: str) -> None:
        self.folder, self.epochs = folder, []  # type: ignore[var-annotated]

    def on_start(self, run: Any) -> None:
        run.train_loader = _RecordingLoader(run.train_loader, self.epochs)

    def on_end(self, run: Any) -> None:
        with open(os.path.join(self.folder, f"rank{run.rank}.json"), "w") as f:
            json.dump(self.epochs, f)


def train_hooks(run: Any) -> list[TrainHook]:
    folder = os.environ.get(LABELS_DIR)
    return [RecordLabels(folder)] if folder else []
