"""The process group every distributed mxtorch component shares: join it, wait on it, leave it.

:func:`init` joins the job described by the environment (see :mod:`mxtorch.distributed.env`)
and registers :func:`shutdown` to run at interpreter exit, so a script needs no clean-up
code.  Creating a distributed KVStore calls :func:`init` for you.

Why the clean exit matters: on torch 2.13, gloo's worker threads free finished work items
(and the tensors they hold) on their own.  If that happens while Python is finalizing,
the thread cannot take the interpreter lock, is unwound by ``pthread_exit`` inside a
``noexcept`` destructor, and the process aborts with "terminate called without an active
exception".  :func:`shutdown` therefore waits for every rank (a barrier), then destroys the
process group *before* finalization, which joins those threads.  This only works if nothing
else keeps the process group alive (a ``DistributedDataParallel`` module does: delete it
first); mxtorch's own objects never hold it.

Why a failing rank must not wait: its peers may be blocked in a collective that it will never
join, while it blocks in the exit barrier waiting for them -- both until the timeout
(``MXTORCH_DIST_TIMEOUT``, 300 s).  A rank ending in failure (an uncaught exception, or
``sys.exit`` with a non-zero status: :mod:`.exit_status`) skips the barrier, writes why it
leaves to the job's store (the side channel every rank can read), and destroys its process
group, which closes its connections: a peer blocked in a gloo collective fails at once
("Connection closed by peer"), and :func:`explain` turns that into an error naming the rank
that left and why -- from the store, or, for a rank that was killed and could say nothing,
from its process being gone (ranks on the same host).  A launcher (``mxtorch launch``,
torchrun) then stops what is left of the job.

Example::

    import mxtorch.distributed as mxdist
    info = mxdist.init()          # rank, world_size, local_rank, ... from the launcher
    mxdist.barrier()
    # ... mxdist.shutdown() runs at exit
"""

from __future__ import annotations

import atexit
import datetime
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import torch
import torch.distributed as dist

from . import exit_status
from .env import (
    LAUNCH_HINT,
    TORCHELASTIC_RESTART_COUNT,
    TORCHELASTIC_USE_AGENT_STORE,
    DistributedConfigError,
    DistributedError,
    WorldInfo,
    default_backend_override,
    default_timeout,
    world_info_from_env,
)

__all__ = ["init", "is_initialized", "world", "backend", "timeout", "barrier", "shutdown", "rejoin",
           "peer_failures", "explain"]

_log = logging.getLogger("mxtorch.distributed")
_T = TypeVar("_T")


@dataclass
class _Group:
    info: WorldInfo
    backend: str
    timeout: float
    owned: bool  # mxtorch created the process group (and so destroys it at exit)


_lock = threading.RLock()
_group: _Group | None = None
_atexit_registered = False

_PROCS_KEY = "procs"  # side-channel keys: one line per rank, "rank host pid start-time"
_LEFT_KEY = "left"  # one line per rank that left the job in failure, "rank reason"
_DIAGNOSE_S = 1.0  # how long a failed collective looks for the peer that caused it
_SETTLE_S = 3.0  # how long it then waits for that peer's process (on this host) to end
_STORE_S = 2.0  # how long a side-channel request may wait for the job's store
_store_gone = False  # the job's store stopped answering: do not try again (torch logs each failure loudly)


def init(backend: str | None = None, timeout: float | None = None) -> WorldInfo:
    """Join the distributed job this process was launched in; return where it sits.

    ``backend`` None picks ``MXTORCH_DIST_BACKEND`` if set, else gloo for CPU tensors plus
    NCCL for CUDA tensors when every local rank has a GPU (``'cpu:gloo,cuda:nccl'``), else
    ``'gloo'``.  ``timeout`` (seconds, default ``MXTORCH_DIST_TIMEOUT`` or 300) bounds the
    rendezvous and every later collective.  Calling it again returns the same answer; if
    torch.distributed was initialized directly, that process group is adopted as is.

    Raises :class:`DistributedConfigError` when the process was not launched as part of a
    job, and :class:`DistributedError` when the rendezvous fails.
    """
    global _group
    with _lock:
        if _group is not None and dist.is_initialized():
            if backend is not None and not _same_backend(backend, _group.backend):
                raise DistributedConfigError(
                    f"rank {_group.info.rank}: the process group already uses backend {_group.backend!r}; "
                    f"it cannot switch to {backend!r} in the same process: pass backend=None (or the same "
                    "backend) everywhere, or call mxtorch.distributed.shutdown() first"
                )
            return _group.info
        if dist.is_initialized():
            _group = _adopt()
            exit_status.track()
            _announce(_group.info)
            return _group.info
        info = world_info_from_env()
        if info is None:
            raise DistributedConfigError(
                "this process was not started as part of a distributed job (none of RANK/WORLD_SIZE, "
                f"OMPI_COMM_WORLD_*, PMI_*, SLURM_* or DMLC_* is set): {LAUNCH_HINT}"
            )
        chosen = _choose_backend(backend, info)
        seconds = default_timeout() if timeout is None else _check_timeout(timeout)
        _join(info, chosen, seconds)
        _group = _Group(info, chosen, seconds, owned=True)
        _register_exit_handlers()
        _announce(info)
        _note_clock(info)
        return info


def is_initialized() -> bool:
    """Whether :func:`init` has joined (or adopted) a process group that is still up."""
    return _group is not None and dist.is_initialized()


def world() -> WorldInfo:
    """Where this process sits in the job; raises if :func:`init` has not run."""
    return _require().info


def backend() -> str:
    """The torch.distributed backend of the process group ('gloo', 'cpu:gloo,cuda:nccl', ...)."""
    return _require().backend


def timeout() -> float:
    """Seconds any collective of the process group may wait for a peer."""
    return _require().timeout


def barrier(timeout: float | None = None) -> None:
    """Wait until every rank reaches this point, at most ``timeout`` seconds (default: the group's).

    On gloo the barrier is monitored: when it times out, the error names the ranks that did
    not arrive.  Raises :class:`DistributedError`.
    """
    g = _require()
    seconds = g.timeout if timeout is None else _check_timeout(timeout)
    if g.info.world_size == 1:
        return
    barrier_on(None, g.backend, seconds, f"rank {g.info.rank} of {g.info.world_size}", "Some rank")


def barrier_on(pg: Any, backend: str | None, seconds: float, where: str, who: str) -> None:
    """Barrier of process group ``pg`` (None: the default one) with a ``seconds`` limit.

    On gloo it is monitored (a time-out names the ranks that did not arrive).  A failure raises
    :class:`DistributedError` starting with ``where``; ``who`` names the ranks waited for.
    """
    start = time.monotonic()
    try:
        if backend == "gloo":
            dist.monitored_barrier(group=pg, timeout=datetime.timedelta(seconds=seconds), wait_all_ranks=True)
        else:
            work = dist.barrier(group=pg, async_op=True)
            if work is not None:
                work.wait(timeout=datetime.timedelta(seconds=seconds))
    except RuntimeError as e:
        raise DistributedError(
            f"{where}: barrier failed after {time.monotonic() - start:.1f} s (limit {seconds:g} s): "
            f"{explain(e)}. {who} did not reach it: it crashed, hangs, or runs different code; check the "
            "other ranks' logs"
        ) from e


def shutdown(timeout: float | None = None, wait_for_peers: bool = True) -> None:
    """Leave the job cleanly: barrier (at most ``timeout`` s), then destroy the process group.

    Runs at interpreter exit by itself (registered by :func:`init`); calling it earlier is
    fine and later calls do nothing.  A rank that leaves because of an error skips the
    barrier (``wait_for_peers=False``; done for you when the process ends with an uncaught
    exception or ``sys.exit`` with a non-zero status) and tells its peers why it left, so
    that they learn of its departure at once instead of at their timeout.  A failing
    barrier is logged, never raised: the group is destroyed anyway.
    """
    global _group
    with _lock:
        g = _group
        if not dist.is_initialized():
            _group = None
            return
        size = g.info.world_size if g is not None else dist.get_world_size()
        reason = exit_status.failure()
        if reason is None and not wait_for_peers:
            reason = "left the job after an error"
        if size > 1 and reason is None:
            try:
                if g is None:
                    dist.barrier()
                else:
                    barrier(timeout)
            except (DistributedError, RuntimeError) as e:
                _log.warning("mxtorch.distributed.shutdown: %s; destroying the process group anyway", e)
        elif size > 1 and reason is not None:
            _post(_LEFT_KEY, f"{dist.get_rank()} {reason}")
        try:
            dist.destroy_process_group()
        except (RuntimeError, ValueError) as e:  # already destroyed by the user, or broken by a dead peer
            _log.warning("mxtorch.distributed.shutdown: destroy_process_group failed: %s", e)
        _group = None


def rejoin(store: dist.Store, info: WorldInfo, backend: str | None = None,
           timeout: float | None = None) -> WorldInfo:
    """Drop the current process group, whatever state its peers are in, and form a new one of
    ``info.world_size`` ranks through ``store``, this process being ``info.rank``.

    For in-process elastic recovery (:mod:`mxtorch.elastic`): the survivors and joiners of one
    membership change agree on ``info`` through the job's store and meet in a fresh prefix of it.
    No barrier precedes the drop (a peer may be dead); the new group is left at exit as :func:`init`'s.
    ``backend``/``timeout`` None keep the old group's (or choose as :func:`init` does).
    Raises :class:`DistributedError` when the new group does not form within the timeout."""
    global _group
    with _lock:
        old = _group
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except (RuntimeError, ValueError) as e:  # broken by the peer that left
                _log.debug("mxtorch.distributed.rejoin: destroy_process_group failed: %s", e)
        _group = None
        chosen = _choose_backend(backend or (old.backend if old is not None else None), info)
        seconds = (old.timeout if old is not None else default_timeout()) if timeout is None \
            else _check_timeout(timeout)
        try:
            dist.init_process_group(chosen, store=store, rank=info.rank, world_size=info.world_size,
                                    timeout=datetime.timedelta(seconds=seconds),
                                    device_id=_device(chosen, info))
        except (RuntimeError, ValueError) as e:
            raise DistributedError(
                f"rank {info.rank} of {info.world_size} could not form the new process group within "
                f"{seconds:g} s: {e}. A member of the new group failed while it formed"
            ) from e
        _group = _Group(info, chosen, seconds, owned=True)
        _register_exit_handlers()
        _announce(info)
        return info


def peer_failures() -> list[tuple[int, str]]:
    """The ranks known to have left the job in failure, each with what is known: ``[(1, "exited
    with status 3 (pid 812 on node1)")]``.

    Read from the job's store (what a failing rank wrote as it left) and, for the ranks on this
    host, from their processes (a rank killed by a signal writes nothing, but its process is
    gone).  Empty when nothing is known, or outside a job.  Meant for error paths: it makes a
    few store requests.
    """
    return [(d.rank, d.why) for d in _departures()]


def explain(error: BaseException) -> str:
    """The text of a failed collective's ``error``, led by the ranks that caused it where known.

    ``"rank 1 exited with status 3 (pid 812 on node1) [<gloo's error>]"``.  A peer that dies
    closes its connections before its process is gone, so this looks for up to a second, and
    then gives a departing process on this host a moment to end: a launcher watching both then
    sees the cause end first.
    """
    text = str(error).strip()
    deadline = time.monotonic() + _DIAGNOSE_S
    while True:
        found = _departures()
        if found or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if not found:
        return text
    deadline = time.monotonic() + _SETTLE_S
    while time.monotonic() < deadline and any(
            d.pid is not None and _process_alive(d.pid, d.started) for d in found):
        time.sleep(0.05)
    who = "; ".join(f"rank {d.rank} {d.why}" for d in found)
    return f"{who} [{text}]" if text else who


# ---- internals ---------------------------------------------------------------------------


def _require() -> _Group:
    g = _group
    if g is None or not dist.is_initialized():
        raise DistributedConfigError(
            "the distributed process group is not initialized: call mxtorch.distributed.init() first "
            f"(creating kvstore 'allreduce' or 'horovod' does it); {LAUNCH_HINT}"
        )
    return g


def _check_timeout(seconds: float) -> float:
    value = float(seconds)
    if not value > 0 or value == float("inf"):
        raise ValueError(f"timeout must be a positive, finite number of seconds, got {seconds!r}")
    return value


def _same_backend(asked: str, current: str) -> bool:
    asked, current = asked.lower(), current.lower()
    return asked == current or (asked in ("nccl", "gloo") and asked in current)


def _nccl_usable(local_size: int) -> bool:
    from .devices import gpus_per_worker

    needed = local_size * gpus_per_worker()  # every local worker owns its own GPU(s)
    return torch.cuda.is_available() and dist.is_nccl_available() and torch.cuda.device_count() >= needed


def _choose_backend(asked: str | None, info: WorldInfo) -> str:
    name = asked or default_backend_override()
    if name is None:
        return "cpu:gloo,cuda:nccl" if _nccl_usable(info.local_size) else "gloo"
    name = name.lower()
    if "nccl" in name and not _nccl_usable(1):
        raise DistributedConfigError(
            f"rank {info.rank}: backend {name!r} needs a CUDA GPU and a torch build with NCCL, but this "
            f"process sees {torch.cuda.device_count()} GPU(s) and NCCL is "
            f"{'available' if dist.is_nccl_available() else 'not built in'}: use backend 'gloo' (CPU), or "
            "unset MXTORCH_DIST_BACKEND to choose automatically"
        )
    if "gloo" in name and not dist.is_gloo_available():
        raise DistributedConfigError(f"rank {info.rank}: this torch build has no gloo backend: use 'nccl'")
    return name


def _join(info: WorldInfo, chosen: str, seconds: float) -> None:
    td = datetime.timedelta(seconds=seconds)
    device_id = _device(chosen, info)
    try:
        if info.master_port is None:  # one process: nothing to meet
            dist.init_process_group(chosen, store=dist.HashStore(), rank=0, world_size=1, timeout=td,
                                    device_id=device_id)
        else:
            host = f"[{info.master_addr}]" if ":" in info.master_addr else info.master_addr
            dist.init_process_group(chosen, init_method=f"tcp://{host}:{info.master_port}", rank=info.rank,
                                    world_size=info.world_size, timeout=td, device_id=device_id)
    except (RuntimeError, ValueError) as e:
        raise DistributedError(
            f"rank {info.rank} of {info.world_size} could not join the job at {info.master_addr}:"
            f"{info.master_port} (layout from {info.launcher} variables) within {seconds:g} s: {e}. Check "
            f"that all {info.world_size} processes were started with the same MASTER_ADDR and MASTER_PORT, "
            "that rank 0 can listen on that port, and raise MXTORCH_DIST_TIMEOUT if they start slowly"
        ) from e


def _device(chosen: str, info: WorldInfo) -> torch.device | None:
    """The CUDA device of this rank when the backend includes NCCL (made current), else None."""
    if "nccl" not in chosen:
        return None
    from .devices import gpus_per_worker, worker_devices

    first = worker_devices(info.local_rank, torch.cuda.device_count(), gpus_per_worker())[0]
    device_id = torch.device("cuda", first)
    torch.cuda.set_device(device_id)
    return device_id


def _adopt() -> _Group:
    rank, size = dist.get_rank(), dist.get_world_size()
    try:
        env_info = world_info_from_env()
    except DistributedConfigError:
        env_info = None
    if env_info is not None and (env_info.rank, env_info.world_size) == (rank, size):
        info = env_info
    else:
        info = WorldInfo(rank, size, rank, size, 0, 1, "", None, "torch.distributed")
    return _Group(info, str(dist.get_backend()), default_timeout(), owned=False)


def _register_exit_handlers() -> None:
    global _atexit_registered
    exit_status.track()
    if _atexit_registered:
        return
    _atexit_registered = True
    atexit.register(_shutdown_at_exit)


def _shutdown_at_exit() -> None:
    g = _group
    if g is not None and g.owned:
        shutdown()


# ---- the side channel: a few keys in the job's store -------------------------------------------


@dataclass(frozen=True)
class _Departure:
    rank: int
    why: str
    pid: int | None  # its process, when it runs on this host
    started: str


def _departures() -> list[_Departure]:
    g = _group
    if g is None or not dist.is_initialized() or g.info.world_size == 1:
        return []
    store = _side_store()
    if store is None:
        return []
    global _store_gone
    me = g.info.rank
    try:
        if _store_gone:
            raise RuntimeError("it stopped answering earlier")
        procs, left = _bounded(lambda: (_lines(store, _PROCS_KEY), _lines(store, _LEFT_KEY)))
    except (RuntimeError, ValueError, TimeoutError) as e:  # the store's host is gone, or cut off
        _store_gone = True
        if os.environ.get(TORCHELASTIC_USE_AGENT_STORE, "").lower() == "true" or me == 0:
            return []  # the launcher's store: its absence says nothing about a rank
        first = str(e).strip().splitlines()[:1] or [type(e).__name__]
        why = (f"cannot be reached (gone, or the network to it is cut): the job's store, which rank 0 hosts "
               f"at {g.info.master_addr}:{g.info.master_port}, does not answer ({first[0]})")
        return [_Departure(0, why, None, "")]
    here = socket.gethostname()
    found: list[_Departure] = []
    for rank, text in sorted(procs.items()):
        fields = text.split()
        if rank == me or len(fields) < 2 or not fields[1].isdigit():
            continue
        host, pid, started = fields[0], int(fields[1]), (fields[2] if len(fields) > 2 else "")
        local = pid if host == here else None
        if rank in left:
            found.append(_Departure(rank, f"{left[rank]} (pid {pid} on {host})", local, started))
        elif local is not None and not _process_alive(local, started):
            why = (f"is gone: its process (pid {pid} on {host}) ended without leaving the job (killed by a "
                   "signal, os._exit, or a crash)")
            found.append(_Departure(rank, why, None, started))
    for rank in sorted(set(left) - set(procs) - {me}):
        found.append(_Departure(rank, left[rank], None, ""))
    return sorted(found, key=lambda d: d.rank)


def _side_store() -> dist.Store | None:
    try:
        store = dist.distributed_c10d._get_default_store()
    except (RuntimeError, ValueError, AttributeError):
        return None
    # a torchrun agent keeps its store across restarts: each attempt has its own keys
    return dist.PrefixStore(f"mxtorch/{os.environ.get(TORCHELASTIC_RESTART_COUNT, '0')}/", store)


def _post(key: str, line: str) -> None:
    global _store_gone
    store = None if _store_gone else _side_store()
    if store is None:
        return
    try:  # Store.append exists, torch's stubs lack it
        _bounded(lambda: cast(Any, store).append(key, line + "\n"))
    except (RuntimeError, ValueError, TimeoutError) as e:  # the store's host is gone: nobody is left to tell
        _store_gone = True
        _log.debug("mxtorch.distributed: could not write %r to the job's store: %s", key, e)


def _bounded(request: Callable[[], _T]) -> _T:
    """``request()`` (a few store requests), or TimeoutError after ``_STORE_S`` seconds.

    A store whose host is cut off (a pulled cable, a partition) answers nothing until the job's
    timeout -- the store client's own timeout, which ``set_timeout`` does not shorten for a
    request already waiting on its socket.  The side channel only serves error paths and exit,
    which must not wait that long: the request runs in a daemon thread, abandoned if it does not
    answer in time (it holds no lock of ours and the GIL is released while it waits).
    """
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, request()))
        except BaseException as e:  # handed to the caller's thread
            box.append((False, e))

    worker = threading.Thread(target=run, name="mxtorch-side-channel", daemon=True)
    worker.start()
    worker.join(_STORE_S)
    if not box:
        raise TimeoutError(f"the job's store did not answer within {_STORE_S:g} s")
    ok, value = box[0]
    if not ok:
        raise value
    return cast(_T, value)


def _lines(store: dist.Store, key: str) -> dict[int, str]:
    if not store.check([key]):
        return {}
    out: dict[int, str] = {}
    for line in store.get(key).decode(errors="replace").splitlines():
        rank, _, rest = line.partition(" ")
        if rank.isdigit():
            out.setdefault(int(rank), rest)
    return out


def _announce(info: WorldInfo) -> None:
    """Write where this rank runs, so that peers on its host can tell when its process is gone."""
    if info.world_size > 1:
        pid = os.getpid()
        _post(_PROCS_KEY, f"{info.rank} {socket.gethostname()} {pid} {_start_time(pid)}")


def _note_clock(info: WorldInfo) -> None:
    """Tell the profiler this rank and its clock against rank 0's, measured now that the job starts
    (``mxtorch trace merge`` aligns the ranks' traces with it)."""
    from ..profiler._process import measure_collective_offset, set_identity

    offset = measure_collective_offset() if info.world_size > 1 else 0
    set_identity("worker", info.rank, info.world_size, offset)


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart; else ''."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return ""


def _process_alive(pid: int, started: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if fields[0] in ("Z", "X"):  # exited, not yet reaped by its parent
        return False
    return not started or len(fields) < 20 or fields[19] == started
