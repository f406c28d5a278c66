"""What servers and workers share: socket set-up, joining the job, and the heartbeat thread.

:func:`join` registers a node with the scheduler and returns its assignment (ASSIGN for a
server, LAYOUT for a worker), answering the scheduler's challenge when the job has a secret.
:class:`Heartbeat` runs in its own thread with its own socket: it sends a HEARTBEAT every
``heartbeat_s`` seconds and records when the scheduler last answered and whether its
connection is open, so that a node notices a dead scheduler (:meth:`Heartbeat.scheduler_gone`:
silent past ``MXTORCH_PS_DEAD_S`` with the connection closed, or past ``MXTORCH_PS_LOST_S``) but
not a starved one, and not its own stop (a process that was stopped sees a long silence).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from typing import Any

import zmq

from ..base import KVStoreError
from .config import PSConfig, listen_host, warn_unauthenticated
from .peers import ConnectionState, set_max_message_bytes
from .protocol import Command, Message, ProtocolError, recv, send, sign, verify

__all__ = ["configure_socket", "bind_router", "join", "JoinError", "Heartbeat", "new_identity"]

_HWM = 0  # unbounded queues: a burst of pushes must never block or drop
_RETRY_S = 0.5  # a restarted server's REGISTER waits this long while its old process's connections close
_logger = logging.getLogger("mxtorch.kvstore.ps.server")


class JoinError(ProtocolError):
    """The scheduler refused this node or could not be reached."""


def configure_socket(sock: zmq.Socket, linger_ms: int = 2000) -> zmq.Socket:
    """Unbounded high-water marks, bounded linger.

    The TCP buffer sizes are left to the kernel: fixing them (SO_SNDBUF/SO_RCVBUF, which an
    earlier version set to 4 MiB) turns off Linux's autotuning, and bench/ps.py measured the
    push+pull of 4 MiB keys about 3 ms per 100 MiB slower with them fixed on 127.0.0.1.
    """
    sock.setsockopt(zmq.SNDHWM, _HWM)
    sock.setsockopt(zmq.RCVHWM, _HWM)
    sock.setsockopt(zmq.LINGER, linger_ms)
    return sock


def bind_router(ctx: zmq.Context, config: PSConfig, port: Any, who: str) -> tuple[zmq.Socket, str]:
    """A server's ROUTER socket bound on its advertised host (:func:`~.config.listen_host`) -- at
    ``port`` (a restarted server's old one), else ``MXTORCH_PS_PORT``, else an ephemeral port --
    and the address workers reach it at; ``who`` names the server in the error when no port can
    be had.  Frames above the server's ``MXTORCH_PS_MAX_MESSAGE_BYTES`` are dropped by ZeroMQ."""
    sock = configure_socket(ctx.socket(zmq.ROUTER))
    set_max_message_bytes(sock, config.server_max_message_bytes())
    host = config.advertised_host()
    listen = listen_host(host, config.bind_all)
    if listen == "*" and not config.bind_all:
        _logger.warning("mxtorch %s: %s names this machine but no single local address: listening on every "
                        "interface", who, host)
    wanted = int(port) if port else config.port
    deadline = time.monotonic() + min(config.timeout, 30.0)
    while True:
        try:
            try:
                where = f"[{listen}]" if ":" in listen else listen
                if wanted:
                    sock.bind(f"tcp://{where}:{wanted}")
                    bound = wanted
                else:
                    bound = sock.bind_to_random_port(f"tcp://{where}")
            except zmq.ZMQError as e:
                if e.errno != zmq.EADDRNOTAVAIL or listen == "*":
                    raise
                _logger.warning("mxtorch %s: %s is not an address of this host: listening on every interface",
                                who, host)
                listen = "*"  # an advertised address that is not a local one (NAT)
                continue
            break
        except zmq.ZMQError as e:
            if time.monotonic() > deadline:
                sock.close(0)
                raise KVStoreError(f"{who} cannot listen on {host}:{wanted or 'any port'}: "
                                   f"{e}; free the port or set MXTORCH_PS_PORT / DMLC_NODE_HOST") from e
            time.sleep(0.2)  # a restarted server's old port may still be held a moment
    warn_unauthenticated(config, who, f"{host}:{bound}")
    h = f"[{host}]" if ":" in host else host
    return sock, f"tcp://{h}:{bound}"


def new_identity(prefix: str) -> bytes:
    return f"{prefix}-{os.getpid()}-{secrets.token_hex(4)}".encode()


def join(ctx: zmq.Context, config: PSConfig, info: dict[str, Any], expect: Command,
         timeout: float | None = None) -> tuple[zmq.Socket, Message]:
    """Register with the scheduler; return the connected DEALER and the ASSIGN/LAYOUT reply.

    ``info`` is the REGISTER content (role, ids, ...).  Raises :class:`JoinError` when the
    scheduler refuses the node (its reason is quoted) or does not answer within ``timeout``
    (default: the job timeout).  A restarted server whose old process's connections are still
    open (ERROR code ``rank_alive``) asks again until they close or the time is up.
    """
    sock = configure_socket(ctx.socket(zmq.DEALER))
    sock.setsockopt(zmq.IDENTITY, new_identity(info["role"][0]))
    sock.connect(config.root_address)
    nonce = secrets.token_hex(16)
    meta = {**info, "host": socket.gethostname(), "pid": os.getpid(), "nonce": nonce}
    send(sock, Message(Command.REGISTER, meta=meta))
    wait = config.timeout if timeout is None else timeout
    deadline = time.monotonic() + wait
    challenged = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sock.poll(int(left * 1000) + 1):
                raise JoinError(
                    f"the scheduler at {config.root_address} did not let this {info['role']} join within "
                    f"{wait:g} s (MXTORCH_DIST_TIMEOUT): is the scheduler running (`mxtorch launch -s M` "
                    "starts it), do DMLC_PS_ROOT_URI/DMLC_PS_ROOT_PORT point at it, and have all "
                    "DMLC_NUM_SERVER servers and DMLC_NUM_WORKER workers been started?")
            _, msg = recv(sock)
            m = msg.meta or {}
            if msg.command == Command.ERROR:
                if m.get("code") == "rank_alive" and deadline - time.monotonic() > _RETRY_S:
                    time.sleep(_RETRY_S)
                    challenged = False
                    send(sock, Message(Command.REGISTER, meta=meta))
                    continue
                raise JoinError(f"the scheduler at {config.root_address} refused this {info['role']}: "
                                f"{m.get('message', 'no reason given')}")
            if msg.command == Command.CHALLENGE:
                if config.secret is None:
                    raise JoinError("the scheduler requires a shared secret: set MXTORCH_PS_SECRET in this "
                                    "process to the job's secret")
                if not verify(config.secret, m.get("proof"), "scheduler", nonce):
                    raise JoinError(f"the scheduler at {config.root_address} does not know this job's "
                                    "MXTORCH_PS_SECRET: refusing to join it")
                challenged = True
                answer = sign(config.secret, "node", str(m.get("nonce", "")))
                send(sock, Message(Command.REGISTER, meta={**meta, "hmac": answer}))
                continue
            if msg.command == expect:
                if config.secret is not None and not challenged:
                    raise JoinError(f"the scheduler at {config.root_address} does not use MXTORCH_PS_SECRET "
                                    "but this process does: set the same secret for every process of the job")
                return sock, msg
            # anything else (a stray heartbeat ack, ...) is not for the joining node
    except BaseException:
        sock.close(0)
        raise


class Heartbeat(threading.Thread):
    """Sends HEARTBEATs from its own socket; :meth:`scheduler_silence` says how long since an answer."""

    def __init__(self, ctx: zmq.Context, config: PSConfig, node_id: int, token: str) -> None:
        super().__init__(name="mxtorch-ps-heartbeat", daemon=True)
        self._ctx = ctx
        self._config = config
        self._node_id = node_id
        self._token = token
        self._stop_event = threading.Event()
        self._last_answer = time.monotonic()
        self._connected = True  # until the socket monitor says otherwise

    def scheduler_silence(self) -> float:
        """Seconds since the scheduler last answered a heartbeat."""
        return time.monotonic() - self._last_answer

    def scheduler_gone(self) -> bool:
        """The scheduler is dead: silent past ``MXTORCH_PS_DEAD_S`` with its connection closed (its
        process is gone), or past ``MXTORCH_PS_LOST_S`` (a cut link, a frozen host)."""
        silence = self.scheduler_silence()
        return silence > self._config.lost_s or (not self._connected and silence > self._config.dead_s)

    def describe_silence(self) -> str:
        """Why :meth:`scheduler_gone` says so, for an error message."""
        silence = self.scheduler_silence()
        if self._connected:
            return (f"has not answered heartbeats for {silence:.1f} s with its connection open "
                    f"(MXTORCH_PS_LOST_S={self._config.lost_s:g}): its host or the network is down")
        return (f"has not answered heartbeats for {silence:.1f} s and its connection closed "
                f"(MXTORCH_PS_DEAD_S={self._config.dead_s:g}): it died")

    def run(self) -> None:
        sock = configure_socket(self._ctx.socket(zmq.DEALER), linger_ms=0)
        sock.setsockopt(zmq.IDENTITY, new_identity("hb"))
        state = ConnectionState(sock)
        sock.connect(self._config.root_address)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(state.monitor, zmq.POLLIN)
        period = self._config.heartbeat_s
        try:
            while not self._stop_event.is_set():
                send(sock, Message(Command.HEARTBEAT, sender=self._node_id, key=self._token))
                end = time.monotonic() + period
                while not self._stop_event.is_set():
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    events = dict(poller.poll(int(min(left, 0.2) * 1000) + 1))
                    if state.monitor in events:
                        state.update()
                        self._connected = state.connected
                    if sock in events:
                        try:
                            recv(sock, flags=zmq.NOBLOCK)
                            self._last_answer = time.monotonic()
                            self._connected = True
                        except (zmq.Again, ProtocolError):
                            pass
        except zmq.ZMQError:
            pass  # the context is being terminated
        finally:
            state.close()
            sock.close(0)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=2.0)
