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
* ``set_optimizer`` (collective over the group: its first rank declares, then the group's
  barrier) gives the group its own optimizer on the servers, beside the job's and the other
  groups' (each stage's Trainer numbers its parameters from 0, so one optimizer could not tell
  two stages' parameter 0 apart).  The servers update each of the group's keys with it, under
  the group's own name of the key (the Trainer's index): per-parameter ``lr_mult``/``wd_mult``,
  update counts and the learning-rate schedule are the Trainer's.  A Trainer therefore chooses
  ``update_on_kvstore=True`` for dist_sync, as MXNet does: the optimizer states live on the
  servers.  Its hyper-parameter changes (``set_learning_rate``, ``rescale_grad``) go to the
  group's optimizer before the next push, and ``save_optimizer_states``/
  ``load_optimizer_states`` (``Trainer.save_states``/``load_states``) move the group's states
  in ``Updater.get_states`` files keyed by the Trainer's indices.  With
  ``update_on_kvstore=False`` the servers sum the group's gradients and the workers update; a
  group of one job must not mix the two with another group (the servers refuse to update a
  group's key with another group's optimizer: its push gets an error).

``rank`` and ``num_workers`` are the position in, and the size of, the group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..._forward import Forward
from ..base import Capability, Key, KVStoreBase, KVStoreError, Value

__all__ = ["GroupStore", "GroupHost"]


class GroupHost(Protocol):
    """What a :class:`GroupStore` sends through: the job's store's operations, and the five scoped to
    a group of workers (``group``: its ranks; ``prefix``: its key names).  ``DistKVStore`` is one."""

    @property
    def type(self) -> str: ...
    @property
    def rank(self) -> int: ...
    @property
    def num_workers(self) -> int: ...
    @property
    def mode(self) -> str: ...

    def push(self, *args: Any, **kwargs: Any) -> None: ...
    def pull(self, *args: Any, **kwargs: Any) -> None: ...
    def pushpull(self, *args: Any, **kwargs: Any) -> None: ...
    def row_sparse_pull(self, *args: Any, **kwargs: Any) -> None: ...
    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None: ...
    def close(self) -> None: ...

    def group_init(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                   group: Sequence[int] | None, prefix: str | None = None) -> None: ...
    def group_barrier(self, group: Sequence[int] | None) -> None: ...
    def group_set_optimizer(self, optimizer: Any, group: Sequence[int] | None,
                            prefix: str | None) -> None: ...
    def group_save_optimizer_states(self, fname: str, dump_optimizer: bool, prefix: str | None) -> None: ...
    def group_load_optimizer_states(self, fname: str, prefix: str | None) -> None: ...


class GroupStore(KVStoreBase):
    """The worker ranks ``ranks`` of ``store``'s job, with keys named ``prefix + str(key)``."""

    def __init__(self, store: GroupHost, ranks: Sequence[int], prefix: str) -> None:
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
    store = Forward[GroupHost]("_store", "The job's store this view sends through.")
    compressor = Forward[Any]("_store.compressor")
    wire_bytes_sent = Forward[int]("_store.wire_bytes_sent")

    def is_capable(self, capability: str) -> bool:
        if capability == Capability.ASYNC:
            return self._store.mode == "async"
        return capability in (Capability.OPTIMIZER, Capability.DISTRIBUTED, Capability.GRADIENT_COMPRESSION)

    def _key(self, key: Any) -> Any:
        if isinstance(key, (list, tuple)):
            return [self._key(k) for k in key]
        if not isinstance(key, (int, str)) or isinstance(key, bool):
            raise KVStoreError(f"KVStore keys must be int or str, got {type(key).__name__}: {key!r}")
        return f"{self._prefix}{key}"

    # ---- the KVStore interface ---------------------------------------------------------------
    def init(self, key: Key | Sequence[Key], value: Value | Sequence[Value]) -> None:
        self._store.group_init(key, value, self._members, self._prefix)

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
        """Run ``optimizer`` on the servers for this group's keys (collective over the group)."""
        self._store.group_set_optimizer(optimizer, self._members, self._prefix)

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Write the servers' states of this group's optimizer to ``fname`` (``Updater.get_states``
        format, keyed by the group's own key names).  Not collective."""
        self._store.group_save_optimizer_states(fname, dump_optimizer, self._prefix)

    def load_optimizer_states(self, fname: str) -> None:
        """Load a file of :meth:`save_optimizer_states` (or ``Updater.get_states``) into the servers'
        optimizer of this group."""
        self._store.group_load_optimizer_states(fname, self._prefix)

    def barrier(self) -> None:
        self._store.group_barrier(self._members)

    def close(self) -> None:
        self._store.close()

    def __repr__(self) -> str:
        return f"GroupStore({self.type!r}, workers={self._members}, prefix={self._prefix!r})"
