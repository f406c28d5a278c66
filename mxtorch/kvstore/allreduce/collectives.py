"""The collectives every rank runs the same way: sum, broadcast, and the descriptor agreement
that compares keys, shapes and dtypes across workers before a key is first used."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
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


def _meta_device(like: torch.Tensor) -> torch.device:
    # Descriptors travel on the CPU (gloo) unless the group only speaks NCCL.
    b = group.backend()
    return like.device if ("gloo" not in b and like.is_cuda) else torch.device("cpu")


def _dtype_name(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def _reduce(t: torch.Tensor, async_op: bool) -> Any:
    return dist.all_reduce(t, op=dist.ReduceOp.SUM, async_op=async_op)


def _broadcast(t: torch.Tensor, async_op: bool) -> Any:
    return dist.broadcast(t, src=0, async_op=async_op)



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


def _agree(op: str, items: Sequence[tuple[Key, tuple[int, ...], torch.dtype]], rank: int,
           device: torch.device) -> None:
    """One tiny all_gather of (length, digest); a second, padded one only to explain a mismatch."""
    desc = _encode(items)
    digest = int.from_bytes(hashlib.blake2b(repr(desc).encode(), digest_size=8).digest(), "little",
                            signed=True)
    world = dist.get_world_size()
    mine = torch.tensor([len(desc), digest], dtype=torch.int64, device=device)
    heads = [torch.empty_like(mine) for _ in range(world)]
    try:
        dist.all_gather(heads, mine)
        if all(bool(torch.equal(h, heads[0])) for h in heads):
            return
        longest = max(int(h[0]) for h in heads)
        padded = torch.zeros(longest, dtype=torch.int64, device=device)
        padded[:len(desc)] = torch.tensor(desc, dtype=torch.int64)
        bodies = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(bodies, padded)
    except RuntimeError as e:
        raise KVStoreError(
            f"rank {rank} of {world}: comparing shapes and dtypes before the first {op} of key(s) "
            f"{[k for k, _, _ in items][:8]} failed: {group.explain(e)}. A peer process died, hangs, or "
            f"runs different code (timeout {group.timeout():g} s, MXTORCH_DIST_TIMEOUT); check the other "
            "ranks' logs"
        ) from e
    per_rank = [_decode(b[:int(h[0])].tolist()) for b, h in zip(bodies, heads)]
    raise KVStoreError(f"rank {rank}: {_explain(op, per_rank)}")


def _explain(op: str, per_rank: list[list[tuple[Key, tuple[int, ...], str]]]) -> str:
    expected = per_rank[0]
    lines: list[str] = []
    exp_keys = [k for k, _, _ in expected]
    for r, got in enumerate(per_rank[1:], start=1):
        keys = [k for k, _, _ in got]
        if keys != exp_keys:
            lines.append(f"rank {r} passed keys {keys[:8]}{'...' if len(keys) > 8 else ''} but rank 0 passed "
                         f"{exp_keys[:8]}{'...' if len(exp_keys) > 8 else ''}")
            continue
        for (k, shape, dt), (_, eshape, edt) in zip(got, expected):
            if (shape, dt) != (eshape, edt):
                lines.append(f"key {k!r}: rank {r} has shape {shape} {dt}, expected rank 0's {eshape} {edt}")
    return (f"{op} needs the same keys, shapes and dtypes on every worker, but they differ: "
            + "; ".join(lines) + f". Make every rank {op} the same tensors in the same order")
