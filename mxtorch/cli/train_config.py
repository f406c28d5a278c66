"""The configuration of ``mxtorch train``: one typed :class:`TrainConfig` (each command-line flag is
one field), built from the parsed arguments, and what is derived from it alone (the Trainer's
``compression_params``).  Every other ``cli/train*`` module imports from here; this module imports
none of them, so that the command's modules form no cycle."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COMPRESSIONS", "DATASETS", "PRUNE_METHODS", "PRUNE_SCOPES", "TWO_BIT_RESIDUAL_LIMIT",
           "TrainConfig", "compression_params", "config_from_args", "launched_world_size"]

DATASETS = ("fashion-mnist", "mnist", "cifar10", "cifar100", "imagerecord", "imagefolder")
COMPRESSIONS = ("2bit", "1bit", "fp16", "bf16", "topk", "powersgd")
PRUNE_METHODS = ("l1", "l2", "random", "structured")
PRUNE_SCOPES = ("global", "layer")
_COMPRESSION_OPTIONS = {"threshold": ("2bit", "1bit"), "ratio": ("topk",), "rank": ("powersgd",),
                        "residual_limit": ("2bit",)}
"""Which --compression-* option each compression type takes."""
TWO_BIT_RESIDUAL_LIMIT = 1.0
"""The bound on 2bit's residuals that ``mxtorch train`` uses unless told otherwise (see
:mod:`mxtorch.compression.quantize`: MXNet's unbounded residual cost 2.2 points on the default job)."""


@dataclass
class TrainConfig:
    """Options of a training run (command-line flags map one to one onto these fields)."""

    model: str = "lenet_bn"
    dataset: str = "fashion-mnist"
    data_root: str | None = None
    data_train: str | None = None  # --dataset imagerecord: the .rec files (cli/train_images.py)
    data_val: str | None = None
    data_shape: str | None = None  # "C,H,W" of image data sets (None: 3,224,224)
    num_classes: int | None = None  # None: from the data set
    epochs: int = 2
    batch_size: int = 128
    optimizer: str = "sgd"
    lr: float = 0.05
    momentum: float = 0.9
    wd: float = 1e-4
    lr_schedule: str = "cosine"
    ctx: str = "cpu"
    kvstore: str = "device"
    workers: int = 1
    servers: int = 0
    amp: str | None = None
    compression: str | None = None
    compression_threshold: float | None = None
    compression_ratio: float | None = None
    compression_rank: int | None = None
    compression_residual_limit: float | None = None
    hybridize: bool = True
    seed: int = 42
    num_workers: int = 0
    output: str = "runs/train"
    progress: bool = True
    threads: int = 0
    pp: int = 1
    dp: int = 0
    micro_batches: int = 4
    schedule: str = "1f1b"
    plan: str | None = None
    plan_memory: str = "4GiB"
    prune: str | None = None
    sparsity: float | None = None
    prune_begin_step: int = 0
    prune_end_epoch: int | None = None
    prune_frequency: int | None = None
    prune_scope: str | None = None  # None: global for l1/l2/random, layer for structured
    init_from: str | None = None
    freeze: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int | None = None
    checkpoint_keep: int = 3
    resume: bool = False
    tensorboard: str | None = None
    profile: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pipelined(self) -> bool:
        """Whether the network is cut into pipeline stages (--pp, --dp or --plan)."""
        return self.pp > 1 or self.dp > 1 or self.plan is not None


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The :class:`TrainConfig` of parsed ``mxtorch train`` arguments (other attributes are ignored)."""
    fields = TrainConfig.__dataclass_fields__
    values = {k: v for k, v in vars(args).items() if k in fields}
    if values.get("ctx", "") is None:  # not given: this worker's own GPU(s), else the CPU
        from ..distributed.devices import default_context_spec
        from ..distributed.env import DistributedConfigError

        try:
            values["ctx"] = default_context_spec()
        except DistributedConfigError as e:
            raise SystemExit(str(e)) from None
    return TrainConfig(**values)


def compression_params(cfg: TrainConfig) -> dict[str, Any] | None:
    """The Trainer's ``compression_params`` for ``cfg``'s --compression options (None: none)."""
    given = {name: getattr(cfg, f"compression_{name}") for name in _COMPRESSION_OPTIONS}
    given = {k: v for k, v in given.items() if v is not None}
    if cfg.compression is None:
        if given:
            raise SystemExit(f"--compression-{next(iter(given)).replace('_', '-')} needs --compression TYPE")
        return None
    params: dict[str, Any] = {"type": cfg.compression}
    for name, value in given.items():
        if cfg.compression not in _COMPRESSION_OPTIONS[name]:
            raise SystemExit(f"--compression-{name.replace('_', '-')} applies to --compression "
                             f"{'/'.join(_COMPRESSION_OPTIONS[name])}, not {cfg.compression}")
        params[name] = value
    if cfg.compression == "2bit":
        limit = params.pop("residual_limit", TWO_BIT_RESIDUAL_LIMIT)
        if limit != 0:  # 0: MXNet's unbounded residual
            params["residual_limit"] = limit
    from .. import compression

    try:
        compressor = compression.create(params)
    except compression.CompressionError as e:
        raise SystemExit(f"--compression {cfg.compression}: {e}") from None
    return {"type": cfg.compression, **compressor.params()}  # every setting, defaults included


def launched_world_size() -> int | None:
    """The number of workers of the job this process belongs to (None when not launched as one)."""
    from ..distributed.env import DistributedConfigError, world_info_from_env

    try:
        info = world_info_from_env()
    except DistributedConfigError as e:
        raise SystemExit(str(e)) from None
    return None if info is None else info.world_size
