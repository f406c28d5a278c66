"""The scheduler: ``run_scheduler(config) -> exit status``.

It binds a ROUTER on ``DMLC_PS_ROOT_PORT`` and

1. waits for ``DMLC_NUM_SERVER`` servers and ``DMLC_NUM_WORKER`` workers to REGISTER (past
   ``MXTORCH_DIST_TIMEOUT`` it tells the registered nodes why and exits 1, naming who is
   missing).  Ranks: ``DMLC_SERVER_ID`` / ``DMLC_WORKER_ID`` (or ``RANK``) where given, the
   remaining ranks in arrival order; a duplicate or mixed-up mode ends the job at once;
2. sends each server its rank (ASSIGN), waits for every server's READY (its address), then
   sends each worker the LAYOUT (its rank, the servers' addresses);
3. runs worker barriers, the key agreement of ``kv.init`` (KEY_CHECK: the keys, shapes and
   dtypes of every worker compared with rank 0's), answers NUM_DEAD, and receives heartbeats.
   A BARRIER or KEY_CHECK whose JSON names a ``group`` of worker ranks (the store of one
   pipeline stage's data-parallel ranks) waits for, and compares, the living members of that
   group only; without one, every living worker;
4. declares a node dead when it has been silent for ``MXTORCH_PS_DEAD_S`` seconds and its
   connections have closed (a killed process's kernel closes them at once), or silent for
   ``MXTORCH_PS_LOST_S`` seconds with its connections open (a cut link, a frozen host): a live
   process starved of CPU, or stopped for a while, is not declared dead.  It then broadcasts
   NODE_DEAD to every node.  In dist_sync a dead worker fails every barrier (it can never
   arrive); in dist_async barriers count the living workers only;
5. re-admits a restarted server (same ``DMLC_SERVER_ID``) once the old one is dead or its
   connections have closed: ASSIGN with its old port, then NODE_BACK to the workers once it is
   READY.  A rank that is alive is never handed to a second connection (nor, while the job
   assembles, a rank another node has claimed): the claim is refused and logged;
6. tells the servers when a worker has sent SHUTDOWN (WORKER_DONE: dist_async staleness stops
   waiting for it); when every worker has (or is dead) tells the servers to stop and exits:
   0 if the job ended normally, 1 if a server died or a dist_sync worker died;
7. in an elastic job (``MXTORCH_PS_ELASTIC=1``, :mod:`.scheduler_elastic`) admits workers that
   join while it runs, takes a worker's leave or death as no failure, announces MEMBERSHIP after
   each change, and fails the job only if a server is still dead at its end.

It listens on ``DMLC_PS_ROOT_URI`` only (:func:`~.config.listen_host`), takes frames of at most
``MXTORCH_PS_MAX_MESSAGE_BYTES`` (16 MiB), and never stops for a peer's message: anything that
cannot be decoded or handled is refused (an ERROR reply, a rate-limited log line naming the
peer's address) and the scheduler keeps serving.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

import zmq

from ..._logging import install as install_logging
from ..base import KVStoreError
from . import protocol as P
from .config import PSConfig, listen_host, warn_unauthenticated
from .node import configure_socket
from .peers import ClosedConnections, ExpiringTable, Refusals, set_max_message_bytes
from .protocol import Command, Message, ProtocolError
from .scheduler_elastic import admit_worker, announce, keys_known, membership_meta, remember_keys

__all__ = ["Scheduler", "run_scheduler"]

_Request = TypeVar("_Request", bound=tuple[Any, ...])  # a waiting request: (identity, request id, ...)
_logger = logging.getLogger("mxtorch.kvstore.ps.scheduler")
_CHALLENGES = 1024  # unanswered challenges kept (a flood of REGISTERs evicts the oldest)
_CHALLENGE_TTL_S = 30.0  # a node answers its challenge in milliseconds


def _log(text: str, level: int = logging.WARNING) -> None:
    """A line of the scheduler's log (INFO: the job's life cycle; WARNING: what went wrong)."""
    _logger.log(level, "%s", text)


@dataclass
class _Node:
    role: str
    identity: bytes
    info: dict[str, Any]
    rank: int = -1
    node_id: int = 0
    state: str = "alive"  # alive | dead | finished
    last_seen: float = field(default_factory=time.monotonic)
    address: str | None = None
    nonce: str | None = None
    ready: bool = False
    incarnation: int = 0
    hb_identity: bytes | None = None  # the connection its heartbeats come from
    closed: bool = False  # one of its connections closed and has not come back

    def gone(self, now: float, dead_s: float, lost_s: float) -> bool:
        """Dead: silent past ``dead_s`` with a connection closed, or past ``lost_s`` anyway."""
        silent = now - self.last_seen
        return silent > lost_s or (self.closed and silent > dead_s)

    def describe(self) -> str:
        where = f"pid {self.info.get('pid')} on {self.info.get('host')}"
        if self.address:
            where = f"{self.address}, {where}"
        return f"{self.role} {self.rank} ({where})"


class _JobFailed(Exception):
    pass


class _RankAlive(KVStoreError):
    """A claim on a rank whose node is alive (answered with ERROR code ``rank_alive``)."""


class Scheduler:
    """The scheduler's state; :meth:`run` is the whole life of the process."""

    def __init__(self, config: PSConfig) -> None:
        self.config = config
        self.ctx = zmq.Context()
        self.sock = configure_socket(self.ctx.socket(zmq.ROUTER), linger_ms=1000)
        self.token = secrets.token_hex(16)
        self.pending: dict[bytes, _Node] = {}  # registered, not yet ranked
        self.challenges: ExpiringTable[str] = ExpiringTable(_CHALLENGE_TTL_S, _CHALLENGES)
        self.hb_nodes: dict[bytes, _Node] = {}  # heartbeat connection -> its node
        self.watch: ClosedConnections | None = None
        self.refusals = Refusals(_logger, "mxtorch ps scheduler")
        self.servers: list[_Node] = []
        self.workers: list[_Node] = []
        self.by_identity: dict[bytes, _Node] = {}
        self.mode: str | None = None
        self.running = False
        # by worker group (() : every worker): worker rank -> (identity, request id[, keys])
        self.barrier: dict[tuple[int, ...], dict[int, tuple[bytes, int]]] = {}
        self.key_check: dict[tuple[int, ...], dict[int, tuple[bytes, int, list[Any]]]] = {}
        self.failures: list[str] = []
        self.epoch = 0  # elastic jobs: the membership's epoch
        self.known_keys: set[str] = set()  # elastic jobs: KEY_CHECK items every worker agreed on

    # ---- life cycle -----------------------------------------------------------------------
    def run(self) -> int:
        cfg = self.config
        set_max_message_bytes(self.sock, cfg.scheduler_max_message_bytes())
        self.watch = ClosedConnections(self.sock)
        host = listen_host(cfg.root_uri, cfg.bind_all)
        try:
            try:
                self.sock.bind(f"tcp://{f'[{host}]' if ':' in host else host}:{cfg.root_port}")
            except zmq.ZMQError as e:
                if e.errno != zmq.EADDRNOTAVAIL:
                    raise
                _logger.warning("mxtorch ps scheduler: DMLC_PS_ROOT_URI=%s is not an address of this host: "
                                "listening on every interface", cfg.root_uri)
                host = "*"
                self.sock.bind(f"tcp://*:{cfg.root_port}")
        except zmq.ZMQError as e:
            _log(f"cannot listen on {host}:{cfg.root_port} (DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT): {e}; "
                 "choose a free port")
            self._close()
            return 1
        if host == "*" and not cfg.bind_all:
            _logger.warning("mxtorch ps scheduler: DMLC_PS_ROOT_URI=%s names this machine but no single "
                            "local address: listening on every interface", cfg.root_uri)
        warn_unauthenticated(cfg, "scheduler", f"port {cfg.root_port}")
        try:
            self._assemble()
            code = self._serve()
        except _JobFailed as e:
            _log(str(e))
            self._broadcast_error(str(e))
            code = 1
        except KeyboardInterrupt:
            self._broadcast_error("the scheduler was interrupted")
            code = 1
        self._close()
        return code

    def _close(self) -> None:
        if self.watch is not None:
            self.watch.close()
        self.sock.close(linger=1000)
        self.ctx.term()

    def _poll(self, timeout_s: float) -> list[tuple[bytes, Message, Any]]:
        """The messages waiting (identity, message, first frame), after at most ``timeout_s``;
        undecodable ones are refused here."""
        out: list[tuple[bytes, Message, Any]] = []
        if self.sock.poll(max(1, int(timeout_s * 1000))):
            while len(out) < 1000:
                try:
                    frames = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                identity = frames[0].bytes
                assert self.watch is not None
                self.watch.note(frames[0], identity)
                try:
                    out.append((identity, P.decode(frames[1:]), frames[0]))
                except Exception as e:  # any failure to decode a peer's bytes: refuse them, keep serving
                    self.refusals.refuse(frames[0], f"undecodable message: {type(e).__name__}: {e}",
                                         None if isinstance(e, ProtocolError) else e)
                    self._send(identity, Message(Command.ERROR, meta={"message": f"scheduler: {e}"}))
        self._take_closed()
        return out

    def _take_closed(self) -> None:
        """Forget what peers whose connections closed left behind; mark nodes that lost one."""
        assert self.watch is not None
        for identity in self.watch.closed():
            self.challenges.pop(identity)
            self.pending.pop(identity, None)
            node = self.by_identity.get(identity) or self.hb_nodes.get(identity)
            if node is not None and node.state == "alive" and not node.closed:
                node.closed = True
                _log(f"the connection of {node.describe()} closed")

    def _seen(self, node: _Node) -> None:
        node.last_seen = time.monotonic()
        node.closed = False  # read after the close was taken: a new connection of that identity

    def _refuse(self, identity: bytes, frame: Any, msg: Message, text: str,
                exc: BaseException | None = None, code: str = "error") -> None:
        """Refuse ``msg``: log it (rate-limited, naming the peer's address) and reply ERROR."""
        self.refusals.refuse(frame, f"{msg.command.name}: {text}", exc)
        self._reply_error(identity, msg, text, code)

    def _handle(self, identity: bytes, msg: Message, frame: Any, handler: Any) -> None:
        """Run ``handler(identity, msg)``; a failure is the peer's message's: refuse it, keep serving."""
        try:
            handler(identity, msg)
        except _JobFailed:
            raise
        except KVStoreError as e:
            code = "rank_alive" if isinstance(e, _RankAlive) else "error"
            self._refuse(identity, frame, msg, str(e), code=code)
        except Exception as e:  # a message that trips a handler: refused, with the traceback at debug level
            self._refuse(identity, frame, msg, f"scheduler failed on it: {type(e).__name__}: {e}", e)

    def _send(self, identity: bytes, msg: Message) -> None:
        msg.sender = P.SCHEDULER_NODE
        P.send(self.sock, msg, identity)

    def _reply_error(self, identity: bytes, req: Message, text: str, code: str = "error") -> None:
        self._send(identity, Message(Command.ERROR, req.request_id, meta={"message": text, "code": code}))

    def _broadcast_error(self, text: str) -> None:
        for node in [*self.pending.values(), *self.servers, *self.workers]:
            if node.state == "alive":
                self._send(node.identity, Message(Command.ERROR, meta={"message": text}))

    # ---- 1-2: assembling the job ------------------------------------------------------------
    def _assemble(self) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.timeout
        while True:
            servers = [n for n in self.pending.values() if n.role == "server"]
            workers = [n for n in self.pending.values() if n.role == "worker"]
            if len(servers) == cfg.num_servers and len(workers) == cfg.num_workers:
                break
            if time.monotonic() > deadline:
                raise _JobFailed(
                    f"the job did not assemble within {cfg.timeout:g} s (MXTORCH_DIST_TIMEOUT): "
                    f"{len(servers)} of {cfg.num_servers} servers and {len(workers)} of {cfg.num_workers} "
                    f"workers registered{self._missing(servers, workers)}; start the missing processes "
                    f"(mxtorch launch -n {cfg.num_workers} -s {cfg.num_servers} ...) or fix "
                    "DMLC_NUM_SERVER/DMLC_NUM_WORKER")
            for identity, msg, frame in self._poll(0.2):
                if msg.command == Command.REGISTER:
                    self._handle(identity, msg, frame, self._on_register)
                elif msg.command != Command.HEARTBEAT:
                    self._refuse(identity, frame, msg, "the job has not started yet: register first")
        self.mode = str(workers[0].info["mode"])
        self.servers = self._rank(servers, "server", "server_id", cfg.num_servers)
        self.workers = self._rank(workers, "worker", "worker_id", cfg.num_workers)
        self.pending.clear()
        now = time.monotonic()
        for n in self.servers:
            n.node_id = P.server_node(n.rank)
            n.last_seen = now
            self.by_identity[n.identity] = n
            self._assign(n, restart=False, port=None)
        for n in self.workers:
            n.node_id = P.worker_node(n.rank)
            self.by_identity[n.identity] = n
        while not all(n.ready for n in self.servers):
            if time.monotonic() > deadline:
                late = [n.describe() for n in self.servers if not n.ready]
                raise _JobFailed(f"server(s) {late} registered but did not report READY within "
                                 f"{cfg.timeout:g} s (MXTORCH_DIST_TIMEOUT): see their logs")
            for identity, msg, frame in self._poll(0.2):
                node = self.by_identity.get(identity)
                if msg.command == Command.READY and node is not None and node.role == "server":
                    self._handle(identity, msg, frame, lambda _, m, n=node: self._on_ready(n, m))
                elif msg.command == Command.HEARTBEAT:
                    self._handle(identity, msg, frame, self._on_heartbeat)
                else:
                    self._refuse(identity, frame, msg, "the job is still assembling")
        hosts: dict[str, list[_Node]] = {}
        for n in self.workers:
            hosts.setdefault(str(n.info.get("host")), []).append(n)
        layout = [{"rank": s.rank, "address": s.address, "nonce": s.nonce} for s in self.servers]
        now = time.monotonic()
        for n in self.workers:
            same_host = hosts[str(n.info.get("host"))]
            n.last_seen = now
            self._send(n.identity, Message(Command.LAYOUT, meta={
                "rank": n.rank, "num_workers": cfg.num_workers, "num_servers": cfg.num_servers,
                "mode": self.mode, "servers": layout, "token": self.token,
                "local_rank": same_host.index(n), "local_size": len(same_host), **membership_meta(self)}))
        self.running = True
        _log(f"job started: {cfg.num_servers} server(s), {cfg.num_workers} worker(s), dist_{self.mode}",
             logging.INFO)

    def _missing(self, servers: list[_Node], workers: list[_Node]) -> str:
        parts = []
        for nodes, key, total, role in ((servers, "server_id", self.config.num_servers, "server"),
                                        (workers, "worker_id", self.config.num_workers, "worker")):
            ids = {n.info.get(key) for n in nodes}
            if None not in ids:
                missing = [r for r in range(total) if r not in ids]
                if missing:
                    parts.append(f"missing {role} rank(s) {missing}")
        return f" ({'; '.join(parts)})" if parts else ""

    @staticmethod
    def _rank(nodes: list[_Node], role: str, key: str, total: int) -> list[_Node]:
        """Ranks: the one a node asked for (unique: checked at REGISTER), the others in arrival order."""
        out: list[_Node | None] = [None] * total
        for n in nodes:
            r = n.info.get(key)
            if r is not None:
                out[r] = n
        free = iter(i for i, n in enumerate(out) if n is None)
        for n in nodes:
            if n.info.get(key) is None:
                out[next(free)] = n
        ranked: list[_Node] = []
        for r, slot in enumerate(out):
            assert slot is not None
            slot.rank = r
            ranked.append(slot)
        return ranked

    def _on_register(self, identity: bytes, msg: Message) -> None:
        m = msg.meta or {}
        role = m.get("role")
        if role not in ("server", "worker"):
            raise KVStoreError(f"cannot register role {str(role)[:40]!r}")
        secret = self.config.secret
        if secret is not None:
            challenge = self.challenges.get(identity)
            if challenge is None or not P.verify(secret, m.get("hmac"), "node", challenge):
                if challenge is not None and m.get("hmac") is not None:
                    self.challenges.pop(identity)
                    raise KVStoreError("authentication failed: wrong MXTORCH_PS_SECRET")
                nonce = secrets.token_hex(16)
                self.challenges.put(identity, nonce)
                proof = P.sign(secret, "scheduler", str(m.get("nonce", "")))
                self._send(identity, Message(Command.CHALLENGE, msg.request_id, meta={"nonce": nonce,
                                                                                     "proof": proof}))
                return
            self.challenges.pop(identity)
        node = _Node(str(role), identity, m)
        if self.running:
            self._admit_late(node, msg)
            return
        who = f"{role} pid {m.get('pid')!r:.20} on {m.get('host')!r:.80}"
        total = self.config.num_workers if role == "worker" else self.config.num_servers
        key = f"{role}_id"
        rank = m.get(key)
        if rank is not None and (type(rank) is not int or not 0 <= rank < total):
            raise KVStoreError(f"{who} asks for rank {str(rank)[:20]}, outside 0..{total - 1}")
        others = [n for n in self.pending.values() if n.role == role and n.identity != identity]
        if role == "worker":
            mode = m.get("mode")
            if mode not in ("sync", "async"):
                raise KVStoreError(f"worker registered with unknown mode {str(mode)[:20]!r}")
            first = next((n for n in others), None)
            if first is not None and first.info["mode"] != mode:
                raise KVStoreError(f"workers disagree on the KVStore type: {who} created a dist_{mode} "
                                   f"store, pid {first.info.get('pid')} on {first.info.get('host')} a "
                                   f"dist_{first.info['mode']} one; every worker must create the same type")
        holder = next((n for n in others if rank is not None and n.info.get(key) == rank), None)
        if holder is not None:  # the first claim stands: a second connection never takes a rank
            raise KVStoreError(f"{role} rank {rank} is already taken by pid {holder.info.get('pid')} on "
                               f"{holder.info.get('host')}; give every {role} its own DMLC_{role.upper()}_ID")
        if identity not in self.pending and len(others) >= total:
            raise KVStoreError(f"the job already has its {total} {role}s (DMLC_NUM_"
                               f"{'WORKER' if role == 'worker' else 'SERVER'}={total})")
        self.pending[identity] = node

    def _assign(self, node: _Node, restart: bool, port: int | None) -> None:
        self._send(node.identity, Message(Command.ASSIGN, meta={
            "rank": node.rank, "num_workers": self.config.num_workers, "num_servers": self.config.num_servers,
            "mode": self.mode or "sync", "token": self.token, "restart": restart, "port": port,
            **membership_meta(self)}))

    def _on_ready(self, node: _Node, msg: Message) -> None:
        m = msg.meta or {}
        node.address = str(m.get("address"))[:300]
        node.nonce = str(m.get("nonce"))[:300]
        node.ready = True
        self._seen(node)

    def _admit_late(self, node: _Node, msg: Message) -> None:
        # A server coming back (restart with its DMLC_SERVER_ID); workers cannot join late.
        rank = node.info.get("server_id")
        if node.role == "worker" and self.config.elastic:
            return admit_worker(self, node)
        if node.role != "server":
            raise KVStoreError(f"the job already has its {self.config.num_workers} workers; workers cannot "
                               "join a running job")
        if not isinstance(rank, int) or not 0 <= rank < len(self.servers):
            raise KVStoreError("a server joining a running job must set DMLC_SERVER_ID to the rank it "
                               f"replaces (0..{len(self.servers) - 1})")
        old = self.servers[rank]
        if old.state == "alive" and not old.closed:
            raise _RankAlive(f"server {rank} is alive (its connections are open): a second process cannot "
                             "take its rank; a restarted server is admitted once the old one's connections "
                             "close")
        port = None
        if old.address:
            try:
                port = int(old.address.rsplit(":", 1)[1])
            except ValueError:
                port = None
        self.by_identity.pop(old.identity, None)
        if old.hb_identity is not None:
            self.hb_nodes.pop(old.hb_identity, None)
        node.rank, node.node_id = rank, old.node_id
        node.incarnation = old.incarnation + 1
        self.servers[rank] = node
        self.by_identity[node.identity] = node
        _log(f"server {rank} rejoins (pid {node.info.get('pid')} on {node.info.get('host')}), on port {port}",
             logging.INFO)
        self._assign(node, restart=True, port=port)

    # ---- 3-6: the running job -----------------------------------------------------------------
    def _serve(self) -> int:
        cfg = self.config
        tick = max(0.05, min(cfg.heartbeat_s / 2, 0.5))
        while True:
            for identity, msg, frame in self._poll(tick):
                self._handle(identity, msg, frame, self._dispatch)
            self._check_dead()
            if all(n.state != "alive" for n in self.workers):
                return self._stop_servers()

    def _dispatch(self, identity: bytes, msg: Message) -> None:
        if msg.command == Command.HEARTBEAT:
            self._on_heartbeat(identity, msg)
            return
        if msg.command == Command.REGISTER:
            self._on_register(identity, msg)
            return
        node = self.by_identity.get(identity)
        if node is None:
            raise KVStoreError("this connection is not part of the job (register first)")
        if node.state == "dead":
            # it was declared dead but speaks again: too late, the others were told
            self._reply_error(identity, msg, f"{node.describe()} was declared dead and cannot rejoin")
            return
        self._seen(node)
        if msg.command == Command.READY and node.role == "server":
            self._on_ready(node, msg)
            self._announce_back(node)
        elif node.role != "worker":
            raise KVStoreError(f"{node.describe()} sent {msg.command.name}, which only workers send")
        elif msg.command == Command.BARRIER:
            group = self._group(node, msg)
            self.barrier.setdefault(group, {})[node.rank] = (identity, msg.request_id)
            self._maybe_release_barrier()
        elif msg.command == Command.KEY_CHECK:
            keys = (msg.meta or {}).get("keys")
            if not isinstance(keys, list):
                raise ProtocolError("malformed KEY_CHECK")
            if keys_known(self, keys):  # a worker that joined an elastic job inits the job's keys
                self._send(identity, Message(Command.ACK, msg.request_id))
                return
            group = self._group(node, msg)
            self.key_check.setdefault(group, {})[node.rank] = (identity, msg.request_id, keys)
            self._maybe_finish_key_check()
        elif msg.command == Command.NUM_DEAD:
            self._on_num_dead(node, msg)
        elif msg.command == Command.SHUTDOWN and (msg.meta or {}).get("failed"):
            # the worker is ending in failure (sys.exit(3), an exception): as dead as a silent one
            self._send(identity, Message(Command.ACK, msg.request_id))
            text = f"{node.describe()} {str((msg.meta or {})['failed'])[:500]}"
            _log(f"{text}: it left the job")
            self._declare_dead(node, text, {"reason": text})
        elif msg.command == Command.SHUTDOWN:
            node.state = "finished"
            self._send(identity, Message(Command.ACK, msg.request_id))
            for server in self.servers:  # dist_async staleness: it no longer holds others back
                if server.state == "alive":
                    self._send(server.identity, Message(Command.WORKER_DONE, meta={"rank": node.rank}))
            self._maybe_release_barrier()
            self._maybe_finish_key_check()
            if self.config.elastic:
                announce(self)
        else:
            raise KVStoreError(f"the scheduler does not handle {msg.command.name}")

    def _on_heartbeat(self, identity: bytes, msg: Message) -> None:
        if msg.key != self.token:
            return  # not from this job: no answer
        node = self._node_by_id(msg.sender)
        if node is not None and node.state == "alive":
            if node.hb_identity != identity:  # its heartbeat connection: a close of it counts
                if node.hb_identity is not None:
                    self.hb_nodes.pop(node.hb_identity, None)
                node.hb_identity = identity
                self.hb_nodes[identity] = node
            self._seen(node)
        self._send(identity, Message(Command.ACK, msg.request_id))

    def _node_by_id(self, node_id: int) -> _Node | None:
        for n in (*self.servers, *self.workers):
            if n.node_id == node_id:
                return n
        return None

    def _live_workers(self, group: tuple[int, ...] = ()) -> list[_Node]:
        """The living workers (of ``group``; ``()``: of the job)."""
        return [n for n in self.workers if n.state == "alive" and (not group or n.rank in group)]

    def _group(self, node: _Node, msg: Message) -> tuple[int, ...]:
        """The worker group a BARRIER or KEY_CHECK is for (``()``: every worker)."""
        group = (msg.meta or {}).get("group")
        if group is None:
            return ()
        if not isinstance(group, list) or not all(isinstance(r, int) and 0 <= r < len(self.workers)
                                                  for r in group) or node.rank not in group:
            raise ProtocolError(f"malformed worker group {group!r} from {node.describe()}")
        return tuple(sorted(set(group)))

    def _sync_death(self) -> str | None:
        if self.mode != "sync" or self.config.elastic:
            return None
        dead = [n for n in self.workers if n.state == "dead"]
        if not dead:
            return None
        return (f"{dead[0].describe()} died, so this dist_sync job cannot continue (every worker takes part "
                "in every barrier and round)")

    def _take_arrived(self, table: dict[tuple[int, ...], dict[int, _Request]],
                      group: tuple[int, ...]) -> dict[int, _Request] | None:
        """Remove and return ``group``'s requests from ``table`` (rank -> (identity, request id, ...))
        once every live member has sent one; None while some are missing, and also after answering
        them all with an error when a dist_sync worker has died."""
        waiting = table.get(group)
        if not waiting:
            table.pop(group, None)
            return None
        failure = self._sync_death()
        if failure is not None:
            for identity, req, *_ in waiting.values():
                self._send(identity, Message(Command.ERROR, req, meta={"message": failure, "code": "dead"}))
            del table[group]
            return None
        if any(n.rank not in waiting for n in self._live_workers(group)):
            return None
        return table.pop(group)

    def _maybe_release_barrier(self) -> None:
        for group in list(self.barrier):
            waiting = self._take_arrived(self.barrier, group)
            for identity, req in (waiting or {}).values():
                self._send(identity, Message(Command.BARRIER_DONE, req))

    def _maybe_finish_key_check(self) -> None:
        for group in list(self.key_check):
            checks = self._take_arrived(self.key_check, group)
            if checks is not None:
                self._answer_key_check(checks)

    def _answer_key_check(self, checks: dict[int, tuple[bytes, int, list[Any]]]) -> None:
        ranks = sorted(checks)
        ref_rank = ranks[0]
        ref = checks[ref_rank][2]
        remember_keys(self, ref)  # a joiner's init of them (elastic jobs) is checked against these
        problems: dict[int, str] = {}
        for r in ranks[1:]:
            if _compare_keys(ref, checks[r][2], ref_rank, "") != "":
                problems[r] = _compare_keys(ref, checks[r][2], ref_rank, f"worker {r}")
        for r in ranks:
            identity, req, _ = checks[r]
            if not problems:
                self._send(identity, Message(Command.ACK, req))
                continue
            if r in problems:
                text = "kv.init on this worker differs from rank {}'s: {}".format(
                    ref_rank, _compare_keys(ref, checks[r][2], ref_rank, f"this worker (rank {r})"))
            else:
                text = "kv.init differs between workers: " + "; ".join(problems.values())
            text += (". Every worker must kv.init the same keys with the same shapes and dtypes, in the same "
                     "order")
            self._send(identity, Message(Command.ERROR, req, meta={"message": text, "code": "mismatch"}))

    def _on_num_dead(self, node: _Node, msg: Message) -> None:
        m = msg.meta or {}
        group, timeout = m.get("node_id"), m.get("timeout")
        if not isinstance(group, int) or not isinstance(timeout, (int, float)):
            raise ProtocolError("malformed NUM_DEAD")
        now = time.monotonic()
        count = 0
        for n in (*self.servers, *self.workers):
            if not (P.node_group(n.node_id) & group or n.node_id == group):
                continue
            if n.state == "dead" or (n.state == "alive" and now - n.last_seen > timeout):
                count += 1
        self._send(node.identity, Message(Command.ACK, msg.request_id, arg=count))

    def _check_dead(self) -> None:
        now = time.monotonic()
        cfg = self.config
        for n in (*self.servers, *self.workers):
            if n.state != "alive" or not n.gone(now, cfg.dead_s, cfg.lost_s):
                continue
            silent = now - n.last_seen
            if n.closed:
                text = (f"{n.describe()} has been silent for {silent:.1f} s and its connection closed "
                        f"(MXTORCH_PS_DEAD_S={cfg.dead_s:g})")
            else:
                text = (f"{n.describe()} has been silent for {silent:.1f} s with its connection open "
                        f"(MXTORCH_PS_LOST_S={cfg.lost_s:g}): its host or the network is down")
            _log(f"{text}: declared dead")
            self._declare_dead(n, text, {"silent_s": silent})

    def _declare_dead(self, n: _Node, text: str, detail: dict[str, Any]) -> None:
        n.state = "dead"
        if (n.role == "server" or self.mode == "sync") and not self.config.elastic:
            self.failures.append(text)
        notice = Message(Command.NODE_DEAD, meta={"node_id": n.node_id, "role": n.role, "rank": n.rank,
                                                  "description": n.describe(), **detail})
        for other in (*self.servers, *self.workers):
            if other.state == "alive":
                self._send(other.identity, notice)
        self._maybe_release_barrier()
        self._maybe_finish_key_check()
        if self.config.elastic and n.role == "worker":
            announce(self)

    def _announce_back(self, node: _Node) -> None:
        if node.state == "dead":
            node.state = "alive"
        notice = Message(Command.NODE_BACK, meta={"node_id": node.node_id, "rank": node.rank,
                                                  "address": node.address, "nonce": node.nonce})
        for w in self._live_workers():
            self._send(w.identity, notice)

    def _stop_servers(self) -> int:
        self.failures += [f"{n.describe()} died and was not restarted" for n in self.servers
                          if n.state == "dead" and self.config.elastic]
        grace = min(self.config.timeout, 30.0)
        waiting = {n.identity: n for n in self.servers if n.state == "alive"}
        for n in waiting.values():
            self._send(n.identity, Message(Command.SHUTDOWN))
        deadline = time.monotonic() + grace
        while waiting and time.monotonic() < deadline:
            for identity, msg, frame in self._poll(0.2):
                if msg.command == Command.ACK and identity in waiting:
                    waiting.pop(identity).state = "finished"
                elif msg.command == Command.HEARTBEAT:
                    self._handle(identity, msg, frame, self._on_heartbeat)
        if waiting:
            _log(f"server(s) {[n.describe() for n in waiting.values()]} did not acknowledge SHUTDOWN within "
                 f"{grace:g} s")
            return 1
        if self.failures:
            _log("job ended after failures: " + "; ".join(self.failures))
            return 1
        _log("job finished: every worker shut down, servers stopped", logging.INFO)
        return 0


def _compare_keys(ref: list[Any], mine: list[Any], ref_rank: int, who: str) -> str:
    """How ``who``'s KEY_CHECK list ([key, shape, dtype] items) differs from ``ref_rank``'s ('': equal)."""
    if len(ref) != len(mine):
        return (f"{who} initializes {len(mine)} key(s) {[_show(k) for k in mine[:6]]}, rank {ref_rank} "
                f"{len(ref)}: {[_show(k) for k in ref[:6]]}")
    for a, b in zip(ref, mine):
        if a == b:
            continue
        if a[0] != b[0]:
            return (f"{who} initializes key {_show(b)} where rank {ref_rank} initializes key {_show(a)} "
                    "(keys in a different order?)")
        return (f"key {_show(b)} has shape {tuple(b[1])} {b[2]} on {who} but shape {tuple(a[1])} {a[2]} on "
                f"rank {ref_rank}")
    return ""


def _show(item: Any) -> Any:
    try:
        return P.key_from_json(item[0])
    except (ProtocolError, TypeError, IndexError):
        return item


def run_scheduler(config: PSConfig) -> int:
    """Run the scheduler of a parameter-server job until the workers finish; return the exit status."""
    if config.role != "scheduler":
        raise KVStoreError(f"run_scheduler needs DMLC_ROLE=scheduler, got {config.role!r}")
    install_logging(default_level=logging.INFO)  # a role process logs its job's life cycle
    return Scheduler(config).run()
