"""Event handlers of the Estimator's loop.

A handler subclasses the mixins of the events it reacts to (``TrainBegin``, ``EpochBegin``,
``BatchBegin``, ``BatchEnd``, ``EpochEnd``, ``TrainEnd``); the Estimator calls each event's
handlers in ascending ``priority`` (default 0).  ``batch_end`` / ``epoch_end`` returning True
stops the batch loop / the training.  ``batch_end`` receives ``batch``, ``pred``, ``label`` and
``loss`` as keywords (lists with one entry per context).
"""

from __future__ import annotations

import math
import os
import re
import time
import warnings
from typing import Any

from ....metric import CompositeEvalMetric, EvalMetric
from ....metric import Loss as LossMetric

__all__ = ["EventHandler", "TrainBegin", "TrainEnd", "EpochBegin", "EpochEnd", "BatchBegin", "BatchEnd",
           "StoppingHandler", "MetricHandler", "ValidationHandler", "LoggingHandler", "CheckpointHandler",
           "EarlyStoppingHandler", "GradientUpdateHandler", "check_metrics", "check_event_handlers"]


class EventHandler:
    """Base of all handlers."""


class TrainBegin(EventHandler):
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class TrainEnd(EventHandler):
    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class EpochBegin(EventHandler):
    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class EpochEnd(EventHandler):
    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        return False


class BatchBegin(EventHandler):
    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class BatchEnd(EventHandler):
    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        return False


def check_metrics(metrics: Any) -> list[EvalMetric]:
    """A metric, a composite metric or a list of metrics as a flat list."""
    if isinstance(metrics, CompositeEvalMetric):
        return [m for metric in metrics.metrics for m in check_metrics(metric)]
    if isinstance(metrics, EvalMetric):
        return [metrics]
    metrics = list(metrics or [])
    bad = [m for m in metrics if not isinstance(m, EvalMetric)]
    if bad:
        raise ValueError(f"metrics must be an EvalMetric or a list of them (mx.metric.*), got {bad[0]!r}")
    return metrics


def check_event_handlers(handlers: Any) -> list[EventHandler]:
    if isinstance(handlers, EventHandler):
        return [handlers]
    handlers = list(handlers or [])
    bad = [h for h in handlers if not isinstance(h, EventHandler)]
    if bad:
        raise ValueError(f"event_handlers must be an EventHandler or a list of them, got {bad[0]!r}")
    return handlers


def _improves(mode: str, name: str) -> str:
    """'max' or 'min': how ``mode`` compares a monitored metric ('auto': larger is better for
    accuracy and F1, smaller for everything else)."""
    if mode not in ("auto", "min", "max"):
        warnings.warn(f"mode {mode!r} is unknown: using 'auto'", RuntimeWarning, stacklevel=3)
        mode = "auto"
    if mode == "auto":
        return "max" if re.search("acc|f1", name.lower()) else "min"
    return mode


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stops after ``max_epoch`` epochs or ``max_batch`` batches (the Estimator adds one)."""

    def __init__(self, max_epoch: int | None = None, max_batch: int | None = None) -> None:
        self.max_epoch, self.max_batch = max_epoch, max_batch
        self.current_batch = self.current_epoch = 0
        self.stop_training = False

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.max_epoch, self.max_batch = estimator.max_epoch, estimator.max_batch
        self.current_batch = self.current_epoch = 0
        self.stop_training = False

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_batch += 1
        if self.current_batch == self.max_batch:
            self.stop_training = True
        return self.stop_training

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_epoch += 1
        if self.current_epoch == self.max_epoch:
            self.stop_training = True
        return self.stop_training


class MetricHandler(EpochBegin, BatchEnd):
    """Resets ``metrics`` at each epoch and updates them after each batch (a ``Loss`` metric
    with the losses, the others with labels and predictions)."""

    def __init__(self, metrics: Any, priority: float = -1000) -> None:
        self.metrics = check_metrics(metrics)
        self.priority = priority

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        for metric in self.metrics:
            metric.reset()

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        for metric in self.metrics:
            if isinstance(metric, LossMetric):
                metric.update(0, kwargs["loss"])
            else:
                metric.update(kwargs["label"], kwargs["pred"])
        return False


class ValidationHandler(TrainBegin, BatchEnd, EpochEnd):
    """Runs ``eval_fn(val_data=..., batch_axis=..., event_handlers=...)`` every ``epoch_period``
    epochs and/or every ``batch_period`` batches."""

    def __init__(self, val_data: Any, eval_fn: Any, epoch_period: int | None = 1,
                 batch_period: int | None = None, priority: float = -1000,
                 event_handlers: Any = None) -> None:
        self.val_data, self.eval_fn = val_data, eval_fn
        self.epoch_period, self.batch_period = epoch_period, batch_period
        self.priority = priority
        self.event_handlers = event_handlers
        self.current_batch = self.current_epoch = 0

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_batch = self.current_epoch = 0

    def _validate(self, estimator: Any) -> None:
        self.eval_fn(val_data=self.val_data, batch_axis=estimator.batch_axis,
                     event_handlers=self.event_handlers)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self._validate(estimator)
        return False

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self._validate(estimator)
        return False


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchBegin, BatchEnd):
    """Logs (through ``estimator.logger``) the learning rate, times and ``metrics`` at each epoch
    (``log_interval='epoch'``) or every ``log_interval`` batches.  Runs last (priority inf)."""

    def __init__(self, log_interval: int | str = "epoch", metrics: Any = None,
                 priority: float = math.inf) -> None:
        if not isinstance(log_interval, int) and log_interval != "epoch":
            raise ValueError(f"log_interval must be an int or 'epoch', got {log_interval!r}")
        self.metrics = check_metrics(metrics)
        self.log_interval = log_interval
        self.priority = priority
        self.batch_index = self.current_epoch = self.processed_samples = 0
        self.interval_time = 0.0
        self.train_start = self.epoch_start = self.batch_start = 0.0

    def _metric_text(self) -> str:
        parts = []
        for metric in self.metrics:
            name, value = metric.get()
            parts.append(f"{name}: {value:.4f}")
        return ", ".join(parts)

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.train_start = time.time()
        trainer = estimator.trainer
        estimator.logger.info("Training begin: using optimizer %s with current learning rate %.4f",
                              type(trainer.optimizer).__name__, trainer.learning_rate)
        if estimator.max_epoch:
            estimator.logger.info("Train for %d epochs.", estimator.max_epoch)
        else:
            estimator.logger.info("Train for %d batches.", estimator.max_batch)
        self.batch_index = self.current_epoch = self.processed_samples = 0
        self.interval_time = 0.0

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        took = time.time() - self.train_start
        estimator.logger.info("Train finished using total %ds with %d epochs. %s", took, self.current_epoch,
                              self._metric_text())

    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(self.log_interval, int):
            self.batch_start = time.time()

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        if isinstance(self.log_interval, int):
            self.interval_time += time.time() - self.batch_start
            self.processed_samples += len(kwargs["batch"][0])
            if self.batch_index % self.log_interval == 0:
                estimator.logger.info("[Epoch %d][Batch %d][Samples %d] time/interval: %.3fs %s",
                                      self.current_epoch, self.batch_index, self.processed_samples,
                                      self.interval_time, self._metric_text())
                self.interval_time = 0.0
        self.batch_index += 1
        return False

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.epoch_start = time.time()
        if any("training" in m.name for m in self.metrics):
            estimator.logger.info("[Epoch %d] Begin, current learning rate: %.4f", self.current_epoch,
                                  estimator.trainer.learning_rate)
        else:
            estimator.logger.info("Validation Begin")

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        estimator.logger.info("[Epoch %d] Finished in %.3fs, %s", self.current_epoch,
                              time.time() - self.epoch_start, self._metric_text())
        self.current_epoch += 1
        self.batch_index = 0
        return False


class GradientUpdateHandler(BatchEnd):
    """``trainer.step(batch size)`` after each batch, the size summed over the contexts' losses
    (runs first: priority -2000)."""

    def __init__(self, priority: float = -2000) -> None:
        self.priority = priority

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        loss = kwargs["loss"]
        losses = loss if isinstance(loss, list) else [loss]
        estimator.trainer.step(sum(int(each.shape[0]) for each in losses))
        return False


class EarlyStoppingHandler(TrainBegin, EpochEnd, TrainEnd):
    """Stops training when ``monitor`` (one of the estimator's metrics) has not improved by more
    than ``min_delta`` for ``patience`` epochs (``baseline``: the value to beat first)."""

    def __init__(self, monitor: EvalMetric, min_delta: float = 0, patience: int = 0, mode: str = "auto",
                 baseline: float | None = None) -> None:
        if not isinstance(monitor, EvalMetric) or isinstance(monitor, CompositeEvalMetric):
            raise ValueError("monitor must be one (non-composite) metric from estimator.train_metrics or "
                             f"estimator.val_metrics, got {monitor!r}")
        self.monitor, self.baseline, self.patience = monitor, baseline, patience
        self.mode = _improves(mode, monitor.get()[0])
        self.min_delta = abs(min_delta) if self.mode == "max" else -abs(min_delta)
        self.wait = self.stopped_epoch = self.current_epoch = 0
        self.stop_training = False
        self.best = 0.0

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.wait = self.stopped_epoch = self.current_epoch = 0
        self.stop_training = False
        worst = -math.inf if self.mode == "max" else math.inf
        self.best = self.baseline if self.baseline is not None else worst

    def _better(self, value: float) -> bool:
        shifted = value - self.min_delta
        return shifted > self.best if self.mode == "max" else shifted < self.best

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        name, value = self.monitor.get()
        if math.isnan(value):
            warnings.warn(f"{name} is not updated: monitor one of estimator.train_metrics / val_metrics",
                          RuntimeWarning, stacklevel=2)
        elif self._better(value):
            self.best, self.wait = value, 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch, self.stop_training = self.current_epoch, True
        self.current_epoch += 1
        return self.stop_training

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.stopped_epoch > 0:
            estimator.logger.info("[Epoch %d] EarlyStoppingHandler: early stopping due to %s not improving",
                                  self.stopped_epoch, self.monitor.get()[0])


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Saves ``{model_prefix}-epoch{E}batch{B}.params`` (``net.save_parameters``) and ``.states``
    (``trainer.save_states``) in ``model_dir`` every ``epoch_period`` epochs and/or
    ``batch_period`` batches, keeping the last ``max_checkpoints``; with ``save_best`` also
    ``{model_prefix}-best`` when ``monitor`` improves.  ``resume_from_checkpoint`` loads the
    latest checkpoint there at train begin and trains only what is left."""

    _NAME = re.compile(r"epoch(\d+)batch(\d+)\.params$")

    def __init__(self, model_dir: str, model_prefix: str = "model", monitor: EvalMetric | None = None,
                 verbose: int = 0, save_best: bool = False, mode: str = "auto", epoch_period: int | None = 1,
                 batch_period: int | None = None, max_checkpoints: int = 5,
                 resume_from_checkpoint: bool = False) -> None:
        if save_best and not isinstance(monitor, EvalMetric):
            raise ValueError("save_best needs a monitor: one of estimator.train_metrics / val_metrics")
        os.makedirs(model_dir, exist_ok=True)
        self.model_dir, self.model_prefix = model_dir, model_prefix
        self.monitor, self.verbose, self.save_best = monitor, verbose, save_best
        self.mode = _improves(mode, monitor.get()[0]) if save_best and monitor is not None else "min"
        self.epoch_period, self.batch_period = epoch_period, batch_period
        self.max_checkpoints = max_checkpoints
        self.resume_from_checkpoint = resume_from_checkpoint
        self.saved_checkpoints: list[str] = []
        self.current_batch = self.current_epoch = 0
        self.trained_epoch = self.trained_batch = -1
        self.best = math.inf

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_batch = self.current_epoch = 0
        self.best = -math.inf if self.mode == "max" else math.inf
        if self.resume_from_checkpoint:
            by_batch = bool(estimator.max_batch)
            if by_batch != bool(self.batch_period) or by_batch == bool(self.epoch_period):
                raise ValueError("resume_from_checkpoint needs checkpoints of the kind the training counts: "
                                 "epoch_period (and batch_period=None) when training by epochs, "
                                 "batch_period (and epoch_period=None) when training by batches")
            self._resume(estimator)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        if self.current_batch == 0:
            self._save_symbol(estimator)
        if self.batch_period and (self.current_batch + 1) % self.batch_period == 0:
            self._save_checkpoint(estimator)
        self.current_batch += 1
        return False

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        if self.epoch_period and (self.current_epoch + 1) % self.epoch_period == 0:
            self._save_checkpoint(estimator)
        self.current_epoch += 1
        return False

    def _save_checkpoint(self, estimator: Any) -> None:
        epoch, batch = self.current_epoch, self.current_batch
        if self.trained_epoch >= 0:  # numbered after the checkpoint this run resumed from
            epoch += self.trained_epoch + 1
            batch += self.trained_batch + (0 if estimator.max_epoch else 1)
        prefix = f"{self.model_prefix}-epoch{epoch}batch{batch}"
        self._save(estimator, prefix)
        self.saved_checkpoints.append(prefix)
        if len(self.saved_checkpoints) > self.max_checkpoints:
            old = self.saved_checkpoints.pop(0)
            for suffix in (".params", ".states"):
                path = os.path.join(self.model_dir, old + suffix)
                if os.path.exists(path):
                    os.remove(path)
        if self.verbose > 0:
            estimator.logger.info("[Epoch %d] CheckpointHandler: saved %s in %s", self.current_epoch, prefix,
                                  self.model_dir)
        if self.save_best and self.monitor is not None:
            name, value = self.monitor.get()
            if math.isnan(value):
                warnings.warn(f"not saving the best model: {name} is not updated", RuntimeWarning,
                              stacklevel=2)
            elif (value > self.best) if self.mode == "max" else (value < self.best):
                self.best = value
                self._save(estimator, f"{self.model_prefix}-best")

    def _save_symbol(self, estimator: Any) -> None:
        """``{model_prefix}-symbol.json``: the graph of a hybridized network (as MXNet saves its
        cached graph); other networks have none to save."""
        path = os.path.join(self.model_dir, self.model_prefix + "-symbol.json")
        net = estimator.net
        if not getattr(net, "_hybrid_active", False):
            estimator.logger.info("the network's graph is not saved to %s: build it from HybridBlocks and "
                                  "call net.hybridize() before giving it to the Estimator", path)
            return
        from ....symbol import Group, var
        from ...symbolic import input_names

        out = net(*[var(n) for n in input_names(net)])
        (Group(list(out)) if isinstance(out, (list, tuple)) else out).save(path)

    def _save(self, estimator: Any, prefix: str) -> None:
        estimator.net.save_parameters(os.path.join(self.model_dir, prefix + ".params"))
        estimator.trainer.save_states(os.path.join(self.model_dir, prefix + ".states"))

    def _resume(self, estimator: Any) -> None:
        found = []
        for fname in os.listdir(self.model_dir):
            m = self._NAME.search(fname)
            if fname.startswith(self.model_prefix + "-epoch") and m:
                found.append((int(m.group(1)), int(m.group(2)), fname[: -len(".params")]))
        if not found:
            estimator.logger.info("CheckpointHandler: no checkpoint in %s, training from scratch",
                                  self.model_dir)
            return
        self.trained_epoch, self.trained_batch, prefix = max(found)
        self.saved_checkpoints = [p for _, _, p in sorted(found)]
        if estimator.max_epoch:
            if self.trained_epoch >= estimator.max_epoch - 1:
                raise ValueError(f"the checkpoint {prefix} already reached {estimator.max_epoch} epochs: "
                                 "pass "
                                 "resume_from_checkpoint=False to train from scratch")
            estimator.max_epoch -= self.trained_epoch + 1
        if estimator.max_batch:
            if self.trained_batch >= estimator.max_batch - 1:
                raise ValueError(f"the checkpoint {prefix} already reached {estimator.max_batch} batches: "
                                 "pass "
                                 "resume_from_checkpoint=False to train from scratch")
            estimator.max_batch -= self.trained_batch + 1
        estimator.net.load_parameters(os.path.join(self.model_dir, prefix + ".params"), ctx=estimator.context)
        estimator.trainer.load_states(os.path.join(self.model_dir, prefix + ".states"))
        estimator.logger.warning("CheckpointHandler: resumed from %s", prefix)
