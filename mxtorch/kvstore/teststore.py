"""'teststore': the smallest KVStore a user could write, kept for tests (MXNet ships the same name).

It offers only what :class:`~mxtorch.gluon.Trainer` needs from any store, ``broadcast`` and
``pushpull`` (summing the values of one key in one process), and declares no capability, so a
Trainer reduces with it and updates on every context.  Tests run Trainer code against it to
check that nothing depends on a built-in store's extras.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .base import Key, KVStoreBase, KVStoreError, Value, register_factory

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


class TestStore(KVStoreBase):
    """In-process store with only ``broadcast`` and ``pushpull`` (no optimizer, no compression)."""

    __test__ = False  # not a pytest test class

    def __init__(self, name: str = "teststore") -> None:
        self._type = name

    @property
    def type(self) -> str:
        return self._type

    def broadcast(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                  out: Value | Sequence[Value], priority: int = 0) -> None:
        outs = _pairs(key, out)
        vals = dict(_pairs(key, value))
        with torch.no_grad():
            for k, o in outs:
                src = _as_list(vals[k])[0]
                for t in _as_list(o):
                    if t is not src:
                        t.copy_(src)

    def pushpull(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                 out: Value | Sequence[Value] | None = None, priority: int = 0) -> None:
        outs = dict(_pairs(key, value if out is None else out))
        with torch.no_grad():
            for k, v in _pairs(key, value):
                vals = _as_list(v)
                total = vals[0].detach().clone()
                for other in vals[1:]:
                    total.add_(other.detach().to(total.device))
                for t in _as_list(outs[k]):
                    t.copy_(total)


register_factory("teststore", TestStore)
