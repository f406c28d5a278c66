"""``broadcast_object`` and ``allgather_object``: Python values between ranks as JSON, never pickle.

The supported values are listed in :mod:`mxtorch.horovod._codec`.  A value that cannot be
encoded makes every rank raise (the encoding rank a :class:`ObjectEncodingError`, the others a
``HorovodError`` naming it), so no peer waits for bytes that never come; received bytes that
are not an mxtorch JSON payload are refused with :class:`ObjectDecodingError`.
"""

from __future__ import annotations

from typing import Any

from . import _basics, _ops
from ._codec import ObjectEncodingError, decode, encode
from ._control import agree, allgather_bytes, broadcast_bytes, op_name
from ._process_sets import scope

__all__ = ["broadcast_object", "allgather_object"]


def broadcast_object(obj: Any, root_rank: int = 0, name: str | None = None, process_set: Any = None) -> Any:
    """``root_rank``'s ``obj`` on every rank (the root gets its own object back, others a decoded copy).

    Other ranks' ``obj`` is ignored (pass None).  Tensors arrive on the CPU.
    """
    where = scope(process_set)
    root = _ops.check_root(root_rank)
    name_ = op_name("broadcast_object", name, where)
    payload: bytes | None = None
    problem: BaseException | None = _ops.root_problem(root, where)
    if problem is None and _basics.rank() == root:
        try:
            payload = encode(obj)
        except ObjectEncodingError as err:
            problem = err
    agree("broadcast_object", name_, f"root={root}", problem, scope=where)
    if where.size == 1:
        return obj
    if payload is not None:  # the root
        broadcast_bytes(payload, root, where)
        return obj
    return decode(broadcast_bytes(None, root, where), f"rank {root}")


def allgather_object(obj: Any, name: str | None = None, process_set: Any = None) -> list[Any]:
    """Every rank's ``obj``, as a list in rank order (each entry decoded from its JSON form)."""
    where = scope(process_set)
    name_ = op_name("allgather_object", name, where)
    payload = b""
    problem: BaseException | None = None
    try:
        payload = encode(obj)
    except ObjectEncodingError as err:
        problem = err
    agree("allgather_object", name_, "", problem, scope=where)
    if where.size == 1:
        return [decode(payload, "this rank")]
    return [decode(p, f"rank {r}") for r, p in zip(where.ranks, allgather_bytes(payload, where))]
