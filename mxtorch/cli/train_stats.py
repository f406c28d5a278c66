"""The running statistics of ``mxtorch train`` summed over the job's workers: the epoch's loss,
accuracy and throughput, and each worker's share saved in a checkpoint and handed back on resume."""

from __future__ import annotations

from typing import Any

__all__ = ["epoch_stats", "resumed_stats", "sum_over_workers"]


def sum_over_workers(kv: Any, key: str, values: list[float]) -> list[float]:
    """``values`` summed over every worker of ``kv``'s job (each worker calls this with the same key);
    ``kv`` None: over the job's process group (a pipelined job, whose stores span one stage each)."""
    import torch

    from ..kvstore import KVStoreBase

    t = torch.tensor(values, dtype=torch.float64)
    if kv is None or kv.is_capable(KVStoreBase.OPTIMIZER):
        # A store that runs the optimizer (a parameter server) would apply it to these pushes: sum
        # them over the job's process group instead (the launcher gave every worker its address).
        import torch.distributed as dist

        from ..distributed import group

        group.init()
        dist.all_reduce(t)
    else:
        kv.pushpull(key, t, out=t)
    return [float(v) for v in t]


def epoch_stats(stats_kv: Any, rank: int, n_workers: int, values: list[float]) -> list[list[float]]:
    """Every worker's ``values`` (the same count on each), indexed by rank (a sum of one-hot slots)."""
    if n_workers == 1:
        return [list(values)]
    k = len(values)
    slots = [0.0] * (k * n_workers)
    slots[rank * k:(rank + 1) * k] = values
    total = sum_over_workers(stats_kv, "checkpoint_stats", slots)
    return [total[r * k:(r + 1) * k] for r in range(n_workers)]


def resumed_stats(stats: list[list[float]], rank: int, n_workers: int) -> list[float]:
    """This worker's running (loss sum, correct, seen) of the epoch in progress from a checkpoint's
    per-worker ``stats``; saved by another number of workers, rank 0 carries their sum."""
    if len(stats) == n_workers:
        return list(stats[rank])
    if rank != 0:
        return [0.0, 0.0, 0.0]
    return [sum(float(s[i]) for s in stats) for i in range(3)]
