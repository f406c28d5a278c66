"""The two ``torch.Tensor`` methods mxtorch extends with MXNet's rules (every other MXNet method is
added under a name torch lacks; see :mod:`mxtorch.ndarray_methods`).

- ``x[key] = value``: numpy arrays, numpy scalars, lists and tuples are values too, converted to
  the array's dtype and device (torch refuses them: "can't assign a numpy.ndarray to a
  torch.FloatTensor"). Tensors and Python numbers go straight to torch's own assignment after
  one ``isinstance`` check; ``bench/tensor_methods.py`` measures that check.
- ``x.__setstate__({'handle': raw bytes})``: MXNet's pickled state of an NDArray (its raw
  single-array bytes) loads into the tensor; any other state is torch's.

:func:`install_setstate` is run by :func:`mxtorch.ndarray_methods.enable` (torch never calls
``__setstate__`` on its own tensors: it costs torch code nothing).  The assignment rule is **off by
default**: every ``x[k] = v`` of plain torch code would pay a Python call for it (``bench/tensor_methods.py``
measured +8 to +26 % on one assignment), and a torch user never pays for MXNet compatibility.  MXNet
code that assigns numpy values turns it on with ``MXTORCH_NUMPY_SETITEM=1`` or
:func:`mxtorch.ndarray_methods.set_numpy_assignment`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

_torch_setitem = torch._C.TensorBase.__setitem__
_torch_setstate = torch.Tensor.__setstate__
_CONVERTED = (np.ndarray, np.generic, list, tuple)


def _as_value(t: torch.Tensor, value: Any) -> torch.Tensor:
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return torch.stack([torch.as_tensor(v) for v in value]).to(device=t.device, dtype=t.dtype)
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"cannot assign {type(value).__name__} of mixed or non-numeric values to an array of "
                        f"dtype {t.dtype}")
    return torch.as_tensor(arr, device=t.device).to(t.dtype)


def _setitem(self: torch.Tensor, key: Any, value: Any, _convert: Any = _CONVERTED,
             _assign: Any = _torch_setitem) -> None:
    if isinstance(value, _convert):
        value = _as_value(self, value)
    _assign(self, key, value)


def _setstate(self: torch.Tensor, state: Any) -> None:
    if isinstance(state, dict) and set(state) == {"handle"}:
        handle = state["handle"]
        if handle is None:
            return
        from .nd.mxnet_format import read_raw_array

        loaded = read_raw_array(bytes(handle), "the pickled MXNet NDArray state")
        with torch.no_grad():
            self.data = loaded.to(self.device) if self.device.type != "cpu" else loaded
        return
    _torch_setstate(self, state)


def install_setitem(on: bool = True) -> None:
    """MXNet's assignment rule on ``torch.Tensor.__setitem__`` (``on``) or torch's own back."""
    if on:
        torch.Tensor.__setitem__ = _setitem  # type: ignore[method-assign,assignment]
    elif torch.Tensor.__dict__.get("__setitem__") is _setitem:
        del torch.Tensor.__setitem__


def setitem_installed() -> bool:
    """True while ``x[k] = v`` takes numpy values and lists (MXNet's rule)."""
    return torch.Tensor.__dict__.get("__setitem__") is _setitem


def install_setstate(on: bool = True) -> None:
    """MXNet's pickled-state rule on ``torch.Tensor.__setstate__`` (``on``) or torch's own back."""
    if on:
        torch.Tensor.__setstate__ = _setstate  # type: ignore[method-assign]
    elif torch.Tensor.__dict__.get("__setstate__") is _setstate:
        torch.Tensor.__setstate__ = _torch_setstate  # type: ignore[method-assign]


def install(on: bool = True) -> None:
    """Both extended methods on (``on``) or torch's own methods back."""
    install_setitem(on)
    install_setstate(on)
