"""``hvd.join()``: a rank out of data keeps serving the others' allreduces until every rank joins.

A joined rank answers each collective header with a join mark; the lowest rank still running
then tells it what the collective is (kind, dtypes, shapes, op, factors, as JSON), and the joined
rank takes part with neutral inputs: zeros for Sum and Average (so Average still divides by the
number of ranks, as in Horovod), ones for Product, +/-inf (or the integer limits) for Min/Max,
where Horovod sends zeros.  Other collectives meeting a joined rank are an error on the running
ranks (Horovod refuses allgather, broadcast, alltoall and reducescatter alike).  When every rank
has joined, ``join`` returns on all of them the rank that joined last.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from ..profiler import span
from . import _ops
from ._control import JOIN_KEY, all_gather_flat, broadcast_bytes, ctrl_device
from ._errors import HorovodError
from ._process_sets import Scope, scope

__all__ = ["join"]

_MAX_ELEMENTS = 1 << 34  # a description asking for more than this is not from a sane peer
_DTYPES = {str(d).removeprefix("torch."): d for d in _ops.REDUCIBLE}


def join(device: int = -1) -> int:
    """Wait, serving the other ranks' allreduces, until every rank has called ``join``; returns the
    rank that joined last (the same on every rank).  ``device`` is accepted as in Horovod (the
    neutral inputs are made on the device of the job's collectives)."""
    where = scope(None)
    if where.size == 1:
        return where.rank
    served = 0
    dev = ctrl_device(where)
    with span("join"):
        while True:
            header = torch.tensor([JOIN_KEY, served], dtype=torch.int64, device=dev)
            table = torch.empty(2 * where.size, dtype=torch.int64, device=dev)
            all_gather_flat(table, header, group=where.group)
            keys = [int(k) for k in table[0::2].tolist()]
            if all(k == JOIN_KEY for k in keys):
                rounds = [int(r) for r in table[1::2].tolist()]
                return max(r for r, n in zip(where.ranks, rounds) if n == 0)
            leader = where.ranks[next(i for i, k in enumerate(keys) if k != JOIN_KEY)]
            message = json.loads(broadcast_bytes(None, leader, where))
            served += 1
            if "run" in message:
                _serve(message["run"], where, dev, leader)


def _serve(desc: Any, where: Scope, dev: torch.device, leader: int) -> None:
    """Take part in the allreduce ``desc`` describes, with neutral inputs."""
    try:
        op = _ops.ReduceOp(int(desc["op"]))
        specs = [(_DTYPES[d], [int(x) for x in shape]) for d, shape in desc["tensors"]]
        if any(x < 0 for _, shape in specs for x in shape) or \
                sum(int(torch.Size(shape).numel()) for _, shape in specs) > _MAX_ELEMENTS:
            raise ValueError("shape out of bounds")
        pre, post, name, kind = float(desc["pre"]), float(desc["post"]), str(desc["name"]), str(desc["kind"])
    except (KeyError, TypeError, ValueError) as err:
        raise HorovodError(f"hvd.join: rank {leader} sent a collective description this rank cannot "
                           f"read ({err}): {str(desc)[:200]}") from None
    inputs = [torch.full(shape, _ops.neutral(dtype, op), dtype=dtype, device=dev) for dtype, shape in specs]
    _ops.allreduce_list(inputs, op, pre, post, name, kind, False, where, joined=True)
