"""The ``mxtorch`` logger tree: every record carries the process's place in its job, and
``MXTORCH_LOG_LEVEL`` (or ``mxtorch --log-level``) sets how much of it is shown.

Every log record (mxtorch's and the application's) gets a ``rank`` attribute: ``rank 1``,
``server 0``, ``scheduler``, or ``-`` outside a job, so ``%(rank)s`` works in any format.  The
``mxtorch`` logger gets one handler, on stderr, that writes ``time level logger [rank]: message``
while the application has configured no logging of its own (a handler on the root logger); once
it has, mxtorch's records reach only the application's handlers, as any library's do.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

__all__ = ["LOG_LEVEL_ENV", "rank_label", "parse_level", "set_level", "install", "FORMAT"]

LOG_LEVEL_ENV = "MXTORCH_LOG_LEVEL"
FORMAT = "%(asctime)s %(levelname)s %(name)s [%(rank)s]: %(message)s"
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def rank_label() -> str:
    """This process's place in its job: what the distributed components recorded (see
    :mod:`mxtorch.profiler._process`), else the launcher's variables, else ``-``."""
    process = sys.modules.get("mxtorch.profiler._process")  # not imported: no component set it
    if process is not None:
        ident = process.identity()  # type: ignore[attr-defined]
        if ident.rank is not None:
            return str(ident.label())
    role = os.environ.get("DMLC_ROLE")
    if role == "scheduler":
        return "scheduler"
    rank = os.environ.get("RANK", os.environ.get("DMLC_WORKER_ID" if role == "worker" else "", ""))
    return f"rank {rank}" if rank.isdigit() else "-"


def parse_level(value: str, source: str = LOG_LEVEL_ENV) -> int:
    """A level name (any case) or number; a one-line ``ValueError`` naming ``source`` otherwise."""
    text = value.strip()
    if text.isdigit():
        return int(text)
    if text.upper() in _LEVELS:
        return int(getattr(logging, text.upper()))
    raise ValueError(f"{source}={value!r} is not a log level: use one of {', '.join(_LEVELS)} (or a number)")


class _StderrUnlessConfigured(logging.StreamHandler):  # type: ignore[type-arg]
    """stderr, while the root logger has no handler (the application has not set up logging)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter(FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return  # the application's handlers show it (records propagate to the root)
        self.stream = sys.stderr  # the current one (tests and tools swap sys.stderr)
        super().emit(record)


def set_level(level: int | str | None) -> None:
    """Set the ``mxtorch`` logger's level (a name or number; None leaves it to the root's)."""
    logger = logging.getLogger("mxtorch")
    logger.setLevel(logging.NOTSET if level is None else
                    parse_level(level, "log level") if isinstance(level, str) else level)


def install(default_level: int | None = None) -> None:
    """Give records their rank, put the stderr handler on ``mxtorch`` and apply
    ``MXTORCH_LOG_LEVEL`` (else ``default_level``, e.g. INFO in a scheduler or server process).
    Idempotent."""
    previous = logging.getLogRecordFactory()
    if not getattr(previous, "_mxtorch_rank", False):
        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if not hasattr(record, "rank"):
                record.rank = rank_label()
            return record
        factory._mxtorch_rank = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(factory)
    logger = logging.getLogger("mxtorch")
    if not any(isinstance(h, _StderrUnlessConfigured) for h in logger.handlers):
        logger.addHandler(_StderrUnlessConfigured())
    value = os.environ.get(LOG_LEVEL_ENV, "").strip()
    if value:
        try:
            set_level(parse_level(value))
        except ValueError as e:
            logger.warning("%s; ignored", e)
    elif default_level is not None and logger.level == logging.NOTSET:
        set_level(default_level)
