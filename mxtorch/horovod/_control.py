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

import torch
import torch.distributed as dist

from . import _basics
from ._errors import CollectiveMismatchError, HorovodError

__all__ = ["op_name", "agree", "allgather_bytes", "broadcast_bytes", "ctrl_device", "all_gather_flat"]

_counters: dict[str, itertools.count[int]] = {}
# torch 2.13 renamed all_gather_into_tensor (and warns on the old name); older torch has only that
all_gather_flat = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_ERROR_KEY = -1


def op_name(kind: str, name: str | None) -> str:
    if name is None:
        counter = _counters.setdefault(kind, itertools.count())
        return f"{kind}.noname.{next(counter)}"
    if not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")
    return name


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def ctrl_device() -> torch.device:
    if dist.get_backend(_basics.process_group()) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def allgather_bytes(data: bytes) -> list[bytes]:
    """Every rank's ``data`` (lengths may differ), in rank order."""
    n = dist.get_world_size()
    pg = _basics.process_group()
    dev = ctrl_device()
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


def broadcast_bytes(data: bytes | None, root_rank: int) -> bytes:
    """``data`` of ``root_rank`` on every rank (other ranks pass None)."""
    pg = _basics.process_group()
    dev = ctrl_device()
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
           dim0: int = 0) -> list[int]:
    """Check that every rank runs the same collective; returns every rank's ``dim0``.

    ``problem`` is a local argument error: it is raised here on this rank, and every other rank
    raises a :class:`HorovodError` naming it, so nobody waits for a collective that never comes.
    """
    n = _basics.size()
    if n == 1:
        if problem is not None:
            raise problem
        return [dim0]
    key = _ERROR_KEY if problem is not None else _hash(f"{kind}\0{name}\0{signature}")
    dev = ctrl_device()
    header = torch.tensor([key, dim0], dtype=torch.int64, device=dev)
    table = torch.empty(2 * n, dtype=torch.int64, device=dev)
    all_gather_flat(table, header, group=_basics.process_group())
    keys = [int(k) for k in table[0::2].tolist()]
    if key != _ERROR_KEY and all(k == key for k in keys):
        return [int(d) for d in table[1::2].tolist()]
    if problem is not None:
        mine = f"{kind} {name!r} failed: {type(problem).__name__}: {problem}"
    else:
        mine = f"{kind} {name!r} with {signature}"
    described = [d.decode("utf-8", "replace") for d in allgather_bytes(mine.encode("utf-8"))]
    if problem is not None:
        raise problem
    listing = "; ".join(f"rank {r}: {d}" for r, d in enumerate(described))
    failed = [r for r, k in enumerate(keys) if k == _ERROR_KEY]
    if failed:
        raise HorovodError(f"{kind} {name!r} could not run because rank(s) {failed} failed — {listing}")
    raise CollectiveMismatchError(
        f"ranks disagree on the collective to run — {listing}. Every rank must call the same "
        "collectives, with the same names, shapes and dtypes, in the same order"
    )
