"""``mxtorch train --tensorboard DIR``: the run's curves as TensorBoard event files
(:class:`TensorBoardHook`, on ``torch.utils.tensorboard``; the ``tensorboard`` extra).

Worker 0 writes into ``DIR``: per step ``train/loss`` (its shard's mean loss), ``train/lr`` and
``train/samples_per_sec`` (the global batch over its step time), per epoch ``train/accuracy`` and
``val/accuracy`` (the whole job's), and in a parameter-server job each server's load from
``kv.server_stats()`` once an epoch (``server{s}/requests``, ``bytes_in``, ``bytes_out``,
``busy_s``, ``queue_wait_s``: totals since the server started, and ``busy_fraction``: its busy share
of the epoch).  Every rank ``r`` writes its own ``rank{r}/step_time``, ``rank{r}/data_wait`` and
``rank{r}/comm_wait`` (seconds) each step, rank 0 into ``DIR``, the others into ``DIR/rank{r}``.

Every rank writes its own numbers rather than sending them to rank 0: gathering each step would put a
collective (and rank 0's disk) on every step's critical path, and a rank that hangs or dies still
leaves its last steps on disk, which is when they are wanted.  On several machines give a ``DIR``
they all reach (a shared folder), or collect the ``rank{r}`` folders afterwards.
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

    def on_start(self, run: Any) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=rank_folder(self.folder, run.rank))
        if run.lead:
            self._servers, self._servers_at = self._server_stats(run), time.monotonic()

    def _write(self, scalars: dict[str, float], step: int) -> None:
        """``scalars`` as one event: a Summary holding every value costs a quarter of one
        ``add_scalar`` per value (measured: 62 us against 244-302 us for six, on a loaded machine)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(v)) for tag, v in scalars.items()])
        self.writer.file_writer.add_summary(summary, step)

    def on_step(self, run: Any) -> None:
        row, r = self.steps.last, run.rank
        if row is None:
            return
        scalars = {f"rank{r}/step_time": row.step_s, f"rank{r}/data_wait": row.data_wait_s,
                   f"rank{r}/comm_wait": row.comm_wait_s}
        if run.lead:
            scalars["train/loss"] = row.loss
            scalars["train/lr"] = float(run.trainer.learning_rate)
            # the job's, in a synchronous job
            scalars["train/samples_per_sec"] = row.samples * run.n_workers / max(row.step_s, 1e-9)
        self._write(scalars, run.step)

    def on_epoch_end(self, run: Any, record: dict[str, Any]) -> None:
        w = self.writer
        if run.lead:
            if "train_acc" in record:  # the pipelined job measures no training accuracy
                w.add_scalar("train/accuracy", record["train_acc"], run.step)
            w.add_scalar("val/accuracy", record["test_acc"], run.step)
            self._write_servers(run)
        w.flush()

    def _server_stats(self, run: Any) -> list[dict[str, Any]]:
        stats = getattr(run.kv, "server_stats", None)
        return list(stats()) if callable(stats) else []

    def _write_servers(self, run: Any) -> None:
        """Each server's load since it started, and its busy share since the last reading."""
        now, servers = time.monotonic(), self._server_stats(run)
        before_all: list[dict[str, Any]] = self._servers or [{} for _ in servers]
        for s, before in zip(servers, before_all):
            name = f"server{s.get('server', servers.index(s))}"
            totals = {k: 0.0 for k in ("requests", "bytes_in", "bytes_out", "busy_s", "queue_wait_s")}
            for counts in (s.get("commands") or {}).values():
                for k in totals:
                    totals[k] += float(counts.get(k, 0))
            for k, v in totals.items():
                self.writer.add_scalar(f"{name}/{k}", v, run.step)
            commands_before = before.get("commands") or {}
            busy_before = sum(float(c.get("busy_s", 0)) for c in commands_before.values())
            elapsed = now - self._servers_at
            if elapsed > 0:
                self.writer.add_scalar(f"{name}/busy_fraction", (totals["busy_s"] - busy_before) / elapsed,
                                       run.step)
        self._servers, self._servers_at = servers, now

    def on_end(self, run: Any) -> None:
        if self.writer is not None:
            self.writer.close()
