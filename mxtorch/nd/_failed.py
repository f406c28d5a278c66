"""Arrays whose operator failed a run-time check: the failure is raised at the next read.

MXNet checked an operator's run-time conditions (a sampler's ``scale > 0`` ...) inside the
operator, which its engine ran after the call returned: the call succeeded, and the error came
at the next read of the result (``asnumpy``, ``wait_to_read``, ``asscalar``) or at
``mx.nd.waitall()``; every array computed from a failed one failed with it.  A
:class:`FailedArray` carries the :class:`~mxtorch.engine.PendingError`; torch operations on it
return FailedArrays sharing it (its ``__torch_function__``), so only arrays in a failed
computation pay for this.  Once raised, the error is cleared for all of them, as in MXNet.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import engine
from .._array_exchange import asnumpy as _asnumpy
from .._array_exchange import wait_to_read as _wait_to_read
from ._ndarray_type import NDArray

__all__ = ["FailedArray", "fail"]


def _pending_in(values: Any) -> engine.PendingError | None:
    for v in values:
        if isinstance(v, FailedArray):
            p: engine.PendingError | None = v.__dict__.get("_mx_pending")
            if p is not None and p.error is not None:
                return p
        elif type(v) in (list, tuple):
            p = _pending_in(v)
            if p is not None:
                return p
    return None


def _mark(result: Any, pending: engine.PendingError) -> None:
    if type(result) in (NDArray, FailedArray):
        result.__class__ = FailedArray
        result._mx_pending = pending
    elif isinstance(result, (list, tuple)):
        for r in result:
            _mark(r, pending)


class FailedArray(NDArray):  # type: ignore[metaclass]
    """An NDArray computed by (or from) an operator that failed; reading it raises the failure."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = super().__torch_function__(func, types, args, kwargs)
        pending = _pending_in([*args, *(kwargs or {}).values()])
        if pending is not None:
            _mark(result, pending)
        return result

    def _mx_raise(self) -> None:
        engine.rethrow(self.__dict__.get("_mx_pending"))

    def asnumpy(self) -> Any:
        self._mx_raise()
        return _asnumpy(self)

    def asscalar(self) -> Any:
        self._mx_raise()
        return super().asscalar()  # type: ignore[misc]  # NDArray's method

    def wait_to_read(self) -> None:
        self._mx_raise()
        _wait_to_read(self)

    wait_to_write = wait_to_read

    def item(self) -> Any:
        self._mx_raise()
        return super().item()

    def tolist(self) -> Any:
        self._mx_raise()
        return super().tolist()


def fail(error: BaseException, result: torch.Tensor) -> torch.Tensor:
    """``result`` (the failed operator's output, its values meaningless) made a FailedArray that
    raises ``error`` at its next read; plain tensors a caller passed in are left as they are."""
    if type(result) in (NDArray, FailedArray):
        _mark(result, engine.defer(error))
    return result
