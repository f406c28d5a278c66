"""Who the workers of an elastic job are, and the log line that says how that changed."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["gather_hosts", "describe_change"]

_NAME_BYTES = 64


def gather_hosts(name: str) -> list[str]:
    """Every rank's host name, by rank (one all-reduce of fixed-size byte rows: nothing is
    unpickled).  Needs ``torch.distributed`` initialized; ``[name]`` without it."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return [name]
    n, r = dist.get_world_size(), dist.get_rank()
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
    rows = torch.zeros(n, _NAME_BYTES, dtype=torch.int32)
    raw = name.encode()[:_NAME_BYTES]
    rows[r, :len(raw)] = torch.tensor(list(raw), dtype=torch.int32)
    if device is not None:
        rows = rows.to(device)
    dist.all_reduce(rows)
    return [bytes(int(v) for v in row if v).decode(errors="replace") for row in rows.cpu()]


def describe_change(before: Sequence[str] | None, after: Sequence[str], *, step: int, epoch: int,
                    batch: int, batches: int, restart: int = 0) -> str:
    """``membership: 3 -> 2 workers (left: a1, was rank 1) ...``: the job now against the
    checkpoint it resumes from (``before`` None: a fresh start)."""
    ranks = ", ".join(f"{h}=rank{r}" for r, h in enumerate(after))
    where = f"step {step} (epoch {epoch + 1}, batch {batch} of {batches})"
    if before is None:
        return f"membership: {len(after)} workers ({ranks}); starting at {where}"
    left = [f"{h}, was rank {r}" for r, h in enumerate(before) if h not in after]
    joined = [h for h in after if h not in before]
    change = "; ".join(
        [f"left: {'; '.join(left)}"] * bool(left) + [f"joined: {', '.join(joined)}"] * bool(joined))
    again = f" (restart {restart} of the workers)" if restart else ""
    return (f"membership: {len(before)} -> {len(after)} workers"
            + (f" ({change})" if change else " (the same hosts)")
            + f"; ranks now {ranks}; resuming from the checkpoint of {where}{again}")
