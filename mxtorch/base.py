"""Errors and small helpers shared by every mxtorch module (MXNet's ``mxnet.base`` names)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = [
    "MXNetError", "DeferredInitializationError", "py_str", "string_types", "numeric_types",
    "integer_types", "classproperty",
]

string_types = (str,)
"""What MXNet accepts as a name: ``isinstance(x, string_types)``."""

numeric_types = (float, int, np.generic, numbers.Number)
"""Python and numpy scalars (MXNet's ``numeric_types``)."""

integer_types = (int, np.integer)
"""Python and numpy integers (MXNet's ``integer_types``)."""


class MXNetError(RuntimeError):
    """Base class of mxtorch's errors (named as in MXNet so ``except mx.MXNetError`` works)."""


class DeferredInitializationError(MXNetError):
    """A parameter's shape is not known yet: run a forward pass first, or give the shape."""


def py_str(x: bytes | str) -> str:
    """A Python ``str`` from bytes (decoded as UTF-8) or a ``str`` (returned as it is)."""
    return x.decode("utf-8") if isinstance(x, bytes) else x


class classproperty:  # noqa: N801 - MXNet's name
    """A read-only property of the class itself (``Cls.name`` without an instance)."""

    def __init__(self, fget: Any) -> None:
        self.fget = fget

    def __get__(self, obj: Any, owner: type) -> Any:
        return self.fget(owner)
