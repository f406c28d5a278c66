"""What ``mxtorch train`` shows of a running job, as hooks: every step's timing on every rank
(:class:`~.train_steps.StepRecorder`: steps.jsonl, the per-rank summary, slow ranks named), with
``--tensorboard DIR`` the curves (:class:`~.train_tensorboard.TensorBoardHook`) and with ``--profile
DIR`` a trace of a few steps per rank (:class:`~.train_profile.ProfileHook`)."""

from __future__ import annotations

from .train_config import TrainConfig
from .train_hooks import TrainHook

__all__ = ["observability_hooks"]


def observability_hooks(cfg: TrainConfig) -> list[TrainHook]:
    """The observability hooks of ``cfg``, in the order the loop must call them."""
    from .train_steps import StepRecorder

    steps = StepRecorder(cfg)
    hooks: list[TrainHook] = [steps]
    if cfg.tensorboard is not None:
        from .train_tensorboard import TensorBoardHook

        hooks.append(TensorBoardHook(cfg, steps))
    if cfg.profile is not None:
        from .train_profile import ProfileHook

        hooks.append(ProfileHook(cfg))
    return hooks
