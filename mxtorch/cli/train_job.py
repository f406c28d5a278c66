"""``mxtorch train`` as a job: built once from its configuration and where this process stands (a
process of a launched job or not, a worker of an elastic job or not), it chooses its mode from one
table and runs that mode's strategy.

=========  =============================================  =============================================
mode       when                                           strategy
=========  =============================================  =============================================
elastic    a worker of ``mxtorch launch --elastic``       train data-parallel, restart on membership
planned    ``--plan auto``                                launch ``--workers N``; each chooses the layout
pipelined  ``--pp N`` or ``--dp N``                       launch dp*pp workers; each trains its stages
servers    ``--servers M``                                launch workers + servers; each trains its shard
workers    ``--workers N``, or a process of a launched job  launch N workers; each trains its shard
replicas   one process, several ``--ctx`` contexts        train here, one replica per context
single     one process, one context                       train here
=========  =============================================  =============================================

"launch" means that the command runs itself again, as the workers of ``mxtorch launch`` (the
strategies of the parent process); in a process of the launched job the same strategy trains.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from .train_config import TrainConfig, compression_params, config_from_args, launched_world_size

__all__ = ["MODES", "Placement", "TrainJob"]


@dataclass(frozen=True)
class Placement:
    """Where this process stands, read once from its environment."""

    world: int | None
    """The size of the launched job this process belongs to; None when it was not launched."""
    elastic: bool
    """Whether it is a worker of an elastic job (``mxtorch launch --elastic``)."""
    argv: tuple[str, ...]
    """This command's arguments, to run it again under the launcher."""

    @property
    def launched(self) -> bool:
        return self.world is not None


Strategy = Callable[[TrainConfig, Placement], int]


def _relaunch(cfg: TrainConfig, argv: list[str]) -> int:
    """Run this same ``mxtorch train`` command as ``cfg.workers`` local workers (and ``cfg.servers``
    parameter servers with their scheduler)."""
    from .. import kvstore
    from ..launcher import JobSpec, LaunchError
    from ..launcher.ps import launch_local_with_servers

    if not kvstore.is_registered(cfg.kvstore):
        raise SystemExit(f"--kvstore {cfg.kvstore!r} is unknown: known types are "
                         f"{kvstore.registered_names()}")
    if cfg.batch_size % cfg.workers:
        raise SystemExit(f"--batch-size {cfg.batch_size} (the global batch) must be divisible by "
                         f"--workers {cfg.workers}")
    ps_store = cfg.kvstore.lower() in kvstore.ps.STORE_NAMES
    if cfg.servers and not ps_store:
        raise SystemExit(f"--servers {cfg.servers} needs a parameter-server KVStore: --kvstore dist_sync or "
                         f"dist_async, not {cfg.kvstore!r}")
    if ps_store and not cfg.servers:
        raise SystemExit(f"--kvstore {cfg.kvstore} needs parameter servers: add --servers M "
                         "(e.g. --servers 1)")
    try:
        spec = JobSpec(command=[sys.executable, "-m", "mxtorch.cli.main", *argv], num_workers=cfg.workers,
                       num_servers=cfg.servers)
        return launch_local_with_servers(spec)
    except LaunchError as e:
        raise SystemExit(f"mxtorch train --workers {cfg.workers}: {e}") from None


def _train_here(cfg: TrainConfig, at: Placement) -> int:
    from .train_loop import train

    train(cfg)
    return 0


def _train_sharded(cfg: TrainConfig, at: Placement) -> int:
    """Data-parallel workers (over a collective or parameter servers): each trains its shard."""
    if not at.launched:
        return _relaunch(cfg, list(at.argv))
    return _train_here(cfg, at)


def _train_elastic(cfg: TrainConfig, at: Placement) -> int:
    from .train_extras import run_elastic_worker
    from .train_loop import train

    return run_elastic_worker(train, cfg)


def _train_stages(cfg: TrainConfig) -> int:
    from .train_parallel import train_pipelined

    train_pipelined(cfg)
    return 0


def _train_pipelined(cfg: TrainConfig, at: Placement) -> int:
    """dp replicas of a pp-stage pipeline: dp*pp workers, launched here when not given."""
    world = at.world or cfg.workers
    dp = cfg.dp or max(world // cfg.pp, 1)
    if not at.launched and cfg.workers == 1:
        workers = dp * cfg.pp
        # the stages' data-parallel groups reduce over a process subgroup (horovod's allreduce) or
        # over the parameter servers (--kvstore dist_sync/dist_async with --servers)
        from ..kvstore import ps as ps_stores

        ps = cfg.kvstore.lower() in ps_stores.STORE_NAMES
        return _relaunch(replace(cfg, workers=workers, kvstore=cfg.kvstore if ps else "horovod"),
                         [*at.argv, "--workers", str(workers)])
    if dp * cfg.pp != world:
        raise SystemExit(f"--dp {dp} x --pp {cfg.pp} = {dp * cfg.pp} processes, but the job has {world}: "
                         f"launch dp*pp workers (--workers {dp * cfg.pp})")
    if not at.launched:
        return _relaunch(cfg, list(at.argv))
    return _train_stages(cfg)


def _train_planned(cfg: TrainConfig, at: Placement) -> int:
    """--plan auto: rank 0 of the launched job chooses dp x pp x tp, every rank trains its part."""
    if at.launched:
        return _train_stages(cfg)
    if cfg.workers < 2:
        raise SystemExit("--plan auto chooses how to split the job over its processes: add --workers N "
                         "(N >= 2) or run under mxtorch launch")
    return _relaunch(cfg, list(at.argv))


MODES: tuple[tuple[str, Callable[[TrainConfig, Placement], bool], Strategy], ...] = (
    ("elastic", lambda cfg, at: at.elastic, _train_elastic),
    ("planned", lambda cfg, at: cfg.plan is not None, _train_planned),
    ("pipelined", lambda cfg, at: cfg.pp > 1 or cfg.dp > 1, _train_pipelined),
    ("servers", lambda cfg, at: cfg.servers > 0, _train_sharded),
    ("workers", lambda cfg, at: cfg.workers > 1 or at.launched, _train_sharded),
    ("replicas", lambda cfg, at: len([c for c in cfg.ctx.split(",") if c.strip()]) > 1, _train_here),
    ("single", lambda cfg, at: True, _train_here),
)
"""The modes, in the order they are tried: the first whose test holds is the job's."""


class TrainJob:
    """One ``mxtorch train`` command: its checked configuration, where this process stands, and the
    mode (a row of :data:`MODES`) chosen from both."""

    def __init__(self, cfg: TrainConfig, at: Placement) -> None:
        self.cfg, self.at = cfg, at
        self.mode, self._strategy = next((name, run) for name, applies, run in MODES if applies(cfg, at))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TrainJob:
        """The job of parsed arguments; every user error in them is refused here (``SystemExit``),
        before any data is loaded or a process started."""
        from ..elastic.env import is_elastic_worker
        from .train_checks import check_train_config
        from .train_extras import elastic_config

        cfg = config_from_args(args)
        elastic = is_elastic_worker()
        if elastic:  # a worker of `mxtorch launch --elastic`: always resumes
            cfg = elastic_config(cfg)
        check_train_config(cfg)
        argv = getattr(args, "argv", None)
        at = Placement(world=launched_world_size(), elastic=elastic,
                       argv=tuple(argv if argv is not None else sys.argv[1:]))
        if compression_params(cfg) is not None and cfg.workers < 2 and not at.launched:
            raise SystemExit(f"--compression {cfg.compression} compresses what workers send each other: add "
                             "--workers 2 (or more) and --kvstore horovod (or allreduce, or dist_sync with "
                             "--servers 1)")
        return cls(cfg, at)

    def run(self) -> int:
        """Run the job's strategy; the exit status."""
        return self._strategy(self.cfg, self.at)
