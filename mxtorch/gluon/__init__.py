"""Gluon: blocks, parameters, layers, losses, data, the Trainer and utilities."""

from __future__ import annotations

import importlib
from typing import Any

from .block import Block, HybridBlock
from .parameter import Constant, DeferredInitializationError, Parameter, ParameterDict
from .symbol_block import SymbolBlock

_SUBMODULES = {
    "nn": "mxtorch.gluon.nn",
    "rnn": "mxtorch.gluon.rnn",
    "loss": "mxtorch.gluon.loss",
    "data": "mxtorch.gluon.data",
    "utils": "mxtorch.gluon.utils",
    "model_zoo": "mxtorch.gluon.model_zoo",
    "contrib": "mxtorch.gluon.contrib",
    "trainer": "mxtorch.gluon.trainer",
}
_LAZY_NAMES = {"Trainer": ("mxtorch.gluon.trainer", "Trainer")}

__all__ = ["Block", "HybridBlock", "SymbolBlock", "Parameter", "Constant", "ParameterDict",
           "DeferredInitializationError", "Trainer", *sorted(_SUBMODULES)]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        mod = importlib.import_module(_SUBMODULES[name])
        globals()[name] = mod
        return mod
    if name in _LAZY_NAMES:
        modname, attr = _LAZY_NAMES[name]
        obj = getattr(importlib.import_module(modname), attr)
        globals()[name] = obj
        return obj
    raise AttributeError(f"module 'mxtorch.gluon' has no attribute {name!r}")
