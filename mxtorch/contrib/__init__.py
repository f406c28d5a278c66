"""Contributed extensions outside MXNet 1.x's core API (``mxtorch.contrib.pruning``), and MXNet's
``mx.contrib`` modules (``mxtorch.contrib.autograd``: the first autograd API;
``mxtorch.contrib.tensorboard``: LogMetricsCallback and a SummaryWriter taking NDArrays;
``mxtorch.contrib.amp``: MXNet 1.x's place of ``mx.amp``; ``mxtorch.contrib.text``: vocabularies
and token embeddings; ``mxtorch.contrib.svrg_optimization``: SVRGModule).

Submodules load on first use: ``mx.contrib.autograd`` or ``from mxtorch.contrib import pruning``.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["pruning", "autograd", "tensorboard", "amp", "text", "svrg_optimization"]


# MXNet's mx.contrib.nd / ndarray / sym / symbol: the contrib operators of mx.nd and mx.sym
_OPERATOR_NAMESPACES = {"nd": "..nd.contrib", "ndarray": "..nd.contrib", "sym": "..symbol.contrib",
                        "symbol": "..symbol.contrib"}


def __getattr__(name: str) -> Any:
    if name in _OPERATOR_NAMESPACES:
        mod = importlib.import_module(_OPERATOR_NAMESPACES[name], __name__)
        globals()[name] = mod
        return mod
    if name in __all__:
        mod = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
