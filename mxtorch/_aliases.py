"""MXNet's module paths as aliases of mxtorch's (``import mxtorch.ndarray.sparse`` is ``mxtorch.nd.sparse``).

MXNet code imports ``mxnet.ndarray.sparse``, ``mxnet.kvstore.base``, ``mxnet.symbol`` ...; in
mxtorch some of those modules live under a shorter name.  A finder on ``sys.meta_path``
resolves each alias (and every submodule below it) to the real module, imported on first use,
so both names are the *same* module object.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["ALIASES", "install"]

ALIASES: dict[str, str] = {
    "mxtorch.ndarray": "mxtorch.nd",
    "mxtorch.kv": "mxtorch.kvstore",
    "mxtorch.init": "mxtorch.initializer",
    "mxtorch.attribute": "mxtorch.symbol._scope",  # MXNet's mxnet.attribute.AttrScope
    "mxtorch.name": "mxtorch.symbol._scope",  # MXNet's mxnet.name.NameManager / Prefix
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._target)
        self._real_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The real module already ran under its own name; the import system replaced its
        # __spec__ with the alias's, so give it back.
        module.__spec__ = self._real_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        for alias, real in ALIASES.items():
            if fullname == alias or fullname.startswith(alias + "."):
                real_name = real + fullname[len(alias):]
                if importlib.util.find_spec(real_name) is None:
                    return None
                return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real_name))
        return None


_finder = _AliasFinder()


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (once)."""
    # First on the path: the file finder would otherwise run mxtorch/nd/sparse.py a second
    # time as a new module named mxtorch.ndarray.sparse.
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
