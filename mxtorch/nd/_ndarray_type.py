"""``mx.nd.NDArray``: the tensor type of arrays made through MXNet's API, with MXNet's methods.

MXNet code calls NDArray methods that torch.Tensor also defines, with another meaning
(``x.size`` is the element count, ``x.reshape(0, -1)``, ``x.max(axis=1)``, ``x.sort()``,
``bool(x)`` of an empty array, ``int32 / int32``, ``x[k] = numpy value`` ...).  Patching those
onto torch.Tensor would cost every call of plain torch code a Python frame, so MXNet's rules
live on this subclass instead: ``mx.nd`` creation functions, samplers and ``mx.nd.load`` return
NDArrays, and every torch operation with an NDArray operand returns one (its
``__torch_function__``), so MXNet code stays in NDArray land (``nd`` operators, arithmetic,
indexing, Gluon blocks' outputs, gradients) while torch tensors keep torch's C methods
untouched.  ``bench/tensor_methods.py`` measures both sides.

``isinstance(t, NDArray)`` is true for every torch.Tensor (code written for mxtorch's earlier
``NDArray = torch.Tensor`` keeps working); ``type(t) is NDArray`` tells an MXNet array apart.
The rules themselves are :data:`mxtorch._mxnet_methods.RULES` (MXNet method mode puts the same
rules on torch.Tensor for code that mixes plain tensors in).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch

from .. import _mxnet_methods, _tensor_overrides

__all__ = [
    "NDArray", "as_ndarray", "compiled_for_ndarrays", "follows_inputs", "is_ndarray", "new_ndarray", "plain",
    "returns_ndarray",
]

_Tensor = torch.Tensor
_TensorMeta = type(torch.Tensor)
_run_plain = torch._C._disabled_torch_function_impl
_refcount = sys.getrefcount
_Fn = TypeVar("_Fn", bound=Callable[..., Any])


class _NDArrayMeta(_TensorMeta):  # type: ignore[misc,valid-type]
    """``isinstance(t, NDArray)`` holds for every torch.Tensor: mxtorch's NDArray was torch.Tensor
    itself, and code (mxtorch's and its users') checks arrays that way."""

    def __instancecheck__(cls, obj: Any) -> bool:
        if cls is NDArray:
            return isinstance(obj, _Tensor)
        return _TensorMeta.__instancecheck__(cls, obj)


def _adopt(value: tuple[Any, ...] | list[Any]) -> Any:
    # the tensors of a tuple/list result torch just made become NDArrays in place (no new object,
    # no autograd node): those nobody else holds (refcount 3: the tuple, v, getrefcount's argument)
    out = []
    for v in value:
        if type(v) is _Tensor and _refcount(v) <= 3:
            v.__class__ = NDArray
        out.append(v)
    t = type(value)
    return t(out)  # type: ignore[call-arg]  # tuple, list, torch.return_types.max ... take a sequence


class NDArray(torch.Tensor, metaclass=_NDArrayMeta):
    """MXNet's array: a torch.Tensor carrying MXNet's meaning for the NDArray methods whose names
    torch also defines (:data:`mxtorch._mxnet_methods.RULES`).

    Every torch operation with an NDArray operand returns NDArrays (results that existed before
    the call, such as ``plain.copy_(x)``'s ``plain``, are returned as they are).
    ``plain(x)`` gives a torch.Tensor view for code that wants torch's methods."""

    def __new__(cls, *args: Any, handle: Any = None, **kwargs: Any) -> Any:
        if handle is not None:  # MXNet's NDArray(handle=...) of an array a C-API call stored
            from .._capi import take_array

            array = take_array(handle)
            if array is None:
                from ..base import MXNetError

                raise MXNetError(f"NDArray(handle={handle!r}): no array is stored under this handle (a "
                                 "handle is made by a C-API call such as MXNDArrayFromDLPack and taken once)")
            return as_ndarray(array)
        return super().__new__(cls, *args, **kwargs)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if len(types) > 1 and not all(issubclass(cls, t) or t is _Tensor for t in types):
            return NotImplemented  # another subclass (sparse arrays) decides first
        r = _run_plain(func, types, args, kwargs) if kwargs else _run_plain(func, types, args)  # type: ignore[call-arg]
        if type(r) is _Tensor:
            if _refcount(r) == 2:  # made by this call (r and getrefcount's argument): it changes
                r.__class__ = NDArray  # class in place: no new object, no autograd node
            return r
        if isinstance(r, (tuple, list)):
            return _adopt(r)
        return r

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        # torch's default copy runs with subclass dispatch off, where new_empty() makes a plain
        # tensor, and refuses the copy: copy this object as a plain tensor (its class changes for
        # the call and back, as in compiled_for_ndarrays) and give the copy this class
        done = memo.get(id(self))
        if done is not None:
            return done
        cls = type(self)
        self.__class__ = _Tensor  # type: ignore[assignment]
        try:
            new = _Tensor.__deepcopy__(self, memo)
        finally:
            self.__class__ = cls
        new.__class__ = cls
        return new

    def __coerce_same_metadata_as_tangent__(self, expected_metadata: Any, expected_type: Any = None) -> Any:
        # a compiled graph (a hybridized block, see compiled_for_ndarrays) traced plain tensors:
        # the gradient arriving from an NDArray output goes in as one
        return plain(self) if expected_type in (None, _Tensor) else None


def _install_rules() -> None:
    for name, rule in _mxnet_methods._rules().items():
        setattr(NDArray, name, rule)
    NDArray.__setitem__ = _tensor_overrides._setitem  # type: ignore[method-assign,assignment]


_install_rules()
# torch.save of an NDArray (a custom optimizer's state, Trainer.save_states) reads back with
# torch.load(weights_only=True), as a plain tensor does: torch's restricted unpickler rebuilds the
# tensor and then only changes its class
torch.serialization.add_safe_globals([NDArray])


def is_ndarray(x: Any) -> bool:
    """True for an array made through MXNet's API (of type NDArray, not just any torch.Tensor)."""
    return isinstance(x, _Tensor) and _TensorMeta.__instancecheck__(NDArray, x)


def as_ndarray(t: torch.Tensor) -> torch.Tensor:
    """``t`` as an NDArray: itself if it is one (or a subclass such as a sparse array), else a view
    sharing its memory (in the autograd graph)."""
    if type(t) is _Tensor:
        return t.as_subclass(NDArray)
    return t


def new_ndarray(t: torch.Tensor) -> torch.Tensor:
    """``t``, a tensor the caller has just made and nobody else holds, as an NDArray (in place)."""
    if type(t) is _Tensor:
        t.__class__ = NDArray
    return t


def plain(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a plain torch.Tensor: itself unless it is an NDArray, else a view sharing memory."""
    if type(t) is NDArray:
        return torch._C.TensorBase.as_subclass(t, _Tensor)
    return t


def _inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    return [*args, *kwargs.values()]


def _convert(result: Any, inputs: list[Any]) -> Any:
    # a result that is not one of the inputs was made by the call: it becomes an NDArray
    if type(result) is _Tensor:
        if any(result is a for a in inputs):
            return result
        result.__class__ = NDArray
        return result
    if type(result) in (list, tuple):
        return type(result)(_convert(v, inputs) for v in result)
    if type(result) is dict:
        return {k: _convert(v, inputs) for k, v in result.items()}
    return result


def returns_ndarray(fn: _Fn) -> _Fn:
    """``fn`` (an ``mx.nd`` creation function, sampler or loader) returning NDArrays: every tensor
    it made (not one it was given, such as ``out=``) becomes an NDArray."""
    import functools

    @functools.wraps(fn)
    def creation(*args: Any, **kwargs: Any) -> Any:
        return _convert(fn(*args, **kwargs), _inputs(args, kwargs))

    return cast(_Fn, creation)


def follows_inputs(fn: _Fn) -> _Fn:
    """``fn`` (an ``mx.nd`` operator) returning NDArrays when one of its inputs is an NDArray."""
    import functools

    @functools.wraps(fn)
    def operator(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        inputs = _inputs(args, kwargs)
        for a in inputs:
            if type(a) is NDArray or (type(a) in (list, tuple) and any(type(v) is NDArray for v in a)):
                return _convert(result, inputs)
        return result

    return cast(_Fn, operator)


def compiled_for_ndarrays(compiled: _Fn) -> _Fn:
    """``compiled`` (a torch.compile'd forward) given its NDArray inputs as plain tensors for the
    call, its results made NDArrays: dynamo cannot trace the subclass's ``__torch_function__`` (a
    graph break at every operation), and MXNet code chains on a hybridized block's output as on
    an eager one.  The inputs change class for the call and back (the same objects: leaves stay
    leaves, their gradients arrive in ``x.grad``)."""
    import functools

    @functools.wraps(compiled)
    def call(*args: Any, **kwargs: Any) -> Any:
        arrays = [a for a in args if type(a) is NDArray]
        if not arrays:
            return compiled(*args, **kwargs)
        try:
            for a in arrays:
                a.__class__ = _Tensor  # type: ignore[assignment]
            out = compiled(*args, **kwargs)
        finally:
            for a in arrays:
                a.__class__ = NDArray
        return _convert(out, list(args))

    return cast(_Fn, call)
