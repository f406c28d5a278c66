"""What a parameter-server process learns from its environment: :class:`PSConfig`.

Every process of a job (scheduler, servers, workers) reads the same MXNet variables, which
``mxtorch launch -n N -s M`` sets:

================================  =====================================================================
variable                          meaning
================================  =====================================================================
``DMLC_ROLE``                     ``worker``, ``server`` or ``scheduler``
``DMLC_PS_ROOT_URI``              the scheduler's host name or address
``DMLC_PS_ROOT_PORT``             the scheduler's port
``DMLC_NUM_SERVER``               number of servers (>= 1)
``DMLC_NUM_WORKER``               number of workers (>= 1)
``DMLC_WORKER_ID``                a worker's rank (else ``RANK``, else the scheduler's arrival order)
``DMLC_SERVER_ID``                a server's rank (optional; a restarted server must give its old one)
``DMLC_NODE_HOST``                the address a server advertises (wins over ``DMLC_INTERFACE``)
``DMLC_INTERFACE``                a network interface whose IPv4 address a server advertises
``MXTORCH_PS_PORT``               the port a server binds (default: a free one)
``MXTORCH_PS_SECRET``             shared secret: nodes must prove they know it to join (HMAC-SHA256)
``MXTORCH_DIST_TIMEOUT``          seconds any wait on a peer may last (default 300)
``MXTORCH_PS_HEARTBEAT_S``        seconds between heartbeats (default 1.0)
``MXTORCH_PS_DEAD_S``             silence after which a node whose connection has closed is dead (default
                                  max(5, 5 x heartbeat)): a killed process's kernel closes its sockets
``MXTORCH_PS_LOST_S``             silence after which a node is dead although its connection is still open
                                  (a cut link, a frozen host; default max(30, 6 x MXTORCH_PS_DEAD_S)): a
                                  live process starved of CPU keeps its connections and is not declared dead
``MXTORCH_PS_MAX_MESSAGE_BYTES``  the largest message frame a scheduler or server accepts; ZeroMQ drops a
                                  larger one (and its connection) before holding it.  Default: servers
                                  ``8 x max(MXNET_KVSTORE_BIGARRAY_BOUND, MXTORCH_PS_PIECE_BYTES / 2)``
                                  plus 1 MiB (the largest slice of any dtype, or its float64 optimizer
                                  state), 4 GiB with ``MXTORCH_PS_PIECE_BYTES=0`` (slices then have no
                                  bound known in advance); the scheduler 16 MiB (control messages only)
``MXTORCH_PS_BIND_ALL``           1: the scheduler and servers listen on every interface instead of only
                                  ``DMLC_PS_ROOT_URI`` / their advertised address (multi-host jobs behind
                                  NAT, where the address others use is not a local one); default 0
``MXTORCH_PS_ELASTIC``            1: an elastic job (:mod:`.membership`): workers may leave and join while it
                                  runs, a dead server is waited for until it is restarted; default 0
``MXNET_KVSTORE_BIGARRAY_BOUND``  elements above which a key is split over all servers (1000000)
``MXTORCH_PS_STALENESS``          dist_async: pushes a worker may be ahead of the slowest (unset: any)
``MXTORCH_PS_SNAPSHOT_DIR``       where servers write snapshots (unset: no snapshots)
``MXTORCH_PS_SNAPSHOT_EVERY``     completed updates between automatic snapshots: one once every key slice
                                  of the server has this many more (0: only on request)
``MXTORCH_PS_WAL``                1 (default): with a snapshot folder, servers log each update before its
                                  reply (:mod:`.wal`), so a restarted server resumes exactly where it was
                                  killed; 0: snapshots only (the updates after the last one are lost)
``MXTORCH_PS_WAL_FSYNC``          1: fsync each log record (survives a host crash too); default 0 (written
                                  to the operating system: survives a killed process)
``MXTORCH_PS_WAL_MAX_BYTES``      a log longer than this is compacted into a new snapshot (default: the larger
                                  of 256 MiB and 8 x the last snapshot's size): the log's disk use is bounded
``MXTORCH_PS_PIECE_BYTES``        a key above the bound is cut into slices of at most this many bytes
                                  (4 MiB), dealt round robin to the servers; 0: one slice per server
``MXTORCH_PS_ADOPT_PULLS``        1 (default): pulls hand their received buffer to an unshared ``out``;
                                  0: pulls always copy into ``out``
``MXTORCH_PS_SERVER_IMPORTS``     modules (comma-separated) a server imports before serving: where the
                                  custom optimizers it must build are registered
================================  =====================================================================

Without ``DMLC_NODE_HOST`` or ``DMLC_INTERFACE`` a server advertises the local address its
host uses to reach the scheduler (127.0.0.1 when the scheduler is local).

Listening: the scheduler binds ``DMLC_PS_ROOT_URI`` and a server its advertised address
(:func:`listen_host`), not every interface: a job started on 127.0.0.1 cannot be reached from
the network.  A host name is resolved first; one that names no local address (NAT), or a
machine name that resolves to a loopback address (Debian's ``127.0.1.1``), makes the process
listen on every interface, with a warning.  A job without ``MXTORCH_PS_SECRET`` (started by hand
with MXNet's variables) runs, and logs once that any process that reaches it may join.

Example::

    >>> cfg = PSConfig.from_env({"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "127.0.0.1",
    ...                          "DMLC_PS_ROOT_PORT": "9000", "DMLC_NUM_SERVER": "1",
    ...                          "DMLC_NUM_WORKER": "2", "DMLC_WORKER_ID": "1"})
    >>> cfg.role, cfg.worker_id, cfg.num_workers
    ('worker', 1, 2)
"""

from __future__ import annotations

import dataclasses
import importlib
import ipaddress
import logging
import math
import os
import re
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from ...distributed import env as _env
from ...distributed.env import DistributedConfigError
from ..base import KVStoreError

__all__ = ["PSConfig", "ROLES", "PS_LAUNCH_HINT", "DEFAULT_HEARTBEAT_S", "DEFAULT_BIGARRAY_BOUND",
           "SCHEDULER_MAX_MESSAGE_BYTES", "interface_address", "listen_host", "parse_modules",
           "import_server_modules", "warn_unauthenticated"]

_logger = logging.getLogger("mxtorch.kvstore.ps")

ROLES = ("worker", "server", "scheduler")
PS_LAUNCH_HINT = ("start the job with `mxtorch launch -n N -s M python script.py` (N workers, M servers), "
                  "which sets DMLC_ROLE, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER and "
                  "DMLC_NUM_WORKER in every process")
"""How to start a parameter-server job; quoted by configuration errors."""
DEFAULT_HEARTBEAT_S = 1.0
DEFAULT_BIGARRAY_BOUND = 1_000_000
"""MXNet's default of MXNET_KVSTORE_BIGARRAY_BOUND (elements)."""
DEFAULT_PIECE_BYTES = 4 << 20  # bytes per slice of a key above the big-array bound
SCHEDULER_MAX_MESSAGE_BYTES = 16 << 20
"""The scheduler's default frame limit: its largest message is a KEY_CHECK (~50 bytes a key)."""
_UNSLICED_MAX_MESSAGE_BYTES = 4 << 30  # MXTORCH_PS_PIECE_BYTES=0: slices have no bound known in advance
_MAX_ITEMSIZE = 8  # float64/int64 values, and an optimizer's float32 master copy of a float16 slice


def _raw(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def _bad(name: str, value: str, expected: str) -> DistributedConfigError:
    return DistributedConfigError(
        f"environment variable {name}={value!r} is not valid: expected {expected}; {PS_LAUNCH_HINT}")


def _int(environ: Mapping[str, str], name: str, lo: int, hi: int | None = None) -> int | None:
    raw = _raw(environ, name)
    if raw is None:
        return None
    expected = f"an integer >= {lo}" + (f" and <= {hi}" if hi is not None else "")
    try:
        value = int(raw)
    except ValueError:
        raise _bad(name, raw, expected) from None
    if value < lo or (hi is not None and value > hi):
        raise _bad(name, raw, expected)
    return value


def _seconds(environ: Mapping[str, str], name: str) -> float | None:
    raw = _raw(environ, name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise _bad(name, raw, "a positive number of seconds")
    return value


_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _modules(environ: Mapping[str, str], name: str) -> tuple[str, ...]:
    raw = _raw(environ, name)
    return () if raw is None else parse_modules(raw, name)


def parse_modules(raw: str, name: str) -> tuple[str, ...]:
    """The module names of a comma-separated list (variable ``name``); raises
    :class:`DistributedConfigError` for one that is not a dotted identifier."""
    names = tuple(part.strip() for part in raw.split(","))
    for n in names:
        if not _MODULE.fullmatch(n):
            raise DistributedConfigError(
                f"environment variable {name}={raw!r} is not valid: {n!r} is not a module name; expected "
                "importable module names separated by commas, such as 'mylib.optimizers,other'")
    return names


def _required(environ: Mapping[str, str], name: str, what: str) -> str:
    raw = _raw(environ, name)
    if raw is None:
        raise DistributedConfigError(
            f"environment variable {name} is not set: a parameter-server job needs {what}; {PS_LAUNCH_HINT}")
    return raw


@dataclass(frozen=True)
class PSConfig:
    """The settings of one parameter-server process (see the module docstring for the variables)."""

    role: str
    root_uri: str
    root_port: int
    num_servers: int
    num_workers: int
    worker_id: int | None = None
    server_id: int | None = None
    node_host: str | None = None
    interface: str | None = None
    port: int | None = None
    secret: bytes | None = dataclasses.field(default=None, repr=False)
    timeout: float = _env.DEFAULT_TIMEOUT_S
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    dead_s: float = 5.0
    lost_s: float = 30.0
    max_message_bytes: int | None = None
    bind_all: bool = False
    bigarray_bound: int = DEFAULT_BIGARRAY_BOUND
    staleness: int | None = None
    snapshot_dir: str | None = None
    snapshot_every: int = 0
    wal: bool = True
    wal_fsync: bool = False
    wal_max_bytes: int | None = None
    adopt_pulls: bool = True
    piece_bytes: int = DEFAULT_PIECE_BYTES
    server_imports: tuple[str, ...] = ()
    elastic: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PSConfig:
        """Read the configuration from ``environ`` (default ``os.environ``).

        Raises :class:`DistributedConfigError` naming the variable, its value and what is
        expected when a variable is missing or malformed.
        """
        env = os.environ if environ is None else environ
        role = _required(env, _env.DMLC_ROLE, "the role of this process (worker, server or scheduler)")
        if role not in ROLES:
            raise _bad(_env.DMLC_ROLE, role, "one of " + ", ".join(ROLES))
        uri = _required(env, _env.DMLC_PS_ROOT_URI, "the scheduler's address")
        if uri.startswith("tcp://"):
            uri = uri[len("tcp://"):]
        port = _int(env, _env.DMLC_PS_ROOT_PORT, 1, 65535)
        if port is None:
            _required(env, _env.DMLC_PS_ROOT_PORT, "the scheduler's port")
        num_servers = _int(env, _env.DMLC_NUM_SERVER, 1)
        if num_servers is None:
            _required(env, _env.DMLC_NUM_SERVER, "the number of servers (>= 1)")
        num_workers = _int(env, _env.DMLC_NUM_WORKER, 1)
        if num_workers is None:
            _required(env, _env.DMLC_NUM_WORKER, "the number of workers (>= 1)")
        assert port is not None and num_servers is not None and num_workers is not None
        worker_id = None
        if role == "worker":
            worker_id = _int(env, _env.DMLC_WORKER_ID, 0, num_workers - 1)
            if worker_id is None:
                rank = _int(env, _env.RANK, 0, num_workers - 1)
                worker_id = rank
        server_id = _int(env, _env.DMLC_SERVER_ID, 0, num_servers - 1) if role == "server" else None
        heartbeat = _seconds(env, _env.MXTORCH_PS_HEARTBEAT_S) or DEFAULT_HEARTBEAT_S
        dead = _seconds(env, _env.MXTORCH_PS_DEAD_S) or max(5.0, 5.0 * heartbeat)
        if dead <= heartbeat:
            raise _bad(_env.MXTORCH_PS_DEAD_S, str(env[_env.MXTORCH_PS_DEAD_S]),
                       f"more seconds than {_env.MXTORCH_PS_HEARTBEAT_S} ({heartbeat:g}); a few heartbeats")
        lost = _seconds(env, _env.MXTORCH_PS_LOST_S) or max(30.0, 6.0 * dead)
        if lost < dead:
            raise _bad(_env.MXTORCH_PS_LOST_S, str(env[_env.MXTORCH_PS_LOST_S]),
                       f"at least {_env.MXTORCH_PS_DEAD_S} ({dead:g}) seconds")
        secret = _raw(env, _env.MXTORCH_PS_SECRET)
        bound = _int(env, _env.MXNET_KVSTORE_BIGARRAY_BOUND, 1)
        every = _int(env, _env.MXTORCH_PS_SNAPSHOT_EVERY, 0)
        adopt = _int(env, _env.MXTORCH_PS_ADOPT_PULLS, 0, 1)
        wal, fsync = _int(env, _env.MXTORCH_PS_WAL, 0, 1), _int(env, _env.MXTORCH_PS_WAL_FSYNC, 0, 1)
        piece = _int(env, _env.MXTORCH_PS_PIECE_BYTES, 0)
        return cls(
            role=role, root_uri=uri, root_port=port, num_servers=num_servers, num_workers=num_workers,
            worker_id=worker_id, server_id=server_id, node_host=_raw(env, _env.DMLC_NODE_HOST),
            interface=_raw(env, _env.DMLC_INTERFACE), port=_int(env, _env.MXTORCH_PS_PORT, 1, 65535),
            secret=secret.encode("utf-8") if secret is not None else None,
            timeout=_env.default_timeout(env), heartbeat_s=heartbeat, dead_s=dead, lost_s=lost,
            max_message_bytes=_int(env, _env.MXTORCH_PS_MAX_MESSAGE_BYTES, 1024),
            bind_all=_int(env, _env.MXTORCH_PS_BIND_ALL, 0, 1) == 1,
            bigarray_bound=bound if bound is not None else DEFAULT_BIGARRAY_BOUND,
            staleness=_int(env, _env.MXTORCH_PS_STALENESS, 0),
            snapshot_dir=_raw(env, _env.MXTORCH_PS_SNAPSHOT_DIR), snapshot_every=every or 0,
            wal=wal != 0, wal_fsync=fsync == 1, wal_max_bytes=_int(env, _env.MXTORCH_PS_WAL_MAX_BYTES, 1),
            adopt_pulls=adopt != 0, piece_bytes=DEFAULT_PIECE_BYTES if piece is None else piece,
            server_imports=_modules(env, _env.MXTORCH_PS_SERVER_IMPORTS),
            elastic=_int(env, _env.MXTORCH_PS_ELASTIC, 0, 1) == 1,
        )

    @property
    def root_address(self) -> str:
        """The scheduler's ZeroMQ endpoint, ``tcp://host:port``."""
        host = f"[{self.root_uri}]" if ":" in self.root_uri else self.root_uri
        return f"tcp://{host}:{self.root_port}"

    def server_max_message_bytes(self) -> int:
        """The largest frame a server accepts (``MXTORCH_PS_MAX_MESSAGE_BYTES``, else from the slicing:
        a key of at most the big-array bound elements travels whole, a larger one in slices of at most
        ``piece_bytes``; any dtype's value or float64 state of such a slice fits)."""
        if self.max_message_bytes is not None:
            return self.max_message_bytes
        if self.piece_bytes == 0:
            return _UNSLICED_MAX_MESSAGE_BYTES
        return _MAX_ITEMSIZE * max(self.bigarray_bound, self.piece_bytes // 2) + (1 << 20)

    def scheduler_max_message_bytes(self) -> int:
        """The largest frame the scheduler accepts (``MXTORCH_PS_MAX_MESSAGE_BYTES``, else 16 MiB)."""
        if self.max_message_bytes is not None:
            return self.max_message_bytes
        return SCHEDULER_MAX_MESSAGE_BYTES

    def advertised_host(self) -> str:
        """The address a server tells the workers: DMLC_NODE_HOST, DMLC_INTERFACE's, or the route's."""
        if self.node_host:
            return self.node_host
        if self.interface:
            return interface_address(self.interface)
        return _route_address(self.root_uri, self.root_port)


def listen_host(host: str, bind_all: bool = False) -> str:
    """The address to bind for ``host`` (the scheduler's DMLC_PS_ROOT_URI, a server's advertised
    address): an IP literal as it is, a host name resolved to its IPv4 address; ``'*'`` (every
    interface) with ``bind_all``, for a name that does not resolve, or for a machine name that
    resolves to a loopback address (other hosts reach it at another one)."""
    if bind_all:
        return "*"
    name = host.strip("[]")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    try:
        address = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (socket.gaierror, IndexError, UnicodeError):
        return "*"
    if ipaddress.ip_address(address).is_loopback and name != "localhost":
        return "*"
    return str(address)


_warned_unauthenticated = False


def warn_unauthenticated(config: PSConfig, who: str, address: str) -> None:
    """Log once per process that the job has no ``MXTORCH_PS_SECRET``: whoever reaches ``address`` joins."""
    global _warned_unauthenticated
    if config.secret is not None or _warned_unauthenticated:
        return
    _warned_unauthenticated = True
    _logger.warning(
        "mxtorch ps %s: this job has no %s: any process that reaches %s may join it as a node; start jobs "
        "with `mxtorch launch` (which sets a secret) or set the same secret in every process",
        who, _env.MXTORCH_PS_SECRET, address)


def _route_address(host: str, port: int) -> str:
    # The local address of the interface that reaches the scheduler (no packet is sent).
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except socket.gaierror as e:
        raise DistributedConfigError(
            f"cannot resolve the scheduler's address {_env.DMLC_PS_ROOT_URI}={host!r}: {e}; "
            f"set it to a host name or IPv4 address every node can reach") from e
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(infos[0][4])
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def interface_address(name: str) -> str:
    """The IPv4 address of network interface ``name`` (``SIOCGIFADDR`` ioctl, else ``ip -4 addr``)."""
    try:
        import fcntl
        import struct

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))  # SIOCGIFADDR
        return socket.inet_ntoa(packed[20:24])
    except (ImportError, OSError):
        pass
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", name], capture_output=True, text=True,
                             timeout=5).stdout
        m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)", out)
        if m:
            return m.group(1)
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        known = ", ".join(n for _, n in socket.if_nameindex())
    except OSError:
        known = "unknown"
    raise DistributedConfigError(
        f"environment variable {_env.DMLC_INTERFACE}={name!r}: this host has no interface of that name with "
        f"an IPv4 address (interfaces: {known}); set it to one of them, or set {_env.DMLC_NODE_HOST} to the "
        f"address to advertise")


def import_server_modules(names: tuple[str, ...]) -> None:
    """Import the modules of ``MXTORCH_PS_SERVER_IMPORTS`` (their ``@register`` calls add custom
    optimizers to this process); raise :class:`KVStoreError` naming a module that fails."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as e:  # any failure of the user's module: say which one and why
            raise KVStoreError(
                f"cannot import module {name!r} named in {_env.MXTORCH_PS_SERVER_IMPORTS}: "
                f"{type(e).__name__}: {e}; it must be importable on every server host (installed, or on "
                "PYTHONPATH)") from e
