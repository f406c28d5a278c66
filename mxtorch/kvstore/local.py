"""'local' and 'device': single-process stores that reduce values from several contexts.

'local' sums on the CPU (MXNet's default for pinned CPU memory); 'device' sums on the
device of the first value (the GPU when values live on GPUs).  With an optimizer set
(``set_optimizer``) a push applies the update to the stored weight, as MXNet's
update-on-kvstore does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .base import Key, KVStoreBase, KVStoreError, Value, register_factory

__all__ = ["LocalKVStore"]


def _key_list(key: Key | Sequence[Key], value: Any) -> tuple[list[Key], list[Any], bool]:
    if isinstance(key, (int, str)):
        return [key], [value], True
    keys = list(key)
    if isinstance(value, torch.Tensor) or value is None:
        values = [value] * len(keys) if value is None else None
        if values is None:
            raise KVStoreError(f"{len(keys)} keys given with a single tensor: give one value per key")
        return keys, values, False
    values = list(value)
    if len(values) != len(keys):
        raise KVStoreError(f"{len(keys)} keys but {len(values)} values: give one value (or list) per key")
    return keys, values, False


def _tensors(value: Any, key: Key, what: str) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return list(value)
    raise KVStoreError(f"{what} for key {key!r} must be a tensor or a non-empty list of tensors, got "
                       f"{type(value).__name__}")


class LocalKVStore(KVStoreBase):
    """In-process KVStore; ``'local'`` reduces on CPU, ``'device'`` on the values' device."""

    def __init__(self, name: str = "local") -> None:
        self._type = name
        self._store: dict[Key, torch.Tensor] = {}
        self._key_type: type | None = None
        self._updater: Callable[[Key, torch.Tensor, torch.Tensor], None] | None = None
        self._optimizer: Any = None

    @property
    def type(self) -> str:
        return self._type

    def is_capable(self, capability: str) -> bool:
        return capability == KVStoreBase.OPTIMIZER

    def _check_key(self, key: Key) -> None:
        if not isinstance(key, (int, str)) or isinstance(key, bool):
            raise KVStoreError(f"KVStore keys must be int or str, got {type(key).__name__}: {key!r}")
        if self._key_type is None:
            self._key_type = type(key)
        elif type(key) is not self._key_type:
            raise KVStoreError(f"key {key!r} is a {type(key).__name__} but this store uses "
                               f"{self._key_type.__name__} keys: do not mix int and str keys")

    def _stored(self, key: Key) -> torch.Tensor:
        try:
            return self._store[key]
        except KeyError:
            raise KVStoreError(f"key {key!r} has not been initialized: call kv.init({key!r}, value) first") \
                from None

    def init(self, key: Key | Sequence[Key], value: Value | Sequence[Value]) -> None:
        keys, values, _ = _key_list(key, value)
        for k, v in zip(keys, values):
            self._check_key(k)
            if k in self._store:
                raise KVStoreError(f"duplicate init of key {k!r}")
            t = _tensors(v, k, "init value")[0]
            dev = torch.device("cpu") if self._type == "local" else t.device
            self._store[k] = t.detach().to(dev, copy=True)

    def _reduce(self, key: Key, vals: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
        for v in vals:
            if v.shape != like.shape:
                raise KVStoreError(f"shape mismatch for key {key!r}: stored {tuple(like.shape)}, "
                                   f"pushed {tuple(v.shape)}")
        dev = like.device
        if len(vals) == 1:
            return vals[0].detach().to(dev)
        acc = vals[0].detach().to(dev, copy=True)
        for v in vals[1:]:
            acc.add_(v.detach().to(dev, non_blocking=True))
        return acc

    def push(self, key: Key | Sequence[Key], value: Value | Sequence[Value], priority: int = 0) -> None:
        keys, values, _ = _key_list(key, value)
        with torch.no_grad():
            for k, v in zip(keys, values):
                stored = self._stored(k)
                merged = self._reduce(k, _tensors(v, k, "pushed value"), stored)
                if self._updater is not None:
                    self._updater(k, merged, stored)
                else:
                    stored.copy_(merged)

    def pull(self, key: Key | Sequence[Key], out: Value | Sequence[Value] | None = None,
             priority: int = 0, ignore_sparse: bool = True) -> None:
        if out is None:
            raise KVStoreError("pull needs out=: the tensor(s) to copy the stored value into")
        keys, outs, _ = _key_list(key, out)
        with torch.no_grad():
            for k, o in zip(keys, outs):
                stored = self._stored(k)
                for t in _tensors(o, k, "out"):
                    if t.shape != stored.shape:
                        raise KVStoreError(f"shape mismatch for key {k!r}: stored {tuple(stored.shape)}, "
                                           f"out {tuple(t.shape)}")
                    t.copy_(stored)

    def pushpull(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                 out: Value | Sequence[Value] | None = None, priority: int = 0) -> None:
        if self._updater is None:
            # no stored state is needed between calls: reduce and write back directly
            keys, values, _ = _key_list(key, value)
            outs = values if out is None else _key_list(key, out)[1]
            with torch.no_grad():
                for k, v, o in zip(keys, values, outs):
                    stored = self._stored(k)
                    merged = self._reduce(k, _tensors(v, k, "pushed value"), stored)
                    stored.copy_(merged)
                    for t in _tensors(o, k, "out"):
                        t.copy_(merged)
            return
        super().pushpull(key, value, out, priority)

    def set_optimizer(self, optimizer: Any) -> None:
        from ..optimizer import get_updater

        self._optimizer = optimizer
        updater = get_updater(optimizer)
        self._updater_obj = updater
        self._updater = lambda k, g, w: updater(k, g, w)

    def _set_updater(self, updater: Callable[[Key, torch.Tensor, torch.Tensor], None]) -> None:
        self._updater = updater

    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None:
        raise KVStoreError(
            f"gradient compression ({compression_params!r}) is not available on the single-process "
            f"{self._type!r} store: there is no network to save; use it with a distributed KVStore"
        )

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        if self._updater is None or not hasattr(self, "_updater_obj"):
            raise KVStoreError("no optimizer is set on this KVStore: call set_optimizer first")
        from ..checkpoint_io import atomic_write_bytes

        atomic_write_bytes(fname, self._updater_obj.get_states(dump_optimizer))

    def load_optimizer_states(self, fname: str) -> None:
        if self._updater is None or not hasattr(self, "_updater_obj"):
            raise KVStoreError("no optimizer is set on this KVStore: call set_optimizer first")
        with open(fname, "rb") as f:
            self._updater_obj.set_states(f.read())


register_factory("local", LocalKVStore)
register_factory("device", LocalKVStore)
