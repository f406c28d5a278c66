"""Horovod's tensor collectives on torch.distributed: allreduce, allgather, broadcast, alltoall, ...

Horovod matches collectives across ranks by name, in any order.  Here every collective runs in
call order, so every rank must call the same collectives in the same order (as with any
torch.distributed program); names (auto-generated per kind when not given), shapes, dtypes and
factors are checked first (see :mod:`mxtorch.horovod._control`), so ranks calling different
things get a :class:`CollectiveMismatchError` listing what each rank called.

The results are new tensors (or the input, for the ``_`` variants), computed under
``torch.no_grad()``: unlike ``horovod.torch`` these ops are not differentiable.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ..profiler import horovod_timeline, span
from . import _basics
from ._control import agree, all_gather_flat, ctrl_device, op_name

__all__ = [
    "ReduceOp", "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "allreduce", "allreduce_", "grouped_allreduce", "grouped_allreduce_",
    "allgather", "broadcast", "broadcast_", "alltoall", "reducescatter", "barrier",
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
_REDUCIBLE = (torch.float16, torch.bfloat16, torch.float32, torch.float64,
              torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _resolve_op(average: bool | None, op: Any, default: ReduceOp) -> ReduceOp:
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
    if resolved is ReduceOp.ADASUM:
        raise NotImplementedError(
            "hvd.Adasum is not implemented in mxtorch.horovod: use hvd.Average or hvd.Sum "
            "(Adasum's pairwise scaled reduction needs Horovod's own MPI/NCCL kernels)"
        )
    return resolved


def _check_tensor(t: Any, what: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise TypeError(f"{what} must be a dense tensor, got layout {t.layout}")
    return t


def _check_factor(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return float(value)


def _sig(t: torch.Tensor, skip_dim0: bool = False) -> str:
    shape = list(t.shape)
    if skip_dim0:
        return f"{str(t.dtype).removeprefix('torch.')}[*, {', '.join(map(str, shape[1:]))}]"
    return f"{str(t.dtype).removeprefix('torch.')}{shape}"


# ---- allreduce -----------------------------------------------------------------------------------
def _work_dtype(dtype: torch.dtype, op: ReduceOp, world: int) -> torch.dtype:
    # With two ranks each element sees one addition/multiplication, which gloo/NCCL round
    # correctly in fp16/bf16; with more, accumulate in fp32 so the result is rounded once.
    if dtype in _LOW_PRECISION and op in (ReduceOp.SUM, ReduceOp.AVERAGE, ReduceOp.PRODUCT) and world > 2:
        return torch.float32
    return dtype


def _scale_(buf: torch.Tensor, factor: float) -> torch.Tensor:
    """``buf * factor`` in ``buf``'s dtype, computed in fp32 for fp16/bf16 and in fp64 for integers."""
    if factor == 1.0:
        return buf
    if buf.is_floating_point() and buf.dtype not in _LOW_PRECISION:
        return buf.mul_(factor)
    wide = torch.float32 if buf.dtype in _LOW_PRECISION else torch.float64
    return buf.copy_(buf.to(wide).mul_(factor))


def _allreduce_list(tensors: list[torch.Tensor], op: ReduceOp, prescale: float, postscale: float,
                    name: str, kind: str, inplace: bool) -> list[torch.Tensor]:
    problem: BaseException | None = None
    for i, t in enumerate(tensors):
        if t.dtype not in _REDUCIBLE:
            problem = TypeError(
                f"{kind} cannot reduce tensor {i} of dtype {t.dtype}: supported dtypes are "
                f"{[str(d).removeprefix('torch.') for d in _REDUCIBLE]}"
            )
    shapes = ",".join(_sig(t) for t in tensors)
    sig = f"[{shapes}] op={op.name} prescale={prescale!r} postscale={postscale!r}"
    tl = horovod_timeline.active()
    names = [name] if len(tensors) == 1 else [f"{name}.{i}" for i in range(len(tensors))]
    if tl:
        tl.negotiate_begin(names, "ALLREDUCE")
    agree(kind, name, sig, problem)
    if tl:
        tl.negotiate_end(names)
    world = _basics.size()
    divisor = world if op is ReduceOp.AVERAGE else 1
    results: list[torch.Tensor | None] = [None] * len(tensors)
    buckets: dict[torch.dtype, list[int]] = {}
    for i, t in enumerate(tensors):
        buckets.setdefault(t.dtype, []).append(i)
    pg = _basics.process_group()
    with torch.no_grad():
        for dtype, idx in buckets.items():
            work = _work_dtype(dtype, op, world)
            members = [tensors[i] for i in idx]
            direct = inplace and len(members) == 1 and work == dtype and members[0].is_contiguous()
            if direct:
                flat = members[0].detach().view(-1)
            elif len(members) == 1:
                flat = members[0].detach().reshape(-1).to(work, copy=True)
            else:
                flat = torch.cat([m.detach().reshape(-1).to(work) for m in members])
            _scale_(flat, prescale)
            if tl:
                tl.op_begin([names[i] for i in idx], "ALLREDUCE",
                            horovod_timeline.activity("ALLREDUCE", flat), fused=len(idx) > 1)
            if world > 1:
                nbytes = flat.numel() * flat.element_size()
                with span("allreduce", keys=name, bytes=nbytes, bucket=str(dtype)):
                    dist.all_reduce(flat, op=_TORCH_OP[op], group=pg)
            if tl:
                tl.op_end([names[i] for i in idx], len(idx) > 1, horovod_timeline.describe(members))
            if divisor > 1 and not flat.is_floating_point():
                flat.copy_(torch.div(flat, divisor, rounding_mode="trunc"))  # integer mean, exact
                _scale_(flat, postscale)
            else:
                _scale_(flat, postscale / divisor)
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
                 postscale_factor: Any) -> tuple[ReduceOp, float, float]:
    _basics.check_process_set(process_set)
    return (_resolve_op(average, op, ReduceOp.AVERAGE), _check_factor("prescale_factor", prescale_factor),
            _check_factor("postscale_factor", postscale_factor))


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
    op_, pre, post = _reduce_args(process_set, average, op, prescale_factor, postscale_factor)
    t = _check_tensor(tensor, "tensor")
    return _allreduce_list([t], op_, pre, post, op_name("allreduce", name), "allreduce", False)[0]


def allreduce_(tensor: torch.Tensor, average: bool | None = None, name: str | None = None, priority: int = 0,
               prescale_factor: float = 1.0, postscale_factor: float = 1.0, process_set: Any = None,
               op: ReduceOp | int | None = None) -> torch.Tensor:
    """:func:`allreduce` writing the result into ``tensor``, which is returned."""
    op_, pre, post = _reduce_args(process_set, average, op, prescale_factor, postscale_factor)
    t = _check_tensor(tensor, "tensor")
    return _allreduce_list([t], op_, pre, post, op_name("allreduce", name), "allreduce", True)[0]


def _check_group(tensors: Any) -> list[torch.Tensor]:
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, Sequence):
        raise TypeError(f"tensors must be a list or tuple of torch.Tensor, got {type(tensors).__name__}")
    return [_check_tensor(t, f"tensors[{i}]") for i, t in enumerate(tensors)]


def _grouped_allreduce(tensors: Sequence[torch.Tensor], average: bool | None, name: str | None,
                       prescale_factor: float, postscale_factor: float, process_set: Any,
                       op: ReduceOp | int | None, in_place: bool) -> list[torch.Tensor]:
    op_, pre, post = _reduce_args(process_set, average, op, prescale_factor, postscale_factor)
    ts = _check_group(tensors)
    if not ts:
        return []
    label = "grouped_allreduce"
    return _allreduce_list(ts, op_, pre, post, op_name(label, name), label, in_place)


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


# ---- allgather / broadcast -----------------------------------------------------------------------
def allgather(tensor: torch.Tensor, name: str | None = None, priority: int = 0,
              process_set: Any = None) -> torch.Tensor:
    """Every rank's ``tensor`` concatenated along dimension 0, in rank order.

    The first dimension may differ between ranks; the other dimensions and the dtype may not.
    """
    _basics.check_process_set(process_set)
    _check_tensor(tensor, "tensor")
    name_ = op_name("allgather", name)
    problem = None if tensor.dim() >= 1 else ValueError(
        "allgather needs a tensor with at least one dimension (it concatenates along dimension 0); "
        "reshape a scalar with tensor.reshape(1)"
    )
    dims = agree("allgather", name_, _sig(tensor, skip_dim0=True), problem,
                  dim0=int(tensor.shape[0]) if tensor.dim() else 0)
    world = _basics.size()
    with torch.no_grad():
        src = tensor.detach().contiguous()
        if world == 1:
            return src.clone()
        rest = tuple(src.shape[1:])
        width = max(dims)
        if all(d == width for d in dims):
            out = torch.empty((world * width, *rest), dtype=src.dtype, device=src.device)
            all_gather_flat(out, src, group=_basics.process_group())
            return out
        padded = torch.zeros((width, *rest), dtype=src.dtype, device=src.device)
        padded[: src.shape[0]] = src
        out = torch.empty((world * width, *rest), dtype=src.dtype, device=src.device)
        all_gather_flat(out, padded, group=_basics.process_group())
        return torch.cat([out[r * width : r * width + d] for r, d in enumerate(dims)])


def check_root(root_rank: Any) -> int:
    if isinstance(root_rank, bool) or not isinstance(root_rank, (int, np.integer)):
        raise TypeError(f"root_rank must be an int, got {root_rank!r}")
    return int(root_rank)


def root_problem(root: int) -> ValueError | None:
    world = _basics.size()
    if not 0 <= root < world:
        return ValueError(f"root_rank {root} is out of range: there are {world} ranks (0..{world - 1})")
    return None


def _checked_broadcast_root(tensor: torch.Tensor, root_rank: int, name: str | None,
                            process_set: Any) -> int:
    """The checks every rank agrees on before a broadcast; returns the root rank."""
    _basics.check_process_set(process_set)
    _check_tensor(tensor, "tensor")
    root = check_root(root_rank)
    agree("broadcast", op_name("broadcast", name), f"{_sig(tensor)} root={root}", root_problem(root))
    return root


def broadcast(tensor: torch.Tensor, root_rank: int, name: str | None = None, priority: int = 0,
              process_set: Any = None) -> torch.Tensor:
    """A new tensor holding ``root_rank``'s ``tensor`` (same shape and dtype on every rank)."""
    root = _checked_broadcast_root(tensor, root_rank, name, process_set)
    with torch.no_grad():
        if _basics.rank() == root:
            out = tensor.detach().clone(memory_format=torch.contiguous_format)
        else:
            out = torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
        if _basics.size() > 1:
            with span("broadcast", keys=name, root=root):
                dist.broadcast(out, src=root, group=_basics.process_group())
    return out


def broadcast_(tensor: torch.Tensor, root_rank: int, name: str | None = None, priority: int = 0,
               process_set: Any = None) -> torch.Tensor:
    """:func:`broadcast` into ``tensor`` itself, which is returned."""
    root = _checked_broadcast_root(tensor, root_rank, name, process_set)
    if _basics.size() == 1:
        return tensor
    with torch.no_grad():
        if tensor.is_contiguous():
            dist.broadcast(tensor.detach(), src=root, group=_basics.process_group())
        else:
            buf = tensor.detach().contiguous()
            dist.broadcast(buf, src=root, group=_basics.process_group())
            tensor.copy_(buf)
    return tensor


def grouped_broadcast_(tensors: list[torch.Tensor], root_rank: int, name: str) -> None:
    """Broadcast several tensors in place, one flattened collective per dtype."""
    root = check_root(root_rank)
    for i, t in enumerate(tensors):
        _check_tensor(t, f"tensors[{i}]")
    sig = f"[{','.join(_sig(t) for t in tensors)}] root={root}"
    agree("grouped_broadcast", name, sig, root_problem(root))
    if _basics.size() == 1 or not tensors:
        return
    buckets: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for t in tensors:
        buckets.setdefault((t.dtype, t.device), []).append(t)
    pg = _basics.process_group()
    with torch.no_grad():
        for members in buckets.values():
            flat = torch.cat([m.detach().reshape(-1) for m in members])
            with span("broadcast", keys=name, bytes=flat.numel() * flat.element_size(), root=root):
                dist.broadcast(flat, src=root, group=pg)
            offset = 0
            for m in members:
                m.copy_(flat[offset : offset + m.numel()].view(m.shape))
                offset += m.numel()


# ---- alltoall / reducescatter --------------------------------------------------------------------
def _as_splits(splits: Any, world: int, dim0: int) -> list[int]:
    if isinstance(splits, torch.Tensor):
        values = splits.detach().cpu().reshape(-1).tolist()
    elif isinstance(splits, np.ndarray):
        values = splits.reshape(-1).tolist()
    elif isinstance(splits, Sequence) and not isinstance(splits, (str, bytes)):
        values = list(splits)
    else:
        raise TypeError(f"splits must be a list, tensor or array of ints, got {type(splits).__name__}")
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        raise TypeError(f"splits must hold integers, got {values!r}")
    out = [int(v) for v in values]
    if len(out) != world:
        raise ValueError(f"splits has {len(out)} entries, expected one per rank ({world})")
    if any(v < 0 for v in out):
        raise ValueError(f"splits must be non-negative, got {out}")
    if sum(out) > dim0:
        raise ValueError(f"splits sum to {sum(out)}, more than the tensor's first dimension {dim0}")
    return out


def alltoall(tensor: torch.Tensor, splits: Any = None, name: str | None = None, priority: int = 0,
             process_set: Any = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Send slices of ``tensor`` along dimension 0 to every rank; return what this rank received.

    ``splits[j]`` rows go to rank ``j`` (default: equal parts, which needs dimension 0 divisible by
    the number of ranks).  The received slices are concatenated in rank order.  As in Horovod,
    when ``splits`` is given the result is ``(received, received_splits)``, the latter an int32
    tensor giving how many rows came from each rank; without ``splits`` only the tensor is returned.
    """
    _basics.check_process_set(process_set)
    _check_tensor(tensor, "tensor")
    name_ = op_name("alltoall", name)
    world = _basics.size()
    problem: BaseException | None = None
    send: list[int] = []
    if tensor.dim() == 0:
        problem = ValueError("alltoall needs a tensor with at least one dimension (it splits dimension 0)")
    elif splits is None:
        if tensor.shape[0] % world:
            problem = ValueError(
                f"alltoall without splits divides dimension 0 ({tensor.shape[0]}) equally among {world} "
                "ranks, which it does not divide; pass splits"
            )
        else:
            send = [tensor.shape[0] // world] * world
    else:
        try:
            send = _as_splits(splits, world, int(tensor.shape[0]))
        except (TypeError, ValueError) as err:
            problem = err
    agree("alltoall", name_, _sig(tensor, skip_dim0=True), problem)
    with torch.no_grad():
        src = tensor.detach()[: sum(send)].contiguous()
        if world == 1:
            out, recv = src.clone(), send
        else:
            pg = _basics.process_group()
            dev = ctrl_device()
            send_t = torch.tensor(send, dtype=torch.int64, device=dev)
            recv_t = torch.empty(world, dtype=torch.int64, device=dev)
            dist.all_to_all_single(recv_t, send_t, group=pg)
            recv = [int(v) for v in recv_t.tolist()]
            out = torch.empty((sum(recv), *src.shape[1:]), dtype=src.dtype, device=src.device)
            dist.all_to_all_single(out, src, output_split_sizes=recv, input_split_sizes=send, group=pg)
    if splits is None:
        return out
    return out, torch.tensor(recv, dtype=torch.int32)


def reducescatter(tensor: torch.Tensor, op: ReduceOp | int = ReduceOp.AVERAGE, name: str | None = None,
                  priority: int = 0, process_set: Any = None, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0) -> torch.Tensor:
    """Reduce ``tensor`` over all ranks (Average or Sum) and return this rank's slice of dimension 0.

    Rank ``r`` gets ``d0 // n`` rows, plus one when ``r < d0 % n`` (the first ranks take the
    remainder), in rank order.  The tensor's shape and dtype must be the same on every rank.
    """
    _basics.check_process_set(process_set)
    _check_tensor(tensor, "tensor")
    op_ = _resolve_op(None, op, ReduceOp.AVERAGE)
    if op_ not in (ReduceOp.AVERAGE, ReduceOp.SUM):
        raise ValueError(f"reducescatter supports hvd.Average and hvd.Sum, got {op_.name}")
    pre = _check_factor("prescale_factor", prescale_factor)
    post = _check_factor("postscale_factor", postscale_factor)
    name_ = op_name("reducescatter", name)
    problem: BaseException | None = None
    if tensor.dim() == 0:
        problem = ValueError("reducescatter needs a tensor with at least one dimension (it splits dim 0)")
    elif tensor.dtype not in _REDUCIBLE:
        problem = TypeError(f"reducescatter cannot reduce dtype {tensor.dtype}")
    sig = f"{_sig(tensor)} op={op_.name} prescale={pre!r} postscale={post!r}"
    agree("reducescatter", name_, sig, problem)
    world, me = _basics.size(), _basics.rank()
    d0 = int(tensor.shape[0])
    counts = [d0 // world + (1 if r < d0 % world else 0) for r in range(world)]
    divisor = world if op_ is ReduceOp.AVERAGE else 1
    work = _work_dtype(tensor.dtype, op_, world)
    with torch.no_grad():
        buf = tensor.detach().to(work, copy=True).contiguous()
        _scale_(buf, pre)
        if world == 1:
            out = buf
        else:
            chunks = [c.contiguous() for c in buf.split(counts)]
            out = torch.empty_like(chunks[me])
            dist.reduce_scatter(out, chunks, op=dist.ReduceOp.SUM, group=_basics.process_group())
        if divisor > 1 and not out.is_floating_point():
            out.copy_(torch.div(out, divisor, rounding_mode="trunc"))
            _scale_(out, post)
        else:
            _scale_(out, post / divisor)
        return out.to(tensor.dtype)


def barrier(process_set: Any = None) -> None:
    """Wait until every rank gets here."""
    _basics.check_process_set(process_set)
    _basics.require_init()
    if _basics.size() > 1:
        dist.barrier(group=_basics.process_group())
