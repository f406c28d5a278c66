"""``mx.callback``: MXNet's training callbacks for ``Module.fit``.

Batch-end callbacks receive a :class:`mxtorch.model.BatchEndParam`; epoch-end callbacks
``(epoch, symbol, arg_params, aux_params)``.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import Any

from .model import save_checkpoint

__all__ = [
    "Speedometer",
    "do_checkpoint",
    "module_checkpoint",
    "log_train_metric",
    "ProgressBar",
    "LogValidationMetricsCallback",
]


def do_checkpoint(prefix: str, period: int = 1) -> Any:
    """Save ``prefix-symbol.json`` and ``prefix-%04d.params`` every ``period`` epochs (file numbers
    count from 1: after the first epoch ``prefix-0001.params``)."""
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any = None, arg: Any = None, aux: Any = None) -> None:
        if (iter_no + 1) % period == 0:
            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)

    return _callback


def module_checkpoint(mod: Any, prefix: str, period: int = 1, save_optimizer_states: bool = False) -> Any:
    """Like :func:`do_checkpoint` through ``mod.save_checkpoint`` (optionally with optimizer states)."""
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any = None, arg: Any = None, aux: Any = None) -> None:
        if (iter_no + 1) % period == 0:
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)

    return _callback


def log_train_metric(period: int, auto_reset: bool = False) -> Any:
    """Log the training metric every ``period`` batches (and reset it with ``auto_reset``)."""

    def _callback(param: Any) -> None:
        if param.nbatch % period == 0 and param.eval_metric is not None:
            for name, value in param.eval_metric.get_name_value():
                logging.info("Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, name, value)
            if auto_reset:
                param.eval_metric.reset_local()

    return _callback


class Speedometer:
    """Log samples per second (and the metric) every ``frequent`` batches."""

    def __init__(self, batch_size: int, frequent: int = 50, auto_reset: bool = True) -> None:
        self.batch_size = batch_size
        self.frequent = frequent
        self.auto_reset = auto_reset
        self.init = False
        self.tic = 0.0
        self.last_count = 0
        self.last_speed: float | None = None

    def __call__(self, param: Any) -> None:
        count = param.nbatch
        if self.last_count > count:
            self.init = False
        self.last_count = count
        if not self.init:
            self.init = True
            self.tic = time.time()
            return
        if count % self.frequent != 0:
            return
        elapsed = max(time.time() - self.tic, 1e-12)
        speed = self.frequent * self.batch_size / elapsed
        self.last_speed = speed
        if param.eval_metric is not None:
            pairs = param.eval_metric.get_name_value()
            if self.auto_reset:
                param.eval_metric.reset_local()
            msg = "\t".join(f"{name}={value:f}" for name, value in pairs)
            # with auto_reset the values cover the last `frequent` batches, else the epoch so far
            first = count - self.frequent if self.auto_reset else 0
            logging.info(
                "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec\t%s", param.epoch, first, count, speed, msg
            )
        else:
            logging.info("Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, count, speed)
        self.tic = time.time()


class ProgressBar:
    """A text progress bar over ``total`` batches."""

    def __init__(self, total: int, length: int = 80) -> None:
        self.bar_len = length
        self.total = total

    def __call__(self, param: Any) -> None:
        count = param.nbatch
        filled = int(round(self.bar_len * count / float(self.total)))
        percents = math.ceil(100.0 * count / float(self.total))
        bar = "=" * filled + "-" * (self.bar_len - filled)
        sys.stdout.write(f"[{bar}] {percents}%\r")
        sys.stdout.flush()


class LogValidationMetricsCallback:
    """Log the validation metrics at the end of an evaluation (an ``eval_end_callback``)."""

    def __call__(self, param: Any) -> None:
        if param.eval_metric is None:
            return
        for name, value in param.eval_metric.get_name_value():
            logging.info("Epoch[%d] Validation-%s=%f", param.epoch, name, value)
