"""The Trainer's update hooks: features that act inside ``Trainer.step``/``update`` (AMP's loss
scaling, a Pruner's masks) through one documented interface instead of wrapping the Trainer.

A Trainer runs its hooks in the order they were added (:class:`UpdateHooks`):

* ``before_reduce`` of every hook, with this worker's local gradients; the reduction runs only if
  all return True;
* ``before_update`` of each hook in turn with the reduced gradients: the factors they return are
  multiplied into ``rescale_grad``; the first ``None`` skips the update (the later hooks are not
  asked);
* ``after_step(trainer, updated)`` of every hook that has one, once the step is over (``updated``:
  whether the optimizer ran).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import torch

from ..base import MXNetError

__all__ = ["UpdateHook", "UpdateHooks"]

_METHODS = ("before_reduce", "before_update", "state_dict", "load_state_dict")


class UpdateHook(Protocol):
    """What :meth:`Trainer.add_update_hook` takes: code run by every ``step``/``update`` after the
    gradients are reduced and before the optimizer (``mxtorch.amp`` uses it for loss scaling,
    ``contrib.pruning.Pruner.attach`` to keep its masks and schedule).

    ``before_reduce(trainer, grads)`` runs first, in ``step``/``allreduce_grads``, with this
    worker's local gradients before the Trainer reduces them (a store that reduces during
    backward has started already); returning False skips the reduction, and ``before_update``
    should then skip the update.  Every worker must return the same.

    ``before_update(trainer, grads)`` receives the reduced gradients of the parameters about to
    be updated and returns a factor folded into the optimizer's ``rescale_grad`` for this step
    (1.0: unchanged), or ``None`` to skip the update: weights, optimizer states and update
    counts stay as they are and the gradients are discarded (``grad_req='write'``: cleared,
    ``'add'``: zeroed).  ``name`` keys the hook's ``state_dict()`` in the files
    :meth:`Trainer.save_states` writes (an empty one is not written); :meth:`Trainer.load_states`
    gives it back to ``load_state_dict``.

    An optional ``after_step(trainer, updated)`` runs when the step (or ``update``) is over.
    """

    name: str

    def before_reduce(self, trainer: Any, grads: list[torch.Tensor]) -> bool: ...

    def before_update(self, trainer: Any, grads: list[torch.Tensor]) -> float | None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


class UpdateHooks:
    """A Trainer's update hooks, in the order they were added, each name at most once."""

    def __init__(self) -> None:
        self._hooks: list[UpdateHook] = []

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def __iter__(self) -> Iterator[UpdateHook]:
        return iter(list(self._hooks))

    def add(self, hook: UpdateHook) -> None:
        name = getattr(hook, "name", None)
        missing = [m for m in _METHODS if not callable(getattr(hook, m, None))]
        if not isinstance(name, str) or not name or missing:
            raise TypeError(f"an update hook needs a non-empty str 'name' and the methods {_METHODS} "
                            f"(see gluon.trainer.UpdateHook), got {type(hook).__name__}")
        if self.named(name) is not None:
            raise MXNetError(f"this Trainer already has the update hook {name!r}: remove it with "
                             "remove_update_hook first")
        self._hooks.append(hook)

    def remove(self, hook: UpdateHook | str) -> None:
        found = self.named(hook) if isinstance(hook, str) else hook if hook in self._hooks else None
        if found is None:
            raise MXNetError(f"this Trainer has no update hook {getattr(hook, 'name', hook)!r}")
        self._hooks.remove(found)

    def clear(self) -> None:
        self._hooks = []

    def named(self, name: str) -> UpdateHook | None:
        return next((h for h in self._hooks if h.name == name), None)

    def before_reduce(self, trainer: Any, grads: list[torch.Tensor]) -> bool:
        return all([bool(h.before_reduce(trainer, grads)) for h in self._hooks])  # every hook sees them

    def before_update(self, trainer: Any, grads: list[torch.Tensor]) -> float | None:
        factor = 1.0
        for h in self._hooks:
            f = h.before_update(trainer, grads)
            if f is None:
                return None
            factor *= float(f)
        return factor

    def after_step(self, trainer: Any, updated: bool) -> None:
        for h in self._hooks:
            after = getattr(h, "after_step", None)
            if callable(after):
                after(trainer, updated)

    def state_dicts(self) -> dict[str, dict[str, Any]]:
        """{name: state} of the hooks with something to save."""
        return {h.name: sd for h in self._hooks if (sd := h.state_dict())}

    def by_name(self) -> dict[str, UpdateHook]:
        return {h.name: h for h in self._hooks}
