"""``mx.mon.Monitor``: statistics of every node's outputs, gradients and the parameters, every
``interval`` batches (MXNet's debugging monitor).

``install(executor)`` (``Module.install_monitor``) sets the executor's monitor callback;
``tic()`` before a batch starts collecting when the batch number is a multiple of ``interval``;
``toc()`` after it adds the arguments and auxiliary states and returns ``(step, name, text)``
for every name matching ``pattern`` (sorted by name with ``sort``), the text being
``stat_func``'s result (default: the norm over the square root of the size) followed by a tab.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["Monitor"]

logger = logging.getLogger(__name__)


def _norm_stat(x: torch.Tensor) -> torch.Tensor:
    """MXNet's default statistic: ``norm(x) / sqrt(x.size)`` as a one-element array."""
    x = x.to_dense() if x.layout != torch.strided else x
    return (torch.linalg.vector_norm(x.double()) / math.sqrt(max(x.numel(), 1))).to(torch.float32).reshape(1)


def _text(value: Any) -> str:
    """One statistic as MXNet prints it: a number for one element, else the array."""
    arr = np.asarray(value.detach().cpu()) if isinstance(value, torch.Tensor) else np.asarray(value)
    return (str(arr.reshape(-1)[0]) if arr.size == 1 else str(arr)) + "\t"  # str: numpy's float32 text


class Monitor:
    """Collects ``stat_func(array)`` of the arrays whose names match ``pattern`` (a regular
    expression) every ``interval`` batches; ``monitor_all`` also shows each node's inputs."""

    def __init__(
        self,
        interval: int,
        stat_func: Callable[[torch.Tensor], Any] | None = None,
        pattern: str = ".*",
        sort: bool = False,
        monitor_all: bool = False,
    ) -> None:
        if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
            raise ValueError(f"Monitor: interval must be a positive int (collect every that many batches), "
                             f"got {interval!r}")
        if stat_func is not None and not callable(stat_func):
            raise TypeError(f"Monitor: stat_func must be callable (array -> statistic), got {stat_func!r}")
        self.interval = interval
        self.stat_func = stat_func if stat_func is not None else _norm_stat
        self.re_prog = re.compile(pattern)
        self.sort = bool(sort)
        self.monitor_all = bool(monitor_all)
        self.activated = False
        self.queue: list[tuple[int, str, Any]] = []
        self.step = 0
        self.exes: list[Any] = []

    def stat_helper(self, name: str, array: torch.Tensor) -> None:
        """The executors' callback: queue the statistic of ``array`` while collecting."""
        if self.activated and self.re_prog.match(name):
            self.queue.append((self.step, name, self.stat_func(array)))

    def install(self, exe: Any) -> None:
        """Watch executor ``exe`` (its node outputs and gradients, its arguments at ``toc``)."""
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)

    def tic(self) -> None:
        """Start a batch: collect during it when its number is a multiple of ``interval``."""
        if self.step % self.interval == 0:
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self) -> list[tuple[int, str, str]]:
        """End a batch: ``(step, name, statistic text)`` of the node arrays seen since ``tic``
        and of every executor's arguments and auxiliary states ([] when not collecting)."""
        if not self.activated:
            return []
        for exe in self.exes:
            for group in (exe.arg_dict, exe.aux_dict):
                for name, array in group.items():
                    if self.re_prog.match(name):
                        self.queue.append((self.step, name, self.stat_func(array)))
        self.activated = False
        if self.sort:
            self.queue.sort(key=lambda entry: entry[1])
        res = []
        for step, name, stats in self.queue:
            values = stats if isinstance(stats, (list, tuple)) else [stats]
            res.append((step, name, "".join(_text(v) for v in values)))
        self.queue = []
        return res

    def toc_print(self) -> None:
        """``toc`` and log each entry at INFO (``Batch: <step> <name> <statistic>``)."""
        for step, name, text in self.toc():
            logger.info("Batch: %7d %30s %s", step, name, text)
