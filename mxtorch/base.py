"""Errors and small helpers shared by every mxtorch module (MXNet's ``mxnet.base`` names)."""

from __future__ import annotations

import ctypes
import numbers
import os
from typing import Any

import numpy as np

__all__ = [
    "MXNetError", "DeferredInitializationError", "NotImplementedForSymbol", "NotSupportedForSparseNDArray",
    "py_str", "string_types", "numeric_types", "integer_types", "classproperty", "ClassPropertyType",
    "mx_real_t", "mx_uint",
    "mx_int", "mx_float", "data_dir", "data_dir_default", "attr_string", "c_str", "check_call",
]

string_types = (str,)
"""What MXNet accepts as a name: ``isinstance(x, string_types)``."""

numeric_types = (float, int, np.generic, numbers.Number)
"""Python and numpy scalars (MXNet's ``numeric_types``)."""

integer_types = (int, np.integer)
"""Python and numpy integers (MXNet's ``integer_types``)."""


mx_real_t = np.float32
"""MXNet's default real type (numpy.float32)."""

# the C types MXNet's ctypes layer named; code that builds its own C calls imports them from here
mx_int = ctypes.c_int
mx_uint = ctypes.c_uint
mx_float = ctypes.c_float


class _NullType:
    """Placeholder for "argument not given" in MXNet's operator signatures (``_Null``)."""

    def __repr__(self) -> str:
        return "_Null"


_Null = _NullType()


class MXNetError(RuntimeError):
    """Base class of mxtorch's errors (named as in MXNet so ``except mx.MXNetError`` works)."""


class _UnsupportedForType(MXNetError):
    """An operator called on a kind of array it does not support; the message names both."""

    _kind = ""

    def __init__(self, function: Any, alias: str | None = None, *args: Any) -> None:
        super().__init__()
        self.function = getattr(function, "__name__", str(function))
        self.alias = alias
        self.args = tuple(str(type(a)) for a in args)

    def __str__(self) -> str:
        alias = f' (namely operator "{self.alias}")' if self.alias else ""
        args = f" with arguments ({', '.join(self.args)})" if self.args else ""
        return f"Function {self.function}{alias}{args} {self._kind}"


class NotImplementedForSymbol(_UnsupportedForType):
    """An NDArray-only function called on a Symbol (MXNet's error of the same name)."""

    _kind = "is not implemented for Symbol and only available in NDArray."


class NotSupportedForSparseNDArray(_UnsupportedForType):
    """A dense-only function called on a sparse array (MXNet's error of the same name)."""

    _kind = "is not supported for SparseNDArray and only available in NDArray."


class DeferredInitializationError(MXNetError):
    """A parameter's shape is not known yet: run a forward pass first, or give the shape."""


def _as_list(obj: Any) -> Any:
    """``obj`` itself when it is a list or tuple, else ``[obj]``."""
    return obj if isinstance(obj, (list, tuple)) else [obj]


def data_dir_default() -> str:
    """Where MXNet keeps downloads by default: ``~/.mxnet`` (``%APPDATA%/mxnet`` on Windows)."""
    if os.name == "nt" and os.environ.get("APPDATA"):
        return os.path.join(os.environ["APPDATA"], "mxnet")
    return os.path.join(os.path.expanduser("~"), ".mxnet")


def data_dir() -> str:
    """The data directory: ``$MXNET_HOME``, else :func:`data_dir_default`."""
    return os.getenv("MXNET_HOME", data_dir_default())


def attr_string(value: Any) -> str:
    """MXNet's string form of an attribute value: ``(3, 3)``, ``True``, ``0.5``, ``relu``."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(attr_string(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if hasattr(value, "dtype") and not hasattr(value, "shape"):
        return str(value)
    if isinstance(value, type):  # numpy scalar types: np.float32 -> 'float32'
        return value.__name__
    return str(value)


def py_str(x: bytes | str) -> str:
    """A Python ``str`` from bytes (decoded as UTF-8) or a ``str`` (returned as it is)."""
    return x.decode("utf-8") if isinstance(x, bytes) else x


class classproperty:  # noqa: N801 - MXNet's name
    """A property of the class itself (``Cls.name`` without an instance).

    Read-only unless given a ``@name.setter``; assigning ``Cls.name = value`` reaches the setter
    only on a class made by :class:`ClassPropertyType` (MXNet's ``AttrScope.current = ...``).
    """

    def __init__(self, fget: Any, fset: Any = None) -> None:
        self.fget = fget
        self.fset = fset

    def __get__(self, obj: Any, owner: type) -> Any:
        return self.fget(owner)

    def setter(self, fset: Any) -> classproperty:
        return classproperty(self.fget, fset)


class ClassPropertyType(type):
    """Metaclass that routes ``Cls.name = value`` to the setter of a :class:`classproperty`."""

    def __setattr__(cls, key: str, value: Any) -> None:
        prop = next((vars(k)[key] for k in cls.__mro__ if key in vars(k)), None)
        if isinstance(prop, classproperty):
            if prop.fset is None:
                raise AttributeError(f"{cls.__name__}.{key} is read-only")
            prop.fset(cls, value)
            return
        super().__setattr__(key, value)


def c_str(string: str) -> ctypes.c_char_p:
    """``string`` as a C string (UTF-8), as MXNet's ctypes calls pass names."""
    return ctypes.c_char_p(string.encode("utf-8"))


def check_call(ret: int) -> None:
    """Raise MXNetError with the last C-API error when a ``_LIB`` call returned non-zero."""
    if ret != 0:
        from ._capi import last_error

        raise MXNetError(last_error() or f"C-API call failed with return code {ret}")


def __getattr__(name: str) -> Any:
    # MXNet's C-API names load on first use (mxtorch._capi sets ctypes signatures as MXNet did)
    if name in ("_LIB", "NDArrayHandle"):
        from . import _capi

        return _capi.LIB if name == "_LIB" else _capi.NDArrayHandle
    raise AttributeError(f"module 'mxtorch.base' has no attribute {name!r}")
