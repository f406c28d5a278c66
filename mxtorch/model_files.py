"""MXNet's checkpoint files of symbolic models (``mx.model``'s functions, which :mod:`mxtorch.model`
hands out beside ``FeedForward``; the Module classes use them from here).

A checkpoint is ``prefix-symbol.json`` (MXNet's graph JSON) plus ``prefix-%04d.params``
(``arg:NAME``/``aux:NAME`` arrays).  mxtorch writes the params file in MXNet's binary format (so
MXNet 1.x loads it) and reads both that and safetensors.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import torch

from . import nd as nd_io  # nd.save / nd.load
from .base import MXNetError

__all__ = ["BatchEndParam", "save_checkpoint", "load_checkpoint", "load_params"]

BatchEndParam = namedtuple("BatchEndParam", ["epoch", "nbatch", "eval_metric", "locals"])
"""What batch-end callbacks receive."""


def save_checkpoint(
    prefix: str,
    epoch: int,
    symbol: Any,
    arg_params: Mapping[str, torch.Tensor],
    aux_params: Mapping[str, torch.Tensor],
    remove_amp_cast: bool = True,
    format: str | None = None,
) -> None:
    """Write ``prefix-symbol.json`` (if ``symbol`` is given) and ``prefix-%04d.params`` (MXNet's
    format; ``format='safetensors'`` for safetensors)."""
    if symbol is not None:
        symbol.save(f"{prefix}-symbol.json")
    data = {f"arg:{k}": v.detach().to("cpu") for k, v in arg_params.items()}
    data.update({f"aux:{k}": v.detach().to("cpu") for k, v in aux_params.items()})
    nd_io.save(f"{prefix}-{epoch:04d}.params", data, format=format)


def load_params(prefix: str, epoch: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``(arg_params, aux_params)`` of ``prefix-%04d.params``."""
    fname = f"{prefix}-{epoch:04d}.params"
    if not os.path.isfile(fname):
        raise MXNetError(f"load_params: {fname!r} does not exist")
    loaded = nd_io.load(fname)
    if not isinstance(loaded, dict):
        raise MXNetError(f"load_params: {fname!r} holds a list of arrays; a checkpoint maps 'arg:NAME' keys")
    arg: dict[str, torch.Tensor] = {}
    aux: dict[str, torch.Tensor] = {}
    for k, v in loaded.items():
        kind, sep, name = k.partition(":")
        if not sep or kind not in ("arg", "aux"):
            raise MXNetError(
                f"load_params: {fname!r} has key {k!r}; a checkpoint has 'arg:NAME' / 'aux:NAME'"
            )
        (arg if kind == "arg" else aux)[name] = v
    return arg, aux


def load_checkpoint(prefix: str, epoch: int) -> tuple[Any, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``(symbol, arg_params, aux_params)`` of the checkpoint ``prefix`` at ``epoch``."""
    from .symbol import load

    symbol = load(f"{prefix}-symbol.json")
    arg, aux = load_params(prefix, epoch)
    return symbol, arg, aux
