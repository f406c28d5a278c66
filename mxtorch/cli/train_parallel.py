"""``mxtorch train --pp/--dp/--plan``: the default task with model parallelism (mxtorch.parallel).

Every rank of the job runs :func:`train_pipelined` (a :class:`PipelinedRun`); rank 0 prints and
writes the files.  With ``--plan auto`` rank 0 chooses the layout with :func:`mxtorch.parallel.plan`
and broadcasts it.  The features of ``mxtorch train`` plug in as the same hooks as in the
data-parallel loop (:mod:`.train_hooks`; ``--amp``, ``--init-from``/``--freeze``, ``--prune``,
``--checkpoint-dir``/``--resume``, ``MXTORCH_TRAIN_HOOKS``' plugins).  They see ``run.net``, the whole
Gluon network, of which this rank holds its stages' parameters (:attr:`PipelinedRun.stage_params`;
the others' are released again once the shapes' hooks ran), and ``run.trainer``, this rank's.  A
checkpoint keeps the whole model in one file (gathered as the run's ``model.params`` is) and each
rank's optimizer states, data position and RNGs; a resumed rank loads its stages from that file.
Pruning ranks each stage's weights layer by layer (a global threshold would need every stage).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, replace
from typing import Any

from ..checkpoint_io import atomic_write_text
from .train_config import TrainConfig, compression_params
from .train_data import load_datasets, num_classes
from .train_features import CheckpointHook, feature_hooks
from .train_hooks import TrainHook, plugin_hooks

__all__ = ["PipelinedRun", "WholeModel", "train_pipelined"]

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
    no stage 3 for an optimizer that needs whole parameters (its norms); only stage 1 beside a
    compressor whose payloads do not add up on the way to an owner (all but fp16/bf16)."""
    from ..gluon.zero_trainer import LAYERWISE_OPTIMIZERS
    from ..kvstore.ps import STORE_NAMES

    if cfg.kvstore.lower() in STORE_NAMES:
        return (0,)
    if cfg.compression is not None and cfg.compression not in ("fp16", "bf16"):
        return (0, 1)
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
        self.pipeline: Any = None  # the PipelineNet; self.net is the whole Gluon network it was cut from
        self.stage_params: Any = None  # this rank's stages' parameters (a ParameterDict)
        self.shapes_done = False
        self.stats_kv: Any = None  # sums over the job's process group (train_stats.sum_over_workers)
        self.checkpoint = next((h for h in self.hooks if isinstance(h, CheckpointHook)), None)
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
        self.net = net  # what the hooks see: the whole network, this rank's stages live in it
        self.pipeline = pnet = parallel.parallelize(
            net, pcfg, micro_batches=cfg.micro_batches, schedule=cfg.schedule,
            stages_per_rank=2 if cfg.schedule in ("interleaved", "zero_bubble") else 1,
            sample_input=self.sample, kvstore=dp_store, split_points=self._split_points(net),
            checkpoint_activations=self.ckpt)
        self.opt_params: dict[str, Any] = {"learning_rate": cfg.lr, "wd": cfg.wd}
        if cfg.lr_schedule == "cosine":
            self.opt_params["lr_scheduler"] = mx.lr_scheduler.CosineScheduler(
                max_update=max(cfg.epochs * len(self.train_loader), 1), base_lr=cfg.lr)
        if cfg.optimizer.lower() in ("sgd", "nag", "signum", "lars"):
            self.opt_params["momentum"] = cfg.momentum
        self.stage_params = pnet.collect_params()
        if self.zero:  # a ZeroTrainer over each stage's dp ranks (no store: it reduces itself)
            self.trainer = pnet.trainer(cfg.optimizer, self.opt_params,
                                        compression_params=compression_params(cfg))
        else:
            comp = compression_params(cfg) if pnet.kvstore is not None else None
            self.trainer = Trainer(self.stage_params, cfg.optimizer, self.opt_params,
                                   kvstore=pnet.kvstore, compression_params=comp)
        self.loss_fn = loss.SoftmaxCrossEntropyLoss()

    def _split_points(self, net: Any) -> list[str] | None:
        """Where the stages start: the plan's; with ``--checkpoint-dir`` balanced by parameter counts,
        so that every run of the job (a resumed one too) cuts the same stages and each rank's saved
        optimizer states fit it (a split balanced by measured time varies from run to run); else
        None, measured by parallelize."""
        if self.split_points is not None or self.cfg.checkpoint_dir is None:
            return self.split_points
        import math

        from ..gluon.block import params_by_path
        from ..parallel.split import chain_units, partition

        stages = self.cfg.pp * (2 if self.cfg.schedule in ("interleaved", "zero_bubble") else 1)
        units = chain_units(net, self.sample)
        sizes = [float(max(sum(math.prod(p.shape) for p in params_by_path(u.block).values() if p.shape), 1))
                 for u in units]
        return [units[i].path for i in partition(sizes, stages)[1:]]

    def say(self, msg: str) -> None:
        """Print ``msg`` on rank 0."""
        if self.lead:
            print(msg, file=self.log or sys.stdout, flush=True)

    def ensure_shapes(self, x: Any) -> None:
        """Run the hooks' :meth:`~.train_hooks.TrainHook.on_shapes` once (the stages' shapes are known
        from the start: a checkpoint's restore calls this first, as the data-parallel loop's does);
        other stages' parameters a hook loaded into :attr:`net` are released again."""
        if self.shapes_done:
            return
        self.shapes_done = True
        for hook in self.hooks:
            hook.on_shapes(self, x)
        own = {id(p) for p in self.stage_params.values()}
        for p in self.net.collect_params().values():
            if id(p) not in own and p.is_initialized:
                p.release_data()

    def resume_from(self, step: int, extra: dict[str, Any]) -> None:
        """Continue after a restored checkpoint of ``step`` whose extra is ``extra``."""
        self.step = self.start_step = step
        self.resumed = extra
        for hook in self.hooks:
            hook.load_state_dict(extra)

    def checkpoint_net(self, gather: bool = True) -> Any:
        """The network as a checkpoint keeps it: the whole model (gathered on rank 0 when ``gather``:
        every rank calls this together), restored into this rank's stages."""
        from ..gluon.serialization import load_tensors

        arrays: dict[str, Any] = {}
        if gather:
            with tempfile.TemporaryDirectory() as folder:  # rank 0's file is the one written
                path = os.path.join(folder, "model.safetensors")
                self.pipeline.save_parameters(path, format="safetensors")
                if self.lead:
                    arrays = load_tensors(path)
        return WholeModel(self.pipeline, arrays)

    def sum_over_stages(self, values: list[float]) -> list[float]:
        """``values`` (counts over this rank's stages) summed over the pipeline's stages: the first
        data-parallel replica's ranks each add theirs (every rank calls this together)."""
        from .train_stats import sum_over_workers

        mine = list(values) if self.pipeline.dp_rank == 0 else [0.0] * len(values)
        return sum_over_workers(None, "stage_sums", mine)

    def run(self) -> dict[str, Any]:
        """Train every epoch; returns the metrics (every rank writes the whole model together, rank 0
        the metrics)."""
        self._build()
        for hook in self.hooks:
            hook.on_start(self)
        self.ensure_shapes(self.sample)
        cfg, pnet = self.cfg, self.pipeline
        store = (f"zero={self.zero}" if self.zero
                 else pnet.kvstore.type if pnet.kvstore is not None else "none")
        self.say(f"model: {cfg.model}  layout: dp={self.dp} x pp={cfg.pp} x tp={self.tp}, {cfg.schedule}, "
                 f"{cfg.micro_batches} micro-batches  stages: {pnet.stage_paths[0][0]}.."
                 f"{pnet.stage_paths[-1][-1]} in {pnet.num_stages}  dp store: {store}  "
                 f"optimizer: {cfg.optimizer}  batch: {cfg.batch_size}  epochs: {cfg.epochs}"
                 + (f"  amp: {cfg.amp}" if cfg.amp else ""))
        self.history = list(self.resumed.get("history", []))
        first_epoch = int(self.resumed.get("epoch", 0)) if self.start_step else 0
        t_start = time.perf_counter()
        for epoch in range(first_epoch, cfg.epochs):
            self._train_epoch(epoch, resuming=bool(self.start_step) and epoch == first_epoch)
        for hook in self.hooks:
            hook.on_end(self)
        return self._finish(time.perf_counter() - t_start)

    def _train_epoch(self, epoch: int, resuming: bool = False) -> None:
        from ..progress import ProgressBar
        from .train_stats import resumed_stats

        cfg, pnet = self.cfg, self.pipeline
        self.epoch, self.loss_sum, self.n_seen = epoch, 0.0, 0
        stats = self.resumed.get("stats") or []
        if resuming and stats:  # the epoch in progress: this rank's running sums when it was saved
            self.loss_sum, _, seen = resumed_stats(stats, self.rank, self.n_workers)
            self.n_seen = int(seen)
        self.sampler.set_epoch(epoch)
        bar = ProgressBar(len(self.train_loader), desc=f"epoch {epoch + 1}/{cfg.epochs}",
                          enabled=cfg.progress and self.lead)
        for data, label in self.train_loader:
            # the Trainer goes along: with --amp the loss is scaled and the stages agree on overflows
            self.loss_sum += pnet.train_step(data, label, self.loss_fn, trainer=self.trainer) * data.shape[0]
            self.trainer.step(cfg.batch_size)  # the global batch: the dp store sums (MXNet's rule)
            self.n_seen += data.shape[0]
            self.step += 1
            bar.update(1, samples=data.shape[0] * self.dp, loss=self.loss_sum / max(self.n_seen, 1))
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

        cfg, pnet, history = self.cfg, self.pipeline, self.history
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


class WholeModel:
    """A pipelined network as a checkpoint's ``net`` (a :class:`~mxtorch.stateful.Stateful`): its
    state is the whole model (``arrays``, gathered on rank 0 as ``model.params`` is); loading one
    reads this rank's stages from it (:meth:`PipelineNet.load_parameters`'s rule: a file of any
    ``pp``, or of the plain network)."""

    def __init__(self, pipeline: Any, arrays: dict[str, Any]) -> None:
        self.pipeline, self.arrays = pipeline, arrays

    def state_dict(self) -> dict[str, Any]:
        return self.arrays

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from ..gluon.serialization import save_tensors

        with tempfile.TemporaryDirectory() as folder:  # the pipeline loads whole-model files
            path = os.path.join(folder, "model.safetensors")
            save_tensors(path, dict(state), format="safetensors")
            self.pipeline.load_parameters(path)
