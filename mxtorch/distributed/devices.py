"""Which accelerator each worker of a launched job owns, and which backend moves its tensors.

Every worker started on a machine with GPUs gets its own: worker ``local_rank`` owns the
``gpus_per_worker`` consecutive devices of block ``local_rank mod (visible // gpus_per_worker)``
(one GPU each by default, so 8 workers on an 8-GPU machine get gpu:0 .. gpu:7; more workers
than blocks share them round-robin).  ``mxtorch launch --gpus-per-worker K`` sets
``MXTORCH_GPUS_PER_WORKER`` for the workers.  CUDA tensors move over NCCL, CPU tensors over gloo
(:func:`backend_for`); the process group of :mod:`mxtorch.distributed` makes the worker's first
device current, and ``mxtorch train`` without ``--ctx`` trains on the worker's devices.

The mapping is a pure function (:func:`worker_devices`) so it is tested without GPUs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .env import MXTORCH_GPUS_PER_WORKER, DistributedConfigError, world_info_from_env

__all__ = ["worker_devices", "gpus_per_worker", "backend_for", "visible_gpu_count", "my_devices",
           "default_context_spec"]


def worker_devices(local_rank: int, visible: int, per_worker: int = 1) -> list[int]:
    """The CUDA device indices (of the ``visible`` ones) that worker ``local_rank`` owns.

    No devices: ``[]`` (the worker runs on the CPU).  ``per_worker`` more than ``visible`` is a
    :class:`DistributedConfigError` saying how many there are.
    """
    if isinstance(local_rank, bool) or not isinstance(local_rank, int) or local_rank < 0:
        raise DistributedConfigError(f"local rank must be an integer >= 0, got {local_rank!r}")
    if isinstance(per_worker, bool) or not isinstance(per_worker, int) or per_worker < 1:
        raise DistributedConfigError(f"GPUs per worker must be an integer >= 1, got {per_worker!r}")
    if visible <= 0:
        return []
    if per_worker > visible:
        raise DistributedConfigError(
            f"each worker should own {per_worker} GPU(s) but this machine shows {visible}: lower "
            f"--gpus-per-worker ({MXTORCH_GPUS_PER_WORKER}) to at most {visible}"
        )
    blocks = visible // per_worker
    first = (local_rank % blocks) * per_worker
    return list(range(first, first + per_worker))


def gpus_per_worker(environ: Mapping[str, str] | None = None) -> int:
    """``MXTORCH_GPUS_PER_WORKER`` (default 1), checked."""
    env = os.environ if environ is None else environ
    text = env.get(MXTORCH_GPUS_PER_WORKER, "").strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        raise DistributedConfigError(f"environment variable {MXTORCH_GPUS_PER_WORKER}={text!r} must be an "
                                     "integer >= 1 (GPUs each worker owns)")
    return int(text)


def backend_for(device: Any) -> str:
    """The torch.distributed backend for tensors on ``device``: 'nccl' for CUDA, 'gloo' otherwise."""
    kind = getattr(device, "type", None) or str(device).split(":", 1)[0]
    return "nccl" if kind in ("cuda", "gpu") else "gloo"


def visible_gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def my_devices(environ: Mapping[str, str] | None = None, visible: int | None = None) -> list[int]:
    """The devices of this process: from its local rank in the launched job (0 when not launched)."""
    info = world_info_from_env(environ)
    local_rank = info.local_rank if info is not None else 0
    count = visible_gpu_count() if visible is None else visible
    return worker_devices(local_rank, count, gpus_per_worker(environ))


def default_context_spec(environ: Mapping[str, str] | None = None, visible: int | None = None) -> str:
    """``mxtorch train``'s ``--ctx`` when none is given: this worker's GPUs ('gpu:2'), else 'cpu'."""
    devices = my_devices(environ, visible)
    return ",".join(f"gpu:{d}" for d in devices) if devices else "cpu"
