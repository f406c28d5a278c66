"""How a parameter server comes back where it was killed: its snapshot and its write-ahead log.

:class:`ServerJournal` keeps a server's durable record in ``MXTORCH_PS_SNAPSHOT_DIR``:

* the snapshot (:mod:`.snapshot`): every value slice and optimizer state, written atomically on
  request, every ``MXTORCH_PS_SNAPSHOT_EVERY`` rounds, when the server starts, and when the log
  grew past ``MXTORCH_PS_WAL_MAX_BYTES`` (so its disk use is bounded);
* the write-ahead log (:mod:`.wal`, on unless ``MXTORCH_PS_WAL=0``): each effect on that state a
  worker may have been told of, appended before the reply that tells it.  A completed round (or
  dist_async update) is logged as its result, the slice's new value, version, optimizer state,
  update counts and scheduler, so a replay overwrites instead of recomputing (bit-identical
  whatever the arithmetic); a dist_sync PUSH, acknowledged before its round completes, is
  logged as the decoded push, so its round completes after a restart without the worker sending
  it again; a slice's first INIT value and SET_OPTIMIZER / SET_HYPER / SET_STATES are logged as
  they came.  Each snapshot carries a new random generation and starts an empty log for it,
  carrying over the pushes of rounds still in progress (the snapshot does not hold them).

A restarted server loads the snapshot, replays the log if it follows that snapshot (same
generation; a log of an older generation was overtaken by the snapshot), then writes a fresh
snapshot and starts a new log.  Pushes that workers send again after the restart are counted
once by their sequence numbers (:mod:`.shard`), as with a snapshot alone.  A log that cannot be
read or replayed is moved aside (``.damaged``) with an error naming it, and the server serves
from the snapshot alone, as before the log existed.
"""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any, Protocol

import torch
from torch.profiler import record_function

from ..base import Key, KVStoreError
from . import protocol as P
from .config import PSConfig
from .key_requests import init_slice
from .optimizer_spec import apply_hyper, build_optimizer, build_scheduler, describe_scheduler
from .protocol import Command, Flag, Message
from .rows import Rows
from .shard import KeyShard, Push
from .slice_optimizer import SliceOptimizer
from .snapshot import pack_shards, read_snapshot, snapshot_path, state_tensors, unpack_shards, write_snapshot
from .wal import WalRecord, WriteAheadLog, read_wal, wal_path

__all__ = ["ServerJournal", "JournaledServer"]

_logger = logging.getLogger("mxtorch.kvstore.ps.recovery")
_SliceId = tuple[Any, int]
_MIN_LOG_BYTES = 256 << 20
_LOG_SNAPSHOTS = 8  # a log may hold this many snapshots' worth of bytes before it is compacted


class JournaledServer(Protocol):
    """What a :class:`ServerJournal` needs of the ParameterServer it records (the server imports
    this module; a protocol here, not an import of the server, keeps the two out of a cycle)."""

    config: PSConfig
    rank: int
    mode: str
    num_workers: int
    shards: dict[tuple[Key, int], KeyShard]
    updater: SliceOptimizer | None
    group_updaters: dict[str, SliceOptimizer]

    def updater_of(self, sh: KeyShard) -> SliceOptimizer | None: ...

    def set_updater(self, prefix: str | None, updater: SliceOptimizer) -> None: ...

    def require_updater(self, prefix: str | None) -> SliceOptimizer: ...

    def replay_push(self, sh: KeyShard, worker: int, grad: torch.Tensor | Rows, seq: int) -> None: ...


class ServerJournal:
    """A server's snapshot and write-ahead log (see the module docstring)."""

    def __init__(self, server: JournaledServer) -> None:
        self.server = server
        self.wal: WriteAheadLog | None = None
        self.updates = 0  # updates since the last snapshot
        self.snapshot_versions = 0  # the lowest slice version in the last snapshot
        self.log_limit = server.config.wal_max_bytes or _MIN_LOG_BYTES  # compact the log beyond it
        # dist_sync pushes logged whose round has not completed: slice -> [(seq, offset, length)]
        self._open_pushes: dict[_SliceId, list[tuple[int, int, int]]] = {}

    @property
    def folder(self) -> str | None:
        return self.server.config.snapshot_dir

    # ---- start ---------------------------------------------------------------------------------
    def start(self, restarted: bool) -> None:
        """At the server's start: restore (``restarted``), then, with the log on, write a snapshot and
        start the log after it."""
        if restarted:
            self.restore()
        config = self.server.config
        if self.folder and config.wal:
            self.write_snapshot()

    # ---- records -------------------------------------------------------------------------------
    def _append(self, msg: Message) -> tuple[int, int]:
        assert self.wal is not None
        return self.wal.append(msg)

    def log_init(self, sh: KeyShard) -> None:
        """A slice got its value from its first INIT."""
        if self.wal is None:
            return
        meta = {"shape": list(sh.shape), "dtype": P.dtype_name(sh.dtype), "num_shards": sh.num_shards,
                "offset": sh.offset, "numel": sh.numel, "kind": sh.kind,
                "workers": None if sh.workers is None else sorted(sh.workers)}
        if sh.group is not None:
            meta["prefix"], meta["index"] = sh.group, P.key_to_json(sh.own_key)
        assert sh.value is not None
        self._append(Message(Command.INIT, key=sh.key, shard=sh.shard, meta=meta, tensors=[sh.value]))

    def log_control(self, msg: Message) -> None:
        """SET_OPTIMIZER, SET_HYPER or SET_STATES, as it came (applied already)."""
        if self.wal is not None:
            self._append(Message(msg.command, meta=msg.meta, tensors=list(msg.tensors)))

    def log_round(self, sh: KeyShard) -> None:
        """``sh`` completed a round (an update in dist_async): its new value and optimizer state."""
        if self.wal is None:
            return
        assert sh.value is not None
        tensors = [sh.value] if sh.stored is None else [sh.value, sh.stored]
        meta: dict[str, Any] = {"version": sh.version, "stored": sh.stored is not None}
        updater = self.server.updater_of(sh)
        sid = (sh.key, sh.shard)
        if updater is not None and sid in updater.counts:
            opt = updater.optimizer
            states: list[torch.Tensor] = []
            meta.update(state=P.pack_tree(updater.states.get(sid), states), count=updater.counts[sid],
                        num_update=int(opt.num_update), first_state=len(tensors),
                        scheduler=describe_scheduler(opt.lr_scheduler))
            tensors += states
        self._append(Message(Command.STATES, key=sh.key, shard=sh.shard, arg=sh.version, meta=meta,
                             tensors=tensors))
        open_pushes = self._open_pushes.get(sid)
        if open_pushes:
            self._open_pushes[sid] = [p for p in open_pushes if p[0] > sh.version]

    def log_push(self, sh: KeyShard, worker: int, grad: Push, seq: int) -> None:
        """A dist_sync PUSH counted into a round that has not completed (its ACK goes out next)."""
        if self.wal is None or seq <= 0:
            return
        if isinstance(grad, Rows):
            msg = Message(Command.PUSH, key=sh.key, shard=sh.shard, flags=Flag.ROW_SPARSE, arg=seq,
                          meta={"worker": worker}, tensors=[grad.ids, grad.values])
        else:
            msg = Message(Command.PUSH, key=sh.key, shard=sh.shard, arg=seq, meta={"worker": worker},
                          tensors=[grad])
        offset, length = self._append(msg)
        self._open_pushes.setdefault((sh.key, sh.shard), []).append((seq, offset, length))

    # ---- snapshots -----------------------------------------------------------------------------
    def after_update(self) -> None:
        """Write the automatic snapshot once every slice completed ``snapshot_every`` more rounds."""
        config, server = self.server.config, self.server
        if self.wal is not None and self.wal.size > self.log_limit:
            self.write_snapshot()  # the log's disk use stays bounded whatever MXTORCH_PS_SNAPSHOT_EVERY
            return
        every = config.snapshot_every
        if not every or not self.folder or (config.wal and self.wal is None):
            return  # with the log on, automatic snapshots start with it (not while replaying)
        self.updates += 1
        if self.updates < every * max(1, len(server.shards)):
            return
        low = min(sh.version for sh in server.shards.values())
        if low >= self.snapshot_versions + every:
            self.write_snapshot()

    def write_snapshot(self) -> str:
        """Write the server's values and optimizer states (see :mod:`.snapshot`) and start the log
        after them; return the snapshot's path."""
        server, folder = self.server, self.folder
        if not folder:
            raise KVStoreError(f"server {server.rank} has no snapshot folder: set MXTORCH_PS_SNAPSHOT_DIR "
                               "for the servers")
        shards, tensors = pack_shards(server.shards.values())
        states: list[torch.Tensor] = []
        optimizer = None if server.updater is None else server.updater.record(server.shards, states)
        groups = [[prefix, u.record(server.shards, states)]
                  for prefix, u in sorted(server.group_updaters.items())]
        tensors.update({f"state/{j}": t for j, t in enumerate(states)})
        path = snapshot_path(folder, server.rank)
        generation = secrets.randbits(63)
        opened = self._next_log(generation) if server.config.wal else None
        try:
            with record_function("mxtorch/ps.snapshot"):
                write_snapshot(path, {"server_rank": server.rank, "mode": server.mode, "shards": shards,
                                      "optimizer": optimizer, "group_optimizers": groups,
                                      "wal_generation": generation}, tensors)
        except BaseException:
            if self.wal is not None:
                self.wal.abort()
            raise
        if opened is not None and self.wal is not None:
            self.wal.commit()  # the log for the snapshot now on disk
            self._open_pushes = opened
            self.log_limit = server.config.wal_max_bytes or max(_MIN_LOG_BYTES,
                                                                _LOG_SNAPSHOTS * os.path.getsize(path))
        self.updates = 0
        self.snapshot_versions = min((sh.version for sh in server.shards.values()), default=0)
        return path

    def _next_log(self, generation: int) -> dict[_SliceId, list[tuple[int, int, int]]]:
        """Prepare the log that follows the snapshot of ``generation``, holding the open rounds' pushes;
        return where those are in it."""
        assert self.folder
        keep = sorted((p for ps in self._open_pushes.values() for p in ps), key=lambda p: p[1])
        if self.wal is None:
            os.makedirs(self.folder, exist_ok=True)
            self.wal = WriteAheadLog(wal_path(self.folder, self.server.rank), self.server.rank,
                                     self.server.config.wal_fsync)
        ranges = [(off, n) for _, off, n in keep]
        where = dict(zip(ranges, self.wal.prepare(generation, ranges)))
        return {sid: [(seq, *where[(off, n)]) for seq, off, n in ps]
                for sid, ps in self._open_pushes.items() if ps}

    def close(self) -> None:
        if self.wal is not None:
            self.wal.close()
            self.wal = None

    # ---- restore -------------------------------------------------------------------------------
    def restore(self) -> None:
        """Load the snapshot, then replay the log that follows it (see the module docstring)."""
        server, folder = self.server, self.folder
        if not folder:
            _logger.warning("server %d restarted without MXTORCH_PS_SNAPSHOT_DIR: it starts empty, workers "
                            "must init their keys again", server.rank)
            return
        path = snapshot_path(folder, server.rank)
        generation = self._load_snapshot(path)
        if generation is None:
            return
        replayed = 0
        if server.config.wal:
            log = wal_path(folder, server.rank)
            try:
                replayed = self._replay_log(log, generation)
            except Exception as e:  # a damaged log: keep it for a person, serve from the snapshot
                damaged = log + ".damaged"
                _logger.error("server %d: the write-ahead log %s cannot be replayed (%s: %s); moved to %s, "
                              "serving from the snapshot %s alone (the updates after it are lost)",
                              server.rank, log, type(e).__name__, e, damaged, path)
                if os.path.exists(log):
                    os.replace(log, damaged)
                self._open_pushes = {}
                self._load_snapshot(path)
        _logger.warning("server %d restored %d key slice(s) from %s and %d record(s) of its write-ahead log",
                        server.rank, len(server.shards), path, replayed)

    def _load_snapshot(self, path: str) -> int | None:
        """Load the snapshot at ``path`` into the server (replacing its state); return its log
        generation (0: a snapshot written without one), None when there is no usable snapshot."""
        server = self.server
        try:
            meta, tensors = read_snapshot(path)
        except KVStoreError as e:
            _logger.warning("server %d restarted but has no usable snapshot (%s); it starts empty",
                            server.rank, e)
            return None
        server.shards, server.updater, server.group_updaters = {}, None, {}
        for sh in unpack_shards(meta, tensors, server.num_workers):
            sh.restored = True  # workers' pushes sent again are told apart by their sequence numbers
            server.shards[(sh.key, sh.shard)] = sh
        opt, groups = meta.get("optimizer"), meta.get("group_optimizers", [])  # older snapshots: no groups
        if opt is not None:
            server.updater = SliceOptimizer.restore(opt, state_tensors(tensors), server.shards)
        if not isinstance(groups, list) or not all(isinstance(g, list) and len(g) == 2 and
                                                   isinstance(g[0], str) for g in groups):
            raise KVStoreError(f"{path}: malformed group_optimizers entry")
        for prefix, record in groups:
            server.group_updaters[prefix] = SliceOptimizer.restore(record, state_tensors(tensors),
                                                                   server.shards)
        self.snapshot_versions = min((sh.version for sh in server.shards.values()), default=0)
        generation = meta.get("wal_generation", 0)
        return generation if isinstance(generation, int) else 0

    def _replay_log(self, path: str, generation: int) -> int:
        with record_function("mxtorch/ps.wal.replay"):
            found = read_wal(path)
            if (found is None or found[0] != generation) and os.path.exists(path + ".new"):
                # killed between the snapshot and the rename of the log prepared for it: finish that
                following = read_wal(path + ".new")
                if following is not None and following[0] == generation:
                    os.replace(path + ".new", path)
                    found = following
            if found is None:
                return 0
            logged, records = found
            if logged != generation:
                _logger.info("%s follows another snapshot than the one restored: the snapshot holds it", path)
                return 0
            server_shards = self.server.shards
            pushes: list[tuple[KeyShard, int, Push, int, WalRecord]] = []
            for rec in records:
                pushed = self._replay(rec.message, path)
                if pushed is not None:
                    pushes.append((*pushed, rec))
            for sh, worker, grad, seq, rec in pushes:
                if seq <= sh.version:
                    continue  # its round completed (logged after it)
                self.server.replay_push(sh, worker, grad, seq)
                self._open_pushes.setdefault((sh.key, sh.shard), []).append((seq, rec.offset, rec.length))
            for sid, ps in list(self._open_pushes.items()):  # the new log carries the still open ones
                self._open_pushes[sid] = [p for p in ps if p[0] > server_shards[sid].version]
            return len(records)

    def _replay(self, msg: Message, path: str) -> tuple[KeyShard, int, Push, int] | None:
        """Apply one record; a PUSH is returned (its round is completed after every record)."""
        server = self.server
        m = msg.meta or {}
        prefix = m.get("prefix")
        if prefix is not None and not isinstance(prefix, str):
            raise KVStoreError(f"{path}: malformed worker group prefix {prefix!r}")
        if msg.command == Command.SET_OPTIMIZER:
            server.set_updater(prefix, SliceOptimizer(build_optimizer(m.get("optimizer"))))
        elif msg.command == Command.SET_HYPER:
            apply_hyper(server.require_updater(prefix).optimizer, m)
        elif msg.command == Command.SET_STATES:
            server.set_updater(prefix, SliceOptimizer.restore(m, msg.tensors, server.shards))
        elif msg.command == Command.INIT:
            if (msg.key, msg.shard) not in server.shards:  # else the snapshot has it
                group = m.get("workers")
                first = min(group) if isinstance(group, list) and group else 0
                sh = init_slice(server.shards, msg, first, server.num_workers)
                self._check_value(sh, msg.tensors[:1], path)
                sh.set_value(msg.tensors[0])
                sh.inited_by = set(range(server.num_workers)) if sh.workers is None else set(sh.workers)
                sh.owner, sh.restored = first, True
        elif msg.command == Command.STATES:
            self._replay_round(self._slice(msg, path), msg, path)
        elif msg.command == Command.PUSH:
            sh, worker = self._slice(msg, path), m.get("worker")
            if not isinstance(worker, int) or not sh.pushes_key(worker) or msg.arg <= 0:
                raise KVStoreError(f"{path}: malformed push record of {sh.describe()}")
            if msg.flags & Flag.ROW_SPARSE:
                if len(msg.tensors) != 2:
                    raise KVStoreError(f"{path}: a row push record of {sh.describe()} needs [ids, rows]")
                return sh, worker, Rows(msg.tensors[0], msg.tensors[1]), msg.arg
            self._check_value(sh, msg.tensors, path, sh.dtype if not msg.tensors else msg.tensors[0].dtype)
            return sh, worker, msg.tensors[0], msg.arg
        else:
            raise KVStoreError(f"{path}: a {msg.command.name} record is not part of a write-ahead log")
        return None

    def _slice(self, msg: Message, path: str) -> KeyShard:
        sh = None if msg.key is None else self.server.shards.get((msg.key, msg.shard))
        if sh is None or sh.value is None:
            raise KVStoreError(f"{path}: a record of key {msg.key!r} (shard {msg.shard}) that neither the "
                               "snapshot nor the log initialized")
        return sh

    @staticmethod
    def _check_value(sh: KeyShard, tensors: list[torch.Tensor], path: str,
                     dtype: torch.dtype | None = None) -> None:
        want = dtype or sh.dtype
        if not tensors or tuple(tensors[0].shape) != sh.value_shape or tensors[0].dtype != want:
            raise KVStoreError(f"{path}: a record of {sh.describe()} does not hold a {sh.value_shape} "
                               f"{P.dtype_name(dtype or sh.dtype)} tensor")

    def _replay_round(self, sh: KeyShard, msg: Message, path: str) -> None:
        m = msg.meta or {}
        version = m.get("version")
        if not isinstance(version, int) or version != msg.arg:
            raise KVStoreError(f"{path}: malformed round record of {sh.describe()}")
        if version <= sh.version:
            return  # the snapshot holds it
        if version != sh.version + 1:
            raise KVStoreError(f"{path}: {sh.describe()} jumps from version {sh.version} to {version}: a "
                               "record is missing")
        stored = m.get("stored") is True
        self._check_value(sh, msg.tensors, path)
        sh.set_value(msg.tensors[0])
        if stored:
            if len(msg.tensors) < 2:
                raise KVStoreError(f"{path}: a round record of {sh.describe()} lacks its row ids")
            sh.stored = msg.tensors[1]
        sh.version = version
        if "count" not in m:
            return
        count, num_update, first = m.get("count"), m.get("num_update"), m.get("first_state")
        if not (_count(count) and _count(num_update) and _count(first)):
            raise KVStoreError(f"{path}: malformed optimizer counts in a round record of {sh.describe()}")
        updater = self.server.updater_of(sh)
        if updater is None:
            raise KVStoreError(f"{path}: a round record of {sh.describe()} holds optimizer state, but no "
                               "optimizer runs for it")
        sid = (sh.key, sh.shard)
        updater.states[sid] = P.unpack_tree(m.get("state"), msg.tensors[first:])
        updater.counts[sid] = m["count"]
        opt = updater.optimizer
        opt.num_update = m["num_update"]
        if m.get("scheduler") is not None:
            opt.lr_scheduler = build_scheduler(m["scheduler"])


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0
