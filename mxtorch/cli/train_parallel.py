"""``mxtorch train --pp/--dp/--plan``: the default task with model parallelism (mxtorch.parallel).

Every rank of the job runs :func:`train_pipelined` (a :class:`PipelinedRun`); rank 0 prints and
writes the files.  With ``--plan auto`` rank 0 chooses the layout with :func:`mxtorch.parallel.plan`
and broadcasts it.  The features of ``mxtorch train`` plug in as the same hooks as in the
data-parallel loop (:mod:`.train_hooks`; ``--amp``, ``MXTORCH_TRAIN_HOOKS``' plugins); those that
need the whole network on one rank (``--prune``, ``--init-from``, ``--freeze``, ``--checkpoint-dir``)
are refused for a pipelined job before it starts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, replace
from typing import Any

from ..checkpoint_io import atomic_write_text
from .train_config import TrainConfig, compression_params
from .train_data import load_datasets, num_classes
from .train_features import feature_hooks
from .train_hooks import TrainHook, plugin_hooks

__all__ = ["PipelinedRun", "train_pipelined"]

_PLAN_SCHEDULES = ("none", "gpipe", "1f1b")


def _agreed_plan(cfg: TrainConfig, info: Any) -> dict[str, Any]:
    """Rank 0 runs mxtorch.parallel.plan for this job and broadcasts the winner (as integers)."""
    import torch
    import torch.distributed as dist

    import mxtorch as mx

    from .. import parallel
    from ..gluon import model_zoo
    from ..gluon.data.vision import transforms
    from ..parallel.planner import usable_cores
    from ..parallel.split import chain_units

    header = torch.zeros(7 + 16, dtype=torch.int64)
    mx.random.seed(cfg.seed)
    net = model_zoo.vision.get_model(cfg.model, classes=num_classes(cfg))
    net.initialize(mx.init.Xavier(magnitude=2.24))
    train_set, _, _ = load_datasets(cfg)
    to_tensor = transforms.ToTensor()
    sample = torch.stack([to_tensor(train_set[i][0]) for i in range(16)])
    with mx.autograd.predict_mode():
        net(sample)
    units = chain_units(net, sample)
    if info.rank == 0:
        # the job trains on CPUs: each host's processes share its usable cores (hosts alike, so the
        # job's processes share the hosts' cores together)
        hosts = max(info.world_size // max(info.local_size, 1), 1)
        plans = parallel.plan(net, sample, world_size=info.world_size, memory_per_device=cfg.plan_memory,
                              batch_size=cfg.batch_size, bandwidth="8Gbit", micro_batches=(1, 2, 4, 8),
                              cores=usable_cores() * hosts, zero_stages=_zero_stages(cfg))
        best = plans[0]
        print(f"plan: {len(plans)} layouts fit {cfg.plan_memory}; the winner:\n{best.explain()}", flush=True)
        paths = [u.path for u in units]
        starts = [paths.index(p) for p in best.split_points]
        header[:7] = torch.tensor([best.config.dp, best.config.pp, best.config.tp, best.micro_batches,
                                   _PLAN_SCHEDULES.index(best.schedule), int(best.checkpointing),
                                   best.config.zero])
        header[7:7 + len(starts)] = torch.tensor(starts, dtype=torch.int64)
    dist.broadcast(header, src=0)
    dp, pp, tp, m, sched, ck, zero = (int(v) for v in header[:7])
    starts = [int(v) for v in header[7:7 + pp - 1]]
    schedule = "gpipe" if sched == 0 else _PLAN_SCHEDULES[sched]  # one stage: any schedule runs it
    return {"dp": dp, "pp": pp, "tp": tp, "m": m, "schedule": schedule, "ckpt": bool(ck), "zero": zero,
            "split_points": [units[i].path for i in starts] or None}


def _zero_stages(cfg: TrainConfig) -> tuple[int, ...]:
    """The ZeRO stages the plan may choose: none over parameter servers (the store reduces there);
    no stage 3 for an optimizer that needs whole parameters (its norms)."""
    from ..gluon.zero_trainer import LAYERWISE_OPTIMIZERS
    from ..kvstore.ps import STORE_NAMES

    if cfg.kvstore.lower() in STORE_NAMES:
        return (0,)
    return (0, 1, 2) if cfg.optimizer.lower() in LAYERWISE_OPTIMIZERS else (0, 1, 2, 3)


def train_pipelined(cfg: TrainConfig, log: Any = None) -> dict[str, Any]:
    """``train`` with the network cut into ``cfg.pp`` pipeline stages (mxtorch.parallel) and ``dp``
    data-parallel replicas of the pipeline; every rank runs this, rank 0 prints and writes files."""
    return PipelinedRun(cfg, log).run()


class PipelinedRun:
    """This rank's part of a pipelined run: it joins the job (and agrees on the plan), builds the
    data, the stages and the Trainer, trains epoch by epoch and writes the whole model (rank 0 the
    metrics).  Its features are :attr:`hooks`, called at the points :mod:`.train_hooks` lists (the
    backward pass is the pipeline's own: ``backward`` is not asked); they read its public attributes,
    named as :class:`~.train_loop.DataParallelRun`'s."""

    def __init__(self, cfg: TrainConfig, log: Any = None) -> None:
        import torch

        import mxtorch as mx

        from .. import distributed
        from ..kvstore.ps import STORE_NAMES

        self.cfg, self.log = cfg, log
        self.elastic = False
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        before, after = feature_hooks(cfg, elastic=False)
        # a plugin is imported (and a bad one refused) before this process joins the job
        self.hooks: list[TrainHook] = [*before, *plugin_hooks(self), *after]
        self.over_servers = cfg.kvstore.lower() in STORE_NAMES
        if self.over_servers:
            # join the parameter-server job first (a scheduler or server process running this same
            # command becomes its role there); each stage's dp ranks then share the servers as a group
            mx.kv.create(cfg.kvstore.lower())
        self.info = info = distributed.init()
        self.rank: int = info.rank
        self.n_workers: int = info.world_size
        self.lead = self.rank == 0
        self.kv: Any = None  # the dp store is the pipeline's (pnet.kvstore)
        self.stats_kv: Any = None  # sums over the job's process group (train_stats.sum_over_workers)
        self.checkpoint: Any = None
        self.force_restart_check = False
        self.tp, self.ckpt, self.split_points, self.zero = 1, False, None, 0
        if cfg.plan:
            chosen = _agreed_plan(cfg, info)
            self.cfg = cfg = replace(cfg, pp=chosen["pp"], dp=chosen["dp"], micro_batches=chosen["m"],
                                     schedule=chosen["schedule"])
            self.tp, self.ckpt, self.split_points = chosen["tp"], chosen["ckpt"], chosen["split_points"]
            self.zero = chosen["zero"]
        self.dp: int = cfg.dp or info.world_size // cfg.pp
        self.step = self.start_step = 0
        self.resumed: dict[str, Any] = {}
        self.epoch = 0
        self.loss_sum, self.n_seen = 0.0, 0
        self.acc: Any = None  # the pipeline reports no training accuracy
        self.history: list[dict[str, Any]] = []

    def _build(self) -> None:

        import mxtorch as mx

        from .. import parallel
        from ..gluon import Trainer, loss, model_zoo
        from ..gluon.data import DataLoader, SplitSampler
        from ..gluon.data.vision import transforms

        cfg, dp = self.cfg, self.dp
        if cfg.batch_size % (dp * cfg.micro_batches):
            raise SystemExit(f"--batch-size {cfg.batch_size} must be divisible by dp x micro-batches = "
                             f"{dp} x {cfg.micro_batches}")
        mx.random.seed(cfg.seed)
        self.ctx = [mx.cpu()]
        self.train_set, test_set, self.data_desc = load_datasets(cfg)
        self.say(f"data: {self.data_desc}")
        to_tensor = transforms.ToTensor()
        pcfg = parallel.ParallelConfig(dp=dp, pp=cfg.pp, tp=self.tp, zero=self.zero)
        self.sampler = SplitSampler(len(self.train_set), dp, pcfg.coords(self.rank)[0], even_size=True,
                                    seed=cfg.seed)
        local = cfg.batch_size // dp
        self.train_loader = DataLoader(self.train_set.transform_first(to_tensor), batch_size=local,
                                       sampler=self.sampler, last_batch="discard",
                                       num_workers=cfg.num_workers)
        self.test_loader = DataLoader(test_set.transform_first(to_tensor),
                                      batch_size=max(cfg.batch_size, 256), shuffle=False, last_batch="keep",
                                      num_workers=cfg.num_workers)
        net = model_zoo.vision.get_model(cfg.model, classes=num_classes(cfg))
        net.initialize(mx.init.Xavier(magnitude=2.24))
        self.sample = next(iter(self.train_loader))[0][: local // cfg.micro_batches]
        with mx.autograd.predict_mode():
            net(self.sample)  # finishes deferred shapes alike on every rank (same seed)
        dp_store = cfg.kvstore.lower() if self.over_servers else "horovod" if dp > 1 else None
        self.net = pnet = parallel.parallelize(
            net, pcfg, micro_batches=cfg.micro_batches, schedule=cfg.schedule,
            stages_per_rank=2 if cfg.schedule in ("interleaved", "zero_bubble") else 1,
            sample_input=self.sample, kvstore=dp_store, split_points=self.split_points,
            checkpoint_activations=self.ckpt)
        self.opt_params: dict[str, Any] = {"learning_rate": cfg.lr, "wd": cfg.wd}
        if cfg.lr_schedule == "cosine":
            self.opt_params["lr_scheduler"] = mx.lr_scheduler.CosineScheduler(
                max_update=max(cfg.epochs * len(self.train_loader), 1), base_lr=cfg.lr)
        if cfg.optimizer.lower() in ("sgd", "nag", "signum", "lars"):
            self.opt_params["momentum"] = cfg.momentum
        if self.zero:  # a ZeroTrainer over each stage's dp ranks (no store: it reduces itself)
            self.trainer = pnet.trainer(cfg.optimizer, self.opt_params)
        else:
            comp = compression_params(cfg) if pnet.kvstore is not None else None
            self.trainer = Trainer(pnet.collect_params(), cfg.optimizer, self.opt_params,
                                   kvstore=pnet.kvstore, compression_params=comp)
        self.loss_fn = loss.SoftmaxCrossEntropyLoss()

    def say(self, msg: str) -> None:
        """Print ``msg`` on rank 0."""
        if self.lead:
            print(msg, file=self.log or sys.stdout, flush=True)

    def run(self) -> dict[str, Any]:
        """Train every epoch; returns the metrics (every rank writes the whole model together, rank 0
        the metrics)."""
        self._build()
        for hook in self.hooks:
            hook.on_start(self)
        for hook in self.hooks:  # the stages' shapes are known from the start
            hook.on_shapes(self, self.sample)
        cfg, pnet = self.cfg, self.net
        store = (f"zero={self.zero}" if self.zero
                 else pnet.kvstore.type if pnet.kvstore is not None else "none")
        self.say(f"model: {cfg.model}  layout: dp={self.dp} x pp={cfg.pp} x tp={self.tp}, {cfg.schedule}, "
                 f"{cfg.micro_batches} micro-batches  stages: {pnet.stage_paths[0][0]}.."
                 f"{pnet.stage_paths[-1][-1]} in {pnet.num_stages}  dp store: {store}  "
                 f"optimizer: {cfg.optimizer}  batch: {cfg.batch_size}  epochs: {cfg.epochs}"
                 + (f"  amp: {cfg.amp}" if cfg.amp else ""))
        t_start = time.perf_counter()
        for epoch in range(cfg.epochs):
            self._train_epoch(epoch)
        for hook in self.hooks:
            hook.on_end(self)
        return self._finish(time.perf_counter() - t_start)

    def _train_epoch(self, epoch: int) -> None:
        from ..progress import ProgressBar

        cfg, pnet = self.cfg, self.net
        self.epoch, self.loss_sum, self.n_seen = epoch, 0.0, 0
        self.sampler.set_epoch(epoch)
        bar = ProgressBar(len(self.train_loader), desc=f"epoch {epoch + 1}/{cfg.epochs}",
                          enabled=cfg.progress and self.lead)
        for data, label in self.train_loader:
            # the Trainer goes along: with --amp the loss is scaled and the stages agree on overflows
            self.loss_sum += pnet.train_step(data, label, self.loss_fn, trainer=self.trainer) * data.shape[0]
            self.trainer.step(cfg.batch_size)  # the global batch: the dp store sums (MXNet's rule)
            self.n_seen += data.shape[0]
            self.step += 1
            bar.update(1, samples=data.shape[0] * self.dp, loss=self.loss_sum / self.n_seen)
            for hook in self.hooks:
                hook.on_step(self)
        bar.close()
        correct = count = 0
        for data, label in self.test_loader:  # every rank takes part: the pipeline runs on all of them
            out = pnet(data)
            correct += int((out.argmax(1) == label.to(out.device).long()).sum())
            count += int(label.shape[0])
        rec = {"epoch": epoch + 1, "train_loss": self.loss_sum / max(self.n_seen, 1),
               "test_acc": correct / max(count, 1), "seconds": bar.elapsed,
               "samples_per_sec": self.n_seen * self.dp / max(bar.elapsed, 1e-9)}
        for hook in self.hooks:
            hook.on_epoch_end(self, rec)
        self.history.append(rec)
        self.say(f"epoch {epoch + 1}: train loss {rec['train_loss']:.4f}  test acc {rec['test_acc']:.4f}  "
                 f"{rec['samples_per_sec']:,.0f} samples/s  {rec['seconds']:.1f}s")

    def _finish(self, total: float) -> dict[str, Any]:
        import torch

        import mxtorch as mx

        cfg, pnet, history = self.cfg, self.net, self.history
        result = {"config": asdict(cfg), "data": self.data_desc, "epochs": history,
                  "final_test_acc": history[-1]["test_acc"] if history else None,
                  "total_seconds": total, "workers": self.n_workers,
                  "pipeline": {"dp": self.dp, "pp": cfg.pp, "tp": self.tp, "schedule": cfg.schedule,
                               "kvstore": None if self.zero or pnet.kvstore is None else pnet.kvstore.type,
                               "zero": self.zero,
                               "micro_batches": cfg.micro_batches, "stages": pnet.stage_paths,
                               "tp_plan": pnet.tp_plan, "planned": bool(cfg.plan)},
                  "torch": torch.__version__, "mxtorch": mx.__version__}
        for hook in self.hooks:
            result.update(hook.report(self))
        os.makedirs(cfg.output, exist_ok=True)
        params_path = os.path.join(cfg.output, "model.params")
        # every rank: the stages meet in one whole-model file (mxtorch's own output: safetensors)
        pnet.save_parameters(params_path, format="safetensors")
        if self.lead:
            result["params_file"] = params_path
            atomic_write_text(os.path.join(cfg.output, "metrics.json"), json.dumps(result, indent=2))
            self.say(f"final held-out accuracy: {result['final_test_acc']:.4f}; saved {params_path} "
                     "(the whole model)")
        return result
