"""``mx.model``: checkpoint files of symbolic models and the legacy ``FeedForward`` API.

A checkpoint is ``prefix-symbol.json`` (MXNet's graph JSON) plus ``prefix-%04d.params``
(``arg:NAME``/``aux:NAME`` arrays).  mxtorch writes the params file in MXNet's binary format (so
MXNet 1.x loads it) and reads both that and safetensors.  The functions live in
:mod:`mxtorch.model_files`, below the Module classes that use them; ``FeedForward``, built on
Module, loads on first use.
"""

from __future__ import annotations

from typing import Any

from .model_files import BatchEndParam, load_checkpoint, load_params, save_checkpoint

__all__ = ["BatchEndParam", "save_checkpoint", "load_checkpoint", "load_params"]


def __getattr__(name: str) -> Any:
    if name == "FeedForward":
        from .module.feedforward import FeedForward

        return FeedForward
    raise AttributeError(f"module 'mxtorch.model' has no attribute {name!r}")
