"""init/shutdown, ranks and sizes, and honest answers about what this Horovod surface is built on.

``init()`` joins the process group of :mod:`mxtorch.distributed` (gloo on CPU, plus NCCL for
CUDA tensors when every local rank has a GPU), whose layout comes from the launcher's variables
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ... — see :mod:`mxtorch.distributed.env`).
``cross_rank``/``cross_size`` are the node index and node count; Horovod defines them as the rank
and count among processes with the same local rank, which is the same thing on evenly filled nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ._errors import NotInitializedError

__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank", "cross_size",
    "cross_rank", "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
]


@dataclass(frozen=True)
class _Layout:
    size: int
    rank: int
    local_size: int
    local_rank: int
    cross_size: int
    cross_rank: int
    backend: str


_layout: _Layout | None = None


def init(comm: Sequence[int] | None = None) -> None:
    """Join the job's process group (idempotent); ``hvd.init`` (in :mod:`._process_sets`) adds
    the process sets after it.

    ``comm`` is accepted as in Horovod only when it names every rank (``None`` or
    ``range(world_size)``); MPI communicators and sub-communicators are not supported.  A
    process not started by a launcher (no ``RANK``/``WORLD_SIZE`` or the like) runs as a
    one-process job, without a process group.
    """
    global _layout
    from ..distributed import env as _env
    from ..distributed import group as _group
    from ..elastic import inprocess

    inprocess.init()  # an in-process elastic job (MXTORCH_ELASTIC_MODE=inprocess) is joined there; else no-op
    if not _group.is_initialized() and not dist.is_initialized() and _env.world_info_from_env() is None:
        # Not started by a launcher: a one-process job without a process group, as in Horovod.
        _check_comm(comm, 1)
        _layout = _Layout(1, 0, 1, 0, 1, 0, "none")
    else:
        info = _group.init()
        _check_comm(comm, info.world_size)
        _layout = _Layout(info.world_size, info.rank, info.local_size, info.local_rank, info.cross_size,
                          info.cross_rank, _group.backend())
    from ..profiler import horovod_timeline

    horovod_timeline.start_from_environment(_layout.rank, _layout.size)  # as Horovod reads it at init


def _check_comm(comm: Sequence[int] | None, world_size: int) -> None:
    if comm is not None:
        try:
            ranks = sorted(int(r) for r in comm)
        except TypeError:
            raise TypeError(
                f"comm must be None or a list of ranks; MPI communicators are not supported, got {comm!r}"
            ) from None
        if ranks != list(range(world_size)):
            raise ValueError(f"comm={ranks} does not name all {world_size} ranks; mxtorch.horovod runs "
                             "on the whole job only (no sub-communicators)")


def shutdown() -> None:
    """Leave the process group (a no-op when not initialized); a timeline being recorded is written."""
    global _layout
    if _layout is None:
        return
    from ..profiler import horovod_timeline

    horovod_timeline.stop_timeline()
    alone = _layout.backend == "none"
    _layout = None
    if alone:
        return
    from ..distributed import group as _group

    _group.shutdown()


def start_timeline(file_path: str, mark_cycles: bool = False) -> None:
    """Record Horovod's timeline into ``file_path`` (every rank calls it; rank 0 writes the file,
    valid JSON once :func:`stop_timeline` ran): see :mod:`mxtorch.profiler.horovod_timeline`."""
    from ..profiler import horovod_timeline

    if _layout is None:
        raise ValueError("start_timeline: call hvd.init() first")
    horovod_timeline.start_timeline(file_path, mark_cycles, _layout.rank, _layout.size)


def stop_timeline() -> None:
    """Stop recording the timeline and write its file."""
    from ..profiler import horovod_timeline

    horovod_timeline.stop_timeline()


def is_initialized() -> bool:
    return _layout is not None and (_layout.backend == "none" or dist.is_initialized())


def require_init() -> _Layout:
    if _layout is None or not (_layout.backend == "none" or dist.is_initialized()):
        raise NotInitializedError(
            "mxtorch.horovod has not been initialized: call hvd.init() first (in every process of the job)"
        )
    return _layout


def _world_reader(field: str, doc: str) -> Callable[[], int]:
    """A module-level function returning ``field`` of the joined job (raises before :func:`init`)."""

    def read() -> int:
        return int(getattr(require_init(), field))

    read.__name__ = read.__qualname__ = field
    read.__doc__ = doc
    return read


# Horovod's six topology queries, one table: (name, what it returns).
size = _world_reader("size", "Number of ranks in the job.")
rank = _world_reader("rank", "This process's rank, 0 .. size() - 1.")
local_size = _world_reader("local_size", "Number of ranks on this node.")
local_rank = _world_reader("local_rank", "This process's rank among the ranks of its node.")
cross_size = _world_reader("cross_size", "Number of nodes in the job.")
cross_rank = _world_reader("cross_rank", "Index of this process's node.")


def mpi_threads_supported() -> bool:
    """False: there is no MPI underneath (collectives use torch.distributed)."""
    require_init()
    return False


def mpi_enabled() -> bool:
    """False: MPI is never used."""
    return False


def mpi_built() -> bool:
    return False


def gloo_enabled() -> bool:
    """Whether the initialized job moves CPU tensors with gloo (False before init)."""
    return _layout is not None and "gloo" in _layout.backend


def gloo_built() -> bool:
    return bool(dist.is_gloo_available())


def nccl_built() -> bool:
    """Whether this torch build has NCCL (it is used for CUDA tensors when the job runs on it)."""
    return bool(dist.is_nccl_available())


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def cuda_built() -> bool:
    return torch.version.cuda is not None


def rocm_built() -> bool:
    return getattr(torch.version, "hip", None) is not None
