"""A worker's connections: one DEALER per server, one to the scheduler, request bookkeeping.

:class:`PSClient` sends requests without waiting (:meth:`PSClient.send`) and then waits for
all of their replies at once (:meth:`PSClient.wait`), so that a list of keys is pipelined over
every server.  Each reply is matched to its request by id and handed to the request's
callback (a pull writes its slice into the output tensors as soon as it arrives).

Every wait is bounded: after ``MXTORCH_DIST_TIMEOUT`` seconds it raises a
:class:`~mxtorch.kvstore.KVStoreError` naming the server (rank and address), the key and what
was expected.  It raises at once when the scheduler reports that a server it waits on died,
when (in dist_sync) any worker died, or when the scheduler itself stops answering heartbeats.
In an elastic job (:mod:`.membership`) it does neither: a dead server is waited for until it is
restarted (then the requests are sent again), workers come and go (MEMBERSHIP notices update
:attr:`PSClient.num_workers`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import zmq

from ..base import KVStoreError
from . import protocol as P
from .config import PSConfig
from .membership import read_membership
from .node import Heartbeat, configure_socket, join, new_identity
from .protocol import Command, Message, ProtocolError

__all__ = ["PSClient", "ServerInfo"]

_POLL_S = 0.25  # how often a long wait looks at heartbeats and death notices
_EVENTS, _POLLIN, _NOBLOCK = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.NOBLOCK)


@dataclass
class ServerInfo:
    rank: int
    address: str
    nonce: str
    sock: zmq.Socket

    def __post_init__(self) -> None:
        self.name = f"server {self.rank} ({self.address})"

    def describe(self) -> str:
        return self.name


@dataclass
class _Request:
    server: int  # -1: the scheduler
    what: str | Callable[[], str]  # built only when an error needs it
    hint: str
    on_reply: Callable[[Message], None] | None
    msg: Message | None = None  # kept to resend once to a restarted server
    retried: bool = False
    where: str = ""

    def describe(self) -> str:
        what = self.what() if callable(self.what) else self.what
        return f"{what} ({self.where})"


class PSClient:
    """The worker's side of the transport (see the module docstring)."""

    def __init__(self, config: PSConfig, mode: str, hello: dict[str, Any] | None = None) -> None:
        """``hello``: what this worker declares to every server on connecting (staleness bound,
        compressor); :attr:`hello` may change later and is said again to a restarted server."""
        self.config = config
        self.mode = mode
        self.hello: dict[str, Any] = dict(hello or {})
        self.ctx = zmq.Context()
        self.servers: list[ServerInfo] = []
        self.pending: dict[int, _Request] = {}
        self.replies: dict[int, Message] = {}
        self.dead: dict[int, str] = {}  # node id -> description
        self.fatal: str | None = None
        self.closed = False
        self.op_timeout = config.timeout
        """Seconds :meth:`wait` waits (MXTORCH_DIST_TIMEOUT unless the store was given another)."""
        self.heartbeat: Heartbeat | None = None
        self._needs_hello: set[int] = set()
        self._next_id = 1
        self.epoch = 0  # elastic jobs: the membership this worker last heard of, its live ranks
        self.members: list[int] = []
        self.joined = False  # it joined an elastic job that was running already
        info = {"role": "worker", "worker_id": config.worker_id, "mode": mode}
        try:
            self.sched, layout = join(self.ctx, config, info, Command.LAYOUT)
        except BaseException:
            self.ctx.term()
            raise
        try:
            self._connect(layout.meta or {})
        except BaseException:
            self.close()  # tells the scheduler, stops the heartbeat, closes the sockets
            raise

    def _connect(self, m: dict[str, Any]) -> None:
        try:
            self.rank = int(m["rank"])
            self.num_workers = int(m["num_workers"])
            self.num_servers = int(m["num_servers"])
            self.local_rank = int(m.get("local_rank", 0))
            self.local_size = int(m.get("local_size", 1))
            servers = sorted(m["servers"], key=lambda s: s["rank"])
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("malformed LAYOUT from the scheduler") from None
        if m.get("mode") != self.mode:
            raise KVStoreError(f"this worker created a dist_{self.mode} store but the job runs "
                               f"dist_{m.get('mode')}: every worker must create the same KVStore type")
        if self.config.elastic:
            self.epoch, self.members = read_membership(m)
            self.joined = bool(m.get("joined"))
        self.node_id = P.worker_node(self.rank)
        self.identity = new_identity(f"w{self.rank}")
        self.poller = zmq.Poller()
        self.poller.register(self.sched, zmq.POLLIN)
        self._sock_rank: dict[zmq.Socket, int] = {self.sched: -1}
        for s in servers:
            sock = configure_socket(self.ctx.socket(zmq.DEALER), linger_ms=200)
            sock.setsockopt(zmq.IDENTITY, self.identity)
            sock.connect(str(s["address"]))
            self.servers.append(ServerInfo(int(s["rank"]), str(s["address"]), str(s["nonce"]), sock))
            self.poller.register(sock, zmq.POLLIN)
            self._sock_rank[sock] = int(s["rank"])
        self.heartbeat = Heartbeat(self.ctx, self.config, self.node_id, str(m.get("token", "")))
        self.heartbeat.start()
        for s in self.servers:
            self._hello(s.rank)
        self.wait()

    # ---- sending ----------------------------------------------------------------------------
    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _hello(self, rank: int) -> None:
        s = self.servers[rank]
        meta: dict[str, Any] = {**self.hello, "rank": self.rank, "epoch": self.epoch}
        if self.config.secret is not None:
            meta["hmac"] = P.sign(self.config.secret, "hello", s.nonce, self.identity)
        rid = self._new_id()
        self.pending[rid] = _Request(rank, "HELLO", "is the server running and reachable from this host "
                                     "(DMLC_NODE_HOST / DMLC_INTERFACE)?", None, where=s.describe())
        P.send(s.sock, Message(Command.HELLO, rid, self.node_id, meta=meta))
        self._needs_hello.discard(rank)

    def send(self, server: int, msg: Message, what: str | Callable[[], str], hint: str = "",
             on_reply: Callable[[Message], None] | None = None, keep: bool = True) -> int:
        """Send ``msg`` to ``server`` (reply handled by ``on_reply``, else kept in :attr:`replies`)."""
        if server in self._needs_hello:
            self._hello(server)
        rid = self._new_id()
        msg.request_id = rid
        msg.sender = self.node_id
        s = self.servers[server]
        kept = msg if keep else None
        self.pending[rid] = _Request(server, what, hint, on_reply, kept, where=s.name)
        P.send(s.sock, msg)
        return rid

    def send_scheduler(self, msg: Message, what: str, hint: str = "") -> int:
        rid = self._new_id()
        msg.request_id = rid
        msg.sender = self.node_id
        where = f"the scheduler at {self.config.root_address}"
        self.pending[rid] = _Request(-1, what, hint, None, where=where)
        P.send(self.sched, msg)
        return rid

    def request_scheduler(self, msg: Message, what: str, hint: str = "") -> Message:
        rid = self.send_scheduler(msg, what, hint)
        self.wait()
        return self.replies.pop(rid)

    def pump(self) -> None:
        """Take in the scheduler's notices (deaths, restarts) without waiting."""
        self._drain(self.sched)

    # ---- waiting ----------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> None:
        """Wait until every sent request is answered; raise on errors, deaths and the timeout."""
        limit = self.op_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        try:
            while self.pending:
                self._check_health()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._timeout_error(limit)
                for sock, _ in self.poller.poll(int(min(left, _POLL_S) * 1000) + 1):
                    self._drain(sock)
                    if not self.pending:
                        break
        except BaseException:
            self.pending.clear()  # late replies to this batch are ignored
            raise

    def _drain(self, sock: zmq.Socket) -> None:
        rank = self._sock_rank[sock]
        # ask ZeroMQ whether a message is waiting instead of letting recv raise zmq.Again: building
        # that exception costs more than the rest of taking a small reply
        while cast(int, sock.getsockopt(_EVENTS)) & _POLLIN:
            try:
                frames = sock.recv_multipart(_NOBLOCK, copy=False)
            except zmq.Again:
                return
            msg = P.decode(frames)
            if rank < 0 and msg.request_id not in self.pending:
                self._on_notice(msg)
            else:
                self._on_reply(msg)

    def _on_notice(self, msg: Message) -> None:
        m = msg.meta or {}
        if msg.command == Command.NODE_DEAD:
            node = int(m.get("node_id", 0))
            who = m.get("description", P.describe_node(node))
            silent = float(m.get("silent_s", 0))
            self.dead[node] = str(m.get("reason") or
                                  f"{who} stopped sending heartbeats ({silent:.1f} s) and was declared dead")
        elif msg.command == Command.NODE_BACK:
            node = int(m.get("node_id", 0))
            self.dead.pop(node, None)
            rank = int(m.get("rank", -1))
            if 0 <= rank < len(self.servers):
                self.servers[rank].nonce = str(m.get("nonce", ""))
                self._needs_hello.add(rank)
                self._resend_lost(rank)
        elif msg.command == Command.MEMBERSHIP:
            epoch, ranks = read_membership(m)
            if epoch > self.epoch:
                self.epoch, self.members, self.num_workers = epoch, ranks, len(ranks)
        elif msg.command in (Command.ERROR, Command.SHUTDOWN):
            self.fatal = f"the scheduler ended the job: {m.get('message', 'no reason given')}"

    def _resend_lost(self, rank: int) -> None:
        """Server ``rank`` restarted (from its snapshot): the requests this worker was waiting on
        died with the old process, so greet the new one and send them again, once.  A sync round
        in progress then completes on the restored state instead of timing out.  A greeting still
        waiting (a worker that joined an elastic job while the server was down: signed with the
        old process's nonce) is replaced by a new one."""
        lost = [(rid, req) for rid, req in self.pending.items() if req.server == rank]
        resend = [req for _, req in lost if req.msg is not None and not req.retried]
        if not resend and all(req.msg is not None for _, req in lost):
            return
        for rid, req in lost:
            if req.msg is None:  # an old HELLO: the new greeting replaces it
                del self.pending[rid]
        self._hello(rank)
        sock = self.servers[rank].sock
        for req in resend:
            req.retried = True
            assert req.msg is not None
            P.send(sock, req.msg)

    def _on_reply(self, msg: Message) -> None:
        req = self.pending.get(msg.request_id)
        if req is None:
            return  # the reply to a request given up on
        if msg.command == Command.ERROR:
            m = msg.meta or {}
            if m.get("code") == "not_greeted" and req.msg is not None and req.server >= 0:
                # the server restarted and refused this copy unread: greet it and ask again, unless
                # that was done already (NODE_BACK, or an earlier refusal) and the copy sent after
                # the greeting is on its way
                if not req.retried:
                    req.retried = True
                    self._hello(req.server)
                    P.send(self.servers[req.server].sock, req.msg)
                return
            del self.pending[msg.request_id]
            raise KVStoreError(f"{req.describe()} failed: {m.get('message', 'no reason given')}")
        del self.pending[msg.request_id]
        if req.on_reply is not None:
            req.on_reply(msg)
        else:
            self.replies[msg.request_id] = msg

    def _check_health(self) -> None:
        if self.fatal is not None:
            raise KVStoreError(f"worker {self.rank}: {self.fatal}")
        if self.dead and not self.config.elastic:  # elastic: a server is restarted, workers come and go
            for req in self.pending.values():
                if req.server >= 0 and P.server_node(req.server) in self.dead:
                    dead = self.dead[P.server_node(req.server)]
                    raise KVStoreError(f"worker {self.rank}: {dead} while this worker waited for "
                                       f"{req.describe()}: restart the job (servers keep no copy of each "
                                       "other's keys)")
            if self.mode == "sync":
                for node_id, text in self.dead.items():
                    if P.node_group(node_id) == 4:
                        raise KVStoreError(f"worker {self.rank}: {text}; in dist_sync every worker takes "
                                           "part in every round and barrier, so this job cannot continue: "
                                           "restart it")
        hb = self.heartbeat
        if hb is not None and hb.scheduler_gone():
            raise KVStoreError(f"worker {self.rank}: the scheduler at {self.config.root_address} "
                               f"{hb.describe_silence()}")

    def _timeout_error(self, limit: float) -> KVStoreError:
        reqs = list(self.pending.values())
        first = reqs[0]
        more = f" (and {len(reqs) - 1} more request(s))" if len(reqs) > 1 else ""
        hint = f": {first.hint}" if first.hint else ""
        return KVStoreError(f"worker {self.rank}: no answer to {first.describe()}{more} within {limit:g} s "
                            f"(MXTORCH_DIST_TIMEOUT){hint}")

    # ---- the end ----------------------------------------------------------------------------
    def close(self, failure: str | None = None) -> None:
        """Tell the scheduler this worker is done (bounded wait), stop the heartbeat, close sockets.

        ``failure`` says why the worker is ending in failure ("exited with status 3"): the
        scheduler then declares it dead at once, so that no peer waits for it.
        """
        if self.closed:
            return
        self.closed = True
        self.pending.clear()
        hb = self.heartbeat
        try:
            rid = self._new_id()
            P.send(self.sched, Message(Command.SHUTDOWN, rid, getattr(self, "node_id", 0),
                                       meta={"failed": failure} if failure else None))
            deadline = time.monotonic() + min(5.0, self.config.timeout)
            while time.monotonic() < deadline:
                if not self.sched.poll(100):
                    if hb is not None and hb.scheduler_gone():
                        break
                    continue
                msg = P.decode(self.sched.recv_multipart(copy=False))
                if msg.request_id == rid:
                    break
        except (zmq.ZMQError, ProtocolError):
            pass
        finally:
            if hb is not None:
                hb.stop()
            for s in self.servers:
                s.sock.close(linger=200)
            self.sched.close(linger=200)
            self.ctx.term()
