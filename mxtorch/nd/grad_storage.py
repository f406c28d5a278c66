"""Gradient arrays in a storage type torch will not attach to the array (MXNet's ``attach_grad(stype=)``).

MXNet lets any array have a gradient of any storage type: ``x.attach_grad(stype='csr')`` on a dense
array, a dense gradient on a row_sparse or csr array.  torch attaches to ``t.grad`` only a tensor of
``t``'s own layout, or a sparse COO one; it refuses the other pairs ("attempting to assign a
gradient to a tensor that has data of a different type"), and a COO gradient on a csr array fails
at the first backward.  For those pairs :func:`set_grad`
changes the array's class to a subclass (of its own class) whose ``grad`` property returns the
array held here while torch holds none; a backward still gives torch's gradient to torch first,
and :func:`take_backward_gradient` adds it into the held array.  Every other array keeps torch's
own ``grad``: torch code pays nothing.
"""

from __future__ import annotations

from typing import Any

import torch

from ._ndarray_type import NDArray
from ._sparse_storage import CSRNDArray, RowSparseNDArray, SparseNDArray, stype, tostype

__all__ = ["set_grad", "holds_grad", "take_backward_gradient"]

_torch_grad: Any = torch._C.TensorBase.__dict__["grad"]  # the getset descriptor (typed as a Tensor)
_HELD = "_mx_held_grad"


class _GradArrayProperty:
    """``grad`` of an array whose MXNet gradient array has a layout torch will not attach."""

    @property
    def grad(self) -> Any:
        g = _torch_grad.__get__(self)
        return self.__dict__.get(_HELD) if g is None else g

    @grad.setter
    def grad(self, value: Any) -> None:
        if value is None or _attachable(self, value):  # type: ignore[arg-type]
            self.__dict__.pop(_HELD, None)
            _torch_grad.__set__(self, value)
        else:
            _torch_grad.__set__(self, None)
            self.__dict__[_HELD] = value


class TensorWithGradArray(_GradArrayProperty, torch.Tensor):
    """A dense array with a csr gradient array; operations on it give plain tensors."""

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]


class SparseNDArrayWithGradArray(_GradArrayProperty, SparseNDArray):  # type: ignore[metaclass]
    """A sparse array with a gradient array of another storage type."""


class RowSparseNDArrayWithGradArray(_GradArrayProperty, RowSparseNDArray):  # type: ignore[metaclass]
    """A row_sparse array with a gradient array of another storage type."""


class CSRNDArrayWithGradArray(_GradArrayProperty, CSRNDArray):  # type: ignore[metaclass]
    """A csr array with a gradient array of another storage type."""


class NDArrayWithGradArray(_GradArrayProperty, NDArray):  # type: ignore[metaclass]
    """An mx.nd array (MXNet's methods, NDArray results) with a csr gradient array."""


_CLASSES: dict[type, type] = {torch.Tensor: TensorWithGradArray, SparseNDArray: SparseNDArrayWithGradArray,
                              RowSparseNDArray: RowSparseNDArrayWithGradArray,
                              CSRNDArray: CSRNDArrayWithGradArray, NDArray: NDArrayWithGradArray}


def _attachable(t: torch.Tensor, g: torch.Tensor) -> bool:
    # torch takes the same layout, or a sparse COO gradient on a dense array (it also takes one on
    # a csr array, but a backward then fails adding the csr gradient into it)
    return g.layout == t.layout or (g.layout == torch.sparse_coo and t.layout == torch.strided)


def set_grad(t: torch.Tensor, g: torch.Tensor | None) -> None:
    """``t.grad = g`` for any pair of MXNet storage types (see the module's docstring)."""
    if g is None or _attachable(t, g) or isinstance(t, _GradArrayProperty):
        t.grad = g
        return
    cls = _CLASSES.get(type(t))
    if cls is None:
        raise TypeError(
            f"cannot attach a {stype(g)} gradient to a {stype(t)} array of class {type(t).__name__}: "
            "attach_grad(stype=...) with another storage type needs a torch.Tensor or an mx.nd sparse array"
        )
    t.__class__ = cls
    t.grad = g


def holds_grad(t: torch.Tensor) -> bool:
    """Whether ``t``'s gradient array is held here (torch holds none between backward passes)."""
    return _HELD in getattr(t, "__dict__", {})


def take_backward_gradient(t: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
    """After a backward: add the gradient torch accumulated (this backward's only: torch held none
    before) into the held array ``buf``, in ``buf``'s storage type; returns the array now held.

    grad_req='write' zeroed ``buf`` before the backward, so adding is right for both requests."""
    g = _torch_grad.__get__(t)
    if g is None:
        return buf
    dense = g.to_dense() if g.layout != torch.strided else g
    with torch.no_grad():
        if buf.layout == torch.strided:
            buf.add_(dense)
        else:
            buf = tostype(buf.to_dense() + dense, stype(buf))
    t.grad = buf
    return buf
