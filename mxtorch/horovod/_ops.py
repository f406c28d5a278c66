"""Horovod's tensor collectives on torch.distributed: allreduce, allgather, broadcast, alltoall, ...

Horovod matches collectives across ranks by name, in any order.  Here every collective runs in
call order, so every rank must call the same collectives in the same order (as with any
torch.distributed program); names (auto-generated per kind when not given), shapes, dtypes and
factors are checked first (see :mod:`mxtorch.horovod._control`), so ranks calling different
things get a :class:`CollectiveMismatchError` listing what each rank called.

The results are new tensors (or the input, for the ``_`` variants), computed under
``torch.no_grad()``: unlike ``horovod.torch`` these ops are not differentiable.  As in
``horovod.mxnet``, MXNet's arrays in give MXNet's arrays out: a result is an ``mx.nd.NDArray``
when an input is one (so ``out.size`` is MXNet's element count), a plain ``torch.Tensor`` otherwise.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ..nd._ndarray_type import follows_inputs
from ..profiler import horovod_timeline, span
from . import _basics
from ._adasum import adasum_reduce
from ._control import agree, op_name
from ._errors import CollectiveTypeError, CollectiveValueError
from ._process_sets import Scope, scope

__all__ = [
    "ReduceOp", "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "allreduce", "allreduce_", "grouped_allreduce", "grouped_allreduce_",
    "broadcast", "broadcast_", "barrier",
]


class ReduceOp(enum.IntEnum):
    """Reduction operations of :func:`allreduce` (values as in Horovod)."""

    AVERAGE = 0
    SUM = 1
    ADASUM = 2
    MIN = 3
    MAX = 4
    PRODUCT = 5


Average = ReduceOp.AVERAGE
Sum = ReduceOp.SUM
Adasum = ReduceOp.ADASUM
Min = ReduceOp.MIN
Max = ReduceOp.MAX
Product = ReduceOp.PRODUCT

_TORCH_OP = {
    ReduceOp.AVERAGE: dist.ReduceOp.SUM,
    ReduceOp.SUM: dist.ReduceOp.SUM,
    ReduceOp.MIN: dist.ReduceOp.MIN,
    ReduceOp.MAX: dist.ReduceOp.MAX,
    ReduceOp.PRODUCT: dist.ReduceOp.PRODUCT,
}
_LOW_PRECISION = (torch.float16, torch.bfloat16)
REDUCIBLE = (torch.float16, torch.bfloat16, torch.float32, torch.float64,
              torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def resolve_op(average: bool | None, op: Any, default: ReduceOp) -> ReduceOp:
    if average is not None and op is not None:
        raise ValueError("give either average= (deprecated in Horovod) or op=, not both")
    if op is None:
        return default if average is None else (ReduceOp.AVERAGE if average else ReduceOp.SUM)
    try:
        resolved = ReduceOp(op)
    except ValueError:
        raise ValueError(
            f"unknown reduction op {op!r}: use hvd.Average, hvd.Sum, hvd.Min, hvd.Max or hvd.Product"
        ) from None
    return resolved


def check_tensor(t: Any, what: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise TypeError(f"{what} must be a dense tensor, got layout {t.layout}")
    return t


def check_factor(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return float(value)


def sig(t: torch.Tensor, skip_dim0: bool = False) -> str:
    shape = list(t.shape)
    if skip_dim0:
        return f"{str(t.dtype).removeprefix('torch.')}[*, {', '.join(map(str, shape[1:]))}]"
    return f"{str(t.dtype).removeprefix('torch.')}{shape}"


# ---- allreduce -----------------------------------------------------------------------------------
def work_dtype(dtype: torch.dtype, op: ReduceOp, world: int) -> torch.dtype:
    # With two ranks each element sees one addition/multiplication, which gloo/NCCL round
    # correctly in fp16/bf16; with more, accumulate in fp32 so the result is rounded once.
    if dtype in _LOW_PRECISION and op in (ReduceOp.SUM, ReduceOp.AVERAGE, ReduceOp.PRODUCT) and world > 2:
        return torch.float32
    return dtype


def scale_(buf: torch.Tensor, factor: float) -> torch.Tensor:
    """``buf * factor`` in ``buf``'s dtype, computed in fp32 for fp16/bf16 and in fp64 for integers."""
    if factor == 1.0:
        return buf
    if buf.is_floating_point() and buf.dtype not in _LOW_PRECISION:
        return buf.mul_(factor)
    wide = torch.float32 if buf.dtype in _LOW_PRECISION else torch.float64
    return buf.copy_(buf.to(wide).mul_(factor))


def _takes(op: ReduceOp, dtype: torch.dtype) -> bool:
    return dtype in REDUCIBLE and (op is not ReduceOp.ADASUM or dtype.is_floating_point)


def neutral(dtype: torch.dtype, op: ReduceOp) -> float | int:
    """The input a rank waiting in ``hvd.join()`` contributes: one that leaves ``op``'s result alone."""
    if op in (ReduceOp.SUM, ReduceOp.AVERAGE):
        return 0
    if op is ReduceOp.PRODUCT:
        return 1
    big: float | int = float("inf") if dtype.is_floating_point else torch.iinfo(dtype).max
    if op is ReduceOp.MIN:
        return big
    return -big if dtype.is_floating_point else torch.iinfo(dtype).min


def allreduce_list(tensors: list[torch.Tensor], op: ReduceOp, prescale: float, postscale: float,
                    name: str, kind: str, inplace: bool, where: Scope, joined: bool = False
                    ) -> list[torch.Tensor]:
    """The allreduce of ``tensors`` among ``where``'s ranks; ``joined``: this rank waits in
    ``hvd.join()`` and takes part with neutral inputs (already agreed, not scaled)."""
    problem: BaseException | None = None
    for i, t in enumerate(tensors):
        if not _takes(op, t.dtype):
            problem = CollectiveTypeError(
                f"{kind} cannot reduce tensor {i} of dtype {t.dtype} with {op.name}: supported dtypes are "
                f"{[str(d).removeprefix('torch.') for d in REDUCIBLE if _takes(op, d)]}"
            )
    shapes = ",".join(sig(t) for t in tensors)
    signature = f"[{shapes}] op={op.name} prescale={prescale!r} postscale={postscale!r}"
    tl = horovod_timeline.active()
    names = [name] if len(tensors) == 1 else [f"{name}.{i}" for i in range(len(tensors))]
    if tl:
        tl.negotiate_begin(names, "ALLREDUCE")
    if not joined:
        desc = None if op is ReduceOp.ADASUM else {
            "kind": kind, "name": name, "op": int(op), "pre": prescale, "post": postscale,
            "tensors": [[str(t.dtype).removeprefix("torch."), list(t.shape)] for t in tensors]}
        agree(kind, name, signature, problem, scope=where, join_desc=desc)
    if tl:
        tl.negotiate_end(names)
    if op is ReduceOp.ADASUM:
        return adasum_reduce(tensors, prescale, postscale, inplace, where)
    world = where.size
    divisor = world if op is ReduceOp.AVERAGE else 1
    results: list[torch.Tensor | None] = [None] * len(tensors)
    buckets: dict[torch.dtype, list[int]] = {}
    for i, t in enumerate(tensors):
        buckets.setdefault(t.dtype, []).append(i)
    with torch.no_grad():
        for dtype, idx in buckets.items():
            work = work_dtype(dtype, op, world)
            members = [tensors[i] for i in idx]
            direct = inplace and len(members) == 1 and work == dtype and members[0].is_contiguous()
            if direct:
                flat = members[0].detach().view(-1)
            elif len(members) == 1:
                flat = members[0].detach().reshape(-1).to(work, copy=True)
            else:
                flat = torch.cat([m.detach().reshape(-1).to(work) for m in members])
            if not joined:
                scale_(flat, prescale)
            if tl:
                tl.op_begin([names[i] for i in idx], "ALLREDUCE",
                            horovod_timeline.activity("ALLREDUCE", flat), fused=len(idx) > 1)
            if world > 1:
                nbytes = flat.numel() * flat.element_size()
                with span("allreduce", keys=name, bytes=nbytes, bucket=str(dtype)):
                    dist.all_reduce(flat, op=_TORCH_OP[op], group=where.group)
            if tl:
                tl.op_end([names[i] for i in idx], len(idx) > 1, horovod_timeline.describe(members))
            if divisor > 1 and not flat.is_floating_point():
                flat.copy_(torch.div(flat, divisor, rounding_mode="trunc"))  # integer mean, exact
                scale_(flat, postscale)
            else:
                scale_(flat, postscale / divisor)
            if direct:
                results[idx[0]] = members[0]
                continue
            offset = 0
            for i, m in zip(idx, members):
                piece = flat[offset : offset + m.numel()].view(m.shape)
                offset += m.numel()
                if inplace:
                    m.copy_(piece)
                    results[i] = m
                else:  # pieces of a fresh buffer: no copy unless the dtype changes back
                    results[i] = piece.to(dtype)
    return [r for r in results if r is not None]


def _reduce_args(process_set: Any, average: bool | None, op: Any, prescale_factor: Any,
                 postscale_factor: Any) -> tuple[Scope, ReduceOp, float, float]:
    op_ = resolve_op(average, op, ReduceOp.AVERAGE)
    pre = check_factor("prescale_factor", prescale_factor)
    return scope(process_set), op_, pre, check_factor("postscale_factor", postscale_factor)


@follows_inputs
def allreduce(tensor: torch.Tensor, average: bool | None = None, name: str | None = None, priority: int = 0,
              prescale_factor: float = 1.0, postscale_factor: float = 1.0, process_set: Any = None,
              op: ReduceOp | int | None = None) -> torch.Tensor:
    """A new tensor: ``tensor`` reduced over all ranks (``op``, default Average).

    ``prescale_factor`` multiplies each rank's input before the reduction and ``postscale_factor``
    the result after it; Average divides by the number of ranks after the sum.  ``average`` is
    Horovod's older spelling (True: Average, False: Sum).  Integer averages round toward zero.
    fp16/bf16 sums with more than two ranks accumulate in fp32.  ``priority`` is accepted and
    ignored (collectives run in call order).
    """
    t = check_tensor(tensor, "tensor")
    where, op_, pre, post = _reduce_args(process_set, average, op, prescale_factor, postscale_factor)
    name_ = op_name("allreduce", name, where)
    return allreduce_list([t], op_, pre, post, name_, "allreduce", False, where)[0]


def allreduce_(tensor: torch.Tensor, average: bool | None = None, name: str | None = None, priority: int = 0,
               prescale_factor: float = 1.0, postscale_factor: float = 1.0, process_set: Any = None,
               op: ReduceOp | int | None = None) -> torch.Tensor:
    """:func:`allreduce` writing the result into ``tensor``, which is returned."""
    t = check_tensor(tensor, "tensor")
    where, op_, pre, post = _reduce_args(process_set, average, op, prescale_factor, postscale_factor)
    return allreduce_list([t], op_, pre, post, op_name("allreduce", name, where), "allreduce", True, where)[0]


def check_group(tensors: Any) -> list[torch.Tensor]:
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, Sequence):
        raise TypeError(f"tensors must be a list or tuple of torch.Tensor, got {type(tensors).__name__}")
    return [check_tensor(t, f"tensors[{i}]") for i, t in enumerate(tensors)]


def _grouped_allreduce(tensors: Sequence[torch.Tensor], average: bool | None, name: str | None,
                       prescale_factor: float, postscale_factor: float, process_set: Any,
                       op: ReduceOp | int | None, in_place: bool) -> list[torch.Tensor]:
    where, op_, pre, post = _reduce_args(process_set, average, op, prescale_factor, postscale_factor)
    ts = check_group(tensors)
    if not ts:
        return []
    label = "grouped_allreduce"
    return allreduce_list(ts, op_, pre, post, op_name(label, name, where), label, in_place, where)


@follows_inputs
def grouped_allreduce(tensors: Sequence[torch.Tensor], average: bool | None = None, name: str | None = None,
                      priority: int = 0, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                      process_set: Any = None, op: ReduceOp | int | None = None) -> list[torch.Tensor]:
    """:func:`allreduce` of several tensors as one flattened collective per dtype; returns new tensors."""
    return _grouped_allreduce(tensors, average, name, prescale_factor, postscale_factor, process_set, op,
                              in_place=False)


def grouped_allreduce_(tensors: Sequence[torch.Tensor], average: bool | None = None, name: str | None = None,
                       priority: int = 0, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                       process_set: Any = None, op: ReduceOp | int | None = None) -> list[torch.Tensor]:
    """:func:`grouped_allreduce` writing each result into its input; returns the inputs."""
    return _grouped_allreduce(tensors, average, name, prescale_factor, postscale_factor, process_set, op,
                              in_place=True)


# ---- broadcast ------------------------------------------------------------------------------------
def check_root(root_rank: Any) -> int:
    if isinstance(root_rank, bool) or not isinstance(root_rank, (int, np.integer)):
        raise TypeError(f"root_rank must be an int, got {root_rank!r}")
    return int(root_rank)


def root_problem(root: int, where: Scope) -> ValueError | None:
    if root not in where.ranks:
        if where.set_id == 0:
            return CollectiveValueError(f"root_rank {root} is out of range: there are {where.size} ranks "
                              f"(0..{where.size - 1})")
        return CollectiveValueError(f"root_rank {root} is not in the process set {list(where.ranks)} "
                          "(root_rank is a global rank)")
    return None


def _checked_broadcast_root(tensor: torch.Tensor, root_rank: int, name: str | None,
                            process_set: Any) -> tuple[int, Scope]:
    """The checks every rank agrees on before a broadcast; returns the root rank and the scope."""
    where = scope(process_set)
    check_tensor(tensor, "tensor")
    root = check_root(root_rank)
    agree("broadcast", op_name("broadcast", name, where), f"{sig(tensor)} root={root}",
          root_problem(root, where), scope=where)
    return root, where


@follows_inputs
def broadcast(tensor: torch.Tensor, root_rank: int, name: str | None = None, priority: int = 0,
              process_set: Any = None) -> torch.Tensor:
    """A new tensor holding ``root_rank``'s ``tensor`` (same shape and dtype on every rank).

    ``root_rank`` is a global rank, also with a ``process_set`` (it must be a member)."""
    root, where = _checked_broadcast_root(tensor, root_rank, name, process_set)
    with torch.no_grad():
        if _basics.rank() == root:
            out = tensor.detach().clone(memory_format=torch.contiguous_format)
        else:
            out = torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
        if where.size > 1:
            with span("broadcast", keys=name, root=root):
                dist.broadcast(out, src=root, group=where.group)
    return out


def broadcast_(tensor: torch.Tensor, root_rank: int, name: str | None = None, priority: int = 0,
               process_set: Any = None) -> torch.Tensor:
    """:func:`broadcast` into ``tensor`` itself, which is returned."""
    root, where = _checked_broadcast_root(tensor, root_rank, name, process_set)
    if where.size == 1:
        return tensor
    with torch.no_grad(), span("broadcast", keys=name, root=root):
        if tensor.is_contiguous():
            dist.broadcast(tensor.detach(), src=root, group=where.group)
        else:
            buf = tensor.detach().contiguous()
            dist.broadcast(buf, src=root, group=where.group)
            tensor.copy_(buf)
    return tensor


def grouped_broadcast_(tensors: list[torch.Tensor], root_rank: int, name: str,
                       process_set: Any = None) -> None:
    """Broadcast several tensors in place, one flattened collective per dtype."""
    where = scope(process_set)
    root = check_root(root_rank)
    for i, t in enumerate(tensors):
        check_tensor(t, f"tensors[{i}]")
    signature = f"[{','.join(sig(t) for t in tensors)}] root={root}"
    agree("grouped_broadcast", name, signature, root_problem(root, where), scope=where)
    if where.size == 1 or not tensors:
        return
    buckets: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for t in tensors:
        buckets.setdefault((t.dtype, t.device), []).append(t)
    with torch.no_grad():
        for members in buckets.values():
            flat = torch.cat([m.detach().reshape(-1) for m in members])
            with span("broadcast", keys=name, bytes=flat.numel() * flat.element_size(), root=root):
                dist.broadcast(flat, src=root, group=where.group)
            offset = 0
            for m in members:
                m.copy_(flat[offset : offset + m.numel()].view(m.shape))
                offset += m.numel()


def barrier(process_set: Any = None) -> None:
    """Wait until every rank of ``process_set`` (default: the job) gets here."""
    where = scope(process_set)
    if where.size > 1:
        agree("barrier", op_name("barrier", None, where), "", scope=where)
        with span("barrier"):
            dist.barrier(group=where.group)
