"""Every environment variable mxtorch reads, and the job layout they describe.

A distributed job is described by environment variables that its launcher sets in each
process.  :func:`world_info_from_env` understands the common launchers, in this order of
precedence (the first one whose rank variable is set wins):

=============  ======================================================================
launcher       variables (rank, size, local rank, local size, node rank, nodes)
=============  ======================================================================
torchrun       ``RANK`` ``WORLD_SIZE`` ``LOCAL_RANK`` ``LOCAL_WORLD_SIZE`` ``GROUP_RANK``
               ``GROUP_WORLD_SIZE`` (also what ``mxtorch launch`` sets)
Horovod        ``HOROVOD_RANK`` ``HOROVOD_SIZE`` ``HOROVOD_LOCAL_RANK`` ``HOROVOD_LOCAL_SIZE``
               ``HOROVOD_CROSS_RANK`` ``HOROVOD_CROSS_SIZE`` (horovodrun's gloo launcher)
Open MPI       ``OMPI_COMM_WORLD_RANK`` ``OMPI_COMM_WORLD_SIZE`` ``OMPI_COMM_WORLD_LOCAL_RANK``
               ``OMPI_COMM_WORLD_LOCAL_SIZE``
MPICH / PMI    ``PMI_RANK`` ``PMI_SIZE`` (``MPI_LOCALRANKID`` ``MPI_LOCALNRANKS`` if set)
Slurm          ``SLURM_PROCID`` ``SLURM_NTASKS`` ``SLURM_LOCALID`` ``SLURM_NODEID`` ``SLURM_NNODES``
MXNet (DMLC)   ``DMLC_ROLE=worker`` with ``DMLC_WORKER_ID`` ``DMLC_NUM_WORKER``
=============  ======================================================================

The rendezvous address is ``MASTER_ADDR``/``MASTER_PORT`` for every launcher (``DMLC_PS_ROOT_URI``
stands in for ``MASTER_ADDR`` in a DMLC job).  A single-host job may omit ``MASTER_ADDR``
(127.0.0.1 is used); a single-process job may omit both.

Example::

    >>> info = world_info_from_env({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1",
    ...                             "MASTER_PORT": "29500"})
    >>> info.rank, info.world_size, info.local_rank
    (1, 2, 1)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..base import MXNetError

__all__ = [
    "DistributedError", "DistributedConfigError", "LaunchError", "WorldInfo", "world_info_from_env",
    "default_timeout", "default_backend_override",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES",
    "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE", "MXTORCH_GPUS_PER_WORKER",
    "DMLC_ROLE", "DMLC_WORKER_ID", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER", "DMLC_PS_ROOT_URI",
    "DMLC_PS_ROOT_PORT", "MXTORCH_DIST_TIMEOUT", "MXTORCH_DIST_BACKEND", "GLOO_SOCKET_IFNAME",
    "DEFAULT_TIMEOUT_S", "LAUNCH_HINT",
    "DMLC_SERVER_ID", "DMLC_NODE_HOST", "DMLC_INTERFACE", "MXNET_KVSTORE_BIGARRAY_BOUND", "MXTORCH_PS_SECRET",
    "MXTORCH_PS_PORT", "MXTORCH_PS_HEARTBEAT_S", "MXTORCH_PS_DEAD_S", "MXTORCH_PS_STALENESS",
    "MXTORCH_PS_SNAPSHOT_DIR", "MXTORCH_PS_SNAPSHOT_EVERY", "MXTORCH_PS_WAL", "MXTORCH_PS_WAL_FSYNC",
    "MXTORCH_PS_WAL_MAX_BYTES",
    "MXTORCH_PS_ADOPT_PULLS",
    "MXTORCH_PS_PIECE_BYTES", "MXTORCH_PS_SERVER_IMPORTS", "MXTORCH_PS_LOST_S",
    "MXTORCH_PS_MAX_MESSAGE_BYTES", "MXTORCH_PS_BIND_ALL", "MXTORCH_NUMPY_SETITEM", "MXTORCH_MXNET_METHODS",
    "MXTORCH_PS_ELASTIC",
    "MXTORCH_NUMPY_DTYPES",
    "MXNET_ELIMINATE_COMMON_EXPR", "MXTORCH_DEBUG", "MXTORCH_PROFILE_DIR",
]

# ---- torchrun / torch.distributed (env:// rendezvous); ``mxtorch launch`` sets these too ----
RANK = "RANK"
"""Global rank of this process, 0 .. WORLD_SIZE-1."""
WORLD_SIZE = "WORLD_SIZE"
"""Number of processes in the job."""
LOCAL_RANK = "LOCAL_RANK"
"""Rank of this process among the processes of its host (selects the GPU)."""
LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"
"""Number of processes on this host."""
GROUP_RANK = "GROUP_RANK"
"""torchrun: index of this host (node) in the job."""
GROUP_WORLD_SIZE = "GROUP_WORLD_SIZE"
"""torchrun: number of hosts (nodes) in the job."""
MASTER_ADDR = "MASTER_ADDR"
"""Host name or address of rank 0, where the rendezvous store listens."""
MASTER_PORT = "MASTER_PORT"
"""TCP port of the rendezvous store on MASTER_ADDR (1..65535)."""
TORCHELASTIC_USE_AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"
"""torchrun: 'True' when the launcher, not rank 0, hosts the rendezvous store (torch reads it)."""
TORCHELASTIC_RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"
"""torchrun: how many times the workers were restarted (0 on the first attempt)."""

# ---- Open MPI (mpirun) ----
OMPI_COMM_WORLD_RANK = "OMPI_COMM_WORLD_RANK"
"""Open MPI: global rank."""
OMPI_COMM_WORLD_SIZE = "OMPI_COMM_WORLD_SIZE"
"""Open MPI: number of processes."""
OMPI_COMM_WORLD_LOCAL_RANK = "OMPI_COMM_WORLD_LOCAL_RANK"
"""Open MPI: rank on this host."""
OMPI_COMM_WORLD_LOCAL_SIZE = "OMPI_COMM_WORLD_LOCAL_SIZE"
"""Open MPI: processes on this host."""

# ---- MPICH, Intel MPI and other PMI launchers ----
PMI_RANK = "PMI_RANK"
"""PMI: global rank."""
PMI_SIZE = "PMI_SIZE"
"""PMI: number of processes."""
MPI_LOCALRANKID = "MPI_LOCALRANKID"
"""MPICH (hydra): rank on this host."""
MPI_LOCALNRANKS = "MPI_LOCALNRANKS"
"""MPICH (hydra): processes on this host."""

# ---- Slurm (srun) ----
SLURM_PROCID = "SLURM_PROCID"
"""Slurm: global task rank."""
SLURM_NTASKS = "SLURM_NTASKS"
"""Slurm: number of tasks."""
SLURM_LOCALID = "SLURM_LOCALID"
"""Slurm: task rank on this node."""
SLURM_NODEID = "SLURM_NODEID"
"""Slurm: index of this node in the allocation."""
SLURM_NNODES = "SLURM_NNODES"
"""Slurm: number of nodes."""

HOROVOD_RANK = "HOROVOD_RANK"
"""horovodrun (gloo): global rank."""
HOROVOD_SIZE = "HOROVOD_SIZE"
"""horovodrun (gloo): number of processes."""
HOROVOD_LOCAL_RANK = "HOROVOD_LOCAL_RANK"
"""horovodrun (gloo): rank among the processes of this host."""
HOROVOD_LOCAL_SIZE = "HOROVOD_LOCAL_SIZE"
"""horovodrun (gloo): processes on this host."""
HOROVOD_CROSS_RANK = "HOROVOD_CROSS_RANK"
"""horovodrun (gloo): index of this host."""
HOROVOD_CROSS_SIZE = "HOROVOD_CROSS_SIZE"
"""horovodrun (gloo): number of hosts."""

MXTORCH_GPUS_PER_WORKER = "MXTORCH_GPUS_PER_WORKER"
"""GPUs each worker of a launched job owns (``mxtorch launch --gpus-per-worker``; default 1 where
there are GPUs): see :mod:`mxtorch.distributed.devices`."""

# ---- MXNet / ps-lite (parameter-server jobs; set by ``mxtorch launch``) ----
DMLC_ROLE = "DMLC_ROLE"
"""'worker', 'server' or 'scheduler': the role of this process in a parameter-server job."""
DMLC_WORKER_ID = "DMLC_WORKER_ID"
"""Rank of this worker among DMLC_NUM_WORKER workers."""
DMLC_NUM_WORKER = "DMLC_NUM_WORKER"
"""Number of worker processes."""
DMLC_NUM_SERVER = "DMLC_NUM_SERVER"
"""Number of parameter-server processes."""
DMLC_PS_ROOT_URI = "DMLC_PS_ROOT_URI"
"""Address of the scheduler (used as MASTER_ADDR when that is not set)."""
DMLC_PS_ROOT_PORT = "DMLC_PS_ROOT_PORT"
"""Port of the scheduler (the parameter server's own; collectives need MASTER_PORT)."""
DMLC_SERVER_ID = "DMLC_SERVER_ID"
"""Rank of a server among DMLC_NUM_SERVER servers (optional; a restarted server must set it)."""
DMLC_NODE_HOST = "DMLC_NODE_HOST"
"""Address a server advertises to the workers (wins over DMLC_INTERFACE)."""
DMLC_INTERFACE = "DMLC_INTERFACE"
"""Network interface (e.g. eth0) whose IPv4 address a server advertises."""
MXNET_KVSTORE_BIGARRAY_BOUND = "MXNET_KVSTORE_BIGARRAY_BOUND"
"""Elements above which a parameter-server key is split across all servers (default 1000000)."""
MXNET_ELIMINATE_COMMON_EXPR = "MXNET_ELIMINATE_COMMON_EXPR"
"""1 (default) or 0: whether a bound executor's optimized graph (``get_optimized_symbol``) merges
operator nodes that repeat the same deterministic computation on the same inputs (MXNet's)."""

# ---- mxtorch's own ----
MXTORCH_DIST_TIMEOUT = "MXTORCH_DIST_TIMEOUT"
"""Seconds any wait on a peer may last (rendezvous, collectives, barriers) before it fails.
Default :data:`DEFAULT_TIMEOUT_S`."""
MXTORCH_DIST_BACKEND = "MXTORCH_DIST_BACKEND"
"""Force the torch.distributed backend ('gloo', 'nccl', 'cpu:gloo,cuda:nccl', ...)."""
MXTORCH_PS_SECRET = "MXTORCH_PS_SECRET"
"""Shared secret of a parameter-server job: nodes prove they know it (HMAC-SHA256) to join."""
MXTORCH_PS_PORT = "MXTORCH_PS_PORT"
"""Port a parameter server binds (default: any free port; a restarted server reuses its old one)."""
MXTORCH_PS_HEARTBEAT_S = "MXTORCH_PS_HEARTBEAT_S"
"""Seconds between a parameter-server node's heartbeats to the scheduler (default 1.0)."""
MXTORCH_PS_DEAD_S = "MXTORCH_PS_DEAD_S"
"""A parameter-server node silent this many seconds whose connection has closed (its process is
gone) is declared dead (default max(5, 5 x heartbeat))."""
MXTORCH_PS_LOST_S = "MXTORCH_PS_LOST_S"
"""A parameter-server node silent this many seconds is declared dead even though its connection
is still open (a cut link, a frozen host); default max(30, 6 x MXTORCH_PS_DEAD_S)."""
MXTORCH_PROFILE_DIR = "MXTORCH_PROFILE_DIR"
"""Where a parameter server writes the profile a worker asks for (``mx.profiler.dump(profile_process=
'server')``): the folder, default the server's working directory; the worker names only the file."""
MXTORCH_PS_MAX_MESSAGE_BYTES = "MXTORCH_PS_MAX_MESSAGE_BYTES"
"""The largest message frame a parameter-server scheduler or server accepts; a larger one is
dropped by ZeroMQ (with its connection) before it is held (default: from the key slicing)."""
MXTORCH_PS_BIND_ALL = "MXTORCH_PS_BIND_ALL"
"""1: parameter-server schedulers and servers listen on every interface, not only the address
they were given (DMLC_PS_ROOT_URI, DMLC_NODE_HOST); default 0."""
MXTORCH_PS_ELASTIC = "MXTORCH_PS_ELASTIC"
"""1: an elastic parameter-server job (workers may leave and join, a dead server waits to be
restarted); set by ``mxtorch launch --elastic MIN:MAX -s K``; default 0."""
MXTORCH_PS_STALENESS = "MXTORCH_PS_STALENESS"
"""dist_async: the most updates a worker may run ahead of the slowest (unset: unbounded)."""
MXTORCH_PS_SNAPSHOT_DIR = "MXTORCH_PS_SNAPSHOT_DIR"
"""Folder where parameter servers write snapshots of their values and optimizer states."""
MXTORCH_PS_SNAPSHOT_EVERY = "MXTORCH_PS_SNAPSHOT_EVERY"
"""Updates between automatic server snapshots (default 0: only when a worker asks)."""
MXTORCH_PS_WAL = "MXTORCH_PS_WAL"
"""1 (default): a parameter server with MXTORCH_PS_SNAPSHOT_DIR logs every update before its reply
(a write-ahead log beside the snapshot), so a restarted server resumes exactly; 0: snapshots only."""
MXTORCH_PS_WAL_FSYNC = "MXTORCH_PS_WAL_FSYNC"
"""1: fsync every write-ahead log record (survives a host crash, not only a killed process); default 0."""
MXTORCH_PS_WAL_MAX_BYTES = "MXTORCH_PS_WAL_MAX_BYTES"
"""A parameter server's write-ahead log longer than this many bytes is compacted into a new
snapshot (default: the larger of 256 MiB and 8 x the last snapshot's size)."""
MXTORCH_PS_PIECE_BYTES = "MXTORCH_PS_PIECE_BYTES"
"""A key above MXNET_KVSTORE_BIGARRAY_BOUND is cut into slices of at most this many bytes
(default 4 MiB), dealt round robin to the servers; 0: one slice per server, as MXNet."""
MXTORCH_PS_SERVER_IMPORTS = "MXTORCH_PS_SERVER_IMPORTS"
"""Comma-separated modules a parameter server imports before it serves: where custom optimizers
(``@mxtorch.optimizer.register``) it must run are defined."""
MXTORCH_TENSOR_METHODS = "MXTORCH_TENSOR_METHODS"
"""1 (default): ``import mxtorch`` adds MXNet's NDArray methods torch.Tensor lacks (``asnumpy``,
``asscalar``, ``context`` ...; see mxtorch.ndarray_methods); 0: torch.Tensor is left untouched."""
MXTORCH_NUMPY_SETITEM = "MXTORCH_NUMPY_SETITEM"
"""1: ``x[k] = v`` takes numpy arrays, numpy scalars and lists as MXNet's NDArray did (set before
``import mxtorch``; :func:`mxtorch.ndarray_methods.set_numpy_assignment` at run time); 0 (default):
torch's own assignment, which plain torch code keeps paying nothing extra for."""
MXTORCH_MXNET_METHODS = "MXTORCH_MXNET_METHODS"
"""1: MXNet method mode, MXNet's meaning for the NDArray methods torch.Tensor also has (``x.size`` the
element count, reshape codes, ``exclude=``, ``bool(x)``, ``int / int`` ...; see mxtorch._mxnet_methods)
and MXNet's assignment rule (set before ``import mxtorch``;
:func:`mxtorch.ndarray_methods.set_mxnet_methods` at run time); 0 (default): torch's own methods, which
plain torch code keeps paying nothing extra for."""
MXTORCH_NUMPY_DTYPES = "MXTORCH_NUMPY_DTYPES"
"""1: torch dtypes equal numpy's types (``x.dtype == np.float32``) and numpy reads them
(``np.ones(3, dtype=x.dtype)``), MXNet's ``x.dtype`` rules (set before ``import mxtorch``;
:func:`mxtorch.numpy_dtypes.set_numpy_dtypes` at run time); 0 (default): torch's own dtypes, whose
comparisons plain torch code keeps paying nothing extra for."""
MXTORCH_DEBUG = "MXTORCH_DEBUG"
"""1: the ``mxtorch`` command prints the traceback of a user error too (as ``--debug`` does); unset
or 0: one line ``mxtorch <command>: error: ...``."""
MXTORCH_TRAIN_HOOKS = "MXTORCH_TRAIN_HOOKS"
"""Comma-separated modules whose ``train_hooks(run)`` adds hooks (:class:`mxtorch.cli.train_hooks.TrainHook`)
to the training loop of ``mxtorch train`` (e.g. a logger, or the kill hooks of mxtorch's own tests)."""
MXTORCH_PS_ADOPT_PULLS = "MXTORCH_PS_ADOPT_PULLS"
"""1 (default): a pulled buffer becomes the storage of an ``out`` nothing else shares instead of
being copied into it; 0: always copy."""

# ---- read by gloo itself, documented here for completeness ----
GLOO_SOCKET_IFNAME = "GLOO_SOCKET_IFNAME"
"""gloo: network interface to use (needed inside network namespaces)."""

DEFAULT_TIMEOUT_S = 300.0
"""Default of MXTORCH_DIST_TIMEOUT, in seconds."""

LAUNCH_HINT = ("start the job with `mxtorch launch -n N python script.py` (or `torchrun --nproc-per-node N "
               "script.py`), or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in every process")
"""How to start a distributed job; quoted by configuration errors."""


class DistributedError(MXNetError):
    """A distributed operation failed: a peer died, a wait timed out, the group is not usable."""


class DistributedConfigError(DistributedError):
    """The environment does not describe a usable distributed job (missing or malformed variables)."""


class LaunchError(MXNetError):
    """A job cannot be launched as asked: bad option, bad hostfile, missing tool, ...

    Raised by the launcher (``mxtorch.launcher.LaunchError`` is this class) and by what it shares
    with the processes it starts (an elastic job's settings): defined here, below both."""


@dataclass(frozen=True)
class WorldInfo:
    """Where this process sits in the job.

    ``cross_rank``/``cross_size`` index the hosts (nodes): processes with the same
    ``cross_rank`` share a host.  ``master_port`` is None only for a single-process job,
    which needs no rendezvous.  ``launcher`` names where the values came from.
    """

    rank: int
    world_size: int
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int
    master_addr: str
    master_port: int | None
    launcher: str = "torchrun"


def _get(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


_N = TypeVar("_N", int, float)


def _converted(environ: Mapping[str, str], name: str,
               convert: Callable[[str], _N]) -> tuple[str | None, _N | None]:
    """``(raw, value)``: ``(None, None)`` when unset, ``value`` None when ``raw`` does not convert."""
    raw = _get(environ, name)
    if raw is None:
        return None, None
    try:
        return raw, convert(raw)
    except ValueError:
        return raw, None


def _int(environ: Mapping[str, str], name: str, minimum: int = 0) -> int | None:
    raw, value = _converted(environ, name, int)
    if raw is None:
        return None
    if value is None:
        raise DistributedConfigError(
            f"environment variable {name}={environ[name]!r} is not an integer: set it to a whole number "
            f"(>= {minimum}), or unset it; {LAUNCH_HINT}"
        )
    if value < minimum:
        raise DistributedConfigError(
            f"environment variable {name}={value} must be >= {minimum}; {LAUNCH_HINT}"
        )
    return value


# (launcher, rank, size, local rank, local size, node rank, node count)
_LAUNCHERS: tuple[tuple[str, str, str, str, str, str | None, str | None], ...] = (
    ("torchrun", RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE),
    ("horovodrun", HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE, HOROVOD_CROSS_RANK,
     HOROVOD_CROSS_SIZE),
    ("openmpi", OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
     OMPI_COMM_WORLD_LOCAL_SIZE, None, None),
    ("pmi", PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS, None, None),
    ("slurm", SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, "", SLURM_NODEID, SLURM_NNODES),
)


def world_info_from_env(environ: Mapping[str, str] | None = None) -> WorldInfo | None:
    """Read the job layout from ``environ`` (default ``os.environ``); None when not launched.

    Raises :class:`DistributedConfigError`, quoting the variable and its value, when the
    variables are half set (a rank without a size), not integers, or inconsistent
    (rank >= size, a port outside 1..65535, no rendezvous address for a multi-host job).
    """
    env = os.environ if environ is None else environ
    for launcher, rank_v, size_v, lrank_v, lsize_v, node_v, nodes_v in _LAUNCHERS:
        has_rank, has_size = _get(env, rank_v) is not None, _get(env, size_v) is not None
        if not (has_rank or has_size):
            continue
        if not (has_rank and has_size):
            present, missing = (rank_v, size_v) if has_rank else (size_v, rank_v)
            raise DistributedConfigError(
                f"environment variable {present}={env[present]!r} is set but {missing} is not: a "
                f"{launcher} job needs both; set {missing}, or unset {present} to run in one process; "
                f"{LAUNCH_HINT}"
            )
        return _layout(env, launcher, rank_v, size_v, lrank_v, lsize_v, node_v, nodes_v)
    role = _get(env, DMLC_ROLE)
    if role is not None:
        return _dmlc_layout(env, role)
    return None


def _layout(env: Mapping[str, str], launcher: str, rank_v: str, size_v: str, lrank_v: str, lsize_v: str,
            node_v: str | None, nodes_v: str | None) -> WorldInfo:
    rank, size = _int(env, rank_v), _int(env, size_v, minimum=1)
    assert rank is not None and size is not None  # both checked present by the caller
    _check_below(rank_v, rank, size_v, size)
    local_rank = _int(env, lrank_v) if lrank_v else None
    local_size = _int(env, lsize_v, minimum=1) if lsize_v else None
    node = _int(env, node_v) if node_v else None
    nodes = _int(env, nodes_v, minimum=1) if nodes_v else None
    if local_size is None:
        # Without a per-host count: one host, or ranks spread evenly over the known nodes.
        local_size = -(-size // nodes) if nodes else size
    if local_rank is None:
        local_rank = rank % local_size  # ranks packed host by host, as launchers place them by default
    _check_below(lrank_v, local_rank, lsize_v or "the number of processes per host", local_size)
    if local_size > size:
        raise DistributedConfigError(
            f"environment variable {lsize_v}={local_size} is larger than {size_v}={size}: the processes "
            f"of one host cannot outnumber the job; {LAUNCH_HINT}"
        )
    if nodes is None:
        nodes = -(-size // local_size)
    if node is None:
        node = rank // local_size
    if node >= nodes:
        raise DistributedConfigError(
            f"node index {node} (from {node_v or rank_v}) is not below the node count {nodes} "
            f"(from {nodes_v or size_v}); {LAUNCH_HINT}"
        )
    addr, port = _master(env, size, nodes, launcher)
    return WorldInfo(rank, size, local_rank, local_size, node, nodes, addr, port, launcher)


def _dmlc_layout(env: Mapping[str, str], role: str) -> WorldInfo | None:
    if role != "worker":
        return None  # servers and the scheduler take no part in collectives
    size = _int(env, DMLC_NUM_WORKER, minimum=1)
    rank = _int(env, DMLC_WORKER_ID)
    if size is None or rank is None:
        missing = DMLC_NUM_WORKER if size is None else DMLC_WORKER_ID
        raise DistributedConfigError(
            f"{DMLC_ROLE}=worker is set but {missing} is not: collectives need every worker's rank and "
            f"the worker count; set {missing}, or {LAUNCH_HINT}"
        )
    _check_below(DMLC_WORKER_ID, rank, DMLC_NUM_WORKER, size)
    addr, port = _master(env, size, 1, "dmlc")
    return WorldInfo(rank, size, rank, size, 0, 1, addr, port, "dmlc")


def _check_below(name: str, value: int, limit_name: str, limit: int) -> None:
    if value >= limit:
        raise DistributedConfigError(
            f"environment variable {name}={value} is not below {limit_name}={limit}: ranks count from 0 to "
            f"{limit - 1}; {LAUNCH_HINT}"
        )


def _master(env: Mapping[str, str], size: int, nodes: int, launcher: str) -> tuple[str, int | None]:
    addr = _get(env, MASTER_ADDR) or (_get(env, DMLC_PS_ROOT_URI) if launcher == "dmlc" else None)
    port = _int(env, MASTER_PORT, minimum=1)
    if port is not None and port > 65535:
        raise DistributedConfigError(
            f"environment variable {MASTER_PORT}={port} is not a TCP port: use a free port in 1..65535 "
            f"on rank 0's host"
        )
    if size == 1:
        return addr or "127.0.0.1", port
    if port is None:
        raise DistributedConfigError(
            f"a {size}-process {launcher} job needs {MASTER_PORT}: set it (and {MASTER_ADDR}) to a free "
            f"port on rank 0's host in every process; {LAUNCH_HINT}"
        )
    if addr is None:
        if nodes > 1:
            raise DistributedConfigError(
                f"a {nodes}-host {launcher} job needs {MASTER_ADDR}: set it to rank 0's host name or "
                f"address in every process; {LAUNCH_HINT}"
            )
        addr = "127.0.0.1"
    return addr, port


def default_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds a wait on a peer may last: ``MXTORCH_DIST_TIMEOUT``, default 300."""
    env = os.environ if environ is None else environ
    raw, value = _converted(env, MXTORCH_DIST_TIMEOUT, float)
    if raw is None:
        return DEFAULT_TIMEOUT_S
    if value is None or not value > 0 or value == float("inf"):
        raise DistributedConfigError(
            f"environment variable {MXTORCH_DIST_TIMEOUT}={env[MXTORCH_DIST_TIMEOUT]!r} is not a positive "
            f"number of seconds: set it to e.g. 300, or unset it for the default ({DEFAULT_TIMEOUT_S:g} s)"
        )
    return value


def default_backend_override(environ: Mapping[str, str] | None = None) -> str | None:
    """The backend forced by ``MXTORCH_DIST_BACKEND``, or None to choose automatically."""
    env = os.environ if environ is None else environ
    return _get(env, MXTORCH_DIST_BACKEND)
