"""The data-parallel training loop of ``mxtorch train`` (one process, one replica per context, or
one worker of a launched job): :class:`DataParallelRun`, whose features plug in as hooks
(:mod:`.train_hooks`, :mod:`.train_features`), and :func:`train`, which runs it."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from typing import Any

from ..checkpoint_io import atomic_write_text
from ..profiler import span
from .train_checks import check_train_config
from .train_config import TrainConfig, compression_params, launched_world_size
from .train_data import evaluate, load_datasets, num_classes, parse_contexts
from .train_extras import elastic_config
from .train_features import CheckpointHook, feature_hooks
from .train_hooks import TrainHook, plugin_hooks
from .train_stats import resumed_stats, sum_over_workers

__all__ = ["DataParallelRun", "train"]


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


def train(cfg: TrainConfig, log: Any = None) -> dict[str, Any]:
    """Run the training job described by ``cfg``; returns the metrics that are also saved.

    In a job started by ``mxtorch launch`` (or ``--workers N``) with a distributed KVStore,
    this process trains on its shard and only worker 0 evaluates, prints and writes files:
    the held-out accuracy then describes exactly the saved model (parameters are equal on
    every worker, BatchNorm running statistics are worker 0's).
    """
    return DataParallelRun(cfg, log).run()


class DataParallelRun:
    """This process's part of a data-parallel training run: it joins the job, builds the data, the
    network and the Trainer, trains epoch by epoch and (worker 0) evaluates and writes model.params
    and metrics.json.  Its features are :attr:`hooks`; they read and change its public attributes."""

    def __init__(self, cfg: TrainConfig, log: Any = None) -> None:
        import mxtorch as mx

        from ..elastic import is_elastic_worker

        self.elastic = is_elastic_worker()
        if self.elastic:  # every (re)start resumes from the newest checkpoint
            cfg = elastic_config(cfg)
        check_train_config(cfg)
        self.cfg, self.log = cfg, log
        before, after = feature_hooks(cfg, self.elastic)
        # a plugin is imported (and a bad one refused) before this process joins the job
        self.hooks: list[TrainHook] = [*before, *plugin_hooks(self), *after]
        self.kv = kv = _join_job(cfg, self.elastic)
        self.rank: int = kv.rank if kv is not None else 0
        self.n_workers: int = kv.num_workers if kv is not None else 1
        if self.elastic and kv is not None and kv.is_capable(mx.kv.KVStoreBase.OPTIMIZER):
            raise SystemExit("an elastic job is an allreduce job: --kvstore horovod or allreduce, not "
                             f"{kv.type!r}")
        self.lead = self.rank == 0
        if cfg.prune and kv is not None and kv.is_capable(mx.kv.KVStoreBase.ASYNC):
            raise SystemExit(f"--prune with the asynchronous store {kv.type!r}: its servers update the "
                             "weights themselves, so masks cannot change during training; use dist_sync or "
                             "horovod")
        self.checkpoint = next((h for h in self.hooks if isinstance(h, CheckpointHook)), None)
        self.stage_params: Any = None  # the whole network is here (a pipelined run holds its stages')
        self.force_restart_check = False  # a hook asks the elastic job to agree on a restart now
        self.step = self.start_step = 0  # training steps done; the checkpoint's step when resumed
        self.resumed: dict[str, Any] = {}  # the resumed checkpoint's extra
        self.epoch = 0
        self.loss_sum, self.n_seen = 0.0, 0  # the epoch's running statistics, with acc (an Accuracy)
        self.acc: Any = None
        self.history: list[dict[str, Any]] = []

    def say(self, msg: str) -> None:
        """Print ``msg`` on worker 0."""
        if self.lead:
            print(msg, file=self.log or sys.stdout, flush=True)

    # ---- set-up ----------------------------------------------------------------------------
    def _build(self) -> None:
        import torch

        import mxtorch as mx

        from ..gluon import Trainer, loss, model_zoo

        cfg, kv = self.cfg, self.kv
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        mx.random.seed(cfg.seed)
        self.ctx = parse_contexts(cfg.ctx)
        self.train_set, test_set, self.data_desc = load_datasets(cfg)
        self.say(f"data: {self.data_desc}")
        self._build_loaders(test_set)
        self.net = model_zoo.vision.get_model(cfg.model, classes=num_classes(cfg))
        self.net.initialize(mx.init.Xavier(magnitude=2.24), ctx=self.ctx)
        # hooks that need the parameters' shapes (--init-from/--freeze/--prune) see them at the first
        # batch, whose forward pass finishes them with the same random draws as a plain run's first step
        self.pending = any(h.needs_shapes for h in self.hooks)
        if cfg.hybridize and not self.pending:
            self.net.hybridize()
        self.opt_params: dict[str, Any] = {"learning_rate": cfg.lr, "wd": cfg.wd}
        if cfg.lr_schedule == "cosine":
            # An asynchronous parameter server updates once per worker's push, not once per step.
            updates_per_step = self.n_workers if getattr(kv, "mode", "sync") == "async" else 1
            self.opt_params["lr_scheduler"] = mx.lr_scheduler.CosineScheduler(
                max_update=max(cfg.epochs * len(self.train_loader) * updates_per_step, 1), base_lr=cfg.lr)
        if cfg.optimizer.lower() in ("sgd", "nag", "signum", "lars"):
            self.opt_params["momentum"] = cfg.momentum
        self.comp = comp = compression_params(cfg)
        if comp is not None and (kv is None or not kv.is_capable(mx.kv.KVStoreBase.GRADIENT_COMPRESSION)):
            raise SystemExit(f"--compression {cfg.compression} compresses what workers send each other: it "
                             "needs --workers 2 (or more) and --kvstore horovod, allreduce, dist_sync or "
                             "dist_async (with --servers 1 or more)"
                             + (f", not --kvstore {cfg.kvstore}" if kv is not None else ""))
        # pruning changes masks during training: the workers (not a store) update, so that the
        # optimizer states the masks zero are the ones in use (a parameter server refuses mask changes)
        self.trainer = Trainer(self.net.collect_params(), cfg.optimizer, self.opt_params,
                               kvstore=kv if kv is not None else cfg.kvstore, compression_params=comp,
                               update_on_kvstore=False if cfg.prune else None)
        # the training statistics must not go through the gradient compressor (a parameter server's
        # statistics go through the process group instead: see sum_over_workers)
        self.stats_kv = (mx.kv.create(kv.type) if comp is not None and not kv.is_capable(kv.OPTIMIZER)
                         else kv)
        self.loss_fn = loss.SoftmaxCrossEntropyLoss()

    def _build_loaders(self, test_set: Any) -> None:
        from ..elastic import ElasticBatchSampler
        from ..gluon.data import DataLoader, SplitSampler
        from ..gluon.data.vision import transforms

        cfg, kv, train = self.cfg, self.kv, self.train_set.transform_first(transforms.ToTensor())
        self.sampler: Any = None
        if self.elastic:  # the same global batches for any world size: a restart re-shards them
            self.sampler = ElasticBatchSampler(len(self.train_set), cfg.batch_size, self.n_workers, self.rank,
                                               seed=cfg.seed)
            self.train_loader = DataLoader(train, batch_sampler=self.sampler, num_workers=cfg.num_workers)
        elif kv is None:
            self.train_loader = DataLoader(train, batch_size=cfg.batch_size, shuffle=True,
                                           last_batch="discard", num_workers=cfg.num_workers)
        else:  # each worker its shard, reshuffled every epoch with the same seed on every worker
            self.sampler = SplitSampler(len(self.train_set), self.n_workers, self.rank, even_size=True,
                                        seed=cfg.seed)
            self.train_loader = DataLoader(train, batch_size=cfg.batch_size // self.n_workers,
                                           sampler=self.sampler, last_batch="discard",
                                           num_workers=cfg.num_workers)
        self.test_loader = DataLoader(test_set.transform_first(transforms.ToTensor()),
                                      batch_size=max(cfg.batch_size, 256), shuffle=False, last_batch="keep",
                                      num_workers=cfg.num_workers)

    def ensure_shapes(self, x: Any) -> None:
        """Finish the parameters' shapes with a forward pass on ``x`` (and run the hooks waiting for them)."""
        import torch

        from .. import autograd

        if self.pending:
            self.pending = False
            with torch.no_grad(), autograd.predict_mode():
                self.net(x)
            for hook in self.hooks:
                hook.on_shapes(self, x)
            if self.cfg.hybridize:
                self.net.hybridize()
        else:
            with torch.no_grad(), autograd.predict_mode():
                self.net(x)

    def checkpoint_net(self, gather: bool = True) -> Any:
        """The network as a checkpoint keeps it: itself (a pipelined run gathers its stages)."""
        return self.net

    def resume_from(self, step: int, extra: dict[str, Any]) -> None:
        """Continue after a restored checkpoint of ``step`` whose extra is ``extra``."""
        self.step = self.start_step = step
        self.resumed = extra
        for hook in self.hooks:
            hook.load_state_dict(extra)

    # ---- training --------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Train every epoch; returns the metrics (worker 0 also writes them and model.params)."""
        self._build()
        for hook in self.hooks:
            hook.on_start(self)
        cfg, kv = self.cfg, self.kv
        self.history = list(self.resumed.get("history", []))
        shown = {k: v for k, v in self.opt_params.items() if k != "lr_scheduler"}
        self.say(f"model: {cfg.model}  contexts: {self.ctx}  optimizer: {cfg.optimizer} {shown} "
                 f"({cfg.lr_schedule} lr)  batch: {cfg.batch_size}  epochs: {cfg.epochs}"
                 + (f"  workers: {self.n_workers} x {cfg.batch_size // self.n_workers} ({kv.type} kvstore)"
                    if kv else "")
                 + (f"  amp: {cfg.amp}" if cfg.amp else "")
                 + (f"  compression: {self.comp}" if self.comp else ""))
        first_epoch = int(self.resumed.get("epoch", 0)) if self.start_step else 0
        t_start = time.perf_counter()
        for epoch in range(first_epoch, cfg.epochs):
            self._train_epoch(epoch, resuming=bool(self.start_step) and epoch == first_epoch)
        for hook in self.hooks:
            hook.on_end(self)
        return self._finish(time.perf_counter() - t_start)

    def _train_epoch(self, epoch: int, resuming: bool) -> None:
        import mxtorch as mx

        from ..progress import ProgressBar

        cfg = self.cfg
        self.epoch, self.acc = epoch, mx.metric.Accuracy()
        self.loss_sum, self.n_seen = 0.0, 0
        stats = self.resumed.get("stats") or []
        if resuming and stats:  # the epoch in progress
            self.loss_sum, correct, seen = resumed_stats(stats, self.rank, self.n_workers)
            self.n_seen = int(seen)
            self.acc.sum_metric, self.acc.num_inst = int(correct), self.n_seen
        if self.sampler is not None:
            self.sampler.set_epoch(epoch)
        bar = ProgressBar(len(self.train_loader), desc=f"epoch {epoch + 1}/{cfg.epochs}",
                          enabled=cfg.progress and self.lead)
        for data, label in self.train_loader:
            self._train_batch(data, label)
            bar.update(1, samples=data.shape[0], loss=self.loss_sum / self.n_seen, acc=self.acc.get()[1])
            for hook in self.hooks:
                hook.on_step(self)
        bar.close()
        rec = self._epoch_record(epoch, bar)
        for hook in self.hooks:
            hook.on_epoch_end(self, rec)
        self.history.append(rec)
        self.say(f"epoch {epoch + 1}: train loss {rec['train_loss']:.4f}  train acc {rec['train_acc']:.4f}  "
                 f"test acc {rec['test_acc']:.4f}  {rec['samples_per_sec']:,.0f} samples/s  "
                 f"{rec['seconds']:.1f}s"
                 + (f"  sparsity {rec['sparsity']:.3f}" if "sparsity" in rec else ""))

    def _train_batch(self, data: Any, label: Any) -> None:
        from .. import autograd
        from ..gluon.utils import split_and_load

        parts, labels = split_and_load(data, self.ctx), split_and_load(label, self.ctx)
        if self.pending:
            self.ensure_shapes(parts[0])
        with autograd.record():
            outs = [self.net(x) for x in parts]
            losses = [self.loss_fn(o, y) for o, y in zip(outs, labels)]
        if not any(hook.backward(self, losses) for hook in self.hooks):  # mxtorch.autograd.backward's span
            with span("backward"):
                for l in losses:
                    l.backward()
        # the global batch: stores sum over workers (MXNet); elastic shares may differ by one sample
        self.trainer.step(self.cfg.batch_size if self.elastic else data.shape[0] * self.n_workers)
        self.loss_sum += sum(float(l.detach().sum()) for l in losses)
        self.acc.update(labels, [o.detach() for o in outs])
        self.n_seen += data.shape[0]
        self.step += 1

    def _epoch_record(self, epoch: int, bar: Any) -> dict[str, Any]:
        """The epoch's loss, accuracy and throughput over the whole job, and the held-out accuracy."""
        train_loss, train_acc, rate = self.loss_sum / max(self.n_seen, 1), self.acc.get()[1], bar.rate
        if self.kv is not None:  # the whole job's loss, accuracy and throughput, not one shard's
            sums = [self.loss_sum, train_acc * self.n_seen, self.n_seen, bar.elapsed]
            total_loss, correct, count, seconds = sum_over_workers(self.stats_kv, "train_stats", sums)
            train_loss, train_acc = total_loss / max(count, 1), correct / max(count, 1)
            rate = count / max(seconds / self.n_workers, 1e-9)
        test_acc = evaluate(self.net, self.test_loader, self.ctx) if self.lead else float("nan")
        return {"epoch": epoch + 1, "train_loss": train_loss, "train_acc": train_acc, "test_acc": test_acc,
                "seconds": bar.elapsed, "samples_per_sec": rate}

    def _finish(self, total: float) -> dict[str, Any]:
        """The run's metrics; worker 0 writes them and model.params."""
        import torch

        import mxtorch as mx

        cfg, kv, history = self.cfg, self.kv, self.history
        result = {"config": asdict(cfg), "data": self.data_desc, "epochs": history,
                  "final_test_acc": history[-1]["test_acc"] if history else None, "total_seconds": total,
                  "workers": self.n_workers, "torch": torch.__version__, "mxtorch": mx.__version__}
        for hook in self.hooks:
            result.update(hook.report(self))
        if self.comp is not None:  # payload bytes this worker (worker 0 in the saved file) sent to its peers
            result["compression"] = {"params": self.comp,
                                     "wire_bytes_sent": int(getattr(kv, "wire_bytes_sent", 0))}
        if not self.lead:
            kv.close()  # type: ignore[union-attr]
            return result
        os.makedirs(cfg.output, exist_ok=True)
        params_path = os.path.join(cfg.output, "model.params")
        self.net.save_parameters(params_path, format="safetensors")  # mxtorch's own output: safetensors
        result["params_file"] = params_path
        atomic_write_text(os.path.join(cfg.output, "metrics.json"), json.dumps(result, indent=2))
        self.say(f"final held-out accuracy: {result['final_test_acc']:.4f}  ({total:.1f}s); saved "
                 f"{params_path} and {os.path.join(cfg.output, 'metrics.json')}")
        if kv is not None:
            kv.close()
        return result
