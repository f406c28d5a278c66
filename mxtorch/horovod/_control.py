"""The control plane of the collectives: naming, header agreement, and raw bytes between ranks.

Before each collective every rank contributes a small header — a hash of the operation kind,
its name and a signature (shapes, dtypes, factors) — and the first dimension of its tensor.
When the headers differ, every rank learns what each rank called, so a mismatch is a clear
error on all of them instead of a hang or silently wrong numbers.  A local argument error is
sent in place of a header, so the ranks without it fail too instead of waiting.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any

import torch
import torch.distributed as dist

from ._errors import CollectiveMismatchError, HorovodError
from ._scope import Scope

__all__ = ["op_name", "agree", "allgather_bytes", "broadcast_bytes", "ctrl_device", "all_gather_flat"]

_counters: dict[str, itertools.count[int]] = {}
# torch 2.13 renamed all_gather_into_tensor (and warns on the old name); older torch has only that
all_gather_flat = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_ERROR_KEY = -1
JOIN_KEY = -2
"""The header of a rank waiting in ``hvd.join()`` (see :mod:`mxtorch.horovod._join`)."""


def op_name(kind: str, name: str | None, scope: Scope | None = None) -> str:
    if name is None:
        # One counter per process set: ranks outside a set do not advance its names.
        key = kind if scope is None or scope.set_id == 0 else f"{kind}@{scope.set_id}"
        counter = _counters.setdefault(key, itertools.count())
        return f"{kind}.noname.{next(counter)}"
    if not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")
    return name


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def ctrl_device(scope: Scope) -> torch.device:
    if dist.get_backend(scope.group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def allgather_bytes(data: bytes, scope: Scope) -> list[bytes]:
    """Every member's ``data`` (lengths may differ), in set order."""
    n = scope.size
    pg = scope.group
    dev = ctrl_device(scope)
    length = torch.tensor([len(data)], dtype=torch.int64, device=dev)
    lengths = torch.empty(n, dtype=torch.int64, device=dev)
    all_gather_flat(lengths, length, group=pg)
    sizes = [int(x) for x in lengths.tolist()]
    width = max(sizes)
    buf = torch.zeros(width, dtype=torch.uint8)
    if data:
        buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    out = torch.empty(n * width, dtype=torch.uint8, device=dev)
    all_gather_flat(out, buf.to(dev), group=pg)
    host = out.cpu().numpy()
    return [host[r * width : r * width + s].tobytes() for r, s in enumerate(sizes)]


def broadcast_bytes(data: bytes | None, root_rank: int, scope: Scope) -> bytes:
    """``data`` of ``root_rank`` (a global rank) on every member (the others pass None)."""
    pg = scope.group
    dev = ctrl_device(scope)
    length = torch.tensor([len(data) if data is not None else 0], dtype=torch.int64, device=dev)
    dist.broadcast(length, src=root_rank, group=pg)
    n = int(length.item())
    if data is not None:
        buf = torch.frombuffer(bytearray(data), dtype=torch.uint8) if n else torch.empty(0, dtype=torch.uint8)
        buf = buf.to(dev)
    else:
        buf = torch.empty(n, dtype=torch.uint8, device=dev)
    if n:
        dist.broadcast(buf, src=root_rank, group=pg)
    return buf.cpu().numpy().tobytes() if data is None else data


def agree(kind: str, name: str, signature: str, problem: BaseException | None = None,
           dim0: int = 0, *, scope: Scope, join_desc: dict[str, Any] | None = None) -> list[int]:
    """Check that every rank runs the same collective; returns every rank's ``dim0``.

    ``problem`` is a local argument error: it is raised here on this rank, and every other rank
    raises a :class:`HorovodError` naming it, so nobody waits for a collective that never comes.
    ``join_desc`` describes the collective to ranks waiting in ``hvd.join()``, which then take
    part with neutral inputs; without it, a collective meeting joined ranks is an error.
    """
    n = scope.size
    if n == 1:
        if problem is not None:
            raise problem
        return [dim0]
    key = _ERROR_KEY if problem is not None else _hash(f"{kind}\0{name}\0{signature}")
    dev = ctrl_device(scope)
    header = torch.tensor([key, dim0], dtype=torch.int64, device=dev)
    table = torch.empty(2 * n, dtype=torch.int64, device=dev)
    all_gather_flat(table, header, group=scope.group)
    keys = [int(k) for k in table[0::2].tolist()]
    if key != _ERROR_KEY and all(k == key for k in keys):
        return [int(d) for d in table[1::2].tolist()]
    if JOIN_KEY in keys:
        _meet_joined(kind, name, key, keys, problem, scope, join_desc)
        return [int(d) for d in table[1::2].tolist()]
    if problem is not None:
        mine = f"{kind} {name!r} failed: {type(problem).__name__}: {problem}"
    else:
        mine = f"{kind} {name!r} with {signature}"
    described = [d.decode("utf-8", "replace") for d in allgather_bytes(mine.encode("utf-8"), scope)]
    if problem is not None:
        raise problem
    listing = "; ".join(f"rank {r}: {d}" for r, d in zip(scope.ranks, described))
    failed = [r for r, k in zip(scope.ranks, keys) if k == _ERROR_KEY]
    if failed:
        raise HorovodError(f"{kind} {name!r} could not run because rank(s) {failed} failed — {listing}")
    raise CollectiveMismatchError(
        f"ranks disagree on the collective to run — {listing}. Every rank must call the same "
        "collectives, with the same names, shapes and dtypes, in the same order"
    )


def _meet_joined(kind: str, name: str, key: int, keys: list[int], problem: BaseException | None,
                 scope: Scope, join_desc: dict[str, Any] | None) -> None:
    """Some ranks wait in ``hvd.join()``: the lowest active rank tells them what to run, or that
    the collective cannot run while they are joined (then every active rank raises)."""
    joined = [r for r, k in zip(scope.ranks, keys) if k == JOIN_KEY]
    active = [i for i, k in enumerate(keys) if k != JOIN_KEY]
    leader = scope.ranks[active[0]]
    message: dict[str, Any] = {}
    if scope.rank == active[0]:
        if problem is not None:
            failure = f"{type(problem).__name__}: {problem}"
            message = {"error": f"{kind} {name!r} failed on rank {leader}: {failure}"}
        elif any(keys[i] != key for i in active):
            message = {"error": f"ranks disagree on the collective to run while rank(s) {joined} have joined "
                                f"(rank {leader} called {kind} {name!r})"}
        elif join_desc is None:
            message = {"error": f"{kind} {name!r} cannot run while rank(s) {joined} have called hvd.join(): "
                                "only allreduce and grouped_allreduce take joined ranks (as in Horovod)"}
        else:
            message = {"run": join_desc}
        broadcast_bytes(json.dumps(message).encode(), leader, scope)
    else:
        message = json.loads(broadcast_bytes(None, leader, scope))
    if problem is not None:
        raise problem
    if "error" in message:
        raise HorovodError(message["error"])
