"""``HybridBlock.register_op_hook``: a callback on the operators a network runs, with MXNet's
node names (``'<block prefix>fwd_output'``, and with ``monitor_all`` its inputs
``'<block prefix>fwd_data'``, ``..._weight``...).

Each built-in layer is one MXNet operator (Dense is ``FullyConnected``, pooling ``Pooling``...),
so a forward hook on every such layer reports what MXNet's cached graph reports for that node;
operators written inside a custom ``hybrid_forward`` are not seen one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["install_op_hooks", "OPERATORS"]

_NN = "mxtorch.gluon.nn."
# layer class -> (MXNet operator, its input names); a subclass counts as its nearest listed base
OPERATORS: dict[str, tuple[str, tuple[str, ...]]] = {
    _NN + "basic_layers.Dense": ("FullyConnected", ("data", "weight", "bias")),
    _NN + "basic_layers.Dropout": ("Dropout", ("data",)),
    _NN + "basic_layers.Flatten": ("Flatten", ("data",)),
    _NN + "activations.Activation": ("Activation", ("input0",)),
    _NN + "activations.LeakyReLU": ("LeakyReLU", ("data",)),
    _NN + "conv_layers._Conv": ("Convolution", ("data", "weight", "bias")),
    _NN + "conv_layers._Pool": ("Pooling", ("data",)),
    _NN + "conv_layers._GlobalPool": ("Pooling", ("data",)),
    _NN + "norm_layers.BatchNorm": ("BatchNorm", ("data", "gamma", "beta", "moving_mean", "moving_var")),
    _NN + "norm_layers.LayerNorm": ("LayerNorm", ("data", "gamma", "beta")),
    _NN + "embedding.Embedding": ("Embedding", ("data", "weight")),
}

_ATTR = {"moving_mean": "running_mean", "moving_var": "running_var"}  # MXNet's input name -> attribute
OpCallback = Callable[[str, str, torch.Tensor], Any]


def _operator(mod: torch.nn.Module) -> tuple[str, tuple[str, ...]] | None:
    for cls in type(mod).__mro__:
        found = OPERATORS.get(f"{cls.__module__}.{cls.__qualname__}")
        if found is not None:
            if found[0] == "Convolution" and getattr(mod, "_transpose", False):
                return "Deconvolution", found[1]
            return found
    return None


def _inputs(mod: Any, names: tuple[str, ...], args: tuple[Any, ...]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    params = getattr(mod, "_gluon_params", {})
    for i, name in enumerate(names):
        attr = _ATTR.get(name, name)
        if attr in params:
            p = params[attr]
            if p is not None and p.is_initialized:
                out.append((name, p._copy_on(None)))
        elif i < len(args) and isinstance(args[i], torch.Tensor):
            out.append((name, args[i]))
    return out


def install_op_hooks(block: torch.nn.Module, callback: OpCallback, monitor_all: bool) -> list[Any]:
    """Hook every operator layer in ``block``; the handles, to remove them."""
    handles = []
    for mod in block.modules():
        op = _operator(mod)
        if op is None:
            continue
        opname, names = op
        node = f"{getattr(mod, 'prefix', '')}fwd"

        def report(m: Any, args: tuple[Any, ...], out: Any, node: str = node, opname: str = opname,
                   names: tuple[str, ...] = names) -> None:
            if monitor_all:
                for name, value in _inputs(m, names, args):
                    callback(f"{node}_{name}", opname, value.detach())
            outs = out if isinstance(out, (list, tuple)) else [out]
            for i, o in enumerate(outs):
                callback(f"{node}_output" if len(outs) == 1 else f"{node}_output{i}", opname, o.detach())

        handles.append(torch.nn.Module.register_forward_hook(mod, report))
    return handles
