"""Tensor parallelism for Gluon layers, on DTensor: Megatron's column → row pairs, vocab-parallel
embeddings, output-channel-parallel convolutions, hidden-unit-parallel recurrent layers.

Styles (``tp_plan={layer path: style}``):

- ``"colwise"`` ``Dense``: keeps rows ``[r*out/tp, (r+1)*out/tp)`` of its weight and bias and
  returns its share of the output features.  ``Conv1D/2D/3D`` (channels first, ``groups=1``): the
  same over output channels.
- ``"rowwise"`` ``Dense`` after a column one: keeps the matching columns of its weight, multiplies
  its share, and one all-reduce sums the partial outputs (then the bias).  A row ``Conv`` keeps
  the matching input channels of its weight; a row ``Dense`` may also read a column ``Conv``'s
  channel shards through pooling and ``Flatten`` (NCHW flattens channel-major, so a channel shard
  is a contiguous block of the Dense's input features).  Per pair: one all-reduce forward (the
  row layer's output) and one backward (the column layer's input gradient), as in Megatron-LM.
- ``"vocab"`` ``Embedding``: keeps rows ``[r*V/tp, (r+1)*V/tp)`` of the table; ids outside the
  shard give zeros, and one all-reduce sums the partial lookups (DTensor's ``_MaskPartial``).
- a ``"colwise"`` ``Dense`` that is the *last* layer leaves its output split over the vocabulary:
  train it with :class:`~.tp_loss.ParallelSoftmaxCrossEntropyLoss` (no rank builds full logits).
- ``"gates"`` ``RNN``/``LSTM``/``GRU``: every gate keeps the rows of this rank's hidden units, and one
  all-gather per layer and time step rebuilds the whole hidden state (an LSTM with a projection also
  keeps its units' ``h2r_weight`` columns, and one all-reduce sums the projections; :mod:`.tp_rnn`).

Parameters stay plain tensors holding the local shard (so the Trainer, the optimizers and the
data-parallel store work on them unchanged); each forward views them as DTensors
(``DTensor.from_local``) and DTensor places the collectives, forward and backward.  Where
DTensor has no sharded rule (convolution: ``aten.convolution`` with a sharded weight gathers the
weight and computes the whole output on every rank) the layer computes on its local shard and
uses DTensor only for the collectives: ``from_local(Replicate).to_local(grad_placements=Partial)``
is Megatron's "identity forward, all-reduce backward", ``from_local(Partial).redistribute(
Replicate)`` its "all-reduce forward, identity backward".  :func:`gather_full` / ``ShardInfo``
convert between shards and whole tensors for the unpartitioned parameter file.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError
from .split import Unit
from .tp_collectives import copy_in, reduce_out
from .tp_rnn import gate_shards, gates_forward, gates_problem, is_recurrent

__all__ = ["TP_STYLES", "auto_plan", "check_plan", "shard_units", "gather_full", "ShardInfo"]

TP_STYLES = ("colwise", "rowwise", "vocab", "gates", "replicate")
_ELEMENTWISE = ("Activation", "LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "Swish", "SiLU", "Dropout")
# per-channel layers a convolution's channel shards pass through unchanged (channels-first only)
_CHANNELWISE = ("MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D", "AvgPool3D",
                "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D", "GlobalAvgPool1D",
                "GlobalAvgPool2D", "GlobalAvgPool3D")


class ShardInfo:
    """How a parameter is split over the tensor-parallel group: dimension ``dim`` of ``full_shape``,
    seen as ``groups`` equal blocks (a recurrent layer's gates), each split in ``tp`` contiguous parts;
    a rank keeps its part of every block."""

    def __init__(self, full_shape: tuple[int, ...], dim: int, tp: int, rank: int, groups: int = 1) -> None:
        self.full_shape, self.dim, self.tp, self.rank, self.groups = full_shape, dim, tp, rank, groups

    def local(self, full: torch.Tensor) -> torch.Tensor:
        blocks = full.unflatten(self.dim, (self.groups, -1))
        n = blocks.shape[self.dim + 1] // self.tp
        return blocks.narrow(self.dim + 1, self.rank * n, n).flatten(self.dim, self.dim + 1).contiguous()


def _kind(block: Any) -> str | None:
    """'dense', 'conv' (channels first, groups=1, not transposed), 'embedding', 'rnn' or None."""
    from ..gluon import nn

    if is_recurrent(block):
        return "rnn"
    if isinstance(block, nn.Dense):
        return "dense"
    if isinstance(block, (nn.Conv1D, nn.Conv2D, nn.Conv3D)) and not block._transpose \
            and not block._channels_last and block._groups == 1:
        return "conv"
    if isinstance(block, nn.Embedding) and not block._sparse_grad:
        return "embedding"
    return None


def _shape(block: Any) -> tuple[int, ...]:
    return tuple(block.weight.shape or ())


def _out_dim(block: Any) -> int:
    """Output features / channels / vocabulary rows (dimension 0 of the weight; 0 = unknown)."""
    s = _shape(block)
    return int(s[0]) if s else 0


def _in_dim(block: Any) -> int:
    s = _shape(block)
    return int(s[1]) if len(s) > 1 else 0


def _through(units: Sequence[Unit], i: int, kind: str) -> tuple[int, bool]:
    """The index of the first layer after column layer ``i`` (of ``kind``) that is not a pass-through
    one, and whether a ``Flatten`` was passed."""
    ok = _ELEMENTWISE + ((*_CHANNELWISE, "Flatten") if kind == "conv" else ())
    j, flat = i + 1, False
    while j < len(units) and type(units[j].block).__name__ in ok:
        b: Any = units[j].block
        if getattr(b, "_channels_last", False):
            break
        flat = flat or type(b).__name__ == "Flatten"
        j += 1
    return j, flat


def _row_partner(units: Sequence[Unit], i: int, tp: int) -> int | None:
    """The layer that can be row-parallel after column layer ``i``, if any."""
    kind = _kind(units[i].block)
    if kind not in ("dense", "conv") or _out_dim(units[i].block) % tp or not _out_dim(units[i].block):
        return None
    j, flat = _through(units, i, kind)
    if j >= len(units):
        return None
    nxt: Any = units[j].block
    nkind = _kind(nxt)
    if nkind == "dense" and (kind == "dense" or flat or nxt._flatten) and _in_dim(nxt) % tp == 0:
        return j
    if nkind == "conv" and kind == "conv" and not flat and _in_dim(nxt) == _out_dim(units[i].block):
        return j
    return None


def _numel(block: Any, *names: str) -> int:
    n = 0
    for name in names:
        p = getattr(block, name, None)
        if p is not None and p.shape:
            n += int(torch.Size(p.shape).numel())
    return n


def auto_plan(units: Sequence[Unit], tp: int) -> dict[str, str]:
    """Megatron's pairing: a Dense (or convolution) whose output feeds, through elementwise layers
    only (for a convolution also per-channel pooling and Flatten), another Dense (or convolution)
    becomes column-parallel and that one row-parallel; the pairs chosen are those that split the
    most parameters (a chain can pair a layer with the one before or the one after it: dynamic
    programming over the chain).  Embeddings whose vocabulary divides by ``tp`` become
    vocab-parallel, and recurrent layers ``"gates"`` (split by hidden units, :mod:`.tp_rnn`); everything
    else is replicated, as are layers whose split dimension does not divide by ``tp``."""
    n = len(units)
    best = [0] * (n + 1)  # best[i]: most parameters split in units[i:]
    pick: list[int | None] = [None] * (n + 1)
    for i in range(n - 1, -1, -1):
        best[i] = best[i + 1]
        j = _row_partner(units, i, tp)
        if j is not None:
            gain = _numel(units[i].block, "weight", "bias") + _numel(units[j].block, "weight") + best[j + 1]
            if gain > best[i]:
                best[i], pick[i] = gain, j
    plan: dict[str, str] = {}
    i = 0
    while i < n:
        j = pick[i]
        if j is not None and best[i] != best[i + 1]:
            plan[units[i].path], plan[units[j].path] = "colwise", "rowwise"
            i = j + 1
            continue
        kind = _kind(units[i].block)
        if kind == "embedding" and _out_dim(units[i].block) % tp == 0:
            plan[units[i].path] = "vocab"
        elif kind == "rnn" and gates_problem(units[i].block, tp) is None:
            plan[units[i].path] = "gates"
        i += 1
    return plan


def check_plan(units: Sequence[Unit], plan: dict[str, str]) -> None:
    """Raise MXNetError on a plan that cannot run (``units``: the whole chain)."""
    paths = [u.path for u in units]
    for path, style in plan.items():
        if style not in TP_STYLES:
            raise MXNetError(f"tp_plan: {path!r}: unknown style {style!r}; use one of {TP_STYLES}")
        if path not in paths:
            raise MXNetError(f"tp_plan: {path!r} is not a layer of the network; the layers are {paths}")
        block = units[paths.index(path)].block
        kind = _kind(block)
        if style == "vocab" and kind != "embedding":
            raise MXNetError(f"tp_plan: {path!r} is a {type(block).__name__}; 'vocab' splits an Embedding "
                             "(without sparse_grad)")
        if style in ("colwise", "rowwise") and kind not in ("dense", "conv"):
            raise MXNetError(f"tp_plan: {path!r} is a {type(block).__name__}; '{style}' splits Dense layers "
                             "and convolutions (channels first, groups=1); Embedding takes 'vocab', "
                             "RNN/LSTM/GRU 'gates', the rest stays 'replicate'")
        if style == "gates":
            if kind != "rnn":
                raise MXNetError(f"tp_plan: {path!r} is a {type(block).__name__}; 'gates' splits the "
                                 "recurrent layers RNN, LSTM and GRU")
            why = gates_problem(block, 1)
            if why is not None:
                raise MXNetError(f"tp_plan: {path!r} ({type(block).__name__}) cannot be split by 'gates': "
                                 f"it {why}")
    # a row-parallel layer must read a column-parallel layer's shards (through pass-through layers)
    paired: set[int] = set()
    for i, u in enumerate(units):
        if plan.get(u.path) != "colwise":
            continue
        j = _row_partner(units, i, 1)  # the structure; divisibility is checked when sharding
        if j is not None and plan.get(units[j].path) == "rowwise":
            paired.add(j)
        elif _kind(u.block) == "dense" and all(type(v.block).__name__ in _ELEMENTWISE for v in units[i + 1:]):
            pass  # the last layer: its output stays split, for ParallelSoftmaxCrossEntropyLoss
        else:
            raise MXNetError(f"tp_plan: {u.path!r} is 'colwise' but no 'rowwise' layer that can read its "
                             "split output follows it (a Dense after a column Dense; a Dense or convolution "
                             "after a column convolution, through pooling/Flatten): its output would stay "
                             "split. Only the network's last Dense may stay split, for "
                             "parallel.ParallelSoftmaxCrossEntropyLoss")
    for j, u in enumerate(units):
        if plan.get(u.path) == "rowwise" and j not in paired:
            raise MXNetError(f"tp_plan: {u.path!r} is 'rowwise' but the layer feeding it is not 'colwise': a "
                             "row-parallel layer reads a column-parallel one's shards")


def _replace(param: Any, local: torch.Tensor) -> None:
    param.replace_data(local)


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
    if self._flatten and x.dim() > 2:  # a column convolution's channel shard: a block of features
        x = x.reshape(x.shape[0], -1)
    xd = DTensor.from_local(x, mesh, [Shard(x.dim() - 1)], run_check=False)
    wd = DTensor.from_local(self.weight.data(), mesh, [Shard(1)], run_check=False)
    out: Any = F.linear(xd, wd)
    out = out.redistribute(mesh, [Replicate()]).to_local()  # the all-reduce
    if self.bias is not None:
        out = out + self.bias.data()
    return self._act_fn(out) if self._act_fn is not None else out


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _conv(self: Any, x: torch.Tensor, bias: bool) -> torch.Tensor:
    b = self.bias.data() if bias and self.bias is not None else None
    return _CONV[self._ndim](x, self.weight.data(), b, self._strides, self._padding, self._dilation, 1)


def _conv_colwise_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    out = _conv(self, copy_in(x, self._tp_mesh), bias=True)  # this rank's output channels
    return self.act(out) if self.act is not None else out


def _conv_rowwise_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    out = reduce_out(_conv(self, x, bias=False), self._tp_mesh)
    if self.bias is not None:
        out = out + self.bias.data().reshape(1, -1, *([1] * self._ndim))
    return self.act(out) if self.act is not None else out


def _vocab_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor, Replicate, Shard

    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    idx = x if x.dtype == torch.int64 else x.long()
    if idx.device.type == "cpu" and idx.numel():
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= self._input_dim:
            raise MXNetError(f"Embedding: index {lo if lo < 0 else hi} is out of range for "
                             f"input_dim={self._input_dim}")
    mesh = self._tp_mesh
    ids = DTensor.from_local(idx, mesh, [Replicate()], run_check=False)
    wd = DTensor.from_local(self.weight.data(), mesh, [Shard(0)], run_check=False)
    out: Any = F.embedding(ids, wd)  # partial: zeros for ids outside this rank's rows
    return out.redistribute(mesh, [Replicate()]).to_local()  # type: ignore[no-any-return]


_FORWARDS = {("dense", "colwise"): _colwise_forward, ("dense", "rowwise"): _rowwise_forward,
             ("conv", "colwise"): _conv_colwise_forward, ("conv", "rowwise"): _conv_rowwise_forward,
             ("embedding", "vocab"): _vocab_forward}


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
        kind = _kind(block)
        if style == "gates":
            infos.update(_shard_gates(u, mesh, tp, rank))
            continue
        full = _shape(block)
        what = {"dense": "features", "conv": "channels", "embedding": "rows"}[str(kind)]
        dim = 1 if style == "rowwise" else 0
        if len(full) <= dim or full[dim] % tp:
            raise MXNetError(f"tp_plan: {u.path!r} has {full[dim] if len(full) > dim else 0} "
                             f"{'input' if dim else 'output'} {what}, not divisible by tp={tp}")
        todo = [(block.weight, dim)]
        if style == "colwise" and block.bias is not None:
            todo.append((block.bias, 0))
        for p, d in todo:
            info = ShardInfo(tuple(p.shape), d, tp, rank)
            _replace(p, info.local(p.data().detach()))
            infos[id(p)] = info
        object.__setattr__(block, "_tp_mesh", mesh)
        object.__setattr__(block, "forward", types.MethodType(_FORWARDS[(str(kind), style)], block))
        object.__setattr__(block, "_tp_style", style)
    return infos


def _shard_gates(u: Unit, mesh: Any, tp: int, rank: int) -> dict[int, ShardInfo]:
    """Keep this rank's hidden units' rows of every gate of a recurrent layer (:mod:`.tp_rnn`)."""
    block: Any = u.block
    why = gates_problem(block, tp)
    if why is not None:
        raise MXNetError(f"tp_plan: {u.path!r} ({type(block).__name__}) cannot be split by 'gates': it {why}")
    infos: dict[int, ShardInfo] = {}
    for p, dim, groups in gate_shards(block):
        if not p.is_initialized or not p.shape or 0 in p.shape:
            raise MXNetError(f"tp_plan: {u.path!r}: parameter {p.name!r} has no data yet (shape {p.shape}): "
                             "give the layer its input_size, or run one forward before parallelize")
        info = ShardInfo(tuple(p.shape), dim, tp, rank, groups=groups)
        _replace(p, info.local(p.data().detach()))
        infos[id(p)] = info
    object.__setattr__(block, "_tp_mesh", mesh)
    object.__setattr__(block, "_tp_size", tp)
    object.__setattr__(block, "_tp_rank", rank)
    object.__setattr__(block, "forward", types.MethodType(gates_forward, block))
    object.__setattr__(block, "_tp_style", "gates")
    return infos


def gather_full(local: torch.Tensor, info: ShardInfo, group: Any) -> torch.Tensor:
    """The whole tensor from every tensor-parallel rank's shard (all ranks of ``group`` call it)."""
    import torch.distributed as dist

    parts = [torch.empty_like(local) for _ in range(info.tp)]
    dist.all_gather(parts, local.contiguous(), group=group)
    d = info.dim
    return torch.cat([q.unflatten(d, (info.groups, -1)) for q in parts], dim=d + 1).flatten(d, d + 1)
