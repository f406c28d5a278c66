"""The features of ``mxtorch train``'s training loop, each a :class:`~.train_hooks.TrainHook`:
``--init-from``/``--freeze`` (:class:`TransferHook`), ``--prune`` (:class:`PruningHook`), ``--amp``
(:class:`AmpHook`), ``--checkpoint-dir`` (:class:`CheckpointHook`) and the membership of an elastic job
(:class:`ElasticHook`); :func:`feature_hooks` lists those a configuration asks for."""

from __future__ import annotations

import os
from typing import Any

from .train_config import TrainConfig
from .train_extras import (
    default_every,
    freeze_parameters,
    load_pretrained,
    make_pruner,
    pruning_report,
    restore_pruner,
)
from .train_hooks import TrainHook
from .train_observe import observability_hooks
from .train_stats import epoch_stats

__all__ = ["AmpHook", "CheckpointHook", "ElasticHook", "PruningHook", "TransferHook", "feature_hooks"]


class TransferHook(TrainHook):
    """``--init-from PATH``: start from a saved network's matching parameters; ``--freeze REGEX``: do
    not train the parameters it matches.  Both need the parameters' shapes."""

    needs_shapes = True

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.transfer: dict[str, Any] = {}

    def on_shapes(self, run: Any, x: Any) -> None:
        cfg = self.cfg
        if cfg.init_from is not None:
            info = self.transfer["init_from"] = load_pretrained(run.net, cfg.init_from, run.ctx)
            kept = ", ".join(f"{k} (file {tuple(v['file'])}, model {tuple(v['model'])})"
                             for k, v in info["shape_differs"].items())
            n_loaded = len(info["loaded"])
            run.say(f"init: {n_loaded} of {n_loaded + len(info['kept'])} parameters from {cfg.init_from}"
                    + (f"; other shapes, kept as initialized: {kept}" if kept else "")
                    + (f"; not in the file: {[k for k in info['kept'] if k not in info['shape_differs']]}"
                       if len(info["kept"]) > len(info["shape_differs"]) else ""))
        if cfg.freeze is not None:
            frozen = self.transfer["frozen"] = freeze_parameters(run.net, cfg.freeze)
            run.say(f"frozen ({len(frozen)}): {', '.join(frozen)}")

    def report(self, run: Any) -> dict[str, Any]:
        return {"transfer": self.transfer} if self.transfer else {}


class PruningHook(TrainHook):
    """``--prune``: a gradual Pruner (polynomial schedule) applied once the shapes are known and
    attached to the Trainer, whose every step is a step of its schedule; checkpoints keep it (masks
    and schedule position) as the Stateful ``pruner``."""

    needs_shapes = True

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.pruner: Any = None
        self.sample: Any = None  # two training images, for the structured report's compacted net

    def on_shapes(self, run: Any, x: Any) -> None:
        self.sample = x[:2]
        # a pipelined run holds its stages' layers only: its Pruner ranks those (layer by layer)
        only = None if run.stage_params is None else list(run.stage_params.keys())
        pruner = self.pruner = make_pruner(self.cfg, len(run.train_loader), only=only)
        pruner.apply(run.net)
        pruner.attach(run.trainer)  # the Trainer's update hook 'pruning' steps it
        run.say(f"pruning: {self.cfg.prune} ({pruner.scope}) to sparsity {self.cfg.sparsity} from step "
                f"{pruner.begin_step} to step {pruner.end_step} (end of epoch "
                f"{pruner.end_step // len(run.train_loader)}), masks updated every {pruner.frequency} steps")

    def on_epoch_end(self, run: Any, record: dict[str, Any]) -> None:
        record["sparsity"] = _sparsity(run)["total"]

    def report(self, run: Any) -> dict[str, Any]:
        # what model.params holds: the weights with the masks' zeros
        sp, report = _sparsity(run), pruning_report(run.net, self.pruner, self.sample)
        if run.stage_params is not None:  # the counts of every stage, not only this rank's
            report["parameters"], report["nonzero_parameters"] = (int(v) for v in run.sum_over_stages(
                [report["parameters"], report["nonzero_parameters"]]))
        run.say(f"sparsity: {sp['total']:.4f} of the Dense/Conv weights are zero; "
                f"{report['nonzero_parameters']:,} of {report['parameters']:,} parameters are non-zero"
                + (f"; compacted: {report['compact_parameters']:,} parameters"
                   if report.get("compact_parameters") else ""))
        return {"sparsity": sp, "pruning": report}

    def stateful(self) -> dict[str, Any]:
        return {"pruner": self.pruner}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "pruner" in state:  # a checkpoint written before the Pruner was a Stateful of its own
            assert self.cfg.checkpoint_dir is not None  # only a checkpoint is resumed
            restore_pruner(self.pruner, state, self.cfg.checkpoint_dir)


def _sparsity(run: Any) -> dict[str, float]:
    """:func:`mxtorch.contrib.pruning.sparsity` of ``run.net``; for a pipelined run only the total,
    over every stage's weights (each rank holds its stages')."""
    from ..contrib import pruning

    sp = pruning.sparsity(run.net)
    if run.stage_params is None:
        return sp
    numel = {name: int(p.data().numel()) for name, p in run.stage_params.items()}
    zeros = sum(round(f * numel[name]) for name, f in sp.items() if name in numel)
    total = sum(numel[name] for name in sp if name in numel)
    zeros, total = run.sum_over_stages([float(zeros), float(total)])
    return {"total": zeros / max(total, 1.0)}


class AmpHook(TrainHook):
    """``--amp bf16|fp16``: autocast and dynamic loss scaling (:mod:`mxtorch.amp`)."""

    def __init__(self, cfg: TrainConfig) -> None:
        assert cfg.amp is not None
        self.dtype = {"bf16": "bfloat16", "fp16": "float16"}[cfg.amp]

    def on_start(self, run: Any) -> None:
        from .. import amp

        amp.init(self.dtype)
        amp.init_trainer(run.trainer)

    def backward(self, run: Any, losses: list[Any]) -> bool:
        from .. import amp, autograd

        with amp.scale_loss(losses, run.trainer) as scaled:
            autograd.backward(scaled)
        return True


class CheckpointHook(TrainHook):
    """``--checkpoint-dir``: a checkpoint every N steps, written in the background (parameters,
    trainer and optimizer states, the data position, the epoch's running statistics of every worker,
    every hook's state); ``--resume`` continues from the newest good one."""

    def __init__(self, cfg: TrainConfig, elastic: bool) -> None:
        self.cfg, self.elastic = cfg, elastic
        self.manager: Any = None
        self.saved = False  # whether the last step was saved

    def on_start(self, run: Any) -> None:
        import torch

        from ..checkpoint import CheckpointError, CheckpointManager
        from ..gluon.data.vision import transforms
        from ..gluon.utils import split_and_load

        cfg = self.cfg
        every = cfg.checkpoint_every or default_every(len(run.train_loader), self.elastic)
        manager = self.manager = CheckpointManager(cfg.checkpoint_dir, keep_last=cfg.checkpoint_keep,
                                                   every_n_steps=every, async_save=True)
        if cfg.resume and manager.list():
            # restoring needs the parameters' shapes: a forward pass on two training images (its
            # random draws do not count: the checkpoint's RNG states are restored last).  Without
            # a checkpoint nothing runs here, so that the run draws as one without --resume does.
            to_tensor = transforms.ToTensor()
            run.ensure_shapes(split_and_load(torch.stack([to_tensor(run.train_set[i][0]) for i in range(2)]),
                                             run.ctx)[0])
            objects = stateful_of(run.hooks)
            try:  # the newest good checkpoint (a corrupt one is skipped with a warning)
                # missing_ok: checkpoints written before a feature's Stateful had a file of its own
                # kept it in the extra under the same name (the hook's load_state_dict reads it)
                start_step = manager.restore(net=run.checkpoint_net(gather=False), trainer=run.trainer,
                                             loader=None if self.elastic else run.train_loader,
                                             stateful=objects, missing_ok=objects)
            except CheckpointError as e:
                raise SystemExit(f"--resume: {e}") from None
            lacking = [n for n in objects if n not in manager.restored_stateful and n not in manager.extra]
            if lacking:
                raise SystemExit(f"--resume: the checkpoint under {cfg.checkpoint_dir} holds no "
                                 f"{lacking[0]!r} state: a run without that feature wrote it (--prune: the "
                                 "pruner); resume without it or use another --checkpoint-dir")
            run.resume_from(start_step, dict(manager.extra))
            at = int(run.resumed.get("epoch", 0))
            n = len(run.train_loader)
            run.say(f"resumed from checkpoint step {start_step} under {cfg.checkpoint_dir} (epoch {at + 1}, "
                    f"batch {start_step - at * n} of {n})")
        elif cfg.resume:
            run.say(f"--resume: no checkpoint under {cfg.checkpoint_dir} yet: starting from the beginning")

    def on_step(self, run: Any) -> None:
        self.saved = self.manager.should_save(run.step)
        if self.saved:  # with this epoch's running statistics of every worker
            self.save(run)

    def save(self, run: Any) -> None:
        """Save the step ``run`` is at (in the background)."""
        correct = float(run.acc.sum_metric) if run.acc is not None else 0.0  # a pipeline counts none
        stats = epoch_stats(run.stats_kv, run.rank, run.n_workers, [run.loss_sum, correct, float(run.n_seen)])
        extra: dict[str, Any] = {"epoch": run.epoch, "stats": stats, "history": run.history}
        for hook in run.hooks:
            extra.update(hook.state_dict())
        self.manager.save(run.step, net=run.checkpoint_net(), trainer=run.trainer, loader=run.train_loader,
                          stateful=stateful_of(run.hooks), **extra)

    def on_end(self, run: Any) -> None:
        self.manager.wait()  # the last background write (raises what it raised)

    def report(self, run: Any) -> dict[str, Any]:
        m = self.manager
        return {"checkpoint": {"dir": self.cfg.checkpoint_dir, "every_steps": m.every_n_steps,
                               "resumed_from_step": run.start_step, "steps": m.list(),
                               "last_save": m.last_save}}


class ElasticHook(TrainHook):
    """A worker of an elastic job: logs who is in the job against the checkpoint it resumes from,
    and, when a worker joins, commits the step and leaves for the agents' restart (agreed every
    :data:`~mxtorch.elastic.worker.RESTART_POLL_STEPS` steps, or at once when ``run.force_restart_check``)."""

    def __init__(self, checkpoint: CheckpointHook) -> None:
        self.checkpoint = checkpoint
        self.hosts: list[str] = []

    def on_start(self, run: Any) -> None:
        from ..elastic import describe_change, gather_hosts
        from ..elastic.env import host_name

        self.hosts = gather_hosts(host_name())
        n = len(run.train_loader)
        at = int(run.resumed.get("epoch", 0)) if run.start_step else 0
        run.sampler.set_start(run.start_step - at * n)
        run.say(describe_change(run.resumed.get("hosts") if run.start_step else None, self.hosts,
                                step=run.start_step, epoch=at, batch=run.start_step - at * n, batches=n,
                                restart=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))))

    def on_step(self, run: Any) -> None:
        from ..elastic.worker import ElasticRestart, restart_agreed

        forced, run.force_restart_check = run.force_restart_check, False
        if restart_agreed(run.step, forced):  # a worker joins: commit this step, then restart
            if not self.checkpoint.saved:
                self.checkpoint.save(run)
            self.checkpoint.manager.wait()
            run.say(f"membership change: the workers restart; saved checkpoint step {run.step}")
            raise ElasticRestart(run.step)

    def state_dict(self) -> dict[str, Any]:
        return {"hosts": self.hosts}


def stateful_of(hooks: list[TrainHook]) -> dict[str, Any]:
    """Every hook's :meth:`~.train_hooks.TrainHook.stateful` objects, by name (a name given twice
    is a programming error)."""
    out: dict[str, Any] = {}
    for hook in hooks:
        for name, obj in hook.stateful().items():
            if name in out:
                raise ValueError(f"two training hooks keep a Stateful named {name!r} in checkpoints")
            out[name] = obj
    return out


def feature_hooks(cfg: TrainConfig, elastic: bool) -> tuple[list[TrainHook], list[TrainHook]]:
    """The hooks ``cfg`` asks for, as (those before, those after) the hooks of ``MXTORCH_TRAIN_HOOKS``:
    a step is saved before a plugin sees it, and an elastic restart is agreed after."""
    before: list[TrainHook] = []
    if cfg.init_from is not None or cfg.freeze is not None:
        before.append(TransferHook(cfg))  # first: pruning ranks the loaded weights
    if cfg.prune is not None:
        before.append(PruningHook(cfg))
    if cfg.amp:
        before.append(AmpHook(cfg))
    after: list[TrainHook] = []
    if cfg.checkpoint_dir is not None:
        checkpoint = CheckpointHook(cfg, elastic)
        before.append(checkpoint)
        if elastic:
            after.append(ElasticHook(checkpoint))
    # after a checkpoint's save: a step's time includes its save
    before.extend(observability_hooks(cfg))
    return before, after
