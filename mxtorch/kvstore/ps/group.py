"""A parameter-server store seen by a group of workers: one pipeline stage's data-parallel ranks.

In a pipeline (:func:`mxtorch.parallel.parallelize` with ``kvstore='dist_sync'``) each stage's
parameters live on the ranks running that stage only, so only those ranks push them: a sync
round that counted every worker of the job would never complete.  :class:`GroupStore` (made
by :meth:`DistKVStore.group_view <.worker.DistKVStore.group_view>`) gives such a group its own
view of the job's store:

* its keys travel as ``prefix + str(key)`` (each group names its keys apart: two stages'
  Trainers both number their parameters from 0);
* ``init`` (and so ``broadcast``) is collective over the group only: the scheduler compares
  the members' keys, the group's first rank sends the values, and the servers record the
  group with each key, so a sync round of the key completes when every member has pushed
  once (other groups' keys are not waited for); ``barrier`` waits for the members;
* ``push``/``pull``/``pushpull``/``row_sparse_pull`` and gradient compression are the
  underlying store's (same wire format, same servers);
* the servers sum the group's gradients; the optimizer runs on the workers
  (``update_on_kvstore=False``, which a Trainer chooses because this view does not declare
  the OPTIMIZER capability): a server optimizer keys its per-parameter multipliers and
  learning-rate schedule by the Trainer's indices, which several groups share.

``rank`` and ``num_workers`` are the position in, and the size of, the group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..._forward import Forward
from ..base import Capability, Key, KVStoreBase, KVStoreError, Value

if TYPE_CHECKING:
    from .worker import DistKVStore

__all__ = ["GroupStore"]


class GroupStore(KVStoreBase):
    """The worker ranks ``ranks`` of ``store``'s job, with keys named ``prefix + str(key)``."""

    def __init__(self, store: DistKVStore, ranks: Sequence[int], prefix: str) -> None:
        members = sorted({int(r) for r in ranks})
        if store.rank not in members:
            raise KVStoreError(f"worker {store.rank} cannot take the view of worker group {members}: it is "
                               "not a member")
        if any(not 0 <= r < store.num_workers for r in members):
            raise KVStoreError(f"worker group {members} names ranks outside 0..{store.num_workers - 1}")
        if not isinstance(prefix, str):
            raise KVStoreError(f"a group's key prefix must be a str, got {type(prefix).__name__}")
        self._store = store
        self._members = members
        self._prefix = prefix

    # ---- description -------------------------------------------------------------------------
    type = Forward[str]("_store.type")

    @property
    def rank(self) -> int:
        return self._members.index(self._store.rank)

    @property
    def num_workers(self) -> int:
        return len(self._members)

    @property
    def members(self) -> list[int]:
        """The job's worker ranks of this group."""
        return list(self._members)

    prefix = Forward[str]("_prefix")
    store = Forward["DistKVStore"]("_store", "The job's store this view sends through.")
    compressor = Forward[Any]("_store.compressor")
    wire_bytes_sent = Forward[int]("_store.wire_bytes_sent")

    def is_capable(self, capability: str) -> bool:
        if capability == Capability.ASYNC:
            return self._store.mode == "async"
        return capability in (Capability.DISTRIBUTED, Capability.GRADIENT_COMPRESSION)

    def _key(self, key: Any) -> Any:
        if isinstance(key, (list, tuple)):
            return [self._key(k) for k in key]
        if not isinstance(key, (int, str)) or isinstance(key, bool):
            raise KVStoreError(f"KVStore keys must be int or str, got {type(key).__name__}: {key!r}")
        return f"{self._prefix}{key}"

    # ---- the KVStore interface ---------------------------------------------------------------
    def init(self, key: Key | Sequence[Key], value: Value | Sequence[Value]) -> None:
        self._store._init(self._key(key), value, self._members)

    def push(self, key: Key | Sequence[Key], value: Value | Sequence[Value], priority: int = 0) -> None:
        self._store.push(self._key(key), value, priority)

    def pull(self, key: Key | Sequence[Key], out: Value | Sequence[Value] | None = None,
             priority: int = 0, ignore_sparse: bool = True) -> None:
        self._store.pull(self._key(key), out, priority, ignore_sparse)

    def pushpull(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                 out: Value | Sequence[Value] | None = None, priority: int = 0) -> None:
        self._store.pushpull(self._key(key), value, out, priority)

    def broadcast(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                  out: Value | Sequence[Value], priority: int = 0) -> None:
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key: Key | Sequence[Key], out: Any = None, priority: int = 0,
                        row_ids: Any = None) -> None:
        self._store.row_sparse_pull(self._key(key), out, priority, row_ids)

    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None:
        self._store.set_gradient_compression(compression_params)

    def set_optimizer(self, optimizer: Any) -> None:
        raise KVStoreError(f"the {self.type!r} store of worker group {self._members} sums gradients only: "
                           "the optimizer runs on the workers (create the Trainer with "
                           "update_on_kvstore=False or None)")

    def barrier(self) -> None:
        self._store._barrier(self._members)

    def close(self) -> None:
        self._store.close()

    def __repr__(self) -> str:
        return f"GroupStore({self.type!r}, workers={self._members}, prefix={self._prefix!r})"
