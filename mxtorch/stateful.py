"""The one state protocol: every object whose state a checkpoint keeps has ``state_dict()`` and
``load_state_dict(state)``, as in torch (``torch.optim.Optimizer``, ``torch.distributed.checkpoint``'s
``Stateful``).

Who implements it: Gluon blocks (through ``torch.nn.Module``) and ``ParameterDict``,
``gluon.Trainer``, ``gluon.data.DataLoader`` and its samplers, ``contrib.pruning.Pruner``,
``amp.LossScaler``, and :class:`mxtorch.checkpoint.RNGState` (Python's, numpy's and torch's
generators).  :class:`mxtorch.checkpoint.CheckpointManager` saves and restores through it alone.

A state dict holds tensors and plain JSON values (``None``, bool, int, float, str, lists and
dicts with str keys) and nothing else, so that it is written without pickle: as JSON when it
holds no tensor, else by ``torch.save`` and read back with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["Stateful", "plain_state_problem"]


@runtime_checkable
class Stateful(Protocol):
    """An object whose state can be taken and given back (``isinstance(obj, Stateful)`` works)."""

    def state_dict(self) -> Any:
        """The object's state: a dict of tensors and plain JSON values."""
        ...

    def load_state_dict(self, state_dict: Any) -> Any:
        """Put back a state :meth:`state_dict` returned (its own errors name what does not fit)."""
        ...


def plain_state_problem(value: Any, where: str = "state") -> str | None:
    """Why ``value`` is not a state dict value (tensors and JSON values only), or None when it is.

    The answer names the first offending entry by its path (``state['masks']['w']``)."""
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            problem = plain_state_problem(v, f"{where}[{i}]")
            if problem is not None:
                return problem
        return None
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{where} has the key {k!r:.60}, not a str"
            problem = plain_state_problem(v, f"{where}[{k!r}]")
            if problem is not None:
                return problem
        return None
    return f"{where} is a {type(value).__name__}: a state dict holds tensors and JSON values only"
