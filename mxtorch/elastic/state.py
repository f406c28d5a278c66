"""``elastic.State``: what a training job must carry across a membership change.

A State holds named objects: every :class:`~mxtorch.stateful.Stateful` one (a Gluon block, a
``Trainer``, a sampler, a loss scaler, ...) is saved and loaded through ``state_dict()`` /
``load_state_dict()`` alone; plain values (``epoch=0``, ``batch=0``: ints, floats, strings, lists
and dicts of them) are copied; an :class:`~mxtorch.elastic.ElasticBatchSampler` is re-sharded when
the group changes.  All are attributes (``state.epoch``).

- :meth:`commit` snapshots everything in memory (and through a
  :class:`~mxtorch.checkpoint.CheckpointManager` when given one), then asks the running workers
  whether a worker waits to join (:class:`~mxtorch.elastic.inprocess.MembershipChanged` on every rank
  when one does): a collective, every rank commits at the same points.
- :meth:`restore` goes back to the last commit (after a peer failed mid-step).
- :meth:`sync` gives every rank rank 0's state (and commits it): a joiner receives the job's state.
- :meth:`on_reset` runs after the group was re-formed: the default rule, then the callbacks of
  :meth:`register_reset_callbacks`.

**The default reset rule keeps the global batch** (MXNet's ``Trainer.step(batch_size)`` rule:
the store sums the workers' gradients, ``step`` divides by the global batch).  Each
``ElasticBatchSampler`` of the State is re-sharded over the new workers (same global batches,
each worker's share ``B/n``), the Trainer's store follows the new group, and the learning rate is
left alone: the update per global batch is the same at any size.  A job that instead keeps the
per-worker batch (the global batch scales with the workers) adjusts the learning rate in a reset
callback (e.g. ``trainer.set_learning_rate(base_lr * size / base_size)``).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ..profiler import span
from ..stateful import Stateful, plain_state_problem
from .broadcast import broadcast_tree
from .inprocess import MembershipChanged, current

__all__ = ["State"]

_OWN = ("_objects", "_values", "_snapshot", "_callbacks", "_checkpoint", "_commits")


def _clone(tree: Any) -> Any:
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    if isinstance(tree, dict):
        return {k: _clone(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_clone(v) for v in tree)
    return copy.deepcopy(tree)


def _load(obj: Any, tree: Any) -> None:
    # a Trainer given another worker's state must not take that worker's compression residuals
    params = inspect.signature(obj.load_state_dict).parameters
    if "worker_local" in params:
        obj.load_state_dict(tree, worker_local=False)
    else:
        obj.load_state_dict(tree)


def _zero_gradients(obj: Any) -> None:
    collect = getattr(obj, "collect_params", None)
    if callable(collect):  # a Gluon block: its parameters' own rule ('write' and 'add')
        collect().zero_grad()
    elif isinstance(obj, torch.nn.Module):
        obj.zero_grad(set_to_none=True)


class State:
    """``State(net=net, trainer=trainer, epoch=0, batch=0, ...)``: see the module docstring.

    ``checkpoint_manager`` (a :class:`~mxtorch.checkpoint.CheckpointManager`) also saves every
    commit to storage, each under the commit's number, the plain values as its extra ``elastic``;
    :meth:`resume` loads the newest one (the restart mode)."""

    def __init__(self, checkpoint_manager: Any = None, **objects: Any) -> None:
        self._objects: dict[str, Any] = {}
        self._values: dict[str, Any] = {}
        for name, value in objects.items():
            self._put(name, value)
        self._callbacks: list[Callable[[], Any]] = []
        self._checkpoint = checkpoint_manager
        self._commits = 0
        self._snapshot: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
        self.save()

    def _put(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            raise ValueError(f"elastic.State: names starting with '_' are the State's own, got {name!r}")
        if isinstance(value, Stateful) or hasattr(value, "reshard"):
            self._values.pop(name, None)
            self._objects[name] = value
            return
        problem = plain_state_problem(value, name)
        if problem is not None and not isinstance(value, torch.Tensor):
            raise TypeError(f"elastic.State: {problem}; give objects with state_dict()/load_state_dict() "
                            "or plain JSON values")
        self._objects.pop(name, None)
        self._values[name] = value

    def __getattr__(self, name: str) -> Any:
        if name in _OWN:
            raise AttributeError(name)
        for table in (self._values, self._objects):
            if name in table:
                return table[name]
        raise AttributeError(f"elastic.State has no attribute {name!r} (it holds {sorted(self.names())})")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            self._put(name, value)

    def names(self) -> list[str]:
        return [*self._objects, *self._values]

    # ---- Horovod's State interface -----------------------------------------------------------
    def save(self) -> None:
        """Snapshot every object and value in memory (what :meth:`restore` goes back to)."""
        with span("mxtorch/elastic.save"):
            taken = {n: _clone(o.state_dict()) for n, o in self._objects.items() if isinstance(o, Stateful)}
            self._snapshot = (taken, _clone(self._values))

    def restore(self) -> None:
        """Go back to the last :meth:`save` / :meth:`commit`; gradients are zeroed (a step that
        failed half-way leaves its own, which the next backward would add to)."""
        with span("mxtorch/elastic.restore"):
            taken, values = self._snapshot
            for name, tree in taken.items():
                self._objects[name].load_state_dict(_clone(tree))
            self._values = _clone(values)
            for obj in self._objects.values():
                _zero_gradients(obj)

    def commit(self) -> None:
        """Snapshot (:meth:`save`), write a checkpoint if a manager was given, then check for workers
        waiting to join: raises :class:`MembershipChanged` on every rank when one waits."""
        self.save()
        self._commits += 1
        if self._checkpoint is not None:
            self._checkpoint.save(self._commits, stateful=self._stateful(), elastic=self._values)
        self.check_host_updates()

    def _stateful(self) -> dict[str, Any]:
        return {n: o for n, o in self._objects.items() if isinstance(o, Stateful)}

    def resume(self) -> int:
        """Load the newest good checkpoint of ``checkpoint_manager`` into the objects and values (a
        restarted worker in the restart mode); its commit number, 0 when there is none (nothing
        changes then).  Every rank calls it."""
        if self._checkpoint is None:
            raise ValueError("elastic.State.resume: the State has no checkpoint_manager to resume from")
        if self._checkpoint.latest() is None:
            return 0
        step = int(self._checkpoint.restore(stateful=self._stateful()))
        values = self._checkpoint.extra.get("elastic")
        if isinstance(values, dict):
            for name, value in values.items():
                self._put(str(name), value)
        self._commits = step
        self.save()
        return step

    def check_host_updates(self) -> None:
        """Raise :class:`MembershipChanged` (on every rank) when a worker waits to join the job."""
        context = current()
        if context is not None and context.joiners_waiting():
            raise MembershipChanged("a worker waits to join the job")

    def sync(self) -> None:
        """Give every rank rank 0's objects and values (a collective), then :meth:`save` them."""
        import torch.distributed as dist

        if dist.is_initialized() and dist.get_world_size() > 1:
            root = dist.get_rank() == 0
            for name in sorted(self._objects):
                obj = self._objects[name]
                if isinstance(obj, Stateful):
                    tree = broadcast_tree(obj.state_dict() if root else None)
                    if not root:
                        _load(obj, tree)
            values = broadcast_tree(self._values if root else None)
            if not root:
                self._values = values
        self.save()

    def register_reset_callbacks(self, callbacks: Iterable[Callable[[], Any]]) -> None:
        """Functions ``fn()`` to run after each re-formed group (after the default rule)."""
        for fn in callbacks:
            if not callable(fn):
                raise TypeError(f"register_reset_callbacks: {fn!r} is not callable")
            self._callbacks.append(fn)

    def on_reset(self) -> None:
        """The default reset rule (keep the global batch: re-shard the samplers, the Trainer's store
        follows the new group), then the registered callbacks, in order."""
        import torch.distributed as dist

        size, rank = (dist.get_world_size(), dist.get_rank()) if dist.is_initialized() else (1, 0)
        if self._checkpoint is not None:  # its files are named by rank, and rank 0 waits for the others'
            self._checkpoint.rank, self._checkpoint.world_size = rank, size
        for obj in self._objects.values():
            if hasattr(obj, "reshard"):
                obj.reshard(size, rank)
            store = getattr(obj, "kvstore", None)
            if store is not None and hasattr(store, "rejoin"):
                store.rejoin()
        for fn in self._callbacks:
            fn()
