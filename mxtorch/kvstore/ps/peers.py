"""What a listening process knows about the peers on its ROUTER socket.

* :class:`ClosedConnections`: which peers' TCP connections have closed.  A killed process's
  kernel closes its sockets at once, while a live process starved of CPU (or stopped) keeps
  them open: a closed connection is what turns a silent node into a dead one (see
  :mod:`.scheduler`).  A ZeroMQ socket monitor reports each closed connection by file
  descriptor; :meth:`ClosedConnections.note` learns which peer identity a descriptor carries
  from the messages received on it (``ZMQ_SRCFD``).
* :class:`Refusals`: the log of refused messages, one line per peer address at most every few
  seconds (a flood of junk must not become a flood of log lines), naming the address ZeroMQ
  saw (``Peer-Address``), never a name the peer claims.
* :class:`ExpiringTable`: a bounded table of what unauthenticated peers left behind (a
  pending challenge), whose entries expire.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any, Generic, TypeVar

import zmq
from zmq.utils.monitor import recv_monitor_message

__all__ = ["ClosedConnections", "ConnectionState", "Refusals", "ExpiringTable", "peer_address",
           "set_max_message_bytes"]

_SRCFD = int(zmq.SRCFD)
_V = TypeVar("_V")


def peer_address(frame: Any) -> str:
    """The remote address ZeroMQ saw for the connection ``frame`` arrived on ('unknown' if none)."""
    try:
        return str(frame.get("Peer-Address"))
    except (zmq.ZMQError, AttributeError, TypeError):
        return "unknown"


def set_max_message_bytes(sock: zmq.Socket, limit: int) -> None:
    """Make ZeroMQ drop a frame above ``limit`` bytes (and its connection) before holding it."""
    sock.setsockopt(zmq.MAXMSGSIZE, int(limit))


class ClosedConnections:
    """The peers of a ROUTER socket whose connections closed (see the module docstring).

    Call :meth:`closed` after taking in the socket's messages: a message sent just before its
    connection closed is then always seen before the close, so a message read after it comes
    from a new connection of that identity.
    """

    def __init__(self, sock: zmq.Socket) -> None:
        self.monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self._sock = sock
        self._by_fd: dict[int, bytes] = {}  # one entry per open connection: bounded by the open files

    def note(self, frame: Any, identity: bytes) -> None:
        """``identity`` sent ``frame``: remember which connection carries it."""
        try:
            self._by_fd[int(frame.get(_SRCFD))] = identity
        except (zmq.ZMQError, TypeError, ValueError):
            pass

    def closed(self) -> list[bytes]:
        """The identities whose connections closed since the last call."""
        out: list[bytes] = []
        while True:
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return out
            except (zmq.ZMQError, ValueError, KeyError):
                continue  # a malformed event: ours, not a peer's
            identity = self._by_fd.pop(int(event.get("value", -1)), None)
            if identity is not None:
                out.append(identity)

    def close(self) -> None:
        try:
            self._sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self.monitor.close(0)


class ConnectionState:
    """Whether a connecting socket (a DEALER) has an open connection, from its monitor's events."""

    def __init__(self, sock: zmq.Socket) -> None:
        self.monitor = sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        self._sock = sock
        self.connected = False

    def update(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            except (zmq.ZMQError, ValueError, KeyError):
                continue
            self.connected = event.get("event") == zmq.EVENT_CONNECTED

    def close(self) -> None:
        try:
            self._sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self.monitor.close(0)


class Refusals:
    """Logs refused messages, at most one line per peer address every ``every_s`` seconds."""

    def __init__(self, logger: logging.Logger, who: str, every_s: float = 10.0,
                 max_peers: int = 1024) -> None:
        self._logger = logger
        self._who = who
        self._every_s = every_s
        self._max_peers = max_peers
        self._peers: OrderedDict[str, list[float]] = OrderedDict()  # address -> [last logged, refused since]
        self.count = 0

    def refuse(self, frame: Any, what: str, exc: BaseException | None = None) -> None:
        """Record that a message from ``frame``'s connection was refused because of ``what``."""
        self.count += 1
        address = peer_address(frame)
        now = time.monotonic()
        entry = self._peers.get(address)
        if exc is not None:
            self._logger.debug("%s refused a message from %s", self._who, address, exc_info=exc)
        if entry is not None and now - entry[0] < self._every_s:
            entry[1] += 1
            return
        more = f" (and {int(entry[1])} more since the last report)" if entry is not None and entry[1] else ""
        self._peers[address] = [now, 0]
        self._peers.move_to_end(address)
        while len(self._peers) > self._max_peers:
            self._peers.popitem(last=False)
        text = "".join(c if c.isprintable() else "?" for c in what[:300])  # no forged log lines
        self._logger.warning("%s: refused a message from %s: %s%s", self._who, address, text, more)


class ExpiringTable(Generic[_V]):
    """A dict whose entries expire after ``ttl_s`` seconds and which holds at most ``size`` of them
    (the oldest go first): for what unauthenticated peers leave behind."""

    def __init__(self, ttl_s: float, size: int) -> None:
        self._ttl_s = ttl_s
        self._size = size
        self._items: OrderedDict[bytes, tuple[float, _V]] = OrderedDict()

    def __len__(self) -> int:
        self._expire()
        return len(self._items)

    def put(self, key: bytes, value: _V) -> None:
        self._items.pop(key, None)
        self._items[key] = (time.monotonic(), value)
        self._expire()

    def get(self, key: bytes) -> _V | None:
        self._expire()
        item = self._items.get(key)
        return None if item is None else item[1]

    def pop(self, key: bytes) -> _V | None:
        item = self._items.pop(key, None)
        return None if item is None else item[1]

    def _expire(self) -> None:
        limit = time.monotonic() - self._ttl_s
        while self._items:
            key, (born, _) = next(iter(self._items.items()))
            if born >= limit and len(self._items) <= self._size:
                return
            del self._items[key]
