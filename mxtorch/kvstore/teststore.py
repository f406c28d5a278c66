"""'teststore': the in-process store for tests (MXNet ships the same name), and the smallest KVStore
a user could write.

It sums what it is given in one process, keeps each key's value, and records every call
(``calls``, :meth:`~TestStore.called`).  It declares exactly the capabilities it is given — none
by default, so a :class:`~mxtorch.gluon.Trainer` reduces with ``broadcast`` and ``pushpull`` only
and updates on every context; with ``Capability.OPTIMIZER`` it runs the optimizer it is handed on
``push``.  Tests run Trainer code against it to check what the Trainer asks of any store (the
call log) and that nothing depends on a built-in store's extras.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from ..optimizer import get_updater
from .base import Capability, Key, KVStoreBase, KVStoreError, Value, register_factory

__all__ = ["TestStore"]


def _pairs(key: Key | Sequence[Key], value: Any) -> list[tuple[Key, Any]]:
    if isinstance(key, (int, str)):
        return [(key, value)]
    keys = list(key)
    values = list(value) if isinstance(value, (list, tuple)) else [value] * len(keys)
    if len(values) != len(keys):
        raise KVStoreError(f"{len(keys)} keys but {len(values)} values: give one value (or list) per key")
    return list(zip(keys, values))


def _as_list(v: Any) -> list[torch.Tensor]:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _summed(v: Any) -> torch.Tensor:
    vals = _as_list(v)
    total = vals[0].detach().clone()
    for other in vals[1:]:
        total.add_(other.detach().to(total.device))
    return total


class TestStore(KVStoreBase):
    """In-process store with MXNet's summing rule, the values per key and a log of the calls made."""

    __test__ = False  # not a pytest test class

    def __init__(self, name: str = "teststore", capabilities: Iterable[Capability | str] = ()) -> None:
        self._type = name
        self._capabilities = {Capability(c) for c in capabilities}
        self.values: dict[Key, torch.Tensor] = {}
        self.calls: list[tuple[str, list[Key]]] = []
        self.optimizer: Any = None
        self._updater: Any = None

    @property
    def type(self) -> str:
        return self._type

    def is_capable(self, capability: str) -> bool:
        return Capability(capability) in self._capabilities

    def called(self, method: str) -> int:
        """How many times ``method`` was called."""
        return sum(1 for m, _ in self.calls if m == method)

    def _log(self, method: str, key: Key | Sequence[Key]) -> None:
        self.calls.append((method, [key] if isinstance(key, (int, str)) else list(key)))

    def init(self, key: Key | Sequence[Key], value: Value | Sequence[Value]) -> None:
        self._log("init", key)
        for k, v in _pairs(key, value):
            if k in self.values:
                raise KVStoreError(f"key {k!r} is already initialized")
            self.values[k] = _summed(_as_list(v)[:1])

    def push(self, key: Key | Sequence[Key], value: Value | Sequence[Value], priority: int = 0) -> None:
        self._log("push", key)
        with torch.no_grad():
            for k, v in _pairs(key, value):
                if k not in self.values:
                    raise KVStoreError(f"key {k!r} was never initialized")
                total = _summed(v).to(self.values[k].device)
                if self._updater is not None:
                    self._updater(k, total, self.values[k])
                else:
                    self.values[k] = total

    def pull(self, key: Key | Sequence[Key], out: Value | Sequence[Value] | None = None,
             priority: int = 0, ignore_sparse: bool = True) -> None:
        self._log("pull", key)
        self._copy_out(key, out)

    def _copy_out(self, key: Key | Sequence[Key], out: Any) -> None:
        with torch.no_grad():
            for k, o in _pairs(key, out):
                for t in _as_list(o):
                    t.copy_(self.values[k].to(t.device))

    def pushpull(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                 out: Value | Sequence[Value] | None = None, priority: int = 0) -> None:
        self._log("pushpull", key)
        if self._updater is not None:
            KVStoreBase.pushpull(self, key, value, out, priority)
            return
        outs = dict(_pairs(key, value if out is None else out))
        with torch.no_grad():
            for k, v in _pairs(key, value):
                total = _summed(v)
                for t in _as_list(outs[k]):
                    t.copy_(total.to(t.device))

    def broadcast(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                  out: Value | Sequence[Value], priority: int = 0) -> None:
        self._log("broadcast", key)
        for k, v in _pairs(key, value):  # MXNet's test store hands out the value given, every time
            self.values[k] = _summed(_as_list(v)[:1])
        self._copy_out(key, out)

    def set_optimizer(self, optimizer: Any) -> None:
        if Capability.OPTIMIZER not in self._capabilities:
            super().set_optimizer(optimizer)
        self._log("set_optimizer", [])
        self.optimizer = optimizer
        self._updater = get_updater(optimizer)

    def keys(self) -> Sequence[Key]:
        return list(self.values)


register_factory("teststore", TestStore)
