"""Entry point of the ``mxtorch`` command: ``mxtorch <subcommand> [options]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import cluster, launch, plan, server, train

_SUBCOMMANDS = {"launch": launch, "train": train, "scheduler": server, "server": server, "cluster": cluster,
                "plan": plan}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mxtorch", description="MXNet's Gluon and KVStore, on PyTorch")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in dict.fromkeys(_SUBCOMMANDS.values()):  # a module may add several subcommands
        mod.add_parser(sub)  # type: ignore[attr-defined]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv  # lets a subcommand run itself again, e.g. `train --workers N` under the launcher
    if args.command is None:
        parser.print_help()
        return 2
    return int(_SUBCOMMANDS[args.command].run(args) or 0)  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
