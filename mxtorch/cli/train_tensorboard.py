"""``mxtorch train --tensorboard DIR``: the run's curves as TensorBoard event files
(:class:`TensorBoardHook`; the ``tensorboard`` extra reads them).

Worker 0 writes into ``DIR``: per step ``train/loss`` (its shard's mean loss), ``train/lr`` and
``train/samples_per_sec`` (the global batch over its step time), per epoch ``train/accuracy`` and
``val/accuracy`` (the whole job's), and in a parameter-server job each server's load from
``kv.server_stats()`` once an epoch (``server{s}/requests``, ``bytes_in``, ``bytes_out``,
``busy_s``, ``queue_wait_s``: totals since the server started, and ``busy_fraction``: its busy share
of the epoch).  Every rank ``r`` writes its own ``rank{r}/step_time``, ``rank{r}/data_wait`` and
``rank{r}/comm_wait`` (seconds) each step, rank 0 into ``DIR``, the others into ``DIR/rank{r}``.

Every rank writes its own numbers rather than sending them to rank 0: gathering each step would put a
collective (and rank 0's disk) on every step's critical path, and a rank that hangs or dies still
leaves its steps on disk (all but at most the last second's: the file is flushed once a second and
at every epoch's end), which is when they are wanted.  On several machines give a ``DIR``
they all reach (a shared folder), or collect the ``rank{r}`` folders afterwards.

The events are written by :class:`~mxtorch.contrib.tensorboard_events.ScalarEventFile` on the training
thread, one event per step holding all of its scalars: through ``torch.utils.tensorboard`` a step's
event cost ~80-100 us, most of it tensorboard's pure-Python CRC of the record on its writer thread
(see that module).
"""

from __future__ import annotations

import os
import time
from typing import Any

from .train_config import TrainConfig
from .train_hooks import TrainHook
from .train_steps import StepRecorder

__all__ = ["TensorBoardHook", "rank_folder"]


def rank_folder(folder: str, rank: int) -> str:
    """Where rank ``rank`` writes its event file: ``folder`` for rank 0, ``folder/rank{r}`` for the others."""
    return folder if rank == 0 else os.path.join(folder, f"rank{rank}")


class TensorBoardHook(TrainHook):
    """Writes the run's scalars (see the module's docstring); reads each step's numbers from ``steps``."""

    def __init__(self, cfg: TrainConfig, steps: StepRecorder) -> None:
        assert cfg.tensorboard is not None
        self.folder, self.steps = cfg.tensorboard, steps
        self.writer: Any = None
        self.global_batch = cfg.batch_size
        self._servers: list[dict[str, Any]] = []  # the servers' counters at the last reading
        self._servers_at = 0.0
        self._rank_tags: tuple[str, ...] = ()

    def on_start(self, run: Any) -> None:
        from ..contrib.tensorboard_events import ScalarEventFile

        self.writer = ScalarEventFile(rank_folder(self.folder, run.rank))
        self._rank_tags = tuple(f"rank{run.rank}/{k}" for k in ("step_time", "data_wait", "comm_wait"))
        if run.lead:
            self._servers, self._servers_at = self._server_stats(run), time.monotonic()

    def _write(self, scalars: dict[str, float], step: int) -> None:
        self.writer.add_scalars(scalars, step)

    def on_step(self, run: Any) -> None:
        row = self.steps.last
        if row is None:
            return
        step_tag, data_tag, comm_tag = self._rank_tags
        scalars = {step_tag: row.step_s, data_tag: row.data_wait_s, comm_tag: row.comm_wait_s}
        if run.lead:
            scalars["train/loss"] = row.loss
            scalars["train/lr"] = float(run.trainer.learning_rate)
            # the job's, in a synchronous job
            scalars["train/samples_per_sec"] = row.samples * run.n_workers / max(row.step_s, 1e-9)
        self._write(scalars, run.step)

    def on_epoch_end(self, run: Any, record: dict[str, Any]) -> None:
        if run.lead:
            scalars = {}
            if "train_acc" in record:  # the pipelined job measures no training accuracy
                scalars["train/accuracy"] = record["train_acc"]
            scalars["val/accuracy"] = record["test_acc"]
            scalars.update(self._servers_load(run))
            self._write(scalars, run.step)
        self.writer.flush()

    def _server_stats(self, run: Any) -> list[dict[str, Any]]:
        stats = getattr(run.kv, "server_stats", None)
        return list(stats()) if callable(stats) else []

    def _servers_load(self, run: Any) -> dict[str, float]:
        """Each server's load since it started, and its busy share since the last reading."""
        out: dict[str, float] = {}
        now, servers = time.monotonic(), self._server_stats(run)
        before_all: list[dict[str, Any]] = self._servers or [{} for _ in servers]
        for s, before in zip(servers, before_all):
            name = f"server{s.get('server', servers.index(s))}"
            totals = {k: 0.0 for k in ("requests", "bytes_in", "bytes_out", "busy_s", "queue_wait_s")}
            for counts in (s.get("commands") or {}).values():
                for k in totals:
                    totals[k] += float(counts.get(k, 0))
            for k, v in totals.items():
                out[f"{name}/{k}"] = v
            commands_before = before.get("commands") or {}
            busy_before = sum(float(c.get("busy_s", 0)) for c in commands_before.values())
            elapsed = now - self._servers_at
            if elapsed > 0:
                out[f"{name}/busy_fraction"] = (totals["busy_s"] - busy_before) / elapsed
        self._servers, self._servers_at = servers, now
        return out

    def on_end(self, run: Any) -> None:
        if self.writer is not None:
            self.writer.close()
