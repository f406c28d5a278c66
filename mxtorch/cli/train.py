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
from typing import Any

from .train_config import (
    COMPRESSIONS,
    DATASETS,
    PRUNE_METHODS,
    PRUNE_SCOPES,
    TWO_BIT_RESIDUAL_LIMIT,
    TrainConfig,
    compression_params,
    launched_world_size,
)
from .train_data import load_datasets
from .train_job import TrainJob
from .train_loop import train

# what scripts and tests import from here (the command's modules are train_*.py)
__all__ = ["COMPRESSIONS", "DATASETS", "TrainConfig", "add_parser", "compression_params",
           "launched_world_size", "load_datasets", "run", "train"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    d = TrainConfig()
    p = sub.add_parser("train", help="train a model-zoo network on an embedded/local data set",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=d.model, help="model-zoo name (lenet, mlp, resnet18_v1, ...)")
    p.add_argument("--dataset", default=d.dataset, choices=DATASETS)
    p.add_argument("--data-root", default=d.data_root,
                   help="folder with the data set's standard files (idx / CIFAR binary); imagefolder: "
                        "DIR/<class>/<image> (every tenth image held out) or DIR/train/... and DIR/val/...")
    p.add_argument("--data-train", default=d.data_train, metavar="FILE.rec",
                   help="imagerecord: the training .rec file (its .idx beside it), e.g. from mxtorch im2rec")
    p.add_argument("--data-val", default=d.data_val, metavar="FILE.rec",
                   help="imagerecord: the validation .rec")
    p.add_argument("--data-shape", default=d.data_shape, metavar="C,H,W",
                   help="imagerecord/imagefolder: the crop each image is cut to (default 3,224,224; "
                        "C=1: gray)")
    p.add_argument("--num-classes", type=int, default=d.num_classes,
                   help="imagerecord/imagefolder: classes of the output layer (default: the class folders, "
                        "or 1 + the largest label in --data-train)")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="global batch size")
    p.add_argument("--optimizer", default=d.optimizer)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--momentum", type=float, default=d.momentum, help="for sgd/nag/rmsprop")
    p.add_argument("--wd", type=float, default=d.wd)
    p.add_argument("--lr-schedule", default=d.lr_schedule, choices=("cosine", "constant"),
                   help="cosine: decay the lr to 0 over the run (default); constant: keep it")
    p.add_argument("--ctx", default=None,
                   help="contexts, comma separated: 'cpu', 'cpu:0,cpu:1', 'gpu:0,gpu:1' (default: each "
                        "worker its own GPU(s) where there are GPUs, see mxtorch launch --gpus-per-worker; "
                        "else cpu)")
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
    p.add_argument("--tensorboard", default=d.tensorboard, metavar="DIR",
                   help="write TensorBoard event files into DIR: loss, lr, samples/s per step, accuracy per "
                        "epoch, each rank's step/data-wait/communication-wait seconds, the servers' load "
                        "(needs the tensorboard extra; `tensorboard --logdir DIR` shows them)")
    p.add_argument("--profile", default=d.profile, metavar="DIR",
                   help="record 5 training steps (after the first) with mx.profiler: one Chrome trace per "
                        "rank in DIR, joined into one timeline by `mxtorch trace merge DIR -o job.json`")
    return p

def run(args: argparse.Namespace) -> int:
    return TrainJob.from_args(args).run()
