"""The checkpointing and pruning/transfer parts of ``mxtorch train`` (checks, set-up, reports).

Kept apart from :mod:`.train` so that each module stays readable; :mod:`.train` imports these.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any

from .train_config import PRUNE_METHODS, PRUNE_SCOPES

if TYPE_CHECKING:
    from .train_config import TrainConfig

__all__ = ["PRUNE_METHODS", "PRUNE_SCOPES", "check_checkpointing", "check_pruning_and_transfer",
           "default_every", "elastic_config", "freeze_parameters", "load_pretrained", "make_pruner",
           "prune_scope", "pruning_report", "restore_pruner", "run_elastic_worker"]


def check_checkpointing(cfg: TrainConfig) -> None:
    """Refuse inconsistent --checkpoint-*/--resume options (SystemExit)."""
    if cfg.checkpoint_dir is None:
        if cfg.resume or cfg.checkpoint_every is not None:
            flag = "--resume" if cfg.resume else "--checkpoint-every"
            raise SystemExit(f"{flag} needs --checkpoint-dir URI")
        return
    if cfg.checkpoint_every is not None and cfg.checkpoint_every < 1:
        raise SystemExit(f"--checkpoint-every must be >= 1, got {cfg.checkpoint_every}")
    if cfg.checkpoint_keep < 1:
        raise SystemExit(f"--checkpoint-keep must be >= 1, got {cfg.checkpoint_keep}")


def elastic_config(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` for a worker of an elastic job: it always resumes, from --checkpoint-dir (default
    OUTPUT/checkpoints; on several machines give a folder or URI they all reach)."""
    from dataclasses import replace

    if cfg.prune is not None or cfg.pp > 1 or cfg.dp > 1 or cfg.plan:
        raise SystemExit("an elastic job (mxtorch launch --elastic) trains data-parallel: --prune, --pp, "
                         "--dp and --plan are not supported there")
    folder = cfg.checkpoint_dir or os.path.join(cfg.output, "checkpoints")
    return replace(cfg, checkpoint_dir=folder, resume=True)


def default_every(steps_per_epoch: int, elastic: bool) -> int:
    """Steps between checkpoints without --checkpoint-every: once an epoch; ten times an epoch in an
    elastic job, whose restarts go back to the last one."""
    return max(steps_per_epoch // 10, 1) if elastic else steps_per_epoch


def run_elastic_worker(train: Any, cfg: TrainConfig) -> int:
    """Run ``train(cfg)`` as a worker of an elastic job: it dies with its agent, and a failure (a
    peer lost mid-step) ends the process at once, without waiting for a checkpoint write that
    can no longer commit, so that the agent restarts the workers quickly."""
    import traceback

    from ..elastic.worker import ElasticRestart, die_with_agent, stop_on_sigterm, wait_for_stop

    die_with_agent()
    stop_on_sigterm()
    try:
        train(cfg)
    except ElasticRestart:
        sys.stdout.flush()
        # exit only once this worker's own agent stopped it: an exit 0 before would tell the agent
        # that the job finished; without a stop, fail so that the agent restarts it
        os._exit(0 if wait_for_stop() else 1)
    except SystemExit as e:
        if e.code not in (None, 0):
            print(e.code if isinstance(e.code, str) else f"exit status {e.code}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(e.code if isinstance(e.code, int) else 1)
    except BaseException as e:
        from ..kvstore.base import KVStoreError

        if isinstance(e, KVStoreError):  # a peer was lost: the agents re-form the job, no traceback needed
            print(f"elastic worker stops: {str(e)[:400]}; the agents re-form the job", file=sys.stderr)
        else:
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    return 0


def check_pruning_and_transfer(cfg: TrainConfig) -> None:
    """Refuse inconsistent --prune/--sparsity/--prune-*/--init-from/--freeze options (SystemExit)."""
    if cfg.prune is None:
        given = {"--sparsity": cfg.sparsity is not None, "--prune-begin-step": cfg.prune_begin_step != 0,
                 "--prune-end-epoch": cfg.prune_end_epoch is not None,
                 "--prune-frequency": cfg.prune_frequency is not None,
                 f"--prune-scope {cfg.prune_scope}": cfg.prune_scope is not None}
        named = [flag for flag, on in given.items() if on]
        if named:
            raise SystemExit(f"{named[0]} needs --prune METHOD ({', '.join(PRUNE_METHODS)})")
    else:
        if cfg.prune not in PRUNE_METHODS:
            raise SystemExit(f"--prune {cfg.prune!r}: use one of {', '.join(PRUNE_METHODS)}")
        if cfg.sparsity is None:
            raise SystemExit(f"--prune {cfg.prune} needs --sparsity S: the final fraction of zero weights "
                             "in each pruned layer, e.g. --sparsity 0.8")
        if not 0.0 <= cfg.sparsity < 1.0:
            raise SystemExit(f"--sparsity must be in [0, 1), got {cfg.sparsity}")
        if cfg.prune_begin_step < 0:
            raise SystemExit(f"--prune-begin-step must be >= 0, got {cfg.prune_begin_step}")
        if cfg.prune_end_epoch is not None and not 1 <= cfg.prune_end_epoch <= cfg.epochs:
            raise SystemExit(f"--prune-end-epoch must be between 1 and --epochs {cfg.epochs}, got "
                             f"{cfg.prune_end_epoch}")
        if cfg.prune_frequency is not None and cfg.prune_frequency < 1:
            raise SystemExit(f"--prune-frequency must be >= 1, got {cfg.prune_frequency}")
        if cfg.prune_scope not in (None, *PRUNE_SCOPES):
            raise SystemExit(f"--prune-scope must be layer or global, got {cfg.prune_scope!r}")
        if cfg.prune == "structured" and cfg.prune_scope == "global":
            raise SystemExit("--prune structured ranks channels within each layer: --prune-scope global "
                             "applies to l1, l2 and random")
        if "async" in cfg.kvstore.lower():
            raise SystemExit(f"--prune with --kvstore {cfg.kvstore}: asynchronous parameter servers update "
                             "the weights themselves, so masks cannot change during training there; use "
                             "--kvstore dist_sync, horovod or allreduce")
    if cfg.prune is not None and cfg.pipelined:
        # each rank holds its stages' layers: one threshold over every layer, or the compaction of the
        # whole network, would need them all on one rank
        if cfg.prune == "structured":
            raise SystemExit("--prune structured compacts the whole network: it applies to data-parallel "
                             "training, not to the pipelined job (--pp, --dp, --plan); use l1, l2 or random")
        if cfg.prune_scope == "global":
            raise SystemExit("--prune-scope global ranks the weights of every layer together, which the "
                             "pipelined job (--pp, --dp, --plan) holds on different ranks: use --prune-scope "
                             "layer (its default there)")
    if cfg.init_from is not None and not os.path.isfile(cfg.init_from):
        raise SystemExit(f"--init-from {cfg.init_from}: no such file")
    if cfg.freeze is not None:
        try:
            re.compile(cfg.freeze)
        except re.error as e:
            raise SystemExit(f"--freeze {cfg.freeze!r}: not a regular expression ({e})") from None


def load_pretrained(net: Any, path: str, ctx: list[Any]) -> dict[str, Any]:
    """Copy the parameters of ``path`` (a ``save_parameters`` file) whose attribute path and shape
    match ``net``'s into ``net`` (shapes must be known); the others keep their values.  Returns
    what was loaded, kept (with the shapes that differ) and ignored."""
    from ..base import MXNetError
    from ..gluon.serialization import load_named, load_tensors

    try:
        arrays = load_tensors(path)
    except (MXNetError, OSError, ValueError, RuntimeError) as e:
        raise SystemExit(f"--init-from {path}: cannot read it: {e}") from None
    params = net._collect_params_with_prefix()
    if not any(k in params for k in arrays):
        raise SystemExit(f"--init-from {path}: none of its {len(arrays)} parameters "
                         f"({sorted(arrays)[:4]} ...) is one of this model's ({list(params)[:4]} ...): "
                         "give a file written by save_parameters for a network of the same layout, e.g. "
                         "the model.params of another `mxtorch train` run")
    differ = {k: (tuple(a.shape), tuple(params[k].shape)) for k, a in arrays.items()
              if k in params and tuple(a.shape) != tuple(params[k].shape)}
    use = {k: a for k, a in arrays.items() if k in params and k not in differ}
    try:
        load_named(params, use, repr(path), ctx=ctx, allow_missing=True, ignore_extra=True, cast_dtype=True)
    except MXNetError as e:
        raise SystemExit(f"--init-from {path}: {e}") from None
    return {"path": path, "loaded": list(use), "kept": [k for k in params if k not in use],
            "shape_differs": {k: {"file": list(f), "model": list(m)} for k, (f, m) in differ.items()},
            "ignored": [k for k in arrays if k not in params]}


def freeze_parameters(net: Any, pattern: str) -> list[str]:
    """Set grad_req='null' on the parameters whose full name or attribute path matches ``pattern``
    (``re.match``); returns their full names."""
    rx = re.compile(pattern)
    by_name = net.collect_params()
    paths: dict[int, list[str]] = {}
    for path, p in net._collect_params_with_prefix().items():
        paths.setdefault(id(p), []).append(path)
    chosen = [name for name, p in by_name.items()
              if rx.match(name) or any(rx.match(k) for k in paths.get(id(p), []))]
    if not chosen:
        raise SystemExit(f"--freeze {pattern!r} matches no parameter: the full names are "
                         f"{list(by_name)[:4]} ..., the attribute paths "
                         f"{list(net._collect_params_with_prefix())[:4]} ...")
    if len(chosen) == len(by_name):
        raise SystemExit(f"--freeze {pattern!r} matches every parameter: nothing would be trained")
    for name in chosen:
        by_name[name].grad_req = "null"
    return chosen


def prune_scope(cfg: TrainConfig) -> str:
    """``--prune-scope``, or its default: ``global`` for l1/l2/random -- one threshold over all layers
    kept 80% l1 within a point of dense (-0.56 pt on the default task, -0.90 on the embedded subset),
    80% of every layer did not (-0.76, -2.20: the first convolution keeps 58 of its 288 weights; the
    docs/pruning.md has the commands) -- and ``layer`` for structured and for the pipelined job (each
    rank holds its stages' layers)."""
    if cfg.prune_scope is not None:
        return cfg.prune_scope
    return "layer" if cfg.prune == "structured" or cfg.pipelined else "global"


def make_pruner(cfg: TrainConfig, steps_per_epoch: int, only: list[str] | None = None) -> Any:
    """The gradual Pruner of ``--prune`` (polynomial schedule) for ``steps_per_epoch`` steps an epoch;
    ``only``: the parameter names whose layers it prunes (None: every Dense/Conv layer)."""
    from ..contrib import pruning

    end_epoch = cfg.prune_end_epoch if cfg.prune_end_epoch is not None else max(cfg.epochs - 1, 1)
    end_step = end_epoch * steps_per_epoch
    if end_step <= cfg.prune_begin_step:
        raise SystemExit(f"--prune-begin-step {cfg.prune_begin_step} is not before the end of pruning: "
                         f"epoch {end_epoch} ends at step {end_step} ({steps_per_epoch} steps an epoch)")
    frequency = cfg.prune_frequency or max((end_step - cfg.prune_begin_step) // 20, 1)
    assert cfg.prune is not None
    return pruning.Pruner(cfg.prune, schedule="polynomial", sparsity=cfg.sparsity,
                          begin_step=cfg.prune_begin_step, end_epoch=end_epoch,
                          steps_per_epoch=steps_per_epoch, frequency=frequency, scope=prune_scope(cfg),
                          select=None if only is None else _exactly(only),
                          seed=cfg.seed)


def _exactly(names: list[str]) -> str:
    """A regular expression ``re.match`` finds in exactly ``names`` (in none when there are none: a
    pipeline stage may hold no weights)."""
    return "|".join(f"{re.escape(n)}$" for n in names) or "(?!)"


def restore_pruner(pruner: Any, resumed: dict[str, Any], where: str) -> None:
    """Continue ``--prune``'s schedule and masks from the JSON extra ``resumed`` of a checkpoint
    written before the Pruner had a state file of its own (``pruner``: its state as
    :func:`mxtorch.contrib.pruning.state_to_json` wrote it)."""
    from ..base import MXNetError
    from ..contrib import pruning

    try:
        pruner.load_state_dict(pruning.state_from_json(resumed["pruner"]))
    except (MXNetError, KeyError, TypeError, ValueError) as e:
        raise SystemExit(f"--resume with --prune: the pruning state of the checkpoint under {where} "
                         f"cannot be restored: {e}") from None


def pruning_report(net: Any, pruner: Any, sample: Any) -> dict[str, Any]:
    """What metrics.json says about the pruning: the schedule, parameter counts and, for
    structured pruning, the parameters left after :func:`mxtorch.contrib.pruning.compact`."""
    from ..base import MXNetError
    from ..contrib import pruning

    def learned(block: Any) -> list[Any]:  # BatchNorm's running statistics are not counted
        return [p for p in block.collect_params().values()
                if p.is_initialized and not p.name.endswith(("running_mean", "running_var"))]

    total = sum(p.list_data()[0].numel() for p in learned(net))
    nonzero = sum(int((p.list_data()[0] != 0).sum()) for p in learned(net))
    out: dict[str, Any] = {"method": pruner.method, "scope": pruner.scope, "target_sparsity": pruner.sparsity,
                           "begin_step": pruner.begin_step, "end_step": pruner.end_step,
                           "frequency": pruner.frequency, "steps": pruner.num_update,
                           "parameters": total, "nonzero_parameters": nonzero}
    if pruner.method == "structured":
        try:
            small = pruning.compact(net, sample)
            out["compact_parameters"] = sum(p.list_data()[0].numel() for p in learned(small))
        except MXNetError as e:
            out["compact_parameters"] = None
            out["compact_error"] = str(e)
    return out
