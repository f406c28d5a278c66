"""Opt-in: torch dtypes that numpy reads and that equal numpy's types (MXNet's ``x.dtype`` rules).

MXNet's ``x.dtype`` is numpy's type, so MXNet code writes ``x.dtype == np.float32`` and
``np.ones(shape, dtype=x.dtype)``.  mxtorch's ``x.dtype`` is torch's (torch functions accept only a
``torch.dtype``), so by default the first is False and numpy refuses the second.  This switch
changes ``torch.dtype`` itself, not ``x.dtype``: each torch dtype with a numpy equivalent gets

* a ``dtype`` attribute (``torch.float32.dtype == np.dtype('float32')``), the protocol numpy uses
  to read foreign dtype objects: ``np.dtype(torch.float32)``, ``np.ones(3, dtype=x.dtype)``;
* equality with numpy's scalar types and dtypes: ``torch.float32 == np.float32`` and
  ``np.dtype('float32') == torch.float32`` are True (torch dtypes still compare by identity with
  each other; strings and Python types stay unequal, as they are to ``np.float32``).

It is **off by default** (``MXTORCH_NUMPY_DTYPES=1`` or :func:`set_numpy_dtypes`): ``torch.dtype``
is an immutable C type, so this lifts its immutable flag for the two assignments (CPython only),
and every ``==`` between dtypes in Python then runs a Python function, about +0.25 µs each (a
plain torch training step makes 0 to 6 of them; see docs/migrating.md).  Hashes are unchanged:
a dict keyed by numpy types does not find a torch dtype.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
from typing import Any

import numpy as np
import torch

__all__ = ["MXTORCH_NUMPY_DTYPES", "set_numpy_dtypes", "numpy_dtypes_installed", "set_from_environment"]

MXTORCH_NUMPY_DTYPES = "MXTORCH_NUMPY_DTYPES"  # documented in mxtorch.distributed.env

_NUMPY: dict[torch.dtype, np.dtype] = {
    t: np.dtype(n) for t, n in (
        (torch.float16, "float16"), (torch.float32, "float32"), (torch.float64, "float64"),
        (torch.uint8, "uint8"), (torch.int8, "int8"), (torch.int16, "int16"), (torch.int32, "int32"),
        (torch.int64, "int64"), (torch.bool, "bool"), (torch.complex64, "complex64"),
        (torch.complex128, "complex128"), (torch.uint16, "uint16"), (torch.uint32, "uint32"),
        (torch.uint64, "uint64"),
    )
}
_IMMUTABLE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE
_lock = threading.Lock()


def _numpy_dtype(self: torch.dtype) -> np.dtype:
    try:
        return _NUMPY[self]
    except KeyError:
        raise AttributeError(f"{self} has no numpy equivalent") from None


def _eq(self: torch.dtype, other: Any, _numpy: dict[torch.dtype, np.dtype] = _NUMPY) -> Any:
    if type(other) is torch.dtype:
        return self is other
    mine = _numpy.get(self)
    if mine is None:
        return NotImplemented
    if isinstance(other, np.dtype):
        return mine == other
    if isinstance(other, type) and issubclass(other, np.generic):
        return mine.type is other
    return NotImplemented


def _ne(self: torch.dtype, other: Any) -> Any:
    same = _eq(self, other)
    return same if same is NotImplemented else not same


_ADDED: dict[str, Any] = {"dtype": property(_numpy_dtype), "__eq__": _eq, "__ne__": _ne}


def _flags(tp: type) -> ctypes.c_ulong:
    # tp_flags, found by its value (type.__flags__) among the type object's first words
    base, want = id(tp), tp.__flags__
    for i in range(32):
        word = ctypes.c_ulong.from_address(base + i * ctypes.sizeof(ctypes.c_void_p))
        if word.value == want:
            return word
    raise RuntimeError(f"cannot find the flags of {tp.__name__} in this Python")


def _edit_immutable_type(tp: type, names: dict[str, Any] | None) -> None:
    """Set (``names``) or delete (None: the names of ``_ADDED``) attributes of an immutable type."""
    word = _flags(tp)
    old = word.value
    word.value = old & ~_IMMUTABLE
    try:
        for name in _ADDED:
            if names is not None:
                setattr(tp, name, names[name])
            elif name in tp.__dict__:
                delattr(tp, name)
    finally:
        word.value = old


def numpy_dtypes_installed() -> bool:
    """True while torch dtypes equal numpy's types and numpy reads them."""
    return torch.dtype.__dict__.get("__eq__") is _eq


def set_numpy_dtypes(on: bool = True) -> None:
    """Turn the rules of this module on (``on``) or back off (torch's own ``torch.dtype``)."""
    if platform.python_implementation() != "CPython":
        raise RuntimeError(f"numpy dtypes need CPython; this is {platform.python_implementation()}")
    with _lock:
        if on != numpy_dtypes_installed():
            _edit_immutable_type(torch.dtype, _ADDED if on else None)


def set_from_environment() -> None:
    """Turn the rules on at ``import mxtorch`` when ``MXTORCH_NUMPY_DTYPES`` is 1 (true/yes/on)."""
    raw = os.environ.get(MXTORCH_NUMPY_DTYPES, "0").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        set_numpy_dtypes(True)
    elif raw not in ("0", "false", "no", "off", ""):
        raise ValueError(f"{MXTORCH_NUMPY_DTYPES}={raw!r} is not understood: set it to 1 (torch dtypes equal "
                         "numpy's types and numpy reads them) or 0 (torch's own dtypes, the default)")
