"""The hook interface of ``mxtorch train``'s training loop: a feature (mixed precision, pruning,
checkpoints, elastic membership, a logger) is a :class:`TrainHook` whose methods the loop calls at
fixed points, instead of code inside the loop.  Modules named in ``MXTORCH_TRAIN_HOOKS`` add their own
(:func:`plugin_hooks`): that is how mxtorch's tests kill a run at a known step without any test code
in the product.

The loop (:class:`mxtorch.cli.train_loop.DataParallelRun`, passed to every method as ``run``) calls,
in the order of its hook list:

* ``on_start(run)`` once the network, Trainer and loaders exist, before the first batch;
* ``on_shapes(run, x)`` once, when the parameters' shapes are known (a forward pass on ``x``), for
  hooks with ``needs_shapes`` (which also defers ``hybridize`` until then);
* ``backward(run, losses)`` to run the backward pass: the first hook that returns True did it;
* ``on_step(run)`` after every ``trainer.step`` (``run.step`` counts the steps done);
* ``on_epoch_end(run, record)`` with the epoch's record (loss, accuracy, ...) before it is printed;
* ``on_end(run)`` after the last epoch, ``report(run)`` for what metrics.json adds;
* ``state_dict()`` / ``load_state_dict(state)``: what a checkpoint's JSON extra keeps for the hook;
* ``stateful()``: the objects (name -> :class:`~mxtorch.stateful.Stateful`) a checkpoint saves
  and restores by name, each in its own file (a Pruner's masks).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["TrainHook", "plugin_hooks"]


class TrainHook:
    """A feature of the training loop; every method does nothing unless a subclass overrides it."""

    needs_shapes: bool = False
    """Whether :meth:`on_shapes` needs the parameters' shapes before training starts."""

    def on_start(self, run: Any) -> None:
        """The network, Trainer and loaders exist; no batch has been trained yet."""

    def on_shapes(self, run: Any, x: Any) -> None:
        """The parameters' shapes are known (``x``: the batch whose forward pass finished them)."""

    def backward(self, run: Any, losses: list[Any]) -> bool:
        """Run the backward pass of ``losses`` and return True, or return False to leave it to others."""
        return False

    def on_step(self, run: Any) -> None:
        """A training step (``trainer.step``) is done; ``run.step`` counts it."""

    def on_epoch_end(self, run: Any, record: dict[str, Any]) -> None:
        """The epoch's ``record`` (train loss and accuracy, test accuracy, ...), which this may extend."""

    def on_end(self, run: Any) -> None:
        """The last epoch is done; nothing is written yet."""

    def report(self, run: Any) -> dict[str, Any]:
        """What the run's metrics (metrics.json) add for this feature."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps for this feature (JSON values, in the checkpoint's extra)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a resumed checkpoint's extra (every hook's :meth:`state_dict` merged)."""

    def stateful(self) -> dict[str, Any]:
        """What a checkpoint keeps for this feature as Stateful objects, by name (restored before
        :meth:`load_state_dict`); names are unique over the hooks."""
        return {}


def plugin_hooks(run: Any) -> list[TrainHook]:
    """The hooks of the modules named in ``MXTORCH_TRAIN_HOOKS``: each module's ``train_hooks(run)``,
    called before ``run`` joins its job (``run.cfg`` and ``run.elastic`` are set; the store, data and
    network come later: read them in the hooks' methods)."""
    from ..distributed.env import MXTORCH_TRAIN_HOOKS, DistributedConfigError
    from ..kvstore.ps.config import parse_modules

    raw = os.environ.get(MXTORCH_TRAIN_HOOKS, "").strip()
    if not raw:
        return []
    try:
        names = parse_modules(raw, MXTORCH_TRAIN_HOOKS)
    except DistributedConfigError as e:
        raise SystemExit(str(e)) from None
    hooks: list[TrainHook] = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception as e:  # any failure of the named module: say which one and why
            raise SystemExit(f"{MXTORCH_TRAIN_HOOKS}: cannot import module {name!r}: {type(e).__name__}: {e} "
                             "(it must be importable: installed, or on PYTHONPATH)") from None
        make = getattr(module, "train_hooks", None)
        if not callable(make):
            raise SystemExit(f"{MXTORCH_TRAIN_HOOKS}: module {name!r} has no function train_hooks(run) "
                             "returning its hooks")
        hooks.extend(make(run))
    return hooks
