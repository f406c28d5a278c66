"""What ``mxtorch train`` checks before it loads any data or starts a process: every user error in
its flags is refused at once, as one line naming the flag (``SystemExit(str)``, which
:func:`mxtorch.cli.main.main` prints as ``mxtorch train: error: ...`` with exit status 2), instead
of a traceback minutes later -- or, for an unwritable ``--output``, after the training is done.
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .train_config import TrainConfig

__all__ = ["check_train_config", "check_writable_folder"]

_AT_LEAST = {"epochs": 1, "batch_size": 1, "workers": 1, "servers": 0, "num_workers": 0, "threads": 0,
             "pp": 1, "dp": 0, "micro_batches": 1}
"""Integer flags and their smallest value."""
_NON_NEGATIVE = ("lr", "momentum", "wd")
"""Float flags that must be finite and >= 0."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_train_config(cfg: TrainConfig) -> None:
    """Refuse ``cfg`` if any flag is a user error: numbers out of range, an unknown model, optimizer,
    store or context, a folder that cannot be written, flags that need another one.  Cheap: nothing
    is loaded, built or written (a probe file is created and removed)."""
    from .train_data import parse_contexts
    from .train_extras import check_checkpointing, check_pruning_and_transfer
    from .train_images import check_image_flags

    for name, low in _AT_LEAST.items():
        value = getattr(cfg, name)
        if value < low:
            raise SystemExit(f"{_flag(name)} must be >= {low}, got {value}")
    for name in _NON_NEGATIVE:
        value = getattr(cfg, name)
        if not (math.isfinite(value) and value >= 0):
            raise SystemExit(f"{_flag(name)} must be a finite number >= 0, got {value}")
    _check_names(cfg)
    parse_contexts(cfg.ctx)
    check_pruning_and_transfer(cfg)
    check_checkpointing(cfg)
    _check_combinations(cfg)
    if cfg.data_root is not None and not os.path.isdir(cfg.data_root):
        raise SystemExit(f"--data-root {cfg.data_root}: no such folder")
    check_image_flags(cfg)
    check_writable_folder("--output", cfg.output)
    if cfg.checkpoint_dir is not None:
        _check_checkpoint_location(cfg.checkpoint_dir)
    _check_tensorboard(cfg)
    if cfg.profile is not None:
        check_writable_folder("--profile", cfg.profile)


def _check_names(cfg: TrainConfig) -> None:
    from .. import kvstore
    from ..gluon.model_zoo import vision
    from ..optimizer import Optimizer
    from .train_config import DATASETS

    if cfg.dataset not in DATASETS:
        raise SystemExit(f"--dataset {cfg.dataset!r}: use one of {', '.join(DATASETS)}")
    key = cfg.model.strip().lower()
    # the names get_model accepts: the model zoo's and its constructors' (e.g. 'mobilenet1_0')
    if key not in vision.list_models() and key not in getattr(vision, "_ALIASES", {}):
        raise SystemExit(f"--model {cfg.model!r} is not in the model zoo: use one of "
                         f"{', '.join(vision.list_models())}")
    if cfg.optimizer not in Optimizer.opt_registry:
        raise SystemExit(f"--optimizer {cfg.optimizer!r} is unknown: use one of "
                         f"{', '.join(Optimizer.opt_registry.names())}")
    if not kvstore.is_registered(cfg.kvstore):
        raise SystemExit(f"--kvstore {cfg.kvstore!r} is unknown: use one of "
                         f"{', '.join(kvstore.registered_names())}")


def _check_combinations(cfg: TrainConfig) -> None:
    """Flags that only mean something with another one, and stores that cannot serve the job."""
    from ..kvstore.local import IN_PROCESS_NAMES
    from .train_config import TrainConfig, compression_params

    pipelined = cfg.pp > 1 or cfg.dp > 1 or cfg.plan is not None
    default = TrainConfig()
    if not pipelined:
        for name in ("micro_batches", "schedule"):
            if getattr(cfg, name) != getattr(default, name):
                raise SystemExit(f"{_flag(name)} applies to the pipelined job: add --pp N (N >= 2) or "
                                 "--plan auto")
    if cfg.plan is None and cfg.plan_memory != default.plan_memory:
        raise SystemExit("--plan-memory applies to --plan auto")
    if cfg.plan is not None:
        from ..base import MXNetError
        from ..parallel.planner import parse_bytes

        try:
            parse_bytes(cfg.plan_memory)
        except MXNetError as e:
            raise SystemExit(f"--plan-memory: {e}") from None
    if cfg.workers > 1 and not pipelined and cfg.batch_size % cfg.workers:
        raise SystemExit(f"--batch-size {cfg.batch_size} (the global batch) must be divisible by "
                         f"--workers {cfg.workers}")
    if cfg.workers > 1 and not pipelined and cfg.kvstore.lower() in IN_PROCESS_NAMES:
        raise SystemExit(f"--workers {cfg.workers}: --kvstore {cfg.kvstore} only reduces gradients inside "
                         "one process: use --kvstore allreduce (or horovod, or dist_sync with --servers 1)")
    compression_params(cfg)  # the --compression-* values, checked by the compressor itself


def check_writable_folder(flag: str, path: str) -> None:
    """Refuse ``path`` (a folder, existing or to be made) if this process cannot write there: a probe
    file is created and removed in it or, when it does not exist yet, in its nearest existing parent
    (nothing else is created)."""
    folder = os.path.abspath(path)
    probe_in = folder
    while not os.path.lexists(probe_in):
        probe_in = os.path.dirname(probe_in)
    if not os.path.isdir(probe_in):
        what = "is" if probe_in == folder else f"cannot be made: {probe_in} is"
        raise SystemExit(f"{flag} {path}: {what} a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".mxtorch-write-probe-", dir=probe_in)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        where = "" if probe_in == folder else f" (it would be made in {probe_in})"
        raise SystemExit(f"{flag} {path}: cannot write there{where}: {e.strerror or e}; give a folder this "
                         "user can write") from None


def _check_tensorboard(cfg: TrainConfig) -> None:
    """``--tensorboard DIR``: its folder is made now (a path that cannot be is refused) and the
    ``tensorboard`` package must be there."""
    if cfg.tensorboard is None:
        return
    check_writable_folder("--tensorboard", cfg.tensorboard)
    try:
        os.makedirs(cfg.tensorboard, exist_ok=True)
    except OSError as e:
        raise SystemExit(f"--tensorboard {cfg.tensorboard}: cannot create it: {e.strerror or e}") from None
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise SystemExit("--tensorboard needs the tensorboard package: pip install 'mxtorch[tensorboard]'") \
            from None


def _check_checkpoint_location(uri: str) -> None:
    """A local --checkpoint-dir must be writable; another fsspec URI needs its file system's package
    (contacting a remote store is left to the first save)."""
    import fsspec

    protocol, path = fsspec.core.split_protocol(uri)
    if protocol in (None, "file", "local"):
        check_writable_folder("--checkpoint-dir", path)
        return
    try:
        fsspec.get_filesystem_class(protocol)
    except (ValueError, ImportError) as e:
        raise SystemExit(f"--checkpoint-dir {uri}: {e}") from None
