"""Entry point of the ``mxtorch`` command: ``mxtorch <subcommand> [options]``.

A user error of a subcommand (a ``SystemExit`` carrying a message) is one line on stderr,
``mxtorch <subcommand>: error: <message>``, and exit status 2, without a traceback; ``--debug``
(or ``MXTORCH_DEBUG=1``) prints the traceback before it.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from .. import _logging
from .._version import __version__
from ..distributed.env import MXTORCH_DEBUG
from . import cluster, im2rec, launch, plan, server, trace, train

_SUBCOMMANDS = {"launch": launch, "train": train, "scheduler": server, "server": server, "cluster": cluster,
                "plan": plan, "trace": trace, "im2rec": im2rec}
_DEBUG_HELP = f"on an error, print its traceback too (also: {MXTORCH_DEBUG}=1)"
_LOG_HELP = (f"what the mxtorch loggers show: DEBUG, INFO, WARNING, ERROR or CRITICAL (also: "
             f"{_logging.LOG_LEVEL_ENV}; passed on to the job's processes)")


class UsageError(SystemExit):
    """What :func:`main` raises after printing a user error: exit status 2; ``str()`` is the message
    (so that callers of :func:`main` in-process can still read it)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mxtorch", description="MXNet's Gluon and KVStore, on PyTorch")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    parser.add_argument("--log-level", metavar="LEVEL", help=_LOG_HELP)
    parser.add_argument("--version", action="version", version=f"mxtorch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in dict.fromkeys(_SUBCOMMANDS.values()):  # a module may add several subcommands
        mod.add_parser(sub)  # type: ignore[attr-defined]
    for command in sub.choices.values():  # SUPPRESS: `mxtorch --debug train` is not undone
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
        command.add_argument("--log-level", metavar="LEVEL", default=argparse.SUPPRESS, help=_LOG_HELP)
    return parser


def debugging(args: argparse.Namespace) -> bool:
    """Whether ``--debug`` or ``MXTORCH_DEBUG=1`` asks for tracebacks."""
    return bool(getattr(args, "debug", False)) or os.environ.get(MXTORCH_DEBUG, "0").strip() not in ("", "0")


def _apply_log_level(args: argparse.Namespace) -> None:
    """``--log-level``: checked, applied here and put in the environment the job's processes inherit."""
    level = getattr(args, "log_level", None)
    if level is None:
        return
    try:
        _logging.parse_level(level, "--log-level")
    except ValueError as e:
        raise SystemExit(str(e)) from None
    os.environ[_logging.LOG_LEVEL_ENV] = level.strip()
    _logging.set_level(level.strip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv  # lets a subcommand run itself again, e.g. `train --workers N` under the launcher
    if args.command is None:
        parser.print_help()
        return 2
    try:
        _apply_log_level(args)
        return int(_SUBCOMMANDS[args.command].run(args) or 0)  # type: ignore[attr-defined]
    except SystemExit as e:
        if isinstance(e, UsageError) or not isinstance(e.code, str):
            raise  # already reported, or an exit status
        if debugging(args):
            traceback.print_exc()
        message = " ".join(e.code.split())  # one line
        print(f"mxtorch {args.command}: error: {message}", file=sys.stderr, flush=True)
        raise UsageError(message) from None


if __name__ == "__main__":
    sys.exit(main())
