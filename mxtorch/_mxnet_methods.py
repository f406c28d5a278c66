"""MXNet method mode: MXNet's meaning for the NDArray methods whose names torch.Tensor also has.

``import mxtorch`` adds only the names torch lacks, so a torch user pays nothing for MXNet
compatibility.  MXNet code also calls methods torch defines with another meaning (``x.size`` is
the element count, ``x.reshape(0, -1)``, ``x.mean(axis=1, exclude=True)``, ``bool(x)`` of an empty
array, ``int32 / int32``); each such rule here is a Python function in place of torch's C method,
which costs every call of plain torch code a Python frame (``bench/tensor_methods.py --mxnet-mode``
measures it), so the rules are **opt-in, all together**: ``MXTORCH_MXNET_METHODS=1`` before
``import mxtorch``, or :func:`mxtorch.ndarray_methods.set_mxnet_methods`.  The mode also turns on
MXNet's assignment rule (``x[k] = numpy value``, :mod:`mxtorch._tensor_overrides`).

How a rule decides (:data:`RULES` lists each one):

- **torch first**: a call torch accepts keeps torch's result; a call torch refuses (``TypeError`` or
  ``RuntimeError``: MXNet's keywords, reshape codes, float indices) gets MXNet's result.  Torch code
  in the same process (torch itself, mxtorch's own layers) keeps working unchanged.
- **MXNet's spelling**: where torch would accept MXNet's call with another meaning (``x.max(axis=1)``
  gives torch's ``(values, indices)``), a keyword only MXNet code uses (``axis``, ``exclude``,
  ``is_ascend`` ...) selects MXNet's meaning; torch's spelling (``dim=``) keeps torch's.
- **MXNet's meaning**: ``x.size`` (an int that ``x.size()`` / ``x.size(d)`` still call),
  ``x.flatten()``, ``x.sort()`` and ``x.round()`` without arguments, ``x.take(i)``, ``/`` of two
  integer operands.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from ._array_exchange import asnumpy
from .base import MXNetError

__all__ = ["RULES", "AmbiguousTruthValueError", "ElementCount", "ReshapeError", "install", "installed"]

_REFUSED = (TypeError, RuntimeError)
_MISSING = object()


class AmbiguousTruthValueError(MXNetError, ValueError):
    """``bool(x)`` of an array with more than one element: MXNet raises ValueError, torch
    RuntimeError; this is both, so code written for either catches it."""


class ReshapeError(MXNetError, ValueError):
    """``x.reshape(shape)`` to a shape of another size: MXNet's method raises ValueError (its
    operator MXNetError); this is both."""


class ElementCount(int):
    """MXNet's ``x.size``: the number of elements, an int; calling it is torch's ``x.size()`` /
    ``x.size(dim)``, so torch code keeps working in MXNet method mode."""

    _tensor: torch.Tensor

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _TORCH_SIZE(self._tensor, *args, **kwargs)

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        return (int, (int(self),))


_TORCH_SIZE = torch._C.TensorBase.size


class _SizeAttribute:
    """``x.size`` on an array: its :class:`ElementCount`; ``torch.Tensor.size`` on the class: torch's
    own method, which torch's ``__torch_function__`` dispatch passes on as the function to call."""

    __doc__ = "MXNet's element count; x.size() / x.size(d) are torch's."

    def __get__(self, obj: torch.Tensor | None, objtype: Any = None) -> Any:
        if obj is None:
            return _TORCH_SIZE
        n = ElementCount(obj.numel())
        n._tensor = obj
        return n


# The mx.nd operators behind the rules (x.sort() is mx.nd.sort(x)).  The nd package sits above this
# module (its NDArray type installs these rules), so it hands its namespace over when it loads:
# every NDArray, and MXNet method mode (which loads nd), comes after that.
_operators: Mapping[str, Any] = {}


def use_operators(namespace: Mapping[str, Any]) -> None:
    """Call ``mx.nd``'s operators from ``namespace`` (its module's, read at each call) in the rules."""
    global _operators
    _operators = namespace


def _nd(name: str) -> Callable[..., Any]:
    def call(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        op = _operators.get(name)
        if op is None:  # only while mxtorch.nd's own import is still under way
            raise MXNetError(f"x.{name}(...): mxtorch.nd is not loaded yet (import mxtorch.nd first)")
        return op(self, *args, **kwargs)

    return call


def _mx_reshape(self: torch.Tensor, *shape: Any, **kwargs: Any) -> torch.Tensor:
    from .nd._shape import reshape

    if "shape" in kwargs:
        if shape:
            raise TypeError("reshape: give the shape either positionally or as shape=, not both")
        shape = tuple(kwargs.pop("shape"))
    elif len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    reverse = bool(kwargs.pop("reverse", False))
    if kwargs:
        raise TypeError(f"reshape: unexpected keyword arguments {sorted(kwargs)}; MXNet's are shape= and "
                        "reverse=")
    try:
        return reshape(self, shape, reverse=reverse)
    except MXNetError as e:
        raise ReshapeError(str(e)) from None


def _mx_squeeze(self: torch.Tensor, axis: Any = None, inplace: bool = False) -> torch.Tensor:
    from .nd._shape import squeeze

    view = squeeze(self, axis=axis)
    return view if inplace else view.clone()


def _mx_flatten(self: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    from .nd._shape import flatten

    view = flatten(self)
    return view if inplace else view.clone()


def _numpy_reduction(name: str) -> Callable[..., Any]:
    # numpy's np.all(x) / np.any(x) call x.all(axis=None, out=None): MXNet arrays answer through numpy
    def call(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(np, name)(asnumpy(self), *args, **kwargs)

    return call


def _is_integer(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def _integer_operand(v: Any) -> bool:
    if isinstance(v, torch.Tensor):
        return _is_integer(v)
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _float_index(key: Any) -> Any:
    # MXNet takes float arrays as indices (their values truncated); torch wants integer tensors
    def fix(k: Any) -> Any:
        if isinstance(k, torch.Tensor) and (k.is_floating_point()):
            return k.long()
        return k

    return tuple(fix(k) for k in key) if isinstance(key, tuple) else fix(key)


def _torch_first(torch_fn: Any, mxnet: Callable[..., Any], mx_keywords: frozenset[str] = frozenset()) -> Any:
    if mx_keywords:
        def method(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if kwargs and not mx_keywords.isdisjoint(kwargs):
                return mxnet(self, *args, **kwargs)
            try:
                return torch_fn(self, *args, **kwargs)
            except _REFUSED:
                return mxnet(self, *args, **kwargs)
    else:
        def method(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            try:
                return torch_fn(self, *args, **kwargs)
            except _REFUSED:
                return mxnet(self, *args, **kwargs)
    return method


def _rules() -> dict[str, Any]:
    """name -> the function or property MXNet method mode puts on torch.Tensor."""
    t = torch.Tensor
    torch_bool, torch_truediv, torch_itruediv = t.__bool__, t.__truediv__, t.__itruediv__
    torch_rtruediv, torch_getitem, torch_flatten = t.__rtruediv__, t.__getitem__, t.flatten
    torch_round, torch_take, torch_sort = t.round, t.take, t.sort
    from .nd._elemwise import broadcast_mod, divide

    def __bool__(self: torch.Tensor) -> bool:
        try:
            return torch_bool(self)
        except RuntimeError:
            if self.numel() == 0:
                return False
            raise AmbiguousTruthValueError(
                f"the truth value of an array with {self.numel()} elements is ambiguous: use x.any() or "
                "x.all()"
            ) from None

    def __truediv__(self: torch.Tensor, other: Any) -> Any:
        if _is_integer(self) and _integer_operand(other):
            return divide(self, other)
        return torch_truediv(self, other)

    def __rtruediv__(self: torch.Tensor, other: Any) -> Any:
        if _is_integer(self) and _integer_operand(other):
            return divide(other, self)
        return torch_rtruediv(self, other)

    def __itruediv__(self: torch.Tensor, other: Any) -> Any:
        if _is_integer(self) and _integer_operand(other):
            with torch.no_grad():
                self.copy_(divide(self, other))
            return self
        return torch_itruediv(self, other)

    def __mod__(self: torch.Tensor, other: Any) -> Any:
        return broadcast_mod(self, other)

    def __rmod__(self: torch.Tensor, other: Any) -> Any:
        return broadcast_mod(other, self)

    def __getitem__(self: torch.Tensor, key: Any) -> Any:
        try:
            return torch_getitem(self, key)
        except IndexError:
            fixed = _float_index(key)
            if fixed is key:
                raise
            return torch_getitem(self, fixed)

    def flatten(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not args and (not kwargs or set(kwargs) == {"inplace"}):
            return _mx_flatten(self, **kwargs)
        return torch_flatten(self, *args, **kwargs)

    def round(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:  # noqa: A001 - torch's name
        if args or kwargs:
            return torch_round(self, *args, **kwargs)
        return _nd("round")(self)

    def take(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if "index" in kwargs:  # torch's keyword: torch's flat take
            return torch_take(self, *args, **kwargs)
        return _nd("take")(self, *args, **kwargs)

    order_kw = frozenset({"axis", "is_ascend", "ret_typ", "dtype"})
    sort_by_keyword = _torch_first(torch_sort, _nd("sort"), order_kw)

    def sort(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs:  # MXNet's x.sort(): the sorted array, not (values, indices)
            return _nd("sort")(self)
        return sort_by_keyword(self, *args, **kwargs)

    rules: dict[str, Any] = {
        "size": _SizeAttribute(),
        "__bool__": __bool__,
        "__truediv__": __truediv__,
        "__rtruediv__": __rtruediv__,
        "__itruediv__": __itruediv__,
        "__mod__": __mod__,
        "__rmod__": __rmod__,
        "__getitem__": __getitem__,
        "flatten": flatten,
        "round": round,
        "take": take,
        "sort": sort,
        "reshape": _torch_first(t.reshape, _mx_reshape),
        "squeeze": _torch_first(t.squeeze, _mx_squeeze, frozenset({"axis", "inplace"})),
        "all": _torch_first(t.all, _numpy_reduction("all")),
        "any": _torch_first(t.any, _numpy_reduction("any")),
    }
    reduce_kw = frozenset({"exclude"})
    for name in ("sum", "mean", "prod", "nansum", "norm"):
        rules[name] = _torch_first(getattr(t, name), _nd(name), reduce_kw)
    for name in ("max", "min", "argmax", "argmin"):
        rules[name] = _torch_first(getattr(t, name), _nd(name), frozenset({"axis", "exclude"}))
    for name in ("argsort", "topk"):
        rules[name] = _torch_first(getattr(t, name), _nd(name), order_kw)
    for name in ("broadcast_to", "clip", "split", "transpose", "tile", "repeat", "flip", "softmax",
                 "log_softmax", "swapaxes", "diag"):
        rules[name] = _torch_first(getattr(t, name), _nd(name))
    return rules


RULES: dict[str, str] = {
    "size": "x.size is the element count (an int); x.size() and x.size(d) stay torch's",
    "reshape": "torch's; a shape torch refuses follows MXNet's codes 0/-1/-2/-3/-4 and reverse=",
    "squeeze": "axis= / inplace= is MXNet's (a copy, or with inplace=True a view; an all-ones shape gives "
               "(1,)); x.squeeze() and x.squeeze(d) stay torch's (a view)",
    "flatten": "x.flatten() / x.flatten(inplace=) keep the first axis (MXNet's); with start_dim/end_dim "
               "torch's",
    "sum": "torch's; exclude= (and other calls torch refuses) MXNet's; likewise mean, prod, nansum, norm",
    "max": "axis= or exclude= gives MXNet's array (torch's dim= gives (values, indices)); likewise min, "
           "argmax, argmin (float32 indices)",
    "sort": "x.sort(), axis=, is_ascend= give MXNet's (the sorted array); dim= torch's; likewise argsort, "
            "topk (ret_typ=)",
    "take": "MXNet's rows along an axis (take(indices, axis=0, mode='clip')); torch's flat take with index=",
    "round": "x.round() rounds halves away from zero (MXNet's); round(decimals=) torch's",
    "broadcast_to": "torch's; broadcast_to(shape=) and other calls torch refuses MXNet's; likewise "
                    "clip(a_min, a_max), split(num_outputs, axis), transpose(axes), tile(reps), "
                    "repeat(repeats, axis), flip(axis), softmax/log_softmax(axis), swapaxes, diag",
    "__bool__": "bool(x): an empty array is False; more than one element raises a ValueError (that is also "
                "a RuntimeError)",
    "__truediv__": "integer / integer stays integer, truncated toward zero (MXNet's divide); otherwise "
                   "torch's; likewise __rtruediv__ and __itruediv__ (x /= y)",
    "__mod__": "x % y is 0 where y is 0 (torch raises for integers, gives NaN for floats); likewise "
               "__rmod__",
    "__getitem__": "float arrays as indices are truncated to integers (torch refuses them)",
    "all": "x.all(axis=, out=, keepdims=) (numpy's np.all(x) calls it) answers as numpy; likewise any",
    "__setitem__": "x[k] = numpy array / numpy scalar / list (MXNet's assignment rule)",
}
"""What MXNet method mode changes, by name (the migration table's rows for the mode)."""


_lock = threading.Lock()
_saved: dict[str, Any] = {}  # name -> torch.Tensor's own __dict__ entry (or _MISSING) before install


def installed() -> bool:
    """True while MXNet method mode's rules are on torch.Tensor."""
    return bool(_saved)


def install(on: bool = True) -> None:
    """Put MXNet method mode's rules on torch.Tensor (``on``), or torch's own methods back (the
    assignment rule is switched by :func:`mxtorch.ndarray_methods.set_mxnet_methods`)."""
    with _lock:
        if on and not _saved:
            for name, rule in _rules().items():
                _saved[name] = torch.Tensor.__dict__.get(name, _MISSING)
                setattr(torch.Tensor, name, rule)
        elif not on and _saved:
            for name, before in _saved.items():
                if before is _MISSING:
                    delattr(torch.Tensor, name)
                else:
                    setattr(torch.Tensor, name, before)
            _saved.clear()
