"""``dist_sync`` / ``dist_async``: MXNet's parameter-server KVStore, as a worker sees it.

``mx.kv.create('dist_sync')`` in a process started by ``mxtorch launch -n N -s M`` joins the
job (the scheduler gives it its rank) and connects to every server.  In a process whose
``DMLC_ROLE`` is ``server`` or ``scheduler`` the same call runs that role instead and exits
the process with status 0 when the job ends (MXNet's "one script for every role" mode).

Semantics (as MXNet's dist stores).  Keys are ints or strs (both kinds may be used side by
side: ``3`` and ``'3'`` are different keys; for the server optimizer a key is its own index,
as in the local store); values are float32/float16/bfloat16 (or integer) tensors.

* ``init(keys, values)`` is collective: every worker calls it with the same keys, shapes and
  dtypes in the same order (checked by the scheduler, a mismatch raises on every worker,
  naming the key and both shapes); only rank 0's values are stored.  It returns once the
  values are on the servers.
* ``push(keys, values)``: a list of values for a key (one per local context) is summed on the
  worker first.  dist_sync: the servers sum one push per worker, then store the sum, or, after
  ``set_optimizer``, apply the optimizer to the stored weight with that sum as the gradient.
  dist_async: every push is applied (or stored) as it arrives.
* ``pull(keys, out)`` returns the value after this worker's own pushes to the key have been
  applied (in dist_sync: after the round they belong to completed).
* ``pushpull`` is push then pull in one pipelined pass; ``broadcast`` is init then pull.
* ``set_optimizer(opt)`` declares ``opt`` to the servers (rank 0 sends it; collective, ends
  with a barrier); later changes of its learning rate, ``rescale_grad``, weight decay or
  clipping are sent before the next push.
* ``save_optimizer_states``/``load_optimizer_states`` gather/scatter the servers' states as
  one file in :meth:`mxtorch.optimizer.Updater.get_states`'s format: files move freely between
  local and distributed training.  Saving is not collective (rank 0 alone may save).

Row-sparse values (torch COO tensors with one sparse dimension, :mod:`mxtorch.nd.sparse`), as
the local store: a row_sparse push sends only its row ids and rows, each server the rows it
holds; the servers sum them by row; with an optimizer only the touched rows are updated (lazy
update), without one the summed rows become the value (the other rows zero).  A row_sparse
``out`` of ``pull(..., ignore_sparse=False)`` or of an optimizer-less ``pushpull`` receives the
rows the value stores.  ``row_sparse_pull(key, out, row_ids)`` fetches just those rows (any
order, repeats, or none) into a row_sparse out (which becomes exactly those rows) or a dense
one (those rows written).  A key initialized with a row_sparse value is split over the servers
by rows; a dense key's slices may cut a row, which then travels to both servers (:mod:`.rows`).

Gradient compression (``set_gradient_compression({'type': '2bit', 'threshold': 0.5})``, any
:mod:`mxtorch.compression` type): this worker compresses each floating-point push (per key
and per server slice, keeping the error-feedback residuals: :attr:`DistKVStore.compressor`),
the servers decompress with the compressor it declared and aggregate; pulls stay dense unless
``'pull': 'fp16'`` (or ``'bf16'``) asks for narrower float32 pulls (:mod:`.codec`).
Row-sparse pushes are sent uncompressed.  :attr:`DistKVStore.wire_bytes_sent` counts the bytes
of every pushed tensor.

dist_async staleness (``MXTORCH_PS_STALENESS=k`` or ``create('dist_async', staleness=k)``): a
pull of a key waits while this worker has pushed the key more than ``k`` times more than the
slowest live worker (stale synchronous parallel); ``k=0`` makes every worker wait for the
others at each step, like dist_sync; dead workers, and workers that closed their store, hold
nobody back.  Every worker should push the keys it pulls.

Placement: a key of at most ``MXNET_KVSTORE_BIGARRAY_BOUND`` elements goes to one server, the
one with the fewest bytes so far (ties: the lowest rank), in init order; a larger key is cut
into contiguous slices of at most ``MXTORCH_PS_PIECE_BYTES`` (4 MiB; at least one per server)
dealt round robin to the servers (sizes differ by at most one element, or one row for keys
initialized row_sparse), pushed and pulled from all servers in parallel (:mod:`.placement`).
Optimizers act on each slice separately, with a state per slice (norm-based ones such as
LAMB/LARS then see slice norms; ``MXTORCH_PS_PIECE_BYTES=0`` cuts one slice per server, as MXNet
does, for the same norms as MXNet's).

fp16/bf16 keys: the servers sum pushes in fp32 and round once; with an optimizer whose
``multi_precision`` is set, the server keeps an fp32 master copy of the weight (in the
optimizer state, as a local Updater does) and returns the rounded value.

Requests of one call are all sent before any reply is awaited (see :mod:`.client`);
``pushpull`` sends one PUSHPULL message per slice and gets one reply. Data frames leave from
the tensors' memory and arrive without copies; a pulled slice that is a whole ``out`` which
shares its storage with no other tensor becomes that out's storage (:mod:`.dense_transfer`), others are
copied into ``out`` (``MXTORCH_PS_ADOPT_PULLS=0``: always copied). Every wait is bounded by
``MXTORCH_DIST_TIMEOUT`` (or ``create(..., timeout=s)``) and raises at once when a node it
depends on is reported dead. One store per process: creating another with the same mode returns
the same open store; ``close()`` (also run at exit) tells the scheduler this worker is done,
and the job ends when every worker is.
"""

from __future__ import annotations

import atexit
import functools
import json
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..._forward import Forward
from ...distributed import exit_status
from ...profiler import span
from ..base import Capability, Key, KVStoreBase, KVStoreError, Value, register_factory
from ..local import _key_list, _tensors
from . import protocol as P
from .client import PSClient
from .codec import PULL_DTYPES, describe_compressor, split_params
from .config import PSConfig
from .dense_transfer import _adopt, flat_value, send_dense_pull, send_dense_push, summed_flat  # noqa: F401
from .optimizer_spec import describe_optimizer, hyper_of
from .placement import KeyPlan, place
from .profiling import connect_worker
from .protocol import Command, Message
from .row_transfer import row_pull_groups, send_row_pull, send_rows_push, send_stored_rows_pull, summed_rows
from .rows import row_size
from .server_stats import server_stats
from .worker_states import load_states, save_states, send_to_servers, sync_hyper

__all__ = ["DistKVStore", "close_all", "place", "STORE_NAMES"]

STORE_NAMES = ("dist_sync", "dist_async", "dist_device_sync", "dist_sync_device", "dist_async_device", "dist")
_ACTIVE: weakref.WeakSet[DistKVStore] = weakref.WeakSet()


def _mode(name: str) -> str:
    return "async" if "async" in name else "sync"


def _is_sparse(t: torch.Tensor) -> bool:
    return t.layout != torch.strided


@dataclass
class _ServerOptimizer:
    """An optimizer this worker declared to the servers, and the hyper-parameters they last got."""

    optimizer: Any
    hyper_sent: dict[str, Any]


@dataclass
class _Pushed:
    """One key's pushed value, summed over its list: ``flat`` (dense) or ``ids`` + ``rows``."""

    flat: torch.Tensor | None = None
    ids: torch.Tensor | None = None
    rows: torch.Tensor | None = None


class DistKVStore(KVStoreBase):
    """The parameter-server KVStore of a worker; see the module docstring."""

    def __init__(self, name: str = "dist_sync", config: PSConfig | None = None,
                 timeout: float | None = None, staleness: int | None = None) -> None:
        """``config``: default :meth:`PSConfig.from_env`; ``timeout``: seconds any later wait on a
        peer may last (default ``MXTORCH_DIST_TIMEOUT``; joining the job always uses that);
        ``staleness``: dist_async's bound (default ``MXTORCH_PS_STALENESS``, unset: unbounded)."""
        if name not in STORE_NAMES:
            raise KVStoreError(f"unknown parameter-server store type {name!r}: use one of "
                               f"{list(STORE_NAMES)}")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise KVStoreError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if staleness is not None:
            if isinstance(staleness, bool) or not isinstance(staleness, int) or staleness < 0:
                raise KVStoreError(f"staleness must be an int >= 0 (pushes a worker may be ahead of the "
                                   f"slowest), got {staleness!r}")
            if _mode(name) != "async":
                raise KVStoreError(f"staleness={staleness} bounds dist_async; {name!r} is synchronous "
                                   "already (every pull waits for every worker's push)")
        config = PSConfig.from_env() if config is None else config
        if config.role != "worker":
            from .roles import become_role

            become_role(config)  # serves, then exits the process
        self._type = name
        self._mode = _mode(name)
        self._config = config
        bound = staleness if staleness is not None else config.staleness
        hello: dict[str, Any] = {"staleness": bound} if self._mode == "async" and bound is not None else {}
        self._staleness = bound if self._mode == "async" else None
        self._client = PSClient(config, self._mode, hello)
        if timeout is not None:
            self._client.op_timeout = float(timeout)
        self._plans: dict[Key, KeyPlan] = {}
        self._server_bytes = [0] * self._client.num_servers
        # the optimizers on the servers this worker declared: the job's (None) and its groups' (prefix)
        self._optimizers: dict[str | None, _ServerOptimizer] = {}
        self._compressor: Any = None
        self._pull_dtype: torch.dtype | None = None
        self.wire_bytes_sent = 0
        """Bytes of the tensors this worker pushed (payloads when compressing; ids + rows when
        row_sparse), for comparing compressors and benchmarks."""
        connect_worker(self._client)
        _ACTIVE.add(self)
        exit_status.track()  # a failing exit tells the scheduler, which tells the others at once
        atexit.register(self.close)

    # ---- description -------------------------------------------------------------------------
    type = Forward[str]("_type")
    rank = Forward[int]("_client.rank")

    @property
    def num_workers(self) -> int:
        """The number of workers; in an elastic job the live ones this worker last heard of (it takes
        in the scheduler's notices first), which changes as workers leave and join."""
        if self._config.elastic and not self._client.closed:
            self._client.pump()
        return self._client.num_workers

    num_servers = Forward[int]("_client.num_servers")
    local_rank = Forward[int]("_client.local_rank")
    closed = Forward[bool]("_client.closed")
    mode = Forward[str]("_mode", "'sync' or 'async'.")
    staleness = Forward[int | None](
        "_staleness", "dist_async's staleness bound of this worker (None: unbounded, or dist_sync).")
    compressor = Forward[Any](
        "_compressor",
        "The gradient :class:`~mxtorch.compression.Compressor` of this worker (its residuals), or None.")

    def is_capable(self, capability: str) -> bool:
        if capability == Capability.ASYNC:
            return self._mode == "async"
        return capability in (Capability.OPTIMIZER, Capability.DISTRIBUTED, Capability.GRADIENT_COMPRESSION)

    def _live(self) -> PSClient:
        if self._client.closed:
            raise KVStoreError(f"this {self._type!r} KVStore is closed")
        self._client.pump()
        return self._client

    # ---- keys and placement ----------------------------------------------------------------------
    @staticmethod
    def _check_key(key: Key) -> None:
        # int and str keys travel typed, so both kinds may live side by side (3 and '3' differ)
        if not isinstance(key, (int, str)) or isinstance(key, bool):
            raise KVStoreError(f"KVStore keys must be int or str, got {type(key).__name__}: {key!r}")

    def _plan(self, key: Key) -> KeyPlan:
        try:
            return self._plans[key]
        except KeyError:
            raise KVStoreError(f"key {key!r} has not been initialized: call kv.init({key!r}, value) on every "
                               "worker first") from None

    def _place(self, key: Key, t: torch.Tensor) -> KeyPlan:
        kind = "row_sparse" if _is_sparse(t) else "dense"
        row = row_size(t.shape) if kind == "row_sparse" and t.dim() else 1
        piece = self._config.piece_bytes // t.element_size()
        shards = place(t.numel(), t.element_size(), self._server_bytes, self._config.bigarray_bound, row,
                       piece=max(piece, 1) if self._config.piece_bytes else 0)
        limit = self._config.server_max_message_bytes()
        largest = max(size for _, _, size in shards) * t.element_size()
        if largest > limit:  # the servers' ZeroMQ would drop it with the connection: say so now
            raise KVStoreError(f"key {key!r}: a slice of {largest} bytes is larger than the {limit} bytes a "
                               "server accepts in one message (MXTORCH_PS_MAX_MESSAGE_BYTES): raise that "
                               "limit on every process, or cut keys smaller (MXTORCH_PS_PIECE_BYTES, "
                               "MXNET_KVSTORE_BIGARRAY_BOUND)")
        return KeyPlan(key, t.shape, t.dtype, t.numel(), shards, kind)

    def placement(self, key: Key) -> list[tuple[int, int, int]]:
        """``[(server rank, flat offset, numel), ...]``: where ``key``'s slices live."""
        return list(self._plan(key).shards)

    # ---- values -------------------------------------------------------------------------------
    def _pushed(self, key: Key, value: Any) -> _Pushed:
        plan = self._plan(key)
        vals = _tensors(value, key, "pushed value")
        for v in vals:
            if v.shape != plan.shape or v.dtype != plan.dtype:
                raise KVStoreError(f"key {key!r}: pushed shape {tuple(v.shape)} {P.dtype_name(v.dtype)}, but "
                                   f"it was initialized as {tuple(plan.shape)} {P.dtype_name(plan.dtype)}")
        sparse_count = sum(_is_sparse(v) for v in vals)
        if sparse_count:
            if sparse_count != len(vals):
                raise KVStoreError(f"key {key!r}: the values pushed mix row_sparse and dense tensors; push "
                                   "values of one storage type (convert with mx.nd.sparse.tostype)")
            ids, rows = summed_rows(plan, vals)
            return _Pushed(ids=ids, rows=rows)
        return _Pushed(flat=summed_flat(vals))

    def _outs(self, key: Key, out: Any) -> list[torch.Tensor]:
        plan = self._plan(key)
        outs = _tensors(out, key, "out")
        for o in outs:
            if o.shape != plan.shape:
                raise KVStoreError(f"key {key!r}: out has shape {tuple(o.shape)}, but the key holds "
                                   f"{tuple(plan.shape)}")
        return outs

    def _send_push(self, client: PSClient, plan: KeyPlan, pushed: _Pushed) -> None:
        if pushed.flat is None:
            assert pushed.ids is not None and pushed.rows is not None
            self.wire_bytes_sent += send_rows_push(client, plan, pushed.ids, pushed.rows)
        else:
            self.wire_bytes_sent += send_dense_push(client, plan, pushed.flat, self._compressor)

    def _pull_hint(self) -> str:
        if self._mode == "sync":
            return ("in dist_sync a pull waits until every worker has pushed the key; another worker may be "
                    "slow, stuck, or not pushing it")
        if self._staleness is not None:
            return (f"with staleness {self._staleness} a pull waits until every live worker is at most "
                    f"{self._staleness} pushes of the key behind this one; another worker may be slow, "
                    "stuck, or not pushing it")
        return "the server may be stuck or overloaded"

    def _send_pull(self, client: PSClient, plan: KeyPlan, outs: list[torch.Tensor],
                   push: torch.Tensor | None = None) -> None:
        """Pull the value into dense ``outs``; with ``push`` (a dense flat value), push it first, in one
        PUSHPULL message per slice (:func:`.dense_transfer.send_dense_pull`)."""
        narrow = self._pull_dtype if plan.dtype == torch.float32 else None
        self.wire_bytes_sent += send_dense_pull(client, plan, outs, narrow, self._config.adopt_pulls,
                                                self._pull_hint(), push, self._compressor)

    # ---- the KVStore interface -------------------------------------------------------------------
    def init(self, key: Key | Sequence[Key], value: Value | Sequence[Value]) -> None:
        """Initialize keys with rank 0's values (collective; see the module docstring).

        A row_sparse value makes a row_sparse key (split over the servers by rows); the stored
        value is its dense form, as in the local store.  Initializing a key again with the same
        shape, dtype and storage type is accepted, as in MXNet's dist stores, and keeps the
        value the servers hold (a second Trainer on the store starts from the trained weights).
        """
        self.group_init(key, value, None)

    def group_init(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
              group: Sequence[int] | None, prefix: str | None = None) -> None:
        """:meth:`init`, collective over the worker ranks ``group`` (None: every worker): the keys
        then belong to that group, whose sync rounds count its members only, and the group's
        first rank sends the values (see :meth:`group_view`).  With ``prefix`` (a group's), the
        keys given are the group's own names: the servers store ``prefix + str(key)`` and update
        it with the group's optimizer under the key's own name."""
        client = self._live()
        keys, values, _ = _key_list(key, value)
        indices: dict[Key, Key] = {}  # the server's name -> the group's name of each key
        if prefix is not None:
            for k in keys:
                self._check_key(k)
            indices = {f"{prefix}{k}": k for k in keys}
            keys = [f"{prefix}{k}" for k in keys]
        firsts: list[torch.Tensor] = []
        seen: set[Key] = set()
        fresh_keys: list[Key] = []
        for k, v in zip(keys, values):
            self._check_key(k)
            if k in seen:
                raise KVStoreError(f"key {k!r} appears twice in one kv.init call: give each key once")
            seen.add(k)
            t = _tensors(v, k, "init value")[0]
            if k in self._plans:
                # MXNet's dist stores accept a repeated init (a second Trainer on the same store): the
                # key keeps the value the servers hold, provided it describes the same array.
                plan = self._plans[k]
                kind = "row_sparse" if _is_sparse(t) else "dense"
                if (tuple(t.shape), t.dtype, kind) != (tuple(plan.shape), plan.dtype, plan.kind):
                    raise KVStoreError(f"key {k!r} is already initialized as {plan.kind} "
                                       f"{tuple(plan.shape)} {P.dtype_name(plan.dtype)}; it cannot be "
                                       f"initialized again as {kind} {tuple(t.shape)} "
                                       f"{P.dtype_name(t.dtype)}")
                continue
            fresh_keys.append(k)
            P.dtype_code(t.dtype)
            if _is_sparse(t) and (t.layout != torch.sparse_coo or t.sparse_dim() != 1):
                raise KVStoreError(f"key {k!r}: a sparse init value must be row_sparse (a COO tensor with "
                                   "one sparse dimension); convert it with mx.nd.sparse.tostype")
            firsts.append(t)
        keys = fresh_keys
        if not keys:
            return
        # the scheduler compares these between workers: the storage type decides the placement too
        check = [[P.key_to_json(k), list(t.shape), ("row_sparse " if _is_sparse(t) else "") +
                  P.dtype_name(t.dtype)] for k, t in zip(keys, firsts)]
        members = None if group is None else sorted(group)
        check_meta: dict[str, Any] = {"keys": check}
        if members is not None:
            check_meta["group"] = members
        size, limit = len(json.dumps(check_meta)), self._config.scheduler_max_message_bytes()
        if size > limit:  # the scheduler's ZeroMQ would drop it with the connection: say so now
            raise KVStoreError(f"kv.init of {len(keys)} keys describes them in {size} bytes, more than the "
                               f"{limit} bytes the scheduler accepts in one message "
                               "(MXTORCH_PS_MAX_MESSAGE_BYTES): init the keys in several calls, or raise "
                               "that limit on every process")
        client.request_scheduler(Message(Command.KEY_CHECK, meta=check_meta), "KEY_CHECK of kv.init",
                                 "another worker has not called kv.init with these keys yet")
        plans = [self._place(k, t) for k, t in zip(keys, firsts)]
        if prefix is not None:
            for plan in plans:
                plan.group, plan.index = prefix, indices[plan.key]
        sender = 0 if members is None else members[0]
        for plan, t in zip(plans, firsts):
            flat = flat_value(t.to_dense() if _is_sparse(t) else t) if self.rank == sender else None
            for i, (server, off, size) in enumerate(plan.shards):
                meta: dict[str, Any] = {"shape": list(plan.shape), "dtype": P.dtype_name(plan.dtype),
                                        "num_shards": len(plan.shards), "offset": off, "numel": size,
                                        "kind": plan.kind}
                if members is not None:
                    meta["workers"] = members
                if plan.group is not None:
                    meta["prefix"], meta["index"] = plan.group, P.key_to_json(plan.own_key)
                tensors = []
                if flat is not None:
                    tensors = [flat.view(plan.shape) if len(plan.shards) == 1 else flat.narrow(0, off, size)]
                client.send(server, Message(Command.INIT, key=plan.key, shard=i, meta=meta, tensors=tensors),
                            functools.partial(plan.operation, "INIT", i),
                            f"rank {sender} has not sent the key's value yet",
                            functools.partial(plan.numbered_from, i) if client.joined else None)
        try:
            client.wait()
        finally:
            for plan in plans:
                self._plans[plan.key] = plan

    def push(self, key: Key | Sequence[Key], value: Value | Sequence[Value], priority: int = 0) -> None:
        client = self._live()
        keys, values, _ = _key_list(key, value)
        pushed = [self._pushed(k, v) for k, v in zip(keys, values)]
        with span("ps.push") as sp:
            sent = self.wire_bytes_sent
            self._sync_hyper(client)
            for k, p in zip(keys, pushed):
                self._send_push(client, self._plans[k], p)
            client.wait()
            if sp:
                sp.note(keys=keys, bytes=self.wire_bytes_sent - sent, worker=self.rank)

    def _send_pulls(self, client: PSClient, plan: KeyPlan, outs: list[torch.Tensor],
                    sparse_outs: bool) -> None:
        """Pull into ``outs``: dense ones get the value; row_sparse ones its stored rows, or nothing."""
        dense = [o for o in outs if not _is_sparse(o)]
        if dense:
            self._send_pull(client, plan, dense)
        if sparse_outs and len(dense) < len(outs):
            send_stored_rows_pull(client, plan, [o for o in outs if _is_sparse(o)], self._pull_hint())

    def pull(self, key: Key | Sequence[Key], out: Value | Sequence[Value] | None = None,
             priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copy the value into ``out``; row_sparse outs are left alone unless ``ignore_sparse`` is False
        (then they become the rows the value stores; use :meth:`row_sparse_pull` for some rows)."""
        if out is None:
            raise KVStoreError("pull needs out=: the tensor(s) to copy the stored value into")
        client = self._live()
        keys, outs, _ = _key_list(key, out)
        targets = [self._outs(k, o) for k, o in zip(keys, outs)]
        with span("ps.pull") as sp:
            if sp:
                sp.note(keys=keys, bytes=sum(o[0].numel() * o[0].element_size() for o in targets if o),
                        worker=self.rank)
            for k, o in zip(keys, targets):
                self._send_pulls(client, self._plans[k], o, not ignore_sparse)
            client.wait()

    def pushpull(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                 out: Value | Sequence[Value] | None = None, priority: int = 0) -> None:
        """Push then pull every key in one pass (with ``out=None`` the result overwrites ``value``).

        Row_sparse outs receive the summed rows when the servers run no optimizer, and are left
        alone when they do (pull the weights' rows with :meth:`row_sparse_pull`), as the local
        store does.
        """
        client = self._live()
        keys, values, _ = _key_list(key, value)
        outs = values if out is None else _key_list(key, out)[1]
        pushed = [self._pushed(k, v) for k, v in zip(keys, values)]
        targets = [self._outs(k, o) for k, o in zip(keys, outs)]
        with span("pushpull") as sp:
            sent = self.wire_bytes_sent
            self._sync_hyper(client)
            for k, p, o in zip(keys, pushed, targets):
                plan = self._plans[k]
                if p.flat is not None and o and not any(_is_sparse(t) for t in o):
                    self._send_pull(client, plan, o, push=p.flat)  # one message each way per slice
                    continue
                self._send_push(client, plan, p)
                self._send_pulls(client, plan, o, plan.group not in self._optimizers)
            client.wait()
            if sp:
                sp.note(keys=keys, bytes=self.wire_bytes_sent - sent, worker=self.rank)

    def row_sparse_pull(self, key: Key | Sequence[Key], out: Any = None, priority: int = 0,
                        row_ids: Any = None) -> None:
        """Copy rows ``row_ids`` of the value into ``out`` (a tensor or a list per key).

        ``row_ids`` (ints in any order, repeats allowed, possibly empty) is one tensor per out (or
        one tensor or list of ints for all outs of a key; a list per key for a list of keys).  Each
        out is row_sparse and becomes exactly those rows (a dense out is refused, as in MXNet).
        Only the rows asked for travel, from the servers holding them; in dist_sync
        the rows come after this worker's last push to the key was applied.
        """
        if out is None:
            raise KVStoreError("row_sparse_pull needs out=: the tensor(s) to copy the rows into")
        client = self._live()
        keys, outs, single = _key_list(key, out)
        rids = [row_ids] * len(keys) if single or row_ids is None else list(_key_list(key, row_ids)[1])
        jobs: list[tuple[KeyPlan, torch.Tensor, list[torch.Tensor]]] = []
        for k, o, r in zip(keys, outs, rids):
            plan = self._plan(k)
            plan.rows_check()
            targets = self._outs(k, o)
            jobs.extend((plan, ids, members) for ids, members in row_pull_groups(k, plan, targets, r))
        hint = self._pull_hint()
        for plan, ids, members in jobs:
            send_row_pull(client, plan, ids, members, hint)
        client.wait()

    # ---- gradient compression --------------------------------------------------------------------
    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None:
        """Compress this worker's pushes: ``{'type': '2bit', 'threshold': 0.5}`` or any type of
        :mod:`mxtorch.compression` (``{'type': 'topk', 'ratio': 0.01}``, ...), plus optionally
        ``'pull': 'fp16'``/``'bf16'`` for narrower pulls of float32 values.

        The compressor is declared to every server (not collective: each worker declares its
        own); its error-feedback residuals stay on this worker (:attr:`compressor`, which
        ``Trainer.save_states`` saves).  Pushes after this call are compressed.
        """
        from ... import compression

        params, pull = split_params(compression_params)
        try:
            comp = compression.create(params)
        except (compression.CompressionError, TypeError) as e:
            raise KVStoreError(f"bad gradient compression params {dict(compression_params)!r}: {e}") from e
        desc = describe_compressor(comp)
        client = self._live()
        for s in range(self.num_servers):
            client.send(s, Message(Command.SET_COMPRESSION, meta={"compression": desc}), "SET_COMPRESSION")
        client.wait()
        client.hello["compression"] = desc  # said again to a restarted server
        self._compressor = comp
        self._pull_dtype = PULL_DTYPES[pull] if pull is not None else None

    def broadcast(self, key: Key | Sequence[Key], value: Value | Sequence[Value],
                  out: Value | Sequence[Value], priority: int = 0) -> None:
        """Initialize with rank 0's ``value`` and pull it into ``out`` on every worker."""
        self.init(key, value)
        self.pull(key, out, priority)

    def barrier(self) -> None:
        """Wait until every worker reaches its barrier (dist_async: every living worker)."""
        self.group_barrier(None)

    def group_barrier(self, group: Sequence[int] | None) -> None:
        """A barrier of the worker ranks ``group`` (None: every worker)."""
        meta = None if group is None else {"group": sorted(group)}
        self._live().request_scheduler(Message(Command.BARRIER, meta=meta), "BARRIER",
                                       "another worker has not reached its barrier yet")

    def group_view(self, ranks: Sequence[int], prefix: str) -> KVStoreBase:
        """This store as seen by the worker ranks ``ranks`` alone (see :class:`~.group.GroupStore`):
        keys ``prefix + str(key)`` on the servers, collective over the group, rounds of the group."""
        from .group import GroupStore

        return GroupStore(self, ranks, prefix)

    def num_dead_node(self, node_id: int, timeout: int = 60) -> int:
        """How many nodes of group ``node_id`` (1 scheduler, 2 servers, 4 workers, sums allowed) are dead,
        counting those silent for ``timeout`` seconds."""
        reply = self._live().request_scheduler(
            Message(Command.NUM_DEAD, meta={"node_id": int(node_id), "timeout": float(timeout)}), "NUM_DEAD")
        return int(reply.arg)

    def server_stats(self) -> list[dict[str, Any]]:
        """Each server's load counters (one dict per server, by rank): per command and per key slice,
        requests, bytes in/out, queue wait and busy seconds (see :mod:`.server_stats`)."""
        return server_stats(self._live())

    # ---- optimizer on the servers --------------------------------------------------------------
    def set_optimizer(self, optimizer: Any) -> None:
        """Run ``optimizer`` on the servers (collective: rank 0 declares it, then a barrier)."""
        self.group_set_optimizer(optimizer, None, None)

    def group_set_optimizer(self, optimizer: Any, group: Sequence[int] | None, prefix: str | None) -> None:
        """:meth:`set_optimizer` for the keys of the worker group ``group`` with key ``prefix`` (None:
        the job's keys), collective over the group: its first rank declares, then its barrier."""
        client = self._live()
        if client.joined and group is None:  # joined an elastic job: the servers run the job's already
            self._optimizers[prefix] = _ServerOptimizer(optimizer, hyper_of(optimizer))
            return
        if self.rank == (0 if group is None else min(group)):
            meta: dict[str, Any] = {"optimizer": describe_optimizer(optimizer)}
            if prefix is not None:
                meta["prefix"] = prefix
            send_to_servers(client, self.num_servers, Command.SET_OPTIMIZER, meta)
        self.group_barrier(group)
        self._optimizers[prefix] = _ServerOptimizer(optimizer, hyper_of(optimizer))

    def _sync_hyper(self, client: PSClient) -> None:
        """Send the hyper-parameters changed since the last step (a learning-rate schedule) to the servers."""
        for prefix, declared in self._optimizers.items():
            declared.hyper_sent = sync_hyper(client, self.num_servers, declared.optimizer,
                                             declared.hyper_sent, prefix)

    def _require_optimizer(self, prefix: str | None) -> Any:
        declared = self._optimizers.get(prefix)
        if declared is None:
            raise KVStoreError("no optimizer runs on the servers: call kv.set_optimizer(...) first (a "
                               "Trainer does so with update_on_kvstore=True)")
        return declared.optimizer

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Write the servers' optimizer states to ``fname`` in ``Updater.get_states`` format."""
        self.group_save_optimizer_states(fname, dump_optimizer, None)

    def group_save_optimizer_states(self, fname: str, dump_optimizer: bool, prefix: str | None) -> None:
        """:meth:`save_optimizer_states` of the optimizer of group ``prefix``'s keys (None: the job's)."""
        optimizer = self._require_optimizer(prefix)
        save_states(self._live(), self.num_servers, self._group_plans(prefix), optimizer, fname,
                    dump_optimizer, prefix)

    def load_optimizer_states(self, fname: str) -> None:
        """Load a file written by ``save_optimizer_states`` or ``Updater.get_states`` into the servers."""
        self.group_load_optimizer_states(fname, None)

    def group_load_optimizer_states(self, fname: str, prefix: str | None) -> None:
        """:meth:`load_optimizer_states` into the optimizer of group ``prefix`` (None: the job's)."""
        optimizer = self._require_optimizer(prefix)
        load_states(self._live(), self.num_servers, self._group_plans(prefix), optimizer, fname, prefix)
        self._optimizers[prefix].hyper_sent = hyper_of(optimizer)

    def _group_plans(self, prefix: str | None) -> dict[Key, KeyPlan]:
        return {k: plan for k, plan in self._plans.items() if plan.group == prefix}

    # ---- snapshots and the end ------------------------------------------------------------------
    def _snapshot(self) -> list[str]:
        """Ask every server to write its snapshot now (needs MXTORCH_PS_SNAPSHOT_DIR); return the paths."""
        client = self._live()
        ids = [client.send(s, Message(Command.SNAPSHOT), "SNAPSHOT") for s in range(self.num_servers)]
        client.wait()
        return [str((client.replies.pop(rid).meta or {}).get("path")) for rid in ids]

    def close(self) -> None:
        """Tell the scheduler this worker is done and disconnect (idempotent; also run at exit)."""
        if self._client.closed:
            return
        self._client.close(failure=exit_status.failure())
        _ACTIVE.discard(self)
        atexit.unregister(self.close)


def close_all() -> None:
    """Close every open store of this process (what a worker does at exit)."""
    for store in list(_ACTIVE):
        store.close()


def _create(name: str, **kwargs: Any) -> KVStoreBase:
    for store in list(_ACTIVE):
        if not store.closed:
            if store.mode != _mode(name):
                raise KVStoreError(f"this process already has an open {store.type!r} KVStore; a process is "
                                   f"one worker and cannot also use {name!r}: close() it first or create the "
                                   "same type")
            return store
    return DistKVStore(name, **kwargs)


for _name in STORE_NAMES:
    register_factory(_name, _create)

