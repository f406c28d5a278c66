"""Tensor parallelism for Gluon layers, on DTensor: Megatron's column → row Dense pairs.

A column-parallel ``Dense`` keeps rows ``[r*out/tp, (r+1)*out/tp)`` of its weight and bias and
returns its share of the output features; the row-parallel ``Dense`` after it keeps the matching
columns of its weight, multiplies its share, and one all-reduce sums the partial outputs.  Per
pair: one all-reduce forward (the row layer's output) and one backward (the column layer's input
gradient), as in Megatron-LM.

Parameters stay plain tensors holding the local shard (so the Trainer, the optimizers and the
data-parallel store work on them unchanged); each forward views them as DTensors
(``DTensor.from_local``) and torch's DTensor propagation places the collectives, forward and
backward.  :func:`gather_full` / :func:`shard_of` convert between shards and whole tensors for
the unpartitioned parameter file.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError
from .split import Unit

__all__ = ["TP_STYLES", "auto_plan", "check_plan", "shard_units", "gather_full", "ShardInfo"]

TP_STYLES = ("colwise", "rowwise", "replicate")
_ELEMENTWISE = ("Activation", "LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "Swish", "SiLU", "Dropout")


class ShardInfo:
    """How a parameter is split over the tensor-parallel group: dimension ``dim`` of ``full_shape``."""

    def __init__(self, full_shape: tuple[int, ...], dim: int, tp: int, rank: int) -> None:
        self.full_shape, self.dim, self.tp, self.rank = full_shape, dim, tp, rank

    def local(self, full: torch.Tensor) -> torch.Tensor:
        n = full.shape[self.dim] // self.tp
        return full.narrow(self.dim, self.rank * n, n).contiguous()


def _is_dense(block: Any) -> bool:
    from ..gluon import nn

    return isinstance(block, nn.Dense)


def auto_plan(units: Sequence[Unit], tp: int) -> dict[str, str]:
    """Megatron's pairing: a Dense whose output feeds (through elementwise layers only) another
    Dense becomes column-parallel and that one row-parallel; everything else is replicated.
    Layers whose split dimension does not divide by ``tp`` stay replicated."""
    plan: dict[str, str] = {}
    i = 0
    while i < len(units):
        u = units[i]
        block: Any = u.block
        if _is_dense(block) and block._units % tp == 0:
            j = i + 1
            while j < len(units) and type(units[j].block).__name__ in _ELEMENTWISE:
                j += 1
            nxt: Any = units[j].block if j < len(units) else None
            if nxt is not None and _is_dense(nxt) and nxt.weight.shape[1] % tp == 0:
                plan[u.path], plan[units[j].path] = "colwise", "rowwise"
                i = j + 1
                continue
        i += 1
    return plan


def check_plan(units: Sequence[Unit], plan: dict[str, str]) -> None:
    paths = [u.path for u in units]
    for path, style in plan.items():
        if style not in TP_STYLES:
            raise MXNetError(f"tp_plan: {path!r}: unknown style {style!r}; use one of {TP_STYLES}")
        if path not in paths:
            raise MXNetError(f"tp_plan: {path!r} is not a layer of the network; the layers are {paths}")
        block = units[paths.index(path)].block
        if style != "replicate" and not _is_dense(block):
            raise MXNetError(f"tp_plan: {path!r} is a {type(block).__name__}; only Dense layers are split so "
                             "far (Conv2D, Embedding and RNN layers stay 'replicate')")
    # a row-parallel layer must read a column-parallel layer's shards (through elementwise layers)
    for i, u in enumerate(units):
        if plan.get(u.path) == "rowwise":
            j = i - 1
            while j >= 0 and type(units[j].block).__name__ in _ELEMENTWISE:
                j -= 1
            if j < 0 or plan.get(units[j].path) != "colwise":
                raise MXNetError(f"tp_plan: {u.path!r} is 'rowwise' but the layer feeding it is not "
                                 "'colwise': a row-parallel Dense reads a column-parallel one's shards")
        if plan.get(u.path) == "colwise":
            j = i + 1
            while j < len(units) and type(units[j].block).__name__ in _ELEMENTWISE:
                j += 1
            if j >= len(units) or plan.get(units[j].path) != "rowwise":
                raise MXNetError(f"tp_plan: {u.path!r} is 'colwise' but no 'rowwise' Dense follows it: its "
                                 "output would stay split")


def _replace(param: Any, local: torch.Tensor) -> None:
    ctx = list(param._ctx_list)
    param._shape = tuple(local.shape)
    param._set_copies([local.to(c.torch_device) for c in ctx], ctx)


def _colwise_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor, Replicate, Shard

    mesh = self._tp_mesh
    if self._flatten and x.dim() > 2:
        x = x.reshape(x.shape[0], -1)
    xd = DTensor.from_local(x, mesh, [Replicate()], run_check=False)
    wd = DTensor.from_local(self.weight.data(), mesh, [Shard(0)], run_check=False)
    bd = (DTensor.from_local(self.bias.data(), mesh, [Shard(0)], run_check=False)
          if self.bias is not None else None)
    out: Any = F.linear(xd, wd, bd)
    out = out.to_local()  # this rank's output features
    return self._act_fn(out) if self._act_fn is not None else out


def _rowwise_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor, Replicate, Shard

    mesh = self._tp_mesh
    xd = DTensor.from_local(x, mesh, [Shard(x.dim() - 1)], run_check=False)
    wd = DTensor.from_local(self.weight.data(), mesh, [Shard(1)], run_check=False)
    out: Any = F.linear(xd, wd)
    out = out.redistribute(mesh, [Replicate()]).to_local()  # the all-reduce
    if self.bias is not None:
        out = out + self.bias.data()
    return self._act_fn(out) if self._act_fn is not None else out


def shard_units(units: Sequence[Unit], plan: dict[str, str], mesh: Any, tp: int,
                rank: int) -> dict[int, ShardInfo]:
    """Split the planned layers among ``units`` (this rank's; ``plan`` was checked on the whole
    chain by :func:`check_plan`) in place; returns {id(Parameter): ShardInfo}."""
    infos: dict[int, ShardInfo] = {}
    for u in units:
        style = plan.get(u.path, "replicate")
        if style == "replicate":
            continue
        block: Any = u.block
        w = block.weight
        full = w.data().detach()
        if style == "colwise":
            if full.shape[0] % tp:
                raise MXNetError(f"tp_plan: {u.path!r} has {full.shape[0]} output features, not divisible by "
                                 f"tp={tp}")
            todo = [(w, 0)] + ([(block.bias, 0)] if block.bias is not None else [])
            forward = _colwise_forward
        else:
            if full.shape[1] % tp:
                raise MXNetError(f"tp_plan: {u.path!r} has {full.shape[1]} input features, not divisible by "
                                 f"tp={tp}")
            todo = [(w, 1)]
            forward = _rowwise_forward
        for p, dim in todo:
            info = ShardInfo(tuple(p.shape), dim, tp, rank)
            _replace(p, info.local(p.data().detach()))
            infos[id(p)] = info
        object.__setattr__(block, "_tp_mesh", mesh)
        object.__setattr__(block, "forward", types.MethodType(forward, block))
        object.__setattr__(block, "_tp_style", style)
    return infos


def gather_full(local: torch.Tensor, info: ShardInfo, group: Any) -> torch.Tensor:
    """The whole tensor from every tensor-parallel rank's shard (all ranks of ``group`` call it)."""
    import torch.distributed as dist

    parts = [torch.empty_like(local) for _ in range(info.tp)]
    dist.all_gather(parts, local.contiguous(), group=group)
    return torch.cat(parts, dim=info.dim)
