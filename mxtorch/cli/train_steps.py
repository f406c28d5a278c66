"""Every step of ``mxtorch train`` on every rank: its loss, samples and seconds, split into waiting for
data, waiting for communication and the rest (compute), as :class:`StepRecorder` (a
:class:`~.train_hooks.TrainHook`, always on).

* ``OUTPUT/steps.jsonl``: one line per step and rank (``step``, ``epoch``, ``rank``, ``loss`` of the
  rank's shard, ``samples``, ``step_s``, ``data_wait_s``, ``comm_wait_s``), written by worker 0 at the
  end of every epoch (the ranks' rows are gathered then: one collective an epoch, none a step).
* ``metrics.json``'s ``"ranks"``: each rank's means per step, and ``"slow_ranks"``: the ranks at least
  20 % slower than the median rank, with why (:func:`slow_ranks`), which the run also prints.

A step is the time from one ``on_step`` to the next (the first of an epoch from the end of the one
before: evaluation is not in it); waits are the seconds the training thread spent inside
``mxtorch/data.wait`` and inside the communication spans (:data:`~mxtorch.profiler.clock.COMM_SPANS`),
timed by a :class:`~mxtorch.profiler.clock.SpanClock` whether a profiler records or not.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

from .train_config import TrainConfig
from .train_hooks import TrainHook
from .train_stats import resumed_stats, sum_over_workers

__all__ = ["SLOW_FACTOR", "StepRecorder", "StepRow", "rank_summary", "slow_ranks"]

SLOW_FACTOR = 1.2
"""A rank whose own time (or step time) is this many times the median rank's is named as slow."""
_FIELDS = ("step", "loss", "samples", "step_s", "data_wait_s", "comm_wait_s")


class StepRow:
    """One training step of one rank."""

    __slots__ = _FIELDS

    def __init__(self, step: int, loss: float, samples: float, step_s: float, data_wait_s: float,
                 comm_wait_s: float) -> None:
        self.step, self.loss, self.samples = step, loss, samples
        self.step_s, self.data_wait_s, self.comm_wait_s = step_s, data_wait_s, comm_wait_s

    def values(self) -> list[float]:
        return [float(getattr(self, f)) for f in _FIELDS]


class _RankTotals:
    """A rank's sums over its steps (its first step after a start is left out: it compiles and warms up)."""

    def __init__(self) -> None:
        self.steps = 0
        self.samples = self.step_s = self.data_s = self.comm_s = 0.0

    def add(self, row: list[float]) -> None:
        _, _, samples, step_s, data_s, comm_s = row
        self.steps += 1
        self.samples += samples
        self.step_s += step_s
        self.data_s += data_s
        self.comm_s += comm_s


def rank_summary(rank: int, t: _RankTotals) -> dict[str, Any]:
    """A rank's means per step: step, data-wait, communication-wait and compute seconds, samples/s."""
    n = max(t.steps, 1)
    step, data, comm = t.step_s / n, t.data_s / n, t.comm_s / n
    return {"rank": rank, "steps": t.steps, "step_s": step, "data_wait_s": data, "comm_wait_s": comm,
            "compute_s": max(step - data - comm, 0.0), "samples_per_sec": t.samples / max(t.step_s, 1e-9)}


def slow_ranks(ranks: list[dict[str, Any]], factor: float = SLOW_FACTOR) -> list[dict[str, Any]]:
    """The ranks at least ``factor`` times slower than the median rank, and why.

    In a synchronous job every rank's step lasts as long as the slowest one's (the others wait for it
    in the collective), so a rank is compared by its own time, data-wait plus compute: over the
    median's, the reason is whichever of the two exceeds the median more (``data`` or ``compute``).
    A rank whose own time is ordinary but whose steps are longer (an asynchronous job, a slow link) is
    slow by ``waiting`` for communication."""
    if len(ranks) < 2:
        return []
    med = {k: statistics.median(r[k] for r in ranks) for k in ("data_wait_s", "compute_s", "comm_wait_s",
                                                                 "step_s")}
    own_median = med["data_wait_s"] + med["compute_s"]
    out = []
    for r in ranks:
        own = r["data_wait_s"] + r["compute_s"]
        if own_median > 0 and own >= factor * own_median:
            excess_data = r["data_wait_s"] - med["data_wait_s"]
            reason = "data" if excess_data >= r["compute_s"] - med["compute_s"] else "compute"
            key = "data_wait_s" if reason == "data" else "compute_s"
            out.append({"rank": r["rank"], "reason": reason, "slower_by": own / own_median - 1,
                        "seconds": r[key], "median_seconds": med[key]})
        elif med["step_s"] > 0 and r["step_s"] >= factor * med["step_s"]:
            out.append({"rank": r["rank"], "reason": "waiting", "slower_by": r["step_s"] / med["step_s"] - 1,
                        "seconds": r["comm_wait_s"], "median_seconds": med["comm_wait_s"]})
    return out


def describe_slow(s: dict[str, Any]) -> str:
    """One line saying which rank is slow and why."""
    what = {"data": "waits for batches", "compute": "computes",
            "waiting": "waits for communication"}[s["reason"]]
    return (f"slow rank: rank {s['rank']} is {100 * s['slower_by']:.0f}% slower than the median rank, "
            f"{s['reason']}: it {what} {s['seconds']:.3f} s a step (the median rank "
            f"{s['median_seconds']:.3f} s)")


class StepRecorder(TrainHook):
    """Times every step of this rank (see the module's docstring); :attr:`last` is the newest
    :class:`StepRow`, which later hooks (``--tensorboard``) read in their ``on_step``."""

    def __init__(self, cfg: TrainConfig) -> None:
        from ..profiler.clock import COMM_SPANS, DATA_SPANS, SpanClock

        self.cfg = cfg
        self.clock = SpanClock({"data": DATA_SPANS, "comm": COMM_SPANS})
        self.last: StepRow | None = None
        self.rows: list[StepRow] = []  # this epoch's, until they are gathered
        self.totals: dict[int, _RankTotals] = {}  # worker 0: every rank's, over the run
        self.first_step = -1  # the first step after this process started: left out of the totals
        self._t = self._data = self._comm = self._loss = self._seen = 0.0

    def _mark(self, run: Any, epoch_start: bool) -> None:
        self._t = time.perf_counter()
        self._data, self._comm = self.clock.seconds["data"], self.clock.seconds["comm"]
        if epoch_start:  # the loop starts the epoch's sums at 0, or at the resumed checkpoint's
            stats = run.resumed.get("stats") or []
            resuming = run.start_step and run.step == run.start_step and stats
            loss, _, seen = resumed_stats(stats, run.rank, run.n_workers) if resuming else (0.0, 0.0, 0.0)
            self._loss, self._seen = float(loss), float(seen)
        else:
            self._loss, self._seen = run.loss_sum, float(run.n_seen)

    def on_start(self, run: Any) -> None:
        self.clock.start()
        self.first_step = run.step + 1
        if run.lead:  # a resumed run may write into a new --output folder
            os.makedirs(self.cfg.output, exist_ok=True)
        if run.lead and not run.start_step:
            open(os.path.join(self.cfg.output, "steps.jsonl"), "w").close()  # a new run's file
        self._mark(run, epoch_start=True)

    def on_step(self, run: Any) -> None:
        now = time.perf_counter()
        samples = run.n_seen - self._seen
        row = StepRow(run.step, (run.loss_sum - self._loss) / max(samples, 1), samples, now - self._t,
                      self.clock.seconds["data"] - self._data, self.clock.seconds["comm"] - self._comm)
        self.rows.append(row)
        self.last = row
        self._mark(run, epoch_start=False)

    def on_epoch_end(self, run: Any, record: dict[str, Any]) -> None:
        per_rank = self._gather(run)
        if run.lead:
            self._write(run, per_rank)
        self.rows = []
        self._mark(run, epoch_start=True)

    def _gather(self, run: Any) -> list[list[list[float]]]:
        """Every rank's rows of this epoch, by rank (one collective; every rank has as many slots)."""
        mine = [r.values() for r in self.rows]
        if run.n_workers == 1:
            return [mine]
        k, cap = len(_FIELDS), max(len(run.train_loader), len(mine))
        width = 1 + k * cap
        slots = [0.0] * (width * run.n_workers)
        base = run.rank * width
        slots[base] = float(len(mine))
        for i, values in enumerate(mine):
            slots[base + 1 + i * k:base + 1 + (i + 1) * k] = values
        total = sum_over_workers(run.stats_kv, "step_stats", slots)
        out = []
        for r in range(run.n_workers):
            b = r * width
            out.append([total[b + 1 + i * k:b + 1 + (i + 1) * k] for i in range(int(total[b]))])
        return out

    def _write(self, run: Any, per_rank: list[list[list[float]]]) -> None:
        records = []
        for rank, rows in enumerate(per_rank):
            totals = self.totals.setdefault(rank, _RankTotals())
            for values in rows:
                row = dict(zip(_FIELDS, values))
                if int(row["step"]) != self.first_step:
                    totals.add(values)
                records.append({"step": int(row["step"]), "epoch": run.epoch + 1, "rank": rank,
                                "loss": row["loss"], "samples": int(row["samples"]), "step_s": row["step_s"],
                                "data_wait_s": row["data_wait_s"], "comm_wait_s": row["comm_wait_s"]})
        records.sort(key=lambda rec: (rec["step"], rec["rank"]))
        with open(os.path.join(self.cfg.output, "steps.jsonl"), "a") as f:
            f.write("".join(json.dumps(rec) + "\n" for rec in records))

    def on_end(self, run: Any) -> None:
        self.clock.stop()

    def report(self, run: Any) -> dict[str, Any]:
        if not run.lead:
            return {}
        ranks = [rank_summary(r, t) for r, t in sorted(self.totals.items())]
        slow = slow_ranks(ranks)
        for s in slow:
            run.say(describe_slow(s))
        return {"ranks": ranks, "slow_ranks": slow}
