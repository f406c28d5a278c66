"""The collectives every rank runs the same way: sum, broadcast, and the descriptor agreement
that compares keys, shapes and dtypes across workers before a key is first used; and
:class:`_Comm`, the process group a store's collectives run on (the world, or a subgroup)."""

from __future__ import annotations

import datetime
import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ...distributed import group
from ..base import Key, KVStoreError

# Stable codes for dtypes in the shape/dtype descriptors that workers compare.
_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
)
_DTYPE_CODE = {d: i for i, d in enumerate(_DTYPES)}


def _meta_device(like: torch.Tensor, backend: str | None = None) -> torch.device:
    # Descriptors travel on the CPU (gloo) unless the group only speaks NCCL.  ``backend``: the
    # store's process group's (None: the world's).
    b = group.backend() if backend is None else backend
    return like.device if ("gloo" not in b and like.is_cuda) else torch.device("cpu")


def _dtype_name(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def _reduce(t: torch.Tensor, async_op: bool, group: Any = None) -> Any:
    return dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group, async_op=async_op)


def _broadcast(t: torch.Tensor, async_op: bool, src: int = 0, group: Any = None) -> Any:
    # ``src`` is a global rank (torch>=2.4 has no group_src everywhere): the group's first rank's
    return dist.broadcast(t, src=src, group=group, async_op=async_op)


@dataclass(frozen=True)
class _Comm:
    """The process group a store's collectives run on, and this worker's place in it.

    ``group`` None is the world (torch's default group: what every collective uses when
    given ``group=None``, so the world's path does no extra work).  ``rank`` and ``size`` are
    within the group; ``src`` is the global rank of the group's first rank (where broadcasts
    come from); ``ranks`` the global ranks of the group's members (None for the world).
    """

    group: Any
    rank: int
    size: int
    src: int = 0
    ranks: tuple[int, ...] | None = None
    backend: str | None = None  # the subgroup's backend (None: the world's, group.backend())
    # the launchers of the store's sums and broadcasts, ``(tensor, async_op) -> work``
    reduce: Callable[[torch.Tensor, bool], Any] = _reduce
    broadcast: Callable[[torch.Tensor, bool], Any] = _broadcast

    @classmethod
    def world(cls, rank: int, size: int) -> _Comm:
        return cls(None, rank, size)

    @classmethod
    def of(cls, pg: Any) -> _Comm:
        """The subgroup ``pg`` (a ``torch.distributed.ProcessGroup`` this process belongs to)."""
        # new_group answers NON_GROUP_MEMBER on the ranks outside the group
        outside = pg is dist.GroupMember.NON_GROUP_MEMBER
        if not (outside or isinstance(pg, dist.ProcessGroup)):
            raise TypeError("process_group must be a torch.distributed ProcessGroup (from dist.new_group or "
                            f"DeviceMesh.get_group()) or None, got {type(pg).__name__}")
        if outside or dist.get_rank(pg) < 0:
            raise KVStoreError(
                f"global rank {dist.get_rank()}: the process_group given does not contain this process: "
                "create the store only on the ranks of its group (every rank must still call new_group for "
                "every group, in the same order)"
            )
        rank = dist.get_rank(pg)
        ranks = tuple(dist.get_process_group_ranks(pg))
        src = dist.get_global_rank(pg, 0)
        return cls(pg, rank, len(ranks), src, ranks, str(dist.get_backend(pg)),
                   functools.partial(_reduce, group=pg), functools.partial(_broadcast, src=src, group=pg))

    def where(self) -> str:
        """Who this worker is, for error messages: ``rank 1 of 2`` (and its global rank in a subgroup)."""
        if self.ranks is None:
            return f"rank {self.rank} of {self.size}"
        return (f"rank {self.rank} of {self.size} in process group {list(self.ranks)} "
                f"(global rank {self.ranks[self.rank]})")

    def label(self, rank: int) -> str:
        """The group rank ``rank`` in messages (with its global rank in a subgroup)."""
        return f"rank {rank}" if self.ranks is None else f"rank {rank} (global {self.ranks[rank]})"

    def timeout(self) -> float:
        """Seconds a collective of this group may wait: the world's (MXTORCH_DIST_TIMEOUT), or the
        one the subgroup was created with where torch tells it."""
        if self.group is None:
            return group.timeout()
        try:
            for device in ("cpu", "cuda"):
                try:
                    backend = self.group._get_backend(torch.device(device))
                except RuntimeError:
                    continue
                seconds = getattr(getattr(backend, "options", None), "_timeout", None)
                if isinstance(seconds, datetime.timedelta):
                    return seconds.total_seconds()
        except (AttributeError, TypeError):
            pass
        return group.timeout()

    def timeout_hint(self) -> str:
        if self.group is None:
            return f"{group.timeout():g} s, MXTORCH_DIST_TIMEOUT"
        return f"{self.timeout():g} s, the timeout process_group was created with"



# ---- descriptor agreement --------------------------------------------------------------


def _encode(items: Sequence[tuple[Key, tuple[int, ...], torch.dtype]]) -> list[int]:
    out: list[int] = []
    for key, shape, dtype in items:
        code = _DTYPE_CODE.get(dtype, len(_DTYPES))
        if isinstance(key, str):
            raw = key.encode("utf-8")
            out += [1, len(raw), code, len(shape), *shape, *raw]
        else:
            out += [0, int(key), code, len(shape), *shape]
    return out


def _decode(values: list[int]) -> list[tuple[Key, tuple[int, ...], str]]:
    out: list[tuple[Key, tuple[int, ...], str]] = []
    i = 0
    while i < len(values):
        kind, kval, code, ndim = values[i:i + 4]
        shape = tuple(values[i + 4:i + 4 + ndim])
        i += 4 + ndim
        key: Key = kval
        if kind == 1:
            key = bytes(values[i:i + kval]).decode("utf-8", errors="replace")
            i += kval
        out.append((key, shape, _dtype_name(_DTYPES[code]) if code < len(_DTYPES) else "other dtype"))
    return out


def _agree(op: str, items: Sequence[tuple[Key, tuple[int, ...], torch.dtype]], comm: _Comm,
           device: torch.device) -> None:
    """One tiny all_gather of (length, digest) over ``comm``'s group; a second, padded one only to
    explain a mismatch."""
    desc = _encode(items)
    digest = int.from_bytes(hashlib.blake2b(repr(desc).encode(), digest_size=8).digest(), "little",
                            signed=True)
    world = comm.size
    mine = torch.tensor([len(desc), digest], dtype=torch.int64, device=device)
    heads = [torch.empty_like(mine) for _ in range(world)]
    try:
        dist.all_gather(heads, mine, group=comm.group)
        if all(bool(torch.equal(h, heads[0])) for h in heads):
            return
        longest = max(int(h[0]) for h in heads)
        padded = torch.zeros(longest, dtype=torch.int64, device=device)
        padded[:len(desc)] = torch.tensor(desc, dtype=torch.int64)
        bodies = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(bodies, padded, group=comm.group)
    except RuntimeError as e:
        raise KVStoreError(
            f"{comm.where()}: comparing shapes and dtypes before the first {op} of key(s) "
            f"{[k for k, _, _ in items][:8]} failed: {group.explain(e)}. A peer process died, hangs, or "
            f"runs different code (timeout {comm.timeout_hint()}); check the other ranks' logs"
        ) from e
    per_rank = [_decode(b[:int(h[0])].tolist()) for b, h in zip(bodies, heads)]
    who = f"rank {comm.rank}" if comm.ranks is None else comm.where()
    raise KVStoreError(f"{who}: {_explain(op, per_rank, comm.label)}")


def _explain(op: str, per_rank: list[list[tuple[Key, tuple[int, ...], str]]],
             label: Callable[[int], str] = lambda r: f"rank {r}") -> str:
    expected = per_rank[0]
    lines: list[str] = []
    exp_keys = [k for k, _, _ in expected]
    first = label(0)
    for r, got in enumerate(per_rank[1:], start=1):
        keys = [k for k, _, _ in got]
        if keys != exp_keys:
            lines.append(f"{label(r)} passed keys {keys[:8]}{'...' if len(keys) > 8 else ''} but {first} "
                         f"passed {exp_keys[:8]}{'...' if len(exp_keys) > 8 else ''}")
            continue
        for (k, shape, dt), (_, eshape, edt) in zip(got, expected):
            if (shape, dt) != (eshape, edt):
                lines.append(f"key {k!r}: {label(r)} has shape {shape} {dt}, "
                             f"expected {first}'s {eshape} {edt}")
    return (f"{op} needs the same keys, shapes and dtypes on every worker, but they differ: "
            + "; ".join(lines) + f". Make every rank {op} the same tensors in the same order")
