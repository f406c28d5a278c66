"""A parameter server: ``run_server(config) -> exit status``.

One single-threaded event loop (a ``zmq.Poller`` over the workers' ROUTER socket and the
scheduler connection) plus a heartbeat thread.  The server

* registers with the scheduler, binds a ROUTER on its advertised address (an ephemeral port,
  ``MXTORCH_PS_PORT``, or, when restarted, its old port), reports READY;
* holds key slices (:class:`~.shard.KeyShard`); INIT comes from every worker: rank 0's
  carries the data, the others' are acknowledged once that data is in, and their shapes and
  dtypes must agree (else ERROR naming the key, the worker and both descriptions);
* sync mode: sums one push per worker per round, then stores the sum or, with an optimizer
  (update on kvstore), applies it; async mode: applies every push on arrival.  A key initialized
  by a group of workers (INIT's ``workers``: e.g. the data-parallel ranks of one pipeline stage,
  which alone hold and push that stage's parameters) has its rounds counted over that group: a
  round completes when every member has pushed once, the group's first rank sends the initial
  value, and a push from outside the group is an error.  Keys without ``workers`` count every
  worker of the job (MXNet's rule);
* answers a PULL once the asking worker's latest push to that slice is in the value;
* takes row-sparse pushes (row ids + rows, :mod:`.rows`): summed by row, applied lazily to
  the touched rows with an optimizer (:func:`mxtorch.optimizer.sparse.update_rows`), assigned
  otherwise; answers ROW_PULL (``row_sparse_pull``) with just the rows asked for;
* decodes compressed pushes with the compressor each worker declared (:mod:`.codec`);
* dist_async with a staleness bound (the bound a worker declares in its HELLO, else the
  server's ``MXTORCH_PS_STALENESS=k``): a worker's pull of a slice waits while that worker has
  pushed the slice more than ``k`` times more than the slowest live worker (dead and finished
  workers do not count);
* imports the modules of ``MXTORCH_PS_SERVER_IMPORTS`` first (custom optimizers registered
  there can then be declared; nothing a message names is ever imported);
* runs the optimizer the workers declared (:mod:`.optimizer_spec`), takes SET_HYPER changes,
  sends and loads optimizer states (GET_STATES / SET_STATES), writes snapshots and, before each
  reply that shows an update, a write-ahead log record of it (:mod:`.recovery`): a restarted
  server resumes exactly where the killed one was;
* keeps one optimizer per worker group besides the job's: SET_OPTIMIZER, SET_HYPER, GET_STATES
  and SET_STATES naming a group's key ``prefix`` (a pipeline stage's ``pp<r>/``) act on that
  group's optimizer, which updates the group's keys (INIT's ``prefix`` and ``index``) under the
  group's own name of each key (its Trainer's index: lr_mult, wd_mult and update counts are the
  Trainer's). A group key is never updated by the job's or another group's optimizer: when its
  group declared none but another optimizer runs, its pushes get an ERROR;
* in sync mode, when the scheduler reports a dead worker, answers every waiting and later
  request with an ERROR naming it (no round can complete any more); when a worker closes its
  store (it finished), a pull waiting for a round that worker has not pushed to gets an ERROR
  naming it at once (the workers ran unequal numbers of steps) instead of waiting for the
  timeout;
* in an elastic job (:mod:`.server_elastic`) counts the rounds over the live workers the scheduler
  announces (MEMBERSHIP), and a worker's death fails nothing;
* exits 0 on the scheduler's SHUTDOWN, 1 when the scheduler goes silent or joining fails.

Requests from a connection that has not said HELLO get ERROR code ``not_greeted`` (a worker
re-greets a restarted server and retries).  A worker rank belongs to the connection that said
HELLO for it until that connection closes: a HELLO from another connection claiming it is
refused.  A bad request never stops the server: it gets an ERROR reply that names what was
wrong (the key requests are checked and decoded by :mod:`.key_requests`); a message that cannot
be decoded, or that trips a handler, is refused with a rate-limited log line naming the peer's
address (the traceback at debug level).  The server listens on its advertised address only and
ZeroMQ drops frames above ``MXTORCH_PS_MAX_MESSAGE_BYTES`` (:mod:`.config`) before holding them.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, cast

import torch
import zmq

from ..._logging import install as install_logging
from ...profiler import span
from ...profiler._process import set_identity
from ..base import Key, KVStoreError
from . import protocol as P
from .codec import build_compressor
from .config import PSConfig, import_server_modules
from .key_requests import decode_push_request, init_slice, narrow_dtype, row_ids
from .node import Heartbeat, JoinError, bind_router, join
from .optimizer_spec import apply_hyper, build_optimizer
from .peers import ClosedConnections, Refusals
from .profiling import message_args, on_profiler, update_args
from .protocol import Command, Flag, Message, ProtocolError
from .recovery import ServerJournal
from .rows import Rows, gather_rows, stored_rows
from .server_elastic import note_greeting, on_membership, start_membership
from .server_stats import ServerStats
from .shard import KeyShard, PendingPull
from .slice_optimizer import SliceOptimizer

__all__ = ["ParameterServer", "run_server"]

_DRAIN = 256  # messages handled per socket before looking at the other one
_EVENTS, _POLLIN, _NOBLOCK = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.NOBLOCK)
_logger = logging.getLogger("mxtorch.kvstore.ps.server")


def _log(text: str) -> None:
    _logger.warning("%s", text)


class ParameterServer:
    """The server's state and handlers; :meth:`run` is the whole life of the process."""

    def __init__(self, config: PSConfig) -> None:
        self.config = config
        self.ctx = zmq.Context()
        self.rank = -1
        self.node_id = 0
        self.mode = "sync"
        self.num_workers = 0
        self.address = ""
        self.nonce = secrets.token_hex(16)
        self.shards: dict[tuple[Key, int], KeyShard] = {}
        self.peers: dict[bytes, int] = {}  # connection identity -> worker rank
        self.updater: SliceOptimizer | None = None  # the job's optimizer (keys of no group)
        self.group_updaters: dict[str, SliceOptimizer] = {}  # a worker group's key prefix -> its optimizer
        self.decoders: dict[int, Any] = {}  # worker rank -> the compressor it declared
        self.staleness: dict[int, int | None] = {}  # worker rank -> its dist_async bound
        self.live: set[int] = set()  # workers neither dead nor finished (dist_async staleness)
        self.members: set[int] = set()  # elastic jobs: the live workers (MEMBERSHIP) of ``epoch``
        self.epoch = 0
        self.greeted: dict[int, int] = {}  # elastic: rank -> the epoch it joined at, before that epoch came
        self.closed: set[int] = set()  # dist_sync: workers that closed their store (push no more)
        self.failed: str | None = None  # why sync rounds cannot complete any more
        self.exit_code: int | None = None
        self.journal = ServerJournal(self)  # the snapshot and write-ahead log (MXTORCH_PS_SNAPSHOT_DIR)
        self.sock: zmq.Socket | None = None
        self.sched: zmq.Socket | None = None
        self.watch: ClosedConnections | None = None  # which workers' connections closed
        self.refusals = Refusals(_logger, "mxtorch ps server")
        self.stats = ServerStats()  # requests, bytes, queue wait, busy time (kv.server_stats())
        self._handlers: dict[Command, Callable[[bytes | None, Message], None]] = {
            Command.HELLO: self._on_hello,
            Command.INIT: self._on_init,
            Command.PUSH: self._on_push,
            Command.PULL: self._on_pull,
            Command.PUSHPULL: self._on_pushpull,
            Command.ROW_PULL: self._on_pull,
            Command.SET_COMPRESSION: self._on_set_compression,
            Command.WORKER_DONE: self._on_worker_gone,
            Command.SET_OPTIMIZER: self._on_set_optimizer,
            Command.SET_HYPER: self._on_set_hyper,
            Command.GET_STATES: self._on_get_states,
            Command.SET_STATES: self._on_set_states,
            Command.SNAPSHOT: self._on_snapshot,
            Command.NODE_DEAD: self._on_node_dead,
            Command.SHUTDOWN: self._on_shutdown,
            Command.ERROR: self._on_scheduler_error,
            Command.ACK: lambda ident, msg: None,
            Command.PROFILER: lambda ident, msg: on_profiler(self, ident, msg),
            Command.STATS: lambda ident, msg: self._ack(ident, msg, meta=self.stats.report(self.rank)),
            Command.MEMBERSHIP: lambda ident, msg: on_membership(self, ident, msg),
        }

    @property
    def round_members(self) -> range | set[int]:
        """Whose pushes a sync round of a job's key waits for: every rank, or the live ones (elastic)."""
        return self.members if self.config.elastic else range(self.num_workers)

    # ---- life cycle -----------------------------------------------------------------------
    def run(self) -> int:
        hb: Heartbeat | None = None
        try:
            import_server_modules(self.config.server_imports)
            info = {"role": "server", "server_id": self.config.server_id}
            self.sched, assign = join(self.ctx, self.config, info, Command.ASSIGN)
            m = assign.meta or {}
            self.rank = int(m["rank"])
            self.node_id = P.server_node(self.rank)
            self.num_workers = int(m["num_workers"])
            set_identity("server", self.rank, self.num_workers)
            start_membership(self, m)
            self.mode = str(m["mode"])
            self.sock, self.address = bind_router(self.ctx, self.config, m.get("port"), f"server {self.rank}")
            self.watch = ClosedConnections(self.sock)
            self.refusals = Refusals(_logger, f"mxtorch ps server {self.rank}")
            self.journal.start(restarted=bool(m.get("restart")))
            P.send(self.sched, Message(Command.READY, sender=self.node_id,
                                       meta={"address": self.address, "nonce": self.nonce}))
            hb = Heartbeat(self.ctx, self.config, self.node_id, str(m["token"]))
            hb.start()
            return self._loop(hb)
        except (JoinError, KVStoreError) as e:
            _log(str(e))
            return 1
        finally:
            if hb is not None:
                hb.stop()
            self.journal.close()
            if self.watch is not None:
                self.watch.close()
            for s in (self.sock, self.sched):
                if s is not None:
                    s.close(linger=500)
            self.ctx.term()

    def _loop(self, hb: Heartbeat) -> int:
        assert self.sock is not None and self.sched is not None and self.watch is not None
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self.sched, zmq.POLLIN)
        poller.register(self.watch.monitor, zmq.POLLIN)
        tick = max(50, int(self.config.heartbeat_s * 1000))
        while self.exit_code is None:
            events = dict(poller.poll(tick))
            if self.sched in events:
                self._drain(self.sched, router=False)
            if self.sock in events and self.exit_code is None:
                self._drain(self.sock, router=True)
            if self.watch.monitor in events:  # after the messages: one read later is from a new connection
                for identity in self.watch.closed():
                    self.peers.pop(identity, None)  # its rank may be greeted again
            if self.exit_code is None and hb.scheduler_gone():
                _log(f"server {self.rank}: the scheduler at {self.config.root_address} "
                     f"{hb.describe_silence()}: the job is gone, exiting")
                return 1
        return self.exit_code

    def _drain(self, sock: zmq.Socket, router: bool) -> None:
        ready_at = time.monotonic()  # a request's queue wait: from here to its handler's start
        for _ in range(_DRAIN):
            if not cast(int, sock.getsockopt(_EVENTS)) & _POLLIN:  # cheaper than a recv raising zmq.Again
                return
            try:
                frames = sock.recv_multipart(_NOBLOCK, copy=False)
            except zmq.Again:
                return
            identity = frames[0].bytes if router else None
            try:
                msg = P.decode(frames[1:] if router else frames)
            except Exception as e:  # any failure to decode a peer's bytes: refuse them, keep serving
                if identity is None:
                    _log(f"server {self.rank}: undecodable message from the scheduler: {type(e).__name__}: "
                         f"{e}")
                    continue
                self.refusals.refuse(frames[0], f"undecodable message: {type(e).__name__}: {e}",
                                     None if isinstance(e, ProtocolError) else e)
                self._send(identity, Message(Command.ERROR, sender=self.node_id,
                                             meta={"message": f"server {self.rank}: {e}"}))
                continue
            with span("ps.handle") as sp:
                if sp:
                    sp.note(**message_args(msg, self.peers.get(identity) if identity else None))
                with self.stats.handling(msg, ready_at, self.shards):
                    self._handle(identity, msg, frames[0])
            if self.exit_code is not None:
                return

    def _handle(self, identity: bytes | None, msg: Message, frame: Any = None) -> None:
        handler = self._handlers.get(msg.command)
        try:
            if handler is None:
                raise ProtocolError(f"a server does not handle {msg.command.name} messages")
            if identity is not None and identity not in self.peers:  # a greeted peer skips this
                if msg.command is not Command.HELLO:
                    self.refusals.refuse(frame, f"{msg.command.name} from a connection without a HELLO")
                    self._error(identity, msg, f"server {self.rank} ({self.address}) does not know this "
                                               "connection: it restarted or was never greeted (HELLO)",
                                code="not_greeted")
                    return
                handler(identity, msg)
                if identity in self.peers and self.watch is not None:
                    self.watch.note(frame, identity)  # a close of this connection frees its rank
                return
            handler(identity, msg)
        except ProtocolError as e:  # a malformed request
            self._refuse(identity, msg, frame, str(e))
        except KVStoreError as e:  # a request the job's state cannot take: the worker is told why
            self._error(identity, msg, str(e))
        except Exception as e:  # a request that trips a handler (or a bug): refused, keep serving
            self._refuse(identity, msg, frame, f"server {self.rank} failed on {msg.command.name}: "
                                               f"{type(e).__name__}: {e}", e)

    def _refuse(self, identity: bytes | None, msg: Message, frame: Any, text: str,
                exc: BaseException | None = None) -> None:
        """Refuse ``msg``: a rate-limited log line naming the peer's address, and an ERROR reply."""
        if identity is None:
            _log(f"server {self.rank}: a message from the scheduler failed: {text}")
            if exc is not None:
                _logger.debug("traceback", exc_info=exc)
        else:
            self.refusals.refuse(frame, f"{msg.command.name}: {text}", exc)
        self._error(identity, msg, text)

    # ---- replies --------------------------------------------------------------------------
    def _send(self, identity: bytes | None, msg: Message, track: bool = False) -> list[Any]:
        self.stats.sent(msg, self.shards)
        if identity is None:
            assert self.sched is not None
            return P.send(self.sched, msg)
        assert self.sock is not None
        return P.send(self.sock, msg, identity, track=track)

    def _ack(self, identity: bytes | None, req: Message, arg: int = 0,
             meta: dict[str, Any] | None = None) -> None:
        self._send(identity, Message(Command.ACK, req.request_id, self.node_id, key=req.key, shard=req.shard,
                                     arg=arg, meta=meta))

    def _error(self, identity: bytes | None, req: Message, text: str, code: str = "error") -> None:
        if identity is None:
            _log(text)
            return
        self._send(identity, Message(Command.ERROR, req.request_id, self.node_id, key=req.key,
                                     shard=req.shard, meta={"message": text, "code": code}))

    def _worker(self, identity: bytes | None) -> int:
        if identity is None:
            raise ProtocolError("only workers send this message")
        return self.peers[identity]

    def _shard(self, msg: Message, worker: int) -> KeyShard:
        sh = self.shards.get((msg.key, msg.shard)) if msg.key is not None else None
        if sh is None or sh.value is None:
            raise KVStoreError(
                f"key {msg.key!r} has not been initialized on server {self.rank}: call kv.init({msg.key!r}, "
                f"value) on every worker before push/pull (worker {worker} asked for it)")
        return sh

    # ---- handshake and job events ----------------------------------------------------------
    def _on_hello(self, identity: bytes | None, msg: Message) -> None:
        m = msg.meta or {}
        rank = m.get("rank")
        if identity is None or not isinstance(rank, int) or not 0 <= rank < self.num_workers:
            raise ProtocolError(f"malformed HELLO (rank {rank!r})")
        secret = self.config.secret
        if secret is not None and not P.verify(secret, m.get("hmac"), "hello", self.nonce, identity):
            raise ProtocolError(f"server {self.rank}: a HELLO claiming worker {rank} failed authentication "
                                "(MXTORCH_PS_SECRET)")
        holder = next((other for other, r in self.peers.items() if r == rank and other != identity), None)
        if holder is not None:  # a second connection never takes a rank whose connection is open
            raise ProtocolError(f"server {self.rank}: worker {rank} is connected already; a second "
                                "connection cannot claim its rank")
        bound = m.get("staleness", self.config.staleness)
        if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool) or bound < 0):
            raise ProtocolError(f"malformed HELLO (staleness {bound!r})")
        decoder = build_compressor(m.get("compression"))
        self.peers[identity] = rank
        note_greeting(self, rank, m)
        self.staleness[rank] = bound
        self.decoders[rank] = decoder
        self._ack(identity, msg)

    def _on_node_dead(self, identity: bytes | None, msg: Message) -> None:
        m = msg.meta or {}
        if m.get("role") != "worker" or self.config.elastic:
            return  # a dead server is the workers' business; elastic jobs: a MEMBERSHIP follows
        if self.mode != "sync":
            self._on_worker_gone(identity, msg)  # async jobs go on without it
            return
        who = m.get("reason") or f"{m.get('description', 'a worker')} died"
        self.failed = (f"{who}, so no dist_sync round can complete any more: restart the job (from a "
                       "checkpoint)")
        for sh in self.shards.values():
            for pull in sh.pulls:
                self._send(pull.identity, Message(Command.ERROR, pull.msg.request_id, self.node_id,
                                                  key=sh.key, shard=sh.shard,
                                                  meta={"message": self.failed, "code": "dead"}))
            sh.pulls = []
            for ident, req in sh.init_waiters:
                self._send(ident, Message(Command.ERROR, req, self.node_id, key=sh.key, shard=sh.shard,
                                          meta={"message": self.failed, "code": "dead"}))
            sh.init_waiters = []

    def _on_worker_gone(self, identity: bytes | None, msg: Message) -> None:
        """A worker died (dist_async) or closed its store: no pull waits for its pushes any more."""
        if identity is not None:
            raise ProtocolError("only the scheduler reports workers gone")
        rank = (msg.meta or {}).get("rank")
        if not isinstance(rank, int) or rank not in self.live:
            return
        self.live.discard(rank)
        if self.mode == "async" or self.config.elastic:
            for sh in self.shards.values():
                self._answer_pulls(sh)
            return
        self.closed.add(rank)
        for sh in self.shards.values():
            self._fail_stuck_pulls(sh)

    def _fail_stuck_pulls(self, sh: KeyShard) -> None:
        """dist_sync: answer the pulls of ``sh`` with an ERROR when its round in progress lacks the
        push of a worker that closed its store (that round can never complete)."""
        if not sh.pulls or not sh.round:
            return
        missing = sorted(w for w in self.closed if w not in sh.round and sh.pushes_key(w))
        if not missing:
            return
        w = missing[0]
        text = (f"worker {w} closed its store after pushing {sh.describe()} {sh.pushes.get(w, 0)} time(s), "
                f"so dist_sync round {sh.version + 1} of it can never complete: in dist_sync every worker "
                "pushes every key equally often. The workers probably ran different numbers of steps "
                "(unequal data shards, an early break): give each the same number of batches, or use "
                "dist_async")
        for pull in sh.pulls:
            self._send(pull.identity, Message(Command.ERROR, pull.msg.request_id, self.node_id, key=sh.key,
                                              shard=sh.shard, meta={"message": text, "code": "closed"}))
        sh.pulls = []

    def _on_shutdown(self, identity: bytes | None, msg: Message) -> None:
        if identity is not None:
            raise ProtocolError("only the scheduler stops a server")
        self._ack(None, msg)
        self.exit_code = 0

    def _on_scheduler_error(self, identity: bytes | None, msg: Message) -> None:
        if identity is None:
            _log(f"the scheduler reports: {(msg.meta or {}).get('message')}")
            self.exit_code = 1

    def _check_running(self) -> None:
        if self.failed is not None:
            raise KVStoreError(self.failed)

    # ---- keys ------------------------------------------------------------------------------
    def _on_init(self, identity: bytes | None, msg: Message) -> None:
        worker = self._worker(identity)
        assert identity is not None
        self._check_running()
        sh = init_slice(self.shards, msg, worker, self.num_workers)
        sh.inited_by.add(worker)
        if msg.tensors:
            data = msg.tensors[0]
            if tuple(data.shape) != sh.value_shape or data.dtype != sh.dtype:
                raise ProtocolError(f"INIT data of {sh.describe()} has shape {tuple(data.shape)} "
                                    f"{data.dtype}, expected {sh.value_shape} {sh.dtype}")
            if sh.value is None:
                sh.set_value(data, msg.frames[0] if msg.frames else None)  # adopt the received frame
                sh.owner = worker
                self.journal.log_init(sh)
            self._ack(identity, msg, sh.version)
            for ident, req in sh.init_waiters:
                self._send(ident, Message(Command.ACK, req, self.node_id, key=sh.key, shard=sh.shard))
            sh.init_waiters = []
        elif sh.value is not None:
            self._ack(identity, msg, sh.version)  # a joiner numbers its pushes from here
        else:
            sh.init_waiters.append((identity, msg.request_id))

    def _on_push(self, identity: bytes | None, msg: Message) -> None:
        worker = self._worker(identity)
        self._check_running()
        sh = self._shard(msg, worker)
        self._take_push(sh, worker, msg, identity, ack=True)

    def _take_push(self, sh: KeyShard, worker: int, msg: Message, identity: bytes | None,
                   ack: bool) -> int:
        """Count (sync) or apply (async) the push ``msg`` carries; ACK it (with the version it makes)
        if ``ack``; return that version."""
        if not sh.pushes_key(worker):
            raise KVStoreError(f"{sh.describe()} belongs to workers {sorted(sh.workers or ())}, which alone "
                               f"push it; worker {worker} is not one of them")
        if sh.group is not None:
            self.updater_of(sh)  # a group key nobody may update says so before it is counted
        grad = decode_push_request(sh, msg, worker, self.decoders.get(worker), self.rank)
        # a dense push arrives as the received frame: the value may become it, and pulls re-send it
        frame = msg.frames[0] if isinstance(grad, torch.Tensor) and msg.frames and \
            not msg.flags & Flag.COMPRESSED else None
        if self.mode == "async":
            self._apply(sh, grad, frame)
            sh.version += 1
            self.journal.log_round(sh)
            sh.pushes[worker] = sh.pushes.get(worker, 0) + 1
            sh.last_target[worker] = sh.version
            if ack:
                self._ack(identity, msg, sh.version)
            self._answer_pulls(sh)  # a slower worker's push may let a faster one's pull go
            self.journal.after_update()
            return sh.version
        seq = msg.arg >> 8
        target = sh.add_push(worker, grad, frame, seq)
        if ack and target == seq and not sh.round_complete(self.round_members):
            self.journal.log_push(sh, worker, grad, seq)  # acknowledged before its round completes
        self._complete_rounds(sh)  # a round this push completes is logged before the push's ACK
        if ack:
            self._ack(identity, msg, target)
        return target

    def _complete_rounds(self, sh: KeyShard) -> None:
        """dist_sync: end every complete round of ``sh``: apply its sum, log it, answer its pulls."""
        while sh.round_complete(self.round_members):
            summed, summed_frame = sh.take_round()
            if summed is not None:  # None: a round every worker saw complete on the process that died
                self._apply(sh, summed, summed_frame)
            sh.version += 1
            self.journal.log_round(sh)  # before any reply that shows the round
            self._answer_pulls(sh)
            self.journal.after_update()

    def replay_push(self, sh: KeyShard, worker: int, grad: torch.Tensor | Rows, seq: int) -> None:
        """Count a push the write-ahead log holds into its round (:mod:`.recovery`)."""
        sh.add_push(worker, grad, None, seq)
        self._complete_rounds(sh)

    def _on_pushpull(self, identity: bytes | None, msg: Message) -> None:
        """A dense push, then a pull of the value it leads to, answered by one PULL_REPLY."""
        worker = self._worker(identity)
        assert identity is not None
        self._check_running()
        sh = self._shard(msg, worker)
        if msg.flags & Flag.ROW_SPARSE:
            raise ProtocolError("PUSHPULL carries dense (or compressed) values: push rows with PUSH")
        narrow = narrow_dtype(sh, msg.arg & 0xFF) if msg.flags & Flag.NARROW else None
        target = self._take_push(sh, worker, msg, identity, ack=False)
        self._queue_pull(sh, PendingPull(identity, msg, worker, target, narrow=narrow))

    def _apply(self, sh: KeyShard, grad: torch.Tensor | Rows, frame: Any = None) -> None:
        """Update the value with ``grad`` (the optimizer's step), or store it (no optimizer);
        ``frame``: the received frame whose memory a dense ``grad`` is."""
        with span("ps.update") as sp:
            if sp:
                sp.note(**update_args(sh, grad))
            updater = self.updater if sh.group is None else self.updater_of(sh)
            if updater is None:
                if isinstance(grad, Rows):
                    sh.assign_rows(grad)
                else:
                    sh.set_value(grad, frame)
                return
            weight = sh.writable_value()
            multi = updater.optimizer.multi_precision
            if isinstance(grad, Rows):
                if grad.values.dtype != weight.dtype and not multi:
                    grad = Rows(grad.ids, grad.values.to(weight.dtype))
                updater.step_rows(sh, weight, grad)
                return
            if grad.dtype != weight.dtype and not multi:
                grad = grad.to(weight.dtype)
            updater.step(sh, grad, weight)

    def updater_of(self, sh: KeyShard) -> SliceOptimizer | None:
        """The optimizer of ``sh``'s owner (None: the servers store sums); refuses a group key whose
        group declared no optimizer while another one runs (it must not update that key)."""
        if sh.group is None:
            return self.updater
        updater = self.group_updaters.get(sh.group)
        if updater is None and (self.group_updaters or self.updater is not None):
            others = [repr(g) for g in sorted(self.group_updaters)] + (["the job's"] if self.updater else [])
            raise KVStoreError(
                f"{sh.describe()} belongs to the worker group {sorted(sh.workers or ())} with key prefix "
                f"{sh.group!r}, which declared no optimizer to the servers, while the optimizer(s) of "
                f"{', '.join(others)} run here: a key is updated by its own group's optimizer only. Give "
                "every group's Trainer the same update_on_kvstore (every stage's optimizer on the servers, "
                "or every stage's on the workers with update_on_kvstore=False)")
        return updater

    # ---- pulls -----------------------------------------------------------------------------
    def _on_pull(self, identity: bytes | None, msg: Message) -> None:
        """PULL (the value, or with ROW_SPARSE the rows it stores) and ROW_PULL (some rows)."""
        worker = self._worker(identity)
        assert identity is not None
        self._check_running()
        sh = self._shard(msg, worker)
        ids = None
        if msg.command == Command.ROW_PULL:
            if len(msg.tensors) != 1:
                raise ProtocolError("ROW_PULL carries [row ids]")
            ids = row_ids(sh, msg.tensors[0], worker)
        narrow = None
        if msg.command == Command.PULL and msg.flags & Flag.COMPRESSED:
            narrow = narrow_dtype(sh, msg.arg)
        self._queue_pull(sh, PendingPull(identity, msg, worker, sh.last_target.get(worker, 0), ids,
                                         stored=bool(msg.flags & Flag.ROW_SPARSE), narrow=narrow))

    def _queue_pull(self, sh: KeyShard, pull: PendingPull) -> None:
        if self._pull_ready(sh, pull):
            self._answer(sh, pull)
        else:
            sh.pulls.append(pull)
            if self.closed:
                self._fail_stuck_pulls(sh)

    def _pull_ready(self, sh: KeyShard, pull: PendingPull) -> bool:
        if self.mode == "sync":
            return sh.version >= pull.target
        bound = self.staleness.get(pull.worker)
        if bound is None:
            return True
        others = [sh.pushes.get(w, 0) for w in self.live if w != pull.worker and sh.pushes_key(w)]
        return not others or sh.pushes.get(pull.worker, 0) - min(others) <= bound

    def _answer(self, sh: KeyShard, pull: PendingPull) -> None:
        assert sh.value is not None
        msg = pull.msg
        reply = Message(Command.PULL_REPLY, msg.request_id, self.node_id, key=sh.key, shard=sh.shard,
                        arg=sh.version)
        if pull.ids is not None:
            reply.tensors = [gather_rows(sh.value, pull.ids, sh.row, sh.offset, sh.numel)]
        elif pull.stored:
            ids = sh.stored if sh.stored is not None else stored_rows(sh.value, sh.row, sh.offset, sh.numel)
            reply.tensors = [ids, gather_rows(sh.value, ids, sh.row, sh.offset, sh.numel)]
        elif pull.narrow is not None:
            reply.tensors = [sh.value.to(pull.narrow)]
        elif sh.frame is not None:  # the value is a received frame, unchanged since: send it again
            reply.tensors, reply.frames = [sh.value], [sh.frame]
        else:
            reply.tensors = [sh.value]
            sh.track(self._send(pull.identity, reply, track=True))
            return
        self._send(pull.identity, reply)  # fresh tensors: nothing to track

    def _answer_pulls(self, sh: KeyShard) -> None:
        if not sh.pulls:
            return
        waiting = []
        for pull in sh.pulls:
            if self._pull_ready(sh, pull):
                with self.stats.answering(pull.msg):  # its bytes out are the pull's, not this request's
                    self._answer(sh, pull)
            else:
                waiting.append(pull)
        sh.pulls = waiting

    # ---- compression -----------------------------------------------------------------------
    def _on_set_compression(self, identity: bytes | None, msg: Message) -> None:
        worker = self._worker(identity)
        self.decoders[worker] = build_compressor((msg.meta or {}).get("compression"))
        self._ack(identity, msg)

    # ---- optimizer -------------------------------------------------------------------------
    @staticmethod
    def _prefix(msg: Message) -> str | None:
        """The worker group an optimizer message is about (its key prefix), or None: the job's."""
        prefix = (msg.meta or {}).get("prefix")
        if prefix is not None and not isinstance(prefix, str):
            raise ProtocolError(f"malformed worker group prefix {prefix!r}")
        return prefix

    def set_updater(self, prefix: str | None, updater: SliceOptimizer) -> None:
        if prefix is None:
            self.updater = updater
        else:
            self.group_updaters[prefix] = updater

    def _on_set_optimizer(self, identity: bytes | None, msg: Message) -> None:
        self._worker(identity)
        optimizer = build_optimizer((msg.meta or {}).get("optimizer"))
        self.set_updater(self._prefix(msg), SliceOptimizer(optimizer))
        self.journal.log_control(msg)
        self._ack(identity, msg)

    def require_updater(self, prefix: str | None) -> SliceOptimizer:
        updater = self.updater if prefix is None else self.group_updaters.get(prefix)
        if updater is None:
            whose = "" if prefix is None else f" for the worker group of key prefix {prefix!r}"
            raise KVStoreError(f"server {self.rank} has no optimizer{whose}: call kv.set_optimizer(...) "
                               "first (a Trainer does so with update_on_kvstore=True)")
        return updater

    def _on_set_hyper(self, identity: bytes | None, msg: Message) -> None:
        self._worker(identity)
        apply_hyper(self.require_updater(self._prefix(msg)).optimizer, msg.meta)
        self.journal.log_control(msg)
        self._ack(identity, msg)

    def _on_get_states(self, identity: bytes | None, msg: Message) -> None:
        self._worker(identity)
        tensors: list[torch.Tensor] = []
        meta = self.require_updater(self._prefix(msg)).pack(self.shards, tensors)
        self._send(identity, Message(Command.STATES, msg.request_id, self.node_id, meta=meta,
                                     tensors=tensors))

    def _on_set_states(self, identity: bytes | None, msg: Message) -> None:
        self._worker(identity)
        self.set_updater(self._prefix(msg), SliceOptimizer.restore(msg.meta or {}, msg.tensors, self.shards))
        self.journal.log_control(msg)
        self._ack(identity, msg)

    # ---- snapshots -------------------------------------------------------------------------
    def _on_snapshot(self, identity: bytes | None, msg: Message) -> None:
        self._worker(identity)
        path = self.write_snapshot()
        self._ack(identity, msg, len(self.shards), meta={"path": path})

    def write_snapshot(self) -> str:
        """Write this server's values and optimizer states (see :mod:`.snapshot`); return the path."""
        return self.journal.write_snapshot()

    def _restore(self) -> None:
        self.journal.restore()


def run_server(config: PSConfig) -> int:
    """Run one parameter server until the scheduler stops it; return the process exit status."""
    if config.role != "server":
        raise KVStoreError(f"run_server needs DMLC_ROLE=server, got {config.role!r}")
    install_logging(default_level=logging.INFO)  # a role process logs its job's life cycle
    return ParameterServer(config).run()
