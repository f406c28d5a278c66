"""The compaction half of :mod:`mxtorch.contrib.pruning`: :func:`compact` (a copy of a network
without the output channels structured pruning zeroed) and :func:`compactable` (the layers whose
channels can go).  It traces one forward pass -- the leaf blocks and the torch functions between
them -- to find, for each Dense/Conv layer, the path its output takes to the next layer.

Users import these from :mod:`mxtorch.contrib.pruning`; this module does not import it.
"""

from __future__ import annotations

from typing import Any

import torch

from ..base import MXNetError
from ..gluon import nn
from ..gluon.block import Block
from ..gluon.block_copy import deepcopy_block
from ..gluon.parameter import Parameter

__all__ = ["compact", "compactable"]


# gluon's public convolution layers (their private base is gluon's)
_CONVS = (nn.Conv1D, nn.Conv2D, nn.Conv3D, nn.Conv1DTranspose, nn.Conv2DTranspose, nn.Conv3DTranspose)

def _is_layer(block: Any) -> bool:
    return isinstance(block, (nn.Dense, *_CONVS))


def _channel_layer(block: Any) -> bool:
    """A layer whose output channels are dim 0 of its weight (plain convolutions and Dense)."""
    return isinstance(block, nn.Dense) or (isinstance(block, _CONVS) and not block._transpose
                                           and block._groups == 1)


# Leaves that keep the channel axis and map a zero channel to zero (checked for activations).
_ACTIVATIONS = (nn.Activation, nn.LeakyReLU, nn.ELU, nn.SELU, nn.GELU, nn.Swish)
_POOLS = (nn.MaxPool1D, nn.MaxPool2D, nn.MaxPool3D, nn.AvgPool1D, nn.AvgPool2D, nn.AvgPool3D,
          nn.GlobalMaxPool1D, nn.GlobalMaxPool2D, nn.GlobalMaxPool3D, nn.GlobalAvgPool1D, nn.GlobalAvgPool2D,
          nn.GlobalAvgPool3D)
_CHANNELWISE = (*_ACTIVATIONS, nn.Dropout, *_POOLS, nn.Identity)
# Functions a forward may call between layers that act on each element alone (f(0) is checked).
_ELEMENTWISE = frozenset({"relu", "relu6", "leaky_relu", "elu", "selu", "gelu", "silu", "tanh", "hardtanh",
                          "dropout", "clone", "contiguous"})


def _leaf(m: torch.nn.Module) -> bool:
    return _is_layer(m) or isinstance(m, nn.BatchNorm) or not any(True for _ in m.children())


class _Call:
    """One traced call: a leaf block (``op`` None) or a function between blocks (``op`` its name)."""

    def __init__(self, block: Any, op: str | None, fn: Any, inputs: list[torch.Tensor], out: Any) -> None:
        self.block, self.op, self.fn, self.inputs, self.out = block, op, fn, inputs, out

    def what(self) -> str:
        return f"'{self.op}'" if self.op is not None else f"{type(self.block).__name__} {self.block.name}"


def _tensors(args: Any) -> list[torch.Tensor]:
    if isinstance(args, torch.Tensor):
        return [args]
    if isinstance(args, (tuple, list)):
        return [t for a in args for t in _tensors(a)]
    if isinstance(args, dict):
        return [t for a in args.values() for t in _tensors(a)]
    return []


def _op_name(fn: Any) -> str:
    name = str(getattr(fn, "__name__", "") or getattr(fn, "__qualname__", "") or fn)
    if name == "__get__":  # a property (Tensor.shape ...)
        name = str(getattr(getattr(fn, "__self__", None), "__name__", name))
    return name.strip("_") if name.startswith("__") else name


def _trace(net: Block, sample_input: torch.Tensor) -> tuple[list[_Call], Any]:
    """What ``net`` runs on ``sample_input``: its leaf blocks and, between them, the torch functions
    its forward calls (residual adds, concatenations, F.relu ...), in order, with their inputs and
    outputs; and the network's output."""
    from torch.overrides import TorchFunctionMode

    from .. import autograd

    calls: list[_Call] = []
    inside: list[torch.nn.Module] = []

    class Glue(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if not inside:
                ins = _tensors(args) + _tensors(kwargs or {})
                outs = _tensors(out)
                name = _op_name(func)
                in_place = name.endswith("_") or name in ("iadd", "isub", "imul", "itruediv", "setitem")
                alias = any(o is i for o in outs for i in ins)
                # metadata (x.shape, x.dim()) and no-op conversions returning x itself are no users
                if ins and (in_place or (outs and not alias)):
                    calls.append(_Call(None, name, func, ins, out))
            return out

    def pre(mod: torch.nn.Module, args: tuple[Any, ...]) -> None:
        inside.append(mod)

    def post(mod: torch.nn.Module, args: tuple[Any, ...], out: Any) -> None:
        inside.pop()
        if not inside:  # outermost leaf only (a Conv's own activation child is part of it)
            calls.append(_Call(mod, None, None, _tensors(args), out))

    handles = []
    for m in net.modules():
        if _leaf(m) and m is not net:
            handles += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
    try:
        with autograd.predict_mode(), torch.no_grad(), Glue():
            out = net(sample_input)
    finally:
        for h in handles:
            h.remove()
    if not any(c.op is None for c in calls):
        raise MXNetError("pruning.compact: running the network called no layers (a hybridized, compiled "
                         "network: call net.hybridize(False) first)")
    return calls, out


def _is_flatten(c: _Call, t: torch.Tensor) -> bool:
    """A call that flattens (N, C, ...) to (N, C * ...) keeping the order (Flatten, reshape, view)."""
    if c.op is None:
        return isinstance(c.block, nn.Flatten)
    return (c.op in ("flatten", "reshape", "view") and isinstance(c.out, torch.Tensor) and c.inputs[0] is t
            and t.dim() > 2 and c.out.dim() == 2 and c.out.shape[0] == t.shape[0])


def _zero_to_zero(f: Any) -> bool:
    with torch.no_grad():
        try:
            return bool((f(torch.zeros(1, 1)) == 0).all())
        except Exception:  # noqa: BLE001 - a function that needs other arguments: not known
            return False


def _follow(layer_call: _Call, users: dict[int, list[Any]]) -> tuple[_Call | None, list[_Call], str]:
    """From a layer's output to the next layer: (that layer's call, the calls in between, '') when the
    output goes nowhere else on the way (only channel-wise blocks and functions, one user each);
    else (None, [], the reason its channels must stay)."""
    t = layer_call.out
    between: list[_Call] = []
    while True:
        us = users.get(id(t), [])
        if not us:
            return None, [], "its output is not used by a following layer"
        if any(u == "output" for u in us):
            return None, [], "its output is the network's output"
        if len(us) > 1:
            names = ", ".join(u.what() for u in us)
            return None, [], f"its output is used by {len(us)} operations ({names}), e.g. a residual shortcut"
        c = us[0]
        if c.op is None and _is_layer(c.block):
            if c.inputs[0] is not t:
                return None, [], f"{c.what()} takes it as a second input"
            return c, between, ""
        if c.op is None:
            ok = isinstance(c.block, (nn.BatchNorm, nn.Flatten, *_CHANNELWISE))
            if isinstance(c.block, _ACTIVATIONS) and not _zero_to_zero(c.block):
                ok = False
        else:
            ok = _is_flatten(c, t) or (c.op in _ELEMENTWISE and len(c.inputs) == 1 and _zero_to_zero(c.fn))
        if not ok or not isinstance(c.out, torch.Tensor) or c.out is t:
            return None, [], f"it feeds {c.what()} (a residual add or a concatenation is not removed through)"
        between.append(c)
        t = c.out


def _dead_channels(layer: Any, between: list[_Call]) -> torch.Tensor:
    """Bool per output channel of ``layer``: its value is exactly zero after ``between`` (the calls
    up to the next layer) for every input, so the channel can be removed."""
    w = layer.weight.list_data()[0].detach()
    dead = (w.reshape(w.shape[0], -1) == 0).all(1)
    if layer.bias is not None:
        dead &= layer.bias.list_data()[0].detach() == 0
    own = layer._act_fn if isinstance(layer, nn.Dense) else layer.act
    if own is not None and not _zero_to_zero(own):
        return torch.zeros_like(dead)
    for c in between:
        if isinstance(c.block, nn.BatchNorm):
            m = c.block
            beta = m.beta.data().detach()
            scale = m.gamma.data().detach() if m._scale else torch.ones_like(beta)
            dead &= (beta == 0) & (scale * m.running_mean.data().detach() == 0)
    return dead


def _plan(net: Block, sample_input: torch.Tensor) -> tuple[list[tuple[_Call, _Call, list[_Call]]],
                                                           list[tuple[Any, str]]]:
    """(layer, next layer, calls between) for every layer whose channels can go, and (layer, reason)
    for the layers whose output channels must stay (the last, those feeding residual adds ...)."""
    calls, out = _trace(net, sample_input)
    users: dict[int, list[Any]] = {}
    for c in calls:
        for t in {id(t): t for t in c.inputs}.values():
            users.setdefault(id(t), []).append(c)
    for t in _tensors(out):
        users.setdefault(id(t), []).append("output")
    chains: list[tuple[_Call, _Call, list[_Call]]] = []
    kept: list[tuple[Any, str]] = []
    seen: set[int] = set()
    for c in calls:
        if c.op is not None or not _is_layer(c.block):
            continue
        if id(c.block) in seen:
            kept.append((c.block, "it runs more than once (shared weights)"))
            continue
        seen.add(id(c.block))
        if not _channel_layer(c.block):
            kept.append((c.block, "grouped or transposed convolution"))
            continue
        nxt, between, why = _follow(c, users)
        if nxt is None:
            kept.append((c.block, why))
        elif not _channel_layer(nxt.block):
            kept.append((c.block, f"the next layer {nxt.what()} is a grouped or transposed convolution"))
        else:
            chains.append((c, nxt, between))
    return chains, kept


def compactable(net: Block, sample_input: torch.Tensor) -> list[str]:
    """The weight names of the layers whose output channels :func:`compact` can remove: give them to
    structured pruning (``Pruner("structured", select=...)``, see docs/pruning.md) so that it does not
    zero channels that must stay (a residual block's last convolution, its shortcut)."""
    chains, _ = _plan(net, sample_input)
    return [c.block.weight.name for c, _, _ in chains]


def _shrink(p: Parameter, dim: int, keep: torch.Tensor) -> None:
    """Keep the entries ``keep`` (indices) of ``p`` along ``dim``, on every context."""
    p.replace_data([d.detach().index_select(dim, keep.to(d.device)).clone() for d in p.list_data()])


def compact(net: Block, sample_input: torch.Tensor, strict: bool = False) -> Block:
    """A copy of ``net`` without the channels structured pruning zeroed: smaller Conv/Dense
    weights, biases and BatchNorms, and the following layers' inputs cut to match; its outputs
    equal the masked network's (``net`` itself is unchanged).

    ``sample_input`` is one batch: running it traces the layers and the functions between them.
    A layer's channel is removed when its filter and bias are zero, and its output reaches the next
    layer only through blocks and functions that keep a zero channel zero (BatchNorm with zero beta
    and gamma * running_mean, ReLU-like activations, pooling, dropout, flatten).  A layer whose
    output goes elsewhere too -- into a residual add (the last convolution of a ResNet block, its
    shortcut), a concatenation, the network's output -- keeps all its channels (pruned ones stay as
    zeros), so the sum still adds matching channels; ``strict=True`` raises an error naming the
    first such layer that has zero channels instead.  :func:`compactable` lists the layers whose
    channels can go.  Layouts must be channels-first (NCHW).
    """
    small = deepcopy_block(net)
    chains, kept = _plan(small, sample_input)
    if strict:
        for layer, why in kept:
            w = layer.weight.list_data()[0].detach()
            if _channel_layer(layer) and bool((w.reshape(w.shape[0], -1) == 0).all(1).any()):
                raise MXNetError(f"pruning.compact: {layer.name} ({type(layer).__name__}) has zero output "
                                 f"channels that cannot be removed: {why}")
    cuts: list[tuple[_Call, _Call, list[_Call], torch.Tensor]] = []
    for c, nxt, between in chains:  # decide every cut on the unchanged network first
        m = c.block
        if isinstance(m, _CONVS) and m._channels_last:
            raise MXNetError(f"pruning.compact: {m.name} uses layout {m._layout}; only channels-first "
                             "layouts are compacted")
        dead = _dead_channels(m, between)
        if bool(dead.any()):
            if isinstance(nxt.block, nn.Dense) and nxt.inputs[0].dim() > 2 and not nxt.block._flatten:
                raise MXNetError(f"pruning.compact: Dense {nxt.block.name} with flatten=False on a "
                                 f"{nxt.inputs[0].dim()}-d input cannot lose input channels")
            cuts.append((c, nxt, between, (~dead).nonzero().reshape(-1)))
    for c, nxt, between, keep in cuts:
        m = c.block
        _shrink(m.weight, 0, keep)
        if m.bias is not None:
            _shrink(m.bias, 0, keep)
        if isinstance(m, _CONVS):
            m._channels = len(keep)
        else:
            m._units = len(keep)
        inner = keep
        t = c.out
        for b in between:
            if isinstance(b.block, nn.BatchNorm):
                for v in b.block._vectors():
                    _shrink(v, 0, keep)
                b.block._in_channels = len(keep)
            elif _is_flatten(b, t):
                inner = _spread(inner, t)
            t = b.out
        n = nxt.block
        if isinstance(n, nn.Dense) and t.dim() > 2:
            inner = _spread(inner, t)
        _shrink(n.weight, 1, inner)
        if isinstance(n, _CONVS):
            n._in_channels = len(inner)
        else:
            n._in_units = len(inner)
    return small


def _spread(keep: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Channel indices of an (N, C, ...) tensor as indices of its (N, C*...) flattening."""
    per = int(x[0, 0].numel()) if x.dim() > 2 else 1
    return (keep.reshape(-1, 1) * per + torch.arange(per).reshape(1, -1)).reshape(-1)
