"""MXNet's ``mxnet.util`` switches for NumPy semantics (``is_np_array``, ``use_np`` ...).

MXNet 1.x had two array front ends, the legacy ``mx.nd`` and ``mx.np``; a global switch chose
which one Gluon produced.  In mxtorch both are ``torch.Tensor``, so the switch only records what
the code asked for (``is_np_array()`` answers as MXNet would) and changes no computation.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = [
    "is_np_array", "is_np_shape", "set_np", "reset_np", "set_np_shape", "np_array", "np_shape",
    "use_np", "use_np_array", "use_np_shape", "makedirs", "getenv", "setenv",
]

_F = TypeVar("_F")
_state = threading.local()


def _get(name: str) -> bool:
    return bool(getattr(_state, name, False))


class _NumpyArrayScope:
    """``with np_array(active):`` — this thread's NumPy-array mode inside the block.

    MXNet's own class: its ``_current`` holds this thread's scope in ``_current.value``, and
    MXNet code (tests among it) reads or replaces ``_NumpyArrayScope._current`` directly.
    """

    _current: Any = threading.local()

    def __init__(self, is_np_array: bool) -> None:
        self._old_scope: _NumpyArrayScope | None = None
        self._is_np_array = bool(is_np_array)

    def __enter__(self) -> _NumpyArrayScope:
        self._old_scope = getattr(_NumpyArrayScope._current, "value", None)
        _NumpyArrayScope._current.value = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _NumpyArrayScope._current.value = self._old_scope


def _set_array(active: bool) -> None:
    _NumpyArrayScope._current.value = _NumpyArrayScope(active)


def is_np_array() -> bool:
    """True inside :func:`np_array` / after :func:`set_np` (MXNet's NumPy-array mode)."""
    scope = getattr(_NumpyArrayScope._current, "value", None)
    return bool(scope is not None and scope._is_np_array)


def is_np_shape() -> bool:
    """True inside :func:`np_shape` / after :func:`set_np` (zero-size and scalar shapes allowed)."""
    return _get("shape")


def set_np_shape(active: bool) -> bool:
    """Turn NumPy shape semantics on or off; returns the previous setting."""
    prev = _get("shape")
    _state.shape = bool(active)
    return prev


def set_np(shape: bool = True, array: bool = True) -> None:
    """Turn MXNet's NumPy mode on (``array`` needs ``shape``, as in MXNet)."""
    if array and not shape:
        raise ValueError("NumPy array semantics need NumPy shape semantics: "
                         "call set_np(shape=True, array=True)")
    _state.shape = bool(shape)
    _set_array(array)


def reset_np() -> None:
    """Back to the legacy ``mx.nd`` mode."""
    set_np(shape=False, array=False)


@contextmanager
def np_shape(active: bool = True) -> Iterator[None]:
    prev = set_np_shape(active)
    try:
        yield
    finally:
        _state.shape = prev


def np_array(active: bool = True) -> _NumpyArrayScope:
    """A ``with`` scope that turns MXNet's NumPy-array mode on (or off) inside it."""
    return _NumpyArrayScope(active)


def _wrap(ctx: Callable[[], Any], obj: _F) -> _F:
    if isinstance(obj, type):  # a class: every method runs in the mode
        for name, attr in list(vars(obj).items()):
            if callable(attr) and not name.startswith("__"):
                setattr(obj, name, _wrap(ctx, attr))
        return obj
    if not callable(obj):
        raise TypeError(f"use_np decorates a function or a class, got {type(obj).__name__}")

    @functools.wraps(obj)  # type: ignore[arg-type]
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with ctx():
            return obj(*args, **kwargs)  # type: ignore[operator]

    return wrapper  # type: ignore[return-value]


@contextmanager
def _np_both() -> Iterator[None]:
    with np_shape(True), np_array(True):
        yield


def use_np_shape(func: _F) -> _F:
    """Run ``func`` (or every method of a class) with NumPy shape semantics."""
    return _wrap(np_shape, func)


def use_np_array(func: _F) -> _F:
    """Run ``func`` (or every method of a class) with NumPy array semantics."""
    return _wrap(np_array, func)


def use_np(func: _F) -> _F:
    """Run ``func`` (or every method of a class) in MXNet's NumPy mode (shape and array)."""
    return _wrap(_np_both, func)


def makedirs(d: str) -> None:
    """Create ``d`` and its parents; no error if it exists."""
    import os

    os.makedirs(d, exist_ok=True)


def getenv(name: str) -> str | None:
    """The environment variable ``name`` as this process sees it, None when unset (MXNet's
    ``util.getenv``, which read the C++ library's view of the same environment)."""
    import os

    return os.environ.get(name)


def setenv(name: str, value: str | None) -> None:
    """Set the environment variable ``name`` (None unsets it), as MXNet's ``util.setenv``."""
    import os

    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)
