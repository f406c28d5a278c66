"""``mx.sym`` / ``mx.symbol``: MXNet's symbolic API on PyTorch.

``mx.sym.Variable``, ``mx.sym.Group``, ``mx.sym.load``/``load_json`` and every operator by name
(``mx.sym.FullyConnected(data, num_hidden=10, name='fc1')``, ``mx.sym.broadcast_add``...).
"""

from __future__ import annotations

from typing import Any

from . import _ops, _recorded_ops  # noqa: F401 - _recorded_ops registers _CachedOp, _torch_op
from ._scope import AttrScope, NameManager, Prefix
from ._ufunc import hypot, maximum, minimum, pow, power  # noqa: A004 - MXNet's names
from .symbol import Group, Symbol, Variable, create, fromjson, load, load_json, split_v2, var

__all__ = [
    "Symbol",
    "Variable",
    "var",
    "Group",
    "load",
    "load_json",
    "fromjson",
    "AttrScope",
    "NameManager",
    "Prefix",
    "create",
    "split_v2",
    "power",
    "pow",
    "maximum",
    "minimum",
    "hypot",
]


def __getattr__(name: str) -> Any:
    # MXNet's internal operators by graph name; the namespaces mx.sym.random / contrib / sparse / linalg
    # / image
    if name in ("_internal", "random", "contrib", "sparse", "linalg", "image"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name.startswith("__") or not _ops.has_op(name):
        raise AttributeError(f"module 'mxtorch.symbol' has no operator {name!r}")

    def operator(*args: Any, **kwargs: Any) -> Symbol:
        return create(name, *args, **kwargs)

    operator.__name__ = name
    operator.__doc__ = f"Symbolic ``{name}``: see ``mx.nd.{name}`` for its parameters."
    globals()[name] = operator
    return operator
