"""'local' and 'device': single-process stores that reduce values from several contexts.

'local' sums on the CPU (MXNet's default for pinned CPU memory); 'device' sums on the
device of the first value (the GPU when values live on GPUs).  MXNet's longer names are the
same stores: 'local_update_cpu' and 'local_allreduce_cpu' are 'local', 'local_allreduce_device'
is 'device'.  With an optimizer set
(``set_optimizer``) a push applies the update to the stored weight, as MXNet's
update-on-kvstore does.

Row-sparse values (torch COO tensors with one sparse dimension, :mod:`mxtorch.nd.sparse`) stay
sparse: a push sums them by rows; with an optimizer only the pushed rows are updated; without
one the pushed rows become the stored value (other rows zero, as MXNet assigns).
``row_sparse_pull(key, out, row_ids)`` copies just the rows asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .base import Capability, Key, KVStoreBase, KVStoreError, Value, register_factory

__all__ = ["LocalKVStore", "IN_PROCESS_NAMES"]


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


def _is_sparse(t: torch.Tensor) -> bool:
    return t.layout != torch.strided


def _row_sparse_sum(key: Key, vals: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Sum row_sparse values into a new coalesced row_sparse tensor on ``like``'s device (by rows)."""
    for v in vals:
        if v.layout != torch.sparse_coo or v.sparse_dim() != 1:
            raise KVStoreError(f"key {key!r}: a sparse value must be row_sparse (a COO tensor with one "
                               f"sparse dimension), got layout {v.layout}; convert it with "
                               "mx.nd.sparse.tostype")
        if v.shape != like.shape:
            raise KVStoreError(f"shape mismatch for key {key!r}: stored {tuple(like.shape)}, "
                               f"pushed {tuple(v.shape)}")
    dev = like.device
    ids = torch.cat([v.detach()._indices().to(dev) for v in vals], dim=1)
    rows = torch.cat([v.detach()._values().to(dev) for v in vals])
    out = torch.sparse_coo_tensor(ids, rows, like.shape, check_invariants=False).coalesce()
    if len(vals) == 1 and vals[0].is_coalesced() and vals[0].device == dev:
        out = out.clone()  # coalesce() of a coalesced tensor is the tensor itself: the store owns a copy
    return out


def _write(t: torch.Tensor, value: torch.Tensor) -> None:
    """Copy ``value`` into ``t`` whatever their storage: a dense ``t`` gets the dense value."""
    from ..nd import sparse

    if _is_sparse(t):
        v = value if _is_sparse(value) else sparse.tostype(value, "row_sparse")
        if v is not t:
            t.copy_(v.to(device=t.device, dtype=t.dtype))
    elif _is_sparse(value):
        ids, rows = sparse.row_sparse_parts(value)
        t.zero_()
        t.index_copy_(0, ids.to(t.device), rows.to(device=t.device, dtype=t.dtype))
    else:
        t.copy_(value)


def _rows_of(stored: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Rows ``ids`` (sorted, unique) of a stored value, dense or row_sparse (absent rows are zero)."""
    if not _is_sparse(stored):
        return stored.index_select(0, ids)
    from ..nd import sparse

    sids, srows = sparse.row_sparse_parts(stored)
    rows = torch.zeros((ids.numel(), *stored.shape[1:]), dtype=stored.dtype, device=stored.device)
    if sids.numel() and ids.numel():
        pos = torch.searchsorted(sids, ids).clamp_(max=sids.numel() - 1)
        hit = sids[pos] == ids
        rows[hit] = srows.index_select(0, pos[hit])
    return rows


def _row_ids(key: Key, row_ids: Any, n_rows: int, device: torch.device) -> torch.Tensor:
    if row_ids is None:
        raise KVStoreError(f"row_sparse_pull of key {key!r} needs row_ids=: the rows to pull (a 1-D integer "
                           "tensor per out)")
    ids = torch.as_tensor(row_ids, device=device).reshape(-1)
    if ids.is_floating_point():
        ids = ids.trunc()
    ids = torch.unique(ids.to(torch.int64), sorted=True)
    if ids.numel() and (int(ids[0]) < 0 or int(ids[-1]) >= n_rows):
        bad = int(ids[0]) if int(ids[0]) < 0 else int(ids[-1])
        raise KVStoreError(f"row_sparse_pull of key {key!r}: row id {bad} is out of range for a value with "
                           f"{n_rows} rows")
    return ids


def _tensors(value: Any, key: Key, what: str) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return list(value)
    raise KVStoreError(f"{what} for key {key!r} must be a tensor or a non-empty list of tensors, got "
                       f"{type(value).__name__}")


_ON_DEVICE = ("device", "local_allreduce_device")
"""Names of the local store that reduce on the values' device; the others reduce on the CPU."""


class LocalKVStore(KVStoreBase):
    """In-process KVStore; ``'local'`` reduces on CPU, ``'device'`` on the values' device.

    ``_updater`` is what a push applies to the stored value: the :class:`~mxtorch.optimizer.Updater`
    made by :meth:`set_optimizer` (its ``states`` and ``optimizer`` are MXNet's), or a function
    ``(key, pushed, stored)`` given to :meth:`_set_updater`.
    """

    def __init__(self, name: str = "local") -> None:
        self._type = name
        self._on_device = name in _ON_DEVICE
        self._store: dict[Key, torch.Tensor] = {}
        self._key_type: type | None = None
        self._updater: Callable[[Key, torch.Tensor, torch.Tensor], None] | None = None
        self._optimizer: Any = None

    @property
    def type(self) -> str:
        return self._type

    def is_capable(self, capability: str) -> bool:
        return capability == Capability.OPTIMIZER

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
            dev = t.device if self._on_device else torch.device("cpu")
            t = t.detach()
            self._store[k] = t.to(dev).to_dense() if _is_sparse(t) else t.to(dev, copy=True)

    def _reduce(self, key: Key, vals: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
        if any(_is_sparse(v) for v in vals):
            if not all(_is_sparse(v) for v in vals):
                raise KVStoreError(f"key {key!r}: the values pushed mix row_sparse and dense tensors; push "
                                   "values of one storage type (convert with mx.nd.sparse.tostype)")
            return _row_sparse_sum(key, vals, like)
        for v in vals:
            if v.shape != like.shape:
                raise KVStoreError(f"shape mismatch for key {key!r}: stored {tuple(like.shape)}, "
                                   f"pushed {tuple(v.shape)}")
        dev = like.device
        if len(vals) == 1:
            return vals[0].detach().to(dev)
        acc = vals[0].detach().to(dev, copy=True)
        for v in vals[1:]:
            # a copy to the CPU must block: torch would fill pinned memory the CPU then reads too early
            acc.add_(v.detach().to(dev, non_blocking=dev.type != "cpu"))
        return acc

    def push(self, key: Key | Sequence[Key], value: Value | Sequence[Value], priority: int = 0) -> None:
        keys, values, _ = _key_list(key, value)
        with torch.no_grad():
            for k, v in zip(keys, values):
                stored = self._stored(k)
                merged = self._reduce(k, _tensors(v, k, "pushed value"), stored)
                if self._updater is not None:
                    if _is_sparse(stored):  # the updater updates a dense weight in place
                        stored = self._store[k] = stored.to_dense()
                    self._updater(k, merged, stored)
                else:
                    self._assign(k, stored, merged)

    def _assign(self, key: Key, stored: torch.Tensor, merged: torch.Tensor) -> None:
        """Without an updater the pushed (summed) value becomes the stored one."""
        if _is_sparse(merged):
            self._store[key] = merged  # a fresh tensor from _row_sparse_sum
        elif _is_sparse(stored):
            self._store[key] = merged.to(stored.device, copy=True)
        else:
            stored.copy_(merged)

    def pull(self, key: Key | Sequence[Key], out: Value | Sequence[Value] | None = None,
             priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copy the stored value into ``out``; row_sparse outs are skipped unless ``ignore_sparse``
        is False (then they receive every row; use :meth:`row_sparse_pull` for some rows)."""
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
                    if _is_sparse(t) and ignore_sparse:
                        continue
                    _write(t, stored)

    def row_sparse_pull(self, key: Key | Sequence[Key], out: Any = None, priority: int = 0,
                        row_ids: Any = None) -> None:
        """Copy rows ``row_ids`` of the stored value into ``out`` (a tensor or a list per key).

        ``row_ids`` (ints in any order, repeats allowed, possibly empty) is one tensor per out
        (or one for all outs of a key; a list per key for a list of keys).  Each out is row_sparse
        and becomes exactly those rows (a dense out is refused, as in MXNet).
        """
        if out is None:
            raise KVStoreError("row_sparse_pull needs out=: the tensor(s) to copy the rows into")
        keys, outs, single = _key_list(key, out)
        if single or row_ids is None:
            rids = [row_ids] * len(keys)
        else:
            rids = list(_key_list(key, row_ids)[1])
        from ..nd import sparse

        with torch.no_grad():
            for k, o, r in zip(keys, outs, rids):
                stored = self._stored(k)
                targets = _tensors(o, k, "out")
                per_out = list(r) if isinstance(r, (list, tuple)) else [r] * len(targets)
                if len(per_out) != len(targets):
                    raise KVStoreError(f"row_sparse_pull of key {k!r}: {len(targets)} outs but "
                                       f"{len(per_out)} row_ids: give one row_ids per out (or one for all)")
                for t, rid in zip(targets, per_out):
                    if not _is_sparse(t):
                        raise KVStoreError(
                            f"row_sparse_pull of key {k!r} needs row_sparse outs, got a dense tensor of "
                            f"shape {tuple(t.shape)}: pull into mx.nd.sparse.zeros('row_sparse', shape), or "
                            "use pull() for every row")
                    if t.shape != stored.shape:
                        raise KVStoreError(f"shape mismatch for key {k!r}: stored {tuple(stored.shape)}, "
                                           f"out {tuple(t.shape)}")
                    ids = _row_ids(k, rid, stored.shape[0], stored.device)
                    rows = _rows_of(stored, ids).to(device=t.device, dtype=t.dtype)
                    ids = ids.to(t.device)
                    if _is_sparse(t):
                        t.copy_(sparse.from_row_parts(ids, rows, tuple(t.shape)))
                    else:
                        t.index_copy_(0, ids, rows)

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
                    self._assign(k, stored, merged)
                    for t in _tensors(o, k, "out"):
                        if t.shape != merged.shape:
                            raise KVStoreError(f"shape mismatch for key {k!r}: stored {tuple(merged.shape)}, "
                                               f"out {tuple(t.shape)}")
                        _write(t, merged)
            return
        super().pushpull(key, value, out, priority)

    def set_optimizer(self, optimizer: Any) -> None:
        from ..optimizer import get_updater

        self._optimizer = optimizer
        self._updater = get_updater(optimizer)

    def _set_updater(self, updater: Callable[[Key, torch.Tensor, torch.Tensor], None]) -> None:
        """Apply ``updater(key, pushed, stored)`` to every push instead of storing the pushed value."""
        self._updater = updater

    def _optimizer_updater(self) -> Any:
        from ..optimizer import Updater

        if not isinstance(self._updater, Updater):
            raise KVStoreError("no optimizer is set on this KVStore: call set_optimizer first")
        return self._updater

    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None:
        raise KVStoreError(
            f"gradient compression ({compression_params!r}) is not available on the single-process "
            f"{self._type!r} store: there is no network to save; use it with a distributed KVStore"
        )

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        updater = self._optimizer_updater()
        from ..checkpoint_io import atomic_write_bytes

        atomic_write_bytes(fname, updater.get_states(dump_optimizer))

    def load_optimizer_states(self, fname: str) -> None:
        updater = self._optimizer_updater()
        with open(fname, "rb") as f:
            updater.set_states(f.read())
        self._optimizer = updater.optimizer


IN_PROCESS_NAMES = ("local", "device", "local_update_cpu", "local_allreduce_cpu", "local_allreduce_device")
"""The store names of this module: they reduce over the contexts of one process, not over workers."""
for _name in IN_PROCESS_NAMES:
    register_factory(_name, LocalKVStore)
