"""Horovod's gathering and scattering collectives: allgather, grouped_allgather, alltoall,
reducescatter and grouped_reducescatter (see :mod:`mxtorch.horovod._ops` for the conventions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ..nd._ndarray_type import follows_inputs
from ..profiler import span
from ._control import agree, all_gather_flat, ctrl_device, op_name
from ._errors import CollectiveTypeError, CollectiveValueError
from ._ops import (
    REDUCIBLE,
    ReduceOp,
    check_factor,
    check_group,
    check_tensor,
    resolve_op,
    scale_,
    sig,
    work_dtype,
)
from ._process_sets import Scope, scope

__all__ = ["allgather", "grouped_allgather", "alltoall", "reducescatter", "grouped_reducescatter"]


# ---- allgather -----------------------------------------------------------------------------------
def _gather_one(src: torch.Tensor, dims: list[int], where: Scope, name: str) -> torch.Tensor:
    """Concatenate every member's ``src`` (first dimensions ``dims``) along dimension 0."""
    if where.size == 1:
        return src.clone()
    rest = tuple(src.shape[1:])
    width = max(dims)
    padded = src
    if src.shape[0] != width:  # unequal first dimensions: pad to the widest, then cut out
        padded = torch.zeros((width, *rest), dtype=src.dtype, device=src.device)
        padded[: src.shape[0]] = src
    out = torch.empty((where.size * width, *rest), dtype=src.dtype, device=src.device)
    with span("allgather", keys=name, bytes=out.numel() * out.element_size()):
        all_gather_flat(out, padded.contiguous(), group=where.group)
    if all(d == width for d in dims):
        return out
    return torch.cat([out[r * width : r * width + d] for r, d in enumerate(dims)])


def _first_dims(tensors: list[torch.Tensor], where: Scope) -> list[list[int]]:
    """Every member's first dimension of each tensor: ``dims[i][r]`` (one gather for the group)."""
    if where.size == 1:
        return [[int(t.shape[0])] for t in tensors]
    dev = ctrl_device(where)
    mine = torch.tensor([int(t.shape[0]) for t in tensors], dtype=torch.int64, device=dev)
    table = torch.empty(where.size * len(tensors), dtype=torch.int64, device=dev)
    all_gather_flat(table, mine, group=where.group)
    rows = table.view(where.size, len(tensors)).tolist()
    return [[int(rows[r][i]) for r in range(where.size)] for i in range(len(tensors))]


_SCALAR = ("{kind} needs tensors with at least one dimension (it concatenates along dimension 0); "
           "reshape a scalar with tensor.reshape(1)")


@follows_inputs
def allgather(tensor: torch.Tensor, name: str | None = None, priority: int = 0,
              process_set: Any = None) -> torch.Tensor:
    """Every member's ``tensor`` concatenated along dimension 0, in rank order.

    The first dimension may differ between ranks; the other dimensions and the dtype may not.
    """
    where = scope(process_set)
    check_tensor(tensor, "tensor")
    name_ = op_name("allgather", name, where)
    problem = None if tensor.dim() >= 1 else CollectiveValueError(_SCALAR.format(kind="allgather"))
    dims = agree("allgather", name_, sig(tensor, skip_dim0=True), problem,
                 dim0=int(tensor.shape[0]) if tensor.dim() else 0, scope=where)
    with torch.no_grad():
        return _gather_one(tensor.detach().contiguous(), dims, where, name_)


@follows_inputs
def grouped_allgather(tensors: Sequence[torch.Tensor], name: str | None = None, priority: int = 0,
                      process_set: Any = None) -> list[torch.Tensor]:
    """:func:`allgather` of each tensor of ``tensors`` (one negotiation for the group); new tensors.

    Each tensor's first dimension may differ between ranks (and from the other tensors')."""
    where = scope(process_set)
    ts = check_group(tensors)
    name_ = op_name("grouped_allgather", name, where)
    scalar = not all(t.dim() >= 1 for t in ts)
    problem = CollectiveValueError(_SCALAR.format(kind="grouped_allgather")) if scalar else None
    signature = f"[{','.join(sig(t, skip_dim0=True) for t in ts)}]"
    agree("grouped_allgather", name_, signature, problem, scope=where)
    if not ts:
        return []
    with torch.no_grad():
        dims = _first_dims(ts, where)
        return [_gather_one(t.detach().contiguous(), d, where, f"{name_}.{i}") for i, (t, d) in
                enumerate(zip(ts, dims))]


# ---- alltoall ------------------------------------------------------------------------------------
def _as_splits(splits: Any, world: int, dim0: int) -> list[int]:
    if isinstance(splits, torch.Tensor):
        values = splits.detach().cpu().reshape(-1).tolist()
    elif isinstance(splits, np.ndarray):
        values = splits.reshape(-1).tolist()
    elif isinstance(splits, Sequence) and not isinstance(splits, (str, bytes)):
        values = list(splits)
    else:
        raise CollectiveTypeError(f"splits must be a list, tensor or array of ints, got "
                                  f"{type(splits).__name__}")
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        raise CollectiveTypeError(f"splits must hold integers, got {values!r}")
    out = [int(v) for v in values]
    if len(out) != world:
        raise CollectiveValueError(f"splits has {len(out)} entries, expected one per rank ({world})")
    if any(v < 0 for v in out):
        raise CollectiveValueError(f"splits must be non-negative, got {out}")
    if sum(out) > dim0:
        raise CollectiveValueError(f"splits sum to {sum(out)}, more than the tensor's first dimension {dim0}")
    return out


@follows_inputs
def alltoall(tensor: torch.Tensor, splits: Any = None, name: str | None = None, priority: int = 0,
             process_set: Any = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Send slices of ``tensor`` along dimension 0 to every member; return what this rank received.

    ``splits[j]`` rows go to the set's ``j``-th rank (default: equal parts, which needs dimension 0
    divisible by the number of ranks).  The received slices are concatenated in rank order.  As in
    Horovod, when ``splits`` is given the result is ``(received, received_splits)``, the latter an
    int32 tensor giving how many rows came from each rank; without ``splits`` only the tensor.
    """
    where = scope(process_set)
    check_tensor(tensor, "tensor")
    name_ = op_name("alltoall", name, where)
    world = where.size
    problem: BaseException | None = None
    send: list[int] = []
    if tensor.dim() == 0:
        problem = CollectiveValueError("alltoall needs a tensor with at least one dimension (it splits "
                                       "dimension 0)")
    elif splits is None:
        if tensor.shape[0] % world:
            problem = CollectiveValueError(
                f"alltoall without splits divides dimension 0 ({tensor.shape[0]}) equally among {world} "
                "ranks, which it does not divide; pass splits"
            )
        else:
            send = [tensor.shape[0] // world] * world
    else:
        try:
            send = _as_splits(splits, world, int(tensor.shape[0]))
        except (CollectiveTypeError, CollectiveValueError) as err:
            problem = err
    agree("alltoall", name_, sig(tensor, skip_dim0=True), problem, scope=where)
    with torch.no_grad():
        src = tensor.detach()[: sum(send)].contiguous()
        if world == 1:
            out, recv = src.clone(), send
        else:
            dev = ctrl_device(where)
            send_t = torch.tensor(send, dtype=torch.int64, device=dev)
            recv_t = torch.empty(world, dtype=torch.int64, device=dev)
            dist.all_to_all_single(recv_t, send_t, group=where.group)
            recv = [int(v) for v in recv_t.tolist()]
            out = torch.empty((sum(recv), *src.shape[1:]), dtype=src.dtype, device=src.device)
            with span("alltoall", keys=name_, bytes=src.numel() * src.element_size()):
                dist.all_to_all_single(out, src, output_split_sizes=recv, input_split_sizes=send,
                                       group=where.group)
    if splits is None:
        return out
    return out, torch.tensor(recv, dtype=torch.int32)


# ---- reducescatter -------------------------------------------------------------------------------
def _scatter_args(op: Any, prescale_factor: Any, postscale_factor: Any) -> tuple[ReduceOp, float, float]:
    op_ = resolve_op(None, op, ReduceOp.AVERAGE)
    if op_ not in (ReduceOp.AVERAGE, ReduceOp.SUM):
        raise ValueError(f"reducescatter supports hvd.Average and hvd.Sum, got {op_.name}")
    pre = check_factor("prescale_factor", prescale_factor)
    return op_, pre, check_factor("postscale_factor", postscale_factor)


def _scatter_problem(kind: str, ts: list[torch.Tensor]) -> BaseException | None:
    for i, t in enumerate(ts):
        if t.dim() == 0:
            return CollectiveValueError(f"{kind} needs tensors with at least one dimension (it splits "
                                        f"dimension 0); tensor {i} is a scalar")
        if t.dtype not in REDUCIBLE:
            return CollectiveTypeError(f"{kind} cannot reduce dtype {t.dtype} (tensor {i})")
    return None


def _scatter_one(tensor: torch.Tensor, op: ReduceOp, pre: float, post: float, where: Scope,
                 name: str) -> torch.Tensor:
    world, me = where.size, where.rank
    d0 = int(tensor.shape[0])
    counts = [d0 // world + (1 if r < d0 % world else 0) for r in range(world)]
    divisor = world if op is ReduceOp.AVERAGE else 1
    buf = tensor.detach().to(work_dtype(tensor.dtype, op, world), copy=True).contiguous()
    scale_(buf, pre)
    if world == 1:
        out = buf
    else:
        chunks = [c.contiguous() for c in buf.split(counts)]
        out = torch.empty_like(chunks[me])
        with span("reducescatter", keys=name, bytes=buf.numel() * buf.element_size()):
            dist.reduce_scatter(out, chunks, op=dist.ReduceOp.SUM, group=where.group)
    if divisor > 1 and not out.is_floating_point():
        out.copy_(torch.div(out, divisor, rounding_mode="trunc"))
        scale_(out, post)
    else:
        scale_(out, post / divisor)
    return out.to(tensor.dtype)


@follows_inputs
def reducescatter(tensor: torch.Tensor, op: ReduceOp | int = ReduceOp.AVERAGE, name: str | None = None,
                  priority: int = 0, process_set: Any = None, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0) -> torch.Tensor:
    """Reduce ``tensor`` over the ranks (Average or Sum) and return this rank's slice of dimension 0.

    Rank ``r`` (of the set) gets ``d0 // n`` rows, plus one when ``r < d0 % n`` (the first ranks
    take the remainder), in rank order.  The shape and dtype must be the same on every rank.
    """
    op_, pre, post = _scatter_args(op, prescale_factor, postscale_factor)
    where = scope(process_set)
    check_tensor(tensor, "tensor")
    name_ = op_name("reducescatter", name, where)
    signature = f"{sig(tensor)} op={op_.name} prescale={pre!r} postscale={post!r}"
    agree("reducescatter", name_, signature, _scatter_problem("reducescatter", [tensor]), scope=where)
    with torch.no_grad():
        return _scatter_one(tensor, op_, pre, post, where, name_)


@follows_inputs
def grouped_reducescatter(tensors: Sequence[torch.Tensor], op: ReduceOp | int = ReduceOp.AVERAGE,
                          name: str | None = None, priority: int = 0, process_set: Any = None,
                          prescale_factor: float = 1.0, postscale_factor: float = 1.0) -> list[torch.Tensor]:
    """:func:`reducescatter` of each tensor of ``tensors`` (one negotiation for the group)."""
    op_, pre, post = _scatter_args(op, prescale_factor, postscale_factor)
    where = scope(process_set)
    ts = check_group(tensors)
    name_ = op_name("grouped_reducescatter", name, where)
    signature = f"[{','.join(sig(t) for t in ts)}] op={op_.name} prescale={pre!r} postscale={post!r}"
    problem = _scatter_problem("grouped_reducescatter", ts)
    agree("grouped_reducescatter", name_, signature, problem, scope=where)
    with torch.no_grad():
        return [_scatter_one(t, op_, pre, post, where, f"{name_}.{i}") for i, t in enumerate(ts)]
