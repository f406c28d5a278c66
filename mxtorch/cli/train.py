"""``mxtorch train``: train a model-zoo network on a data set that needs no download.

By default: LeNet on Fashion-MNIST — the full data set where it is installed (Debian's
``dataset-fashion-mnist`` puts it in /usr/share/datasets/fashion-mnist), otherwise the
class-balanced subset shipped inside mxtorch.  Prints a progress bar, evaluates on the
held-out split, saves the parameters and a metrics file.

``--workers N --kvstore allreduce`` (or ``horovod``) trains with N processes: the command
runs itself again under ``mxtorch launch -n N``; each worker reads its own shard of the
training set with ``--batch-size / N`` samples per step, gradients are summed over the
workers, and worker 0 evaluates, prints and saves.  ``--compression 2bit`` (or ``1bit``,
``fp16``, ``bf16``, ``topk``, ``powersgd``) compresses the gradients the workers exchange.
``--servers M --kvstore dist_sync`` (or ``dist_async``) adds M parameter servers and a
scheduler, and the optimizer runs on the servers.

``--prune l1 --sparsity 0.8`` (or ``l2``, ``random``, ``structured``) prunes the network
gradually while it trains (:mod:`mxtorch.contrib.pruning`, Zhu & Gupta's polynomial schedule
from ``--prune-begin-step`` to the end of ``--prune-end-epoch``), by default with one magnitude
threshold over all layers (``--prune-scope global``; ``layer`` gives every layer the sparsity);
metrics.json reports the final ``"sparsity"`` and model.params holds the zeros.
``--init-from FILE`` starts from the parameters of a saved network (those whose name and shape
match; a new output layer keeps its fresh values), and ``--freeze REGEX`` keeps the parameters
whose full name (or attribute path) matches fixed.

``--checkpoint-dir URI --checkpoint-every N`` saves a checkpoint (:mod:`mxtorch.checkpoint`:
parameters, trainer and optimizer states incl. a parameter server's, compression residuals,
every RNG, the data position, the epoch's running statistics) every N steps, in the background,
to a folder or any fsspec URI; ``--resume`` continues from the newest good one, so that a job
killed mid-epoch and run again with ``--resume`` ends with the model.params of an uninterrupted run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..checkpoint_io import atomic_write_text
from .train_checks import check_train_config
from .train_data import evaluate, load_datasets, parse_contexts
from .train_extras import (
    PRUNE_METHODS,
    PRUNE_SCOPES,
    _epoch_stats,
    _test_kill_hook,
    default_every,
    elastic_config,
    freeze_parameters,
    load_pretrained,
    make_pruner,
    pruner_checkpoint_extra,
    pruning_report,
    restore_pruner,
    resumed_stats,
    run_elastic_worker,
)

DATASETS = ("fashion-mnist", "mnist", "cifar10", "cifar100")
COMPRESSIONS = ("2bit", "1bit", "fp16", "bf16", "topk", "powersgd")
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
    extra: dict[str, Any] = field(default_factory=dict)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    d = TrainConfig()
    p = sub.add_parser("train", help="train a model-zoo network on an embedded/local data set",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=d.model, help="model-zoo name (lenet, mlp, resnet18_v1, ...)")
    p.add_argument("--dataset", default=d.dataset, choices=DATASETS)
    p.add_argument("--data-root", default=d.data_root,
                   help="folder with the data set's standard files (idx / CIFAR binary)")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="global batch size")
    p.add_argument("--optimizer", default=d.optimizer)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--momentum", type=float, default=d.momentum, help="for sgd/nag/rmsprop")
    p.add_argument("--wd", type=float, default=d.wd)
    p.add_argument("--lr-schedule", default=d.lr_schedule, choices=("cosine", "constant"),
                   help="cosine: decay the lr to 0 over the run (default); constant: keep it")
    p.add_argument("--ctx", default=d.ctx,
                   help="contexts, comma separated: 'cpu', 'cpu:0,cpu:1', 'gpu:0,gpu:1'")
    p.add_argument("--amp", default=d.amp, choices=("bf16", "fp16"),
                   help="mixed precision: autocast + dynamic loss scaling (bf16 runs for real on CPU)")
    p.add_argument("--compression", default=d.compression, choices=COMPRESSIONS,
                   help="compress gradients between workers (needs --workers > 1 and --kvstore horovod or "
                        "allreduce): 2bit/1bit quantization and topk/powersgd with error feedback, "
                        "fp16/bf16 casts")
    p.add_argument("--compression-threshold", type=float, default=d.compression_threshold,
                   help="2bit: values at or beyond +-threshold are sent (default 0.5); 1bit: the sign "
                        "threshold (default 0)")
    p.add_argument("--compression-ratio", type=float, default=d.compression_ratio,
                   help="topk: the fraction of each gradient sent (default 0.01)")
    p.add_argument("--compression-rank", type=int, default=d.compression_rank,
                   help="powersgd: the rank of the approximation (default 1)")
    p.add_argument("--compression-residual-limit", type=float, default=d.compression_residual_limit,
                   help=f"2bit: bound each error-feedback residual to this many thresholds (default "
                        f"{TWO_BIT_RESIDUAL_LIMIT:g}); 0 keeps MXNet's unbounded residual")
    p.add_argument("--kvstore", default=d.kvstore,
                   help="how gradients are shared: local/device (contexts of one process), allreduce or "
                        "horovod (several workers), dist_sync or dist_async (parameter servers: --servers)")
    p.add_argument("--workers", type=int, default=d.workers,
                   help="worker processes, started on this machine by `mxtorch launch`; needs --kvstore "
                        "allreduce, horovod, dist_sync or dist_async; --batch-size stays the global batch")
    p.add_argument("--servers", type=int, default=d.servers,
                   help="parameter servers (and a scheduler) started beside the workers, for --kvstore "
                        "dist_sync or dist_async")
    p.add_argument("--no-hybridize", dest="hybridize", action="store_false")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--num-workers", type=int, default=d.num_workers, help="data loader workers")
    p.add_argument("--output", default=d.output, help="folder for model.params and metrics.json")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("--threads", type=int, default=d.threads, help="torch intra-op threads (0: default)")
    p.add_argument("--pp", type=int, default=d.pp,
                   help="pipeline stages (mxtorch.parallel): the job has dp*pp worker processes")
    p.add_argument("--dp", type=int, default=d.dp,
                   help="data-parallel replicas of the pipeline (0: workers/pp)")
    p.add_argument("--micro-batches", type=int, default=d.micro_batches,
                   help="micro-batches per step and data-parallel rank (with --pp)")
    p.add_argument("--schedule", default=d.schedule, choices=("gpipe", "1f1b", "interleaved", "zero_bubble"),
                   help="pipeline schedule (with --pp)")
    p.add_argument("--plan", default=d.plan, choices=("auto",),
                   help="choose dp x pp x tp, micro-batches and schedule with mxtorch.parallel.plan "
                        "(needs --workers N or a launched job)")
    p.add_argument("--plan-memory", default=d.plan_memory, help="memory per device the plan must fit")
    p.add_argument("--prune", default=d.prune, choices=PRUNE_METHODS,
                   help="prune gradually while training (mxtorch.contrib.pruning): l1/l2 magnitude or random "
                        "single weights per layer, or structured (whole channels ranked by their L1 norm)")
    p.add_argument("--sparsity", type=float, default=d.sparsity,
                   help="with --prune: the final fraction of zero weights in each pruned layer, e.g. 0.8")
    p.add_argument("--prune-begin-step", type=int, default=d.prune_begin_step,
                   help="with --prune: the training step at which pruning starts (default 0)")
    p.add_argument("--prune-end-epoch", type=int, default=d.prune_end_epoch,
                   help="with --prune: the epoch at whose end the final sparsity is reached (default: the "
                        "one before the last, so the last epoch trains the pruned net; 1 with --epochs 1)")
    p.add_argument("--prune-frequency", type=int, default=d.prune_frequency,
                   help="with --prune: update the masks every this many steps (default: 20 updates in all)")
    p.add_argument("--prune-scope", default=d.prune_scope, choices=PRUNE_SCOPES,
                   help="with --prune l1/l2/random: one threshold over all pruned weights (global, the "
                        "default: small layers lose fewer; 80%% l1 stays within a point of dense) or every "
                        "layer reaches the sparsity (layer); structured is always per layer")
    p.add_argument("--init-from", default=d.init_from, metavar="PATH",
                   help="start from the parameters in PATH (save_parameters' file, e.g. another run's "
                        "model.params): those whose name and shape match are loaded, the others (a new "
                        "output layer for another class count) keep their initial values")
    p.add_argument("--freeze", default=d.freeze, metavar="REGEX",
                   help="do not train the parameters whose full name ('mlp0_dense0_weight') or attribute "
                        "path ('features.1.weight') matches REGEX (re.match; grad_req='null')")
    p.add_argument("--checkpoint-dir", default=d.checkpoint_dir, metavar="URI",
                   help="save checkpoints (mxtorch.checkpoint) under this folder or fsspec URI (file://, "
                        "s3://bucket/run with s3fs, ...) to resume the job exactly with --resume")
    p.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every, metavar="N",
                   help="with --checkpoint-dir: save every N training steps (default: once an epoch); "
                        "written in the background")
    p.add_argument("--checkpoint-keep", type=int, default=d.checkpoint_keep, metavar="K",
                   help="with --checkpoint-dir: keep the last K checkpoints (default 3)")
    p.add_argument("--resume", action="store_true",
                   help="with --checkpoint-dir: continue from its newest good checkpoint (from the start "
                        "when there is none)")
    return p


def _config_from_args(args: argparse.Namespace) -> TrainConfig:
    fields = TrainConfig.__dataclass_fields__
    return TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})


def launched_world_size() -> int | None:
    """The number of workers of the job this process belongs to (None when not launched as one)."""
    from ..distributed.env import DistributedConfigError, world_info_from_env

    try:
        info = world_info_from_env()
    except DistributedConfigError as e:
        raise SystemExit(str(e)) from None
    return None if info is None else info.world_size


def _join_job(cfg: TrainConfig, elastic: bool = False) -> Any:
    """The distributed KVStore of this worker, or None when training in one process."""
    import mxtorch as mx

    world = launched_world_size()
    if world is None and cfg.workers > 1:
        raise SystemExit(f"workers={cfg.workers}: start the job with `mxtorch train --workers {cfg.workers}` "
                         "(or under `mxtorch launch`), not by calling train() in one process")
    if world is None or (world == 1 and not cfg.servers):
        return None
    if cfg.workers not in (1, world) and not elastic:  # an elastic job's size changes
        raise SystemExit(f"--workers {cfg.workers} but this job was launched with {world} workers")
    kv = mx.kv.create(cfg.kvstore)
    if not kv.is_capable(mx.kv.KVStoreBase.DISTRIBUTED):
        raise SystemExit(f"this process is one of {world} workers, but --kvstore {cfg.kvstore!r} only "
                         "reduces gradients inside one process: use --kvstore allreduce (or horovod)")
    if cfg.batch_size % kv.num_workers and not elastic:  # elastic shares may differ by one sample
        raise SystemExit(f"--batch-size {cfg.batch_size} (the global batch) must be divisible by the "
                         f"{kv.num_workers} workers")
    return kv


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


def _sum_over_workers(kv: Any, key: str, values: list[float]) -> list[float]:
    import torch

    from ..kvstore import KVStoreBase

    t = torch.tensor(values, dtype=torch.float64)
    if kv.is_capable(KVStoreBase.OPTIMIZER):
        # A store that runs the optimizer (a parameter server) would apply it to these pushes: sum
        # them over the job's process group instead (the launcher gave every worker its address).
        import torch.distributed as dist

        from ..distributed import group

        group.init()
        dist.all_reduce(t)
    else:
        kv.pushpull(key, t, out=t)
    return [float(v) for v in t]


def train(cfg: TrainConfig, log: Any = None) -> dict[str, Any]:
    """Run the training job described by ``cfg``; returns the metrics that are also saved.

    In a job started by ``mxtorch launch`` (or ``--workers N``) with a distributed KVStore,
    this process trains on its shard and only worker 0 evaluates, prints and writes files:
    the held-out accuracy then describes exactly the saved model (parameters are equal on
    every worker, BatchNorm running statistics are worker 0's).
    """
    import torch

    import mxtorch as mx

    from .. import autograd
    from ..elastic import ElasticBatchSampler, describe_change, gather_hosts, is_elastic_worker
    from ..elastic.env import host_name
    from ..elastic.worker import ElasticRestart, restart_agreed, test_kill_host_hook, test_pause_hook
    from ..gluon import Trainer, loss, model_zoo
    from ..gluon.data import DataLoader, SplitSampler
    from ..gluon.data.vision import transforms
    from ..gluon.utils import split_and_load
    from ..progress import ProgressBar

    elastic = is_elastic_worker()
    if elastic:  # every (re)start resumes from the newest checkpoint
        cfg = elastic_config(cfg)
    check_train_config(cfg)
    kv = _join_job(cfg, elastic)
    rank, n_workers = (kv.rank, kv.num_workers) if kv is not None else (0, 1)
    if elastic and kv is not None and kv.is_capable(mx.kv.KVStoreBase.OPTIMIZER):
        raise SystemExit("an elastic job is an allreduce job: --kvstore horovod or allreduce, not "
                         f"{kv.type!r}")
    lead = rank == 0
    if cfg.prune and kv is not None and kv.is_capable(mx.kv.KVStoreBase.ASYNC):
        raise SystemExit(f"--prune with the asynchronous store {kv.type!r}: its servers update the weights "
                         "themselves, so masks cannot change during training; use dist_sync or horovod")

    def say(msg: str) -> None:
        if lead:
            print(msg, file=log or sys.stdout, flush=True)

    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    mx.random.seed(cfg.seed)
    ctx = parse_contexts(cfg.ctx)
    train_set, test_set, data_desc = load_datasets(cfg)
    say(f"data: {data_desc}")
    to_tensor = transforms.ToTensor()
    sampler: Any = None
    if elastic:  # the same global batches for any world size: a restart re-shards them
        sampler = ElasticBatchSampler(len(train_set), cfg.batch_size, n_workers, rank, seed=cfg.seed)
        train_loader = DataLoader(train_set.transform_first(to_tensor), batch_sampler=sampler,
                                  num_workers=cfg.num_workers)
    elif kv is None:
        train_loader = DataLoader(train_set.transform_first(to_tensor), batch_size=cfg.batch_size,
                                  shuffle=True, last_batch="discard", num_workers=cfg.num_workers)
    else:  # each worker its shard, reshuffled every epoch with the same seed on every worker
        sampler = SplitSampler(len(train_set), n_workers, rank, even_size=True, seed=cfg.seed)
        train_loader = DataLoader(train_set.transform_first(to_tensor),
                                  batch_size=cfg.batch_size // n_workers, sampler=sampler,
                                  last_batch="discard", num_workers=cfg.num_workers)
    test_loader = DataLoader(test_set.transform_first(to_tensor), batch_size=max(cfg.batch_size, 256),
                             shuffle=False, last_batch="keep", num_workers=cfg.num_workers)
    classes = 100 if cfg.dataset == "cifar100" else 10
    net = model_zoo.vision.get_model(cfg.model, classes=classes)
    net.initialize(mx.init.Xavier(magnitude=2.24), ctx=ctx)
    # --init-from/--freeze/--prune need the parameters' shapes: prepare() runs at the first batch,
    # whose forward pass finishes them with the same random draws as a plain run's first step.
    pending = cfg.prune is not None or cfg.init_from is not None or cfg.freeze is not None
    if cfg.hybridize and not pending:
        net.hybridize()
    pruner: Any = None
    transfer: dict[str, Any] = {}
    sample: Any = None

    def prepare(x: Any) -> None:
        nonlocal pruner, sample
        with torch.no_grad(), autograd.predict_mode():
            net(x)
        sample = x[:2]
        if cfg.init_from is not None:
            info = transfer["init_from"] = load_pretrained(net, cfg.init_from, ctx)
            kept = ", ".join(f"{k} (file {tuple(v['file'])}, model {tuple(v['model'])})"
                             for k, v in info["shape_differs"].items())
            say(f"init: {len(info['loaded'])} of {len(info['loaded']) + len(info['kept'])} parameters from "
                f"{cfg.init_from}" + (f"; other shapes, kept as initialized: {kept}" if kept else "")
                + (f"; not in the file: {[k for k in info['kept'] if k not in info['shape_differs']]}"
                   if len(info["kept"]) > len(info["shape_differs"]) else ""))
        if cfg.freeze is not None:
            frozen = transfer["frozen"] = freeze_parameters(net, cfg.freeze)
            say(f"frozen ({len(frozen)}): {', '.join(frozen)}")
        if cfg.hybridize:
            net.hybridize()
        if cfg.prune is not None:
            pruner = make_pruner(cfg, len(train_loader))
            pruner.apply(net)
            say(f"pruning: {cfg.prune} ({pruner.scope}) to sparsity {cfg.sparsity} from step "
                f"{pruner.begin_step} to step {pruner.end_step} (end of epoch "
                f"{pruner.end_step // len(train_loader)}), masks updated every {pruner.frequency} steps")

    opt_params: dict[str, Any] = {"learning_rate": cfg.lr, "wd": cfg.wd}
    if cfg.lr_schedule == "cosine":
        # An asynchronous parameter server updates once per worker's push, not once per step.
        updates_per_step = n_workers if getattr(kv, "mode", "sync") == "async" else 1
        opt_params["lr_scheduler"] = mx.lr_scheduler.CosineScheduler(
            max_update=max(cfg.epochs * len(train_loader) * updates_per_step, 1), base_lr=cfg.lr)
    if cfg.optimizer.lower() in ("sgd", "nag", "signum", "lars"):
        opt_params["momentum"] = cfg.momentum
    comp = compression_params(cfg)
    if comp is not None and (kv is None or not kv.is_capable(mx.kv.KVStoreBase.GRADIENT_COMPRESSION)):
        raise SystemExit(f"--compression {cfg.compression} compresses what workers send each other: it needs "
                         "--workers 2 (or more) and --kvstore horovod, allreduce, dist_sync or dist_async "
                         "(with --servers 1 or more)"
                         + (f", not --kvstore {cfg.kvstore}" if kv is not None else ""))
    # pruning changes masks during training: the workers (not a store) update, so that the
    # optimizer states the masks zero are the ones in use (a parameter server refuses mask changes)
    trainer = Trainer(net.collect_params(), cfg.optimizer, opt_params,
                      kvstore=kv if kv is not None else cfg.kvstore, compression_params=comp,
                      update_on_kvstore=False if cfg.prune else None)
    # the training statistics must not go through the gradient compressor (a parameter server's
    # statistics go through the process group instead: see _sum_over_workers)
    stats_kv = mx.kv.create(kv.type) if comp is not None and not kv.is_capable(kv.OPTIMIZER) else kv
    if cfg.amp:
        from .. import amp

        amp.init({"bf16": "bfloat16", "fp16": "float16"}[cfg.amp])
        amp.init_trainer(trainer)
    loss_fn = loss.SoftmaxCrossEntropyLoss()
    ckpt: Any = None
    start_step, resumed = 0, {}
    if cfg.checkpoint_dir is not None:
        from ..checkpoint import CheckpointError, CheckpointManager

        every = cfg.checkpoint_every or default_every(len(train_loader), elastic)
        ckpt = CheckpointManager(cfg.checkpoint_dir, keep_last=cfg.checkpoint_keep, every_n_steps=every,
                                 async_save=True)
        if cfg.resume and ckpt.list():
            # restoring needs the parameters' shapes: a forward pass on two training images (its
            # random draws do not count: the checkpoint's RNG states are restored last).  Without
            # a checkpoint nothing runs here, so that the run draws as one without --resume does.
            x = split_and_load(torch.stack([to_tensor(train_set[i][0]) for i in range(2)]), ctx)[0]
            if pending:
                pending = False
                prepare(x)
            else:
                with torch.no_grad(), autograd.predict_mode():
                    net(x)
            try:  # the newest good checkpoint (a corrupt one is skipped with a warning)
                start_step = ckpt.restore(net=net, trainer=trainer, loader=None if elastic else train_loader)
            except CheckpointError as e:
                raise SystemExit(f"--resume: {e}") from None
            resumed = dict(ckpt.extra)
            restore_pruner(pruner, resumed, cfg.checkpoint_dir)
            at = int(resumed.get("epoch", 0))
            say(f"resumed from checkpoint step {start_step} under {cfg.checkpoint_dir} (epoch {at + 1}, "
                f"batch {start_step - at * len(train_loader)} of {len(train_loader)})")
        elif cfg.resume:
            say(f"--resume: no checkpoint under {cfg.checkpoint_dir} yet: starting from the beginning")
    hosts: list[str] = []
    if elastic:  # who is in the job now, against the checkpoint it resumes from
        hosts = gather_hosts(host_name())
        at = int(resumed.get("epoch", 0)) if start_step else 0
        sampler.set_start(start_step - at * len(train_loader))
        say(describe_change(resumed.get("hosts") if start_step else None, hosts, step=start_step, epoch=at,
                            batch=start_step - at * len(train_loader), batches=len(train_loader),
                            restart=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))))
    shown = {k: v for k, v in opt_params.items() if k != "lr_scheduler"}
    say(f"model: {cfg.model}  contexts: {ctx}  optimizer: {cfg.optimizer} {shown} ({cfg.lr_schedule} lr)  "
        f"batch: {cfg.batch_size}  epochs: {cfg.epochs}"
        + (f"  workers: {n_workers} x {cfg.batch_size // n_workers} ({kv.type} kvstore)" if kv else "")
        + (f"  amp: {cfg.amp}" if cfg.amp else "")
        + (f"  compression: {comp}" if comp else ""))
    history: list[dict[str, Any]] = list(resumed.get("history", []))

    def save_checkpoint(step: int, epoch: int, loss_sum: float, acc: Any, n_seen: int) -> None:
        ckpt.save(step, net=net, trainer=trainer, loader=train_loader, epoch=epoch,
                  stats=_epoch_stats(stats_kv, rank, n_workers,
                                     [loss_sum, float(acc.sum_metric), float(n_seen)]),
                  history=history, **({"hosts": hosts} if elastic else {}), **pruner_checkpoint_extra(pruner))

    step = start_step  # training steps done
    first_epoch = int(resumed.get("epoch", 0)) if start_step else 0
    t_start = time.perf_counter()
    for epoch in range(first_epoch, cfg.epochs):
        acc = mx.metric.Accuracy()
        loss_sum = 0.0
        n_seen = 0
        stats = resumed.get("stats") or []
        if start_step and epoch == first_epoch and stats:  # the epoch in progress
            loss_sum, correct, seen = resumed_stats(stats, rank, n_workers)
            n_seen = int(seen)
            acc.sum_metric, acc.num_inst = int(correct), n_seen
        if sampler is not None:
            sampler.set_epoch(epoch)
        bar = ProgressBar(len(train_loader), desc=f"epoch {epoch + 1}/{cfg.epochs}",
                          enabled=cfg.progress and lead)
        for data, label in train_loader:
            parts = split_and_load(data, ctx)
            labels = split_and_load(label, ctx)
            if pending:
                pending = False
                prepare(parts[0])
            with autograd.record():
                outs = [net(x) for x in parts]
                losses = [loss_fn(o, y) for o, y in zip(outs, labels)]
            if cfg.amp:
                with amp.scale_loss(losses, trainer) as scaled:
                    autograd.backward(scaled)
            else:
                for l in losses:
                    l.backward()
            # the global batch: stores sum over workers (MXNet); elastic shares may differ by one sample
            trainer.step(cfg.batch_size if elastic else data.shape[0] * n_workers)
            if pruner is not None:
                pruner.step()  # advances the schedule; masks stay written into the weights
            loss_sum += sum(float(l.detach().sum()) for l in losses)
            acc.update(labels, [o.detach() for o in outs])
            n_seen += data.shape[0]
            bar.update(1, samples=data.shape[0], loss=loss_sum / n_seen, acc=acc.get()[1])
            step += 1
            if ckpt is not None:
                saved = ckpt.should_save(step)
                if saved:  # with this epoch's running statistics of every worker
                    save_checkpoint(step, epoch, loss_sum, acc, n_seen)
                _test_kill_hook(step, ckpt, kv)
                if elastic:
                    test_kill_host_hook(step, ckpt)
                    paused = test_pause_hook(step, n_workers, ckpt)
                    if restart_agreed(step, paused):  # a worker joins: commit this step, then restart
                        if not saved:
                            save_checkpoint(step, epoch, loss_sum, acc, n_seen)
                        ckpt.wait()
                        say(f"membership change: the workers restart; saved checkpoint step {step}")
                        raise ElasticRestart(step)
        bar.close()
        train_loss, train_acc, rate = loss_sum / max(n_seen, 1), acc.get()[1], bar.rate
        if kv is not None:  # the whole job's loss, accuracy and throughput, not one shard's
            total_loss, correct, count, seconds = _sum_over_workers(
                stats_kv, "train_stats", [loss_sum, train_acc * n_seen, n_seen, bar.elapsed])
            train_loss, train_acc = total_loss / max(count, 1), correct / max(count, 1)
            rate = count / max(seconds / n_workers, 1e-9)
        test_acc = evaluate(net, test_loader, ctx) if lead else float("nan")
        rec = {"epoch": epoch + 1, "train_loss": train_loss, "train_acc": train_acc, "test_acc": test_acc,
               "seconds": bar.elapsed, "samples_per_sec": rate}
        if pruner is not None:
            from ..contrib import pruning

            rec["sparsity"] = pruning.sparsity(net)["total"]
        history.append(rec)
        say(f"epoch {epoch + 1}: train loss {rec['train_loss']:.4f}  train acc {rec['train_acc']:.4f}  "
            f"test acc {test_acc:.4f}  {rec['samples_per_sec']:,.0f} samples/s  {rec['seconds']:.1f}s"
            + (f"  sparsity {rec['sparsity']:.3f}" if pruner is not None else ""))
    if ckpt is not None:
        ckpt.wait()  # the last background write (raises what it raised)
    total = time.perf_counter() - t_start
    result = {"config": asdict(cfg), "data": data_desc, "epochs": history,
              "final_test_acc": history[-1]["test_acc"] if history else None, "total_seconds": total,
              "workers": n_workers, "torch": torch.__version__, "mxtorch": mx.__version__}
    if pruner is not None:  # what model.params holds: the weights with the masks' zeros
        from ..contrib import pruning

        sp, report = pruning.sparsity(net), pruning_report(net, pruner, sample)
        result["sparsity"], result["pruning"] = sp, report
        say(f"sparsity: {sp['total']:.4f} of the Dense/Conv weights are zero; "
            f"{report['nonzero_parameters']:,} of {report['parameters']:,} parameters are non-zero"
            + (f"; compacted: {report['compact_parameters']:,} parameters" if report.get("compact_parameters")
               else ""))
    if transfer:
        result["transfer"] = transfer
    if ckpt is not None:
        result["checkpoint"] = {"dir": cfg.checkpoint_dir, "every_steps": ckpt.every_n_steps,
                                "resumed_from_step": start_step, "steps": ckpt.list(),
                                "last_save": ckpt.last_save}
    if comp is not None:  # payload bytes this worker (worker 0 in the saved file) sent to its peers
        result["compression"] = {"params": comp, "wire_bytes_sent": int(getattr(kv, "wire_bytes_sent", 0))}
    if not lead:
        kv.close()  # type: ignore[union-attr]
        return result
    os.makedirs(cfg.output, exist_ok=True)
    params_path = os.path.join(cfg.output, "model.params")
    net.save_parameters(params_path, format="safetensors")  # mxtorch's own output: safetensors
    result["params_file"] = params_path
    atomic_write_text(os.path.join(cfg.output, "metrics.json"), json.dumps(result, indent=2))
    say(f"final held-out accuracy: {result['final_test_acc']:.4f}  ({total:.1f}s); saved {params_path} and "
        f"{os.path.join(cfg.output, 'metrics.json')}")
    if kv is not None:
        kv.close()
    return result


def _run_workers(cfg: TrainConfig, argv: list[str]) -> int:
    """Run this same ``mxtorch train`` command as ``cfg.workers`` local workers."""
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


def run(args: argparse.Namespace) -> int:
    from ..elastic.env import is_elastic_worker

    cfg = _config_from_args(args)
    if is_elastic_worker():  # a worker of `mxtorch launch --elastic`: always resumes
        cfg = elastic_config(cfg)
    check_train_config(cfg)  # every user error, before any data is loaded or a process started
    if compression_params(cfg) is not None and cfg.workers < 2 and launched_world_size() is None:
        raise SystemExit(f"--compression {cfg.compression} compresses what workers send each other: add "
                         "--workers 2 (or more) and --kvstore horovod (or allreduce, or dist_sync with "
                         "--servers 1)")
    if cfg.plan and launched_world_size() is None and cfg.workers < 2:
        raise SystemExit("--plan auto chooses how to split the job over its processes: add --workers N "
                         "(N >= 2) or run under mxtorch launch")
    if cfg.plan and launched_world_size() is None:
        argv = getattr(args, "argv", None)
        return _run_workers(cfg, list(argv) if argv is not None else sys.argv[1:])
    if cfg.plan:
        from .train_parallel import train_pipelined

        train_pipelined(cfg)
        return 0
    if cfg.pp > 1 or cfg.dp > 1:
        world = launched_world_size() or cfg.workers
        dp = cfg.dp or max(world // cfg.pp, 1)
        if launched_world_size() is None and cfg.workers == 1:
            cfg.workers = dp * cfg.pp
            given = getattr(args, "argv", None)
            pargv: list[str] = list(given) if given is not None else sys.argv[1:]
            # the stages' data-parallel groups reduce over a process subgroup (horovod's allreduce) or
            # over the parameter servers (--kvstore dist_sync/dist_async with --servers)
            from ..kvstore import ps as ps_stores

            ps = cfg.kvstore.lower() in ps_stores.STORE_NAMES
            return _run_workers(cfg if ps else replace(cfg, kvstore="horovod"),
                                [*pargv, "--workers", str(cfg.workers)])
        if dp * cfg.pp != world:
            raise SystemExit(f"--dp {dp} x --pp {cfg.pp} = {dp * cfg.pp} processes, but the job has {world}: "
                             f"launch dp*pp workers (--workers {dp * cfg.pp})")
    if (cfg.workers > 1 or cfg.servers) and launched_world_size() is None:
        argv = getattr(args, "argv", None)
        return _run_workers(cfg, list(argv) if argv is not None else sys.argv[1:])
    if cfg.pp > 1 or cfg.dp > 1:
        from .train_parallel import train_pipelined

        train_pipelined(cfg)
        return 0
    if is_elastic_worker():
        return run_elastic_worker(train, cfg)
    train(cfg)
    return 0
