"""MXNet's ctypes route for DLPack: ``_LIB.MXNDArrayFromDLPack`` + ``NDArray(handle=...)``, with
MXNet's return-code convention (``check_call`` raises MXNetError)."""

from __future__ import annotations

import ctypes

import pytest

import mxtorch as mx
from mxtorch.base import _LIB, NDArrayHandle, c_str, check_call


def _consume(capsule: object) -> ctypes.c_void_p:
    # what MXNet code does with a DLPack capsule it hands to the C API: the pointer goes to the
    # library, the capsule is renamed "used" and gives up its destructor (ownership moved)
    obj = ctypes.py_object(capsule)
    assert ctypes.pythonapi.PyCapsule_IsValid(obj, c_str("dltensor"))
    ptr = ctypes.c_void_p(ctypes.pythonapi.PyCapsule_GetPointer(obj, c_str("dltensor")))
    handle = NDArrayHandle()
    check_call(_LIB.MXNDArrayFromDLPack(ptr, ctypes.byref(handle)))
    ctypes.pythonapi.PyCapsule_SetName(obj, c_str("used_dltensor"))
    ctypes.pythonapi.PyCapsule_SetDestructor(obj, None)
    return handle


def test_array_through_the_c_api_shares_the_memory() -> None:
    x = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    y = mx.nd.NDArray(handle=_consume(mx.nd.to_dlpack_for_write(x)))
    assert type(y) is mx.nd.NDArray and y.asnumpy().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    y[0, 0] = 9.0
    assert float(x[0, 0].asscalar()) == 9.0


def test_c_api_errors_are_mxnet_errors() -> None:
    handle = NDArrayHandle()
    with pytest.raises(mx.MXNetError, match="MXNDArrayFromDLPack: the DLManagedTensor pointer is NULL"):
        check_call(_LIB.MXNDArrayFromDLPack(ctypes.c_void_p(None), ctypes.byref(handle)))
    with pytest.raises(mx.MXNetError, match="no array is stored under this handle"):
        mx.nd.NDArray(handle=ctypes.c_void_p(123456789))
    with pytest.raises(AttributeError):
        _LIB.MXNotAnEntry  # noqa: B018


def test_ndarray_constructor_without_a_handle_is_torchs() -> None:
    assert mx.nd.NDArray([1.0, 2.0]).tolist() == [1.0, 2.0]
