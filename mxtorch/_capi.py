"""The few entries of MXNet's C API that MXNet Python code calls through ctypes (``mx.base._LIB``).

MXNet code that hands arrays between libraries sometimes calls the C library directly:
``check_call(_LIB.MXNDArrayFromDLPack(ptr, ctypes.byref(handle)))`` then
``mx.nd.NDArray(handle=handle)``.  mxtorch has no C library; :data:`LIB` answers those calls in
Python with MXNet's conventions (0 on success, -1 and a last error that ``check_call`` raises as
MXNetError), and a handle is a key into this module's table of arrays, taken once by
``NDArray(handle=...)``.  An entry MXNet had but this module lacks raises AttributeError naming it.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from typing import Any

__all__ = ["LIB", "NDArrayHandle", "take_array"]

NDArrayHandle = ctypes.c_void_p

# MXNet sets these signatures when it loads (its DLPack helpers rely on them); pointers are
# 64-bit, ctypes' default restype int would cut them
_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DLTENSOR = b"dltensor"  # a capsule keeps a pointer to its name: this object lives as long as the module

_arrays: dict[int, Any] = {}
_ids = itertools.count(1)
_lock = threading.Lock()
_last_error = threading.local()


def take_array(handle: Any) -> Any:
    """The array a C-API call stored under ``handle`` (a c_void_p or int), removed from the table;
    None when there is none."""
    key = handle.value if isinstance(handle, ctypes.c_void_p) else handle
    with _lock:
        return _arrays.pop(key, None) if isinstance(key, int) else None


def last_error() -> str:
    return str(getattr(_last_error, "message", ""))


class _CAPI:
    """MXNet's ``_LIB``: the C-API calls answered here (each returns 0, or -1 with a last error)."""

    def MXNDArrayFromDLPack(self, dlpack: Any, out: Any) -> int:  # noqa: N802 - MXNet's name
        """Take ownership of a ``DLManagedTensor*`` and store the array; its handle goes to ``out``."""
        import torch.utils.dlpack

        try:
            ptr = dlpack.value if isinstance(dlpack, ctypes.c_void_p) else int(dlpack)
            if not ptr:
                raise ValueError("the DLManagedTensor pointer is NULL")
            target = getattr(out, "_obj", out)  # ctypes.byref(handle) carries the handle object
            if not isinstance(target, ctypes.c_void_p):
                raise TypeError(f"out must be ctypes.byref(NDArrayHandle()), got {type(out).__name__}")
            array = torch.utils.dlpack.from_dlpack(_api.PyCapsule_New(ptr, _DLTENSOR, None))
        except (TypeError, ValueError, RuntimeError, BufferError) as e:
            _last_error.message = f"MXNDArrayFromDLPack: {e}"
            return -1
        with _lock:
            key = next(_ids)
            _arrays[key] = array
        target.value = key
        return 0


LIB = _CAPI()
