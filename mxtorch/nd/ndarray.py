"""The names MXNet code imports from ``mxnet.ndarray.ndarray`` (reached as ``mxtorch.ndarray.ndarray``).

``NDArray`` is MXNet's array type (:mod:`mxtorch.nd._ndarray_type`); the storage-type, dtype and
grad_req tables hold MXNet's codes
(``_STORAGE_TYPE_STR_TO_ID['row_sparse'] == 1``), and the module-level functions MXNet defines
here (``moveaxis``, ``onehot_encode``, ``true_divide``, DLPack exchange ...) work on tensors.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from .._array_exchange import to_dlpack_for_read, to_dlpack_for_write
from ._common import norm_axis, to_index, write_out
from ._creation import arange, array, empty, eye, from_numpy, full, linspace, ones, waitall, zeros
from ._ops import (
    add,
    concatenate,
    divide,
    equal,
    greater,
    greater_equal,
    lesser,
    lesser_equal,
    logical_and,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    modulo,
    multiply,
    not_equal,
    power,
    split_v2,
    subtract,
)

__all__ = [
    "NDArray", "concatenate", "ones", "add", "arange", "linspace", "eye", "divide", "equal", "full",
    "greater", "greater_equal", "lesser", "lesser_equal", "logical_and", "logical_or", "logical_xor",
    "maximum", "minimum", "moveaxis", "modulo", "multiply", "not_equal", "onehot_encode", "power",
    "subtract", "true_divide", "waitall", "histogram", "split_v2", "to_dlpack_for_read",
    "to_dlpack_for_write", "from_dlpack", "from_numpy", "zeros", "empty", "array",
]

from ._ndarray_type import NDArray  # noqa: E402 - MXNet's array type (a torch.Tensor subclass)

py_slice = slice
"""Python's ``slice`` (MXNet's module names it so because ``slice`` is an operator there)."""

_STORAGE_TYPE_UNDEFINED = -1
_STORAGE_TYPE_DEFAULT = 0
_STORAGE_TYPE_ROW_SPARSE = 1
_STORAGE_TYPE_CSR = 2

_STORAGE_TYPE_STR_TO_ID: dict[str, int] = {
    "undefined": _STORAGE_TYPE_UNDEFINED,
    "default": _STORAGE_TYPE_DEFAULT,
    "row_sparse": _STORAGE_TYPE_ROW_SPARSE,
    "csr": _STORAGE_TYPE_CSR,
}
_STORAGE_TYPE_ID_TO_STR: dict[int, str] = {v: k for k, v in _STORAGE_TYPE_STR_TO_ID.items()}

# MXNet's dtype codes (mshadow's type flags); bfloat16 is a numpy record type there.
_BFLOAT16_NP = np.dtype([("bfloat16", np.uint16)])
_DTYPE_NP_TO_MX: dict[Any, int] = {
    None: -1, np.float32: 0, np.float64: 1, np.float16: 2, np.uint8: 3, np.int32: 4, np.int8: 5,
    np.int64: 6, np.bool_: 7, _BFLOAT16_NP: 12,
}
_DTYPE_MX_TO_NP: dict[int, Any] = {v: k for k, v in _DTYPE_NP_TO_MX.items()}

_GRAD_REQ_MAP: dict[str, int] = {"null": 0, "write": 1, "add": 3}


def true_divide(lhs: Any, rhs: Any) -> Any:
    """lhs / rhs with broadcasting (MXNet's alias of ``divide``)."""
    return divide(lhs, rhs)


def moveaxis(tensor: torch.Tensor, source: Any, destination: Any) -> torch.Tensor:
    """``tensor`` with axes ``source`` moved to ``destination`` (ints or sequences of ints), as numpy."""
    src = (source,) if isinstance(source, numbers.Integral) else tuple(source)
    dst = (destination,) if isinstance(destination, numbers.Integral) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source!r} and destination {destination!r} need as many axes")
    nd = tensor.dim()
    src_axes = tuple(norm_axis(a, nd, "source") for a in src)
    dst_axes = tuple(norm_axis(a, nd, "destination") for a in dst)
    if len(set(src_axes)) != len(src_axes) or len(set(dst_axes)) != len(dst_axes):
        raise ValueError(
            f"moveaxis: source {source!r} and destination {destination!r} must not repeat an axis"
        )
    return torch.movedim(tensor, src_axes, dst_axes)


def onehot_encode(indices: Any, out: torch.Tensor) -> torch.Tensor:
    """Write the one-hot rows of the 1-D ``indices`` into the 2-D ``out`` (n, depth); returns ``out``."""
    if not isinstance(out, torch.Tensor) or out.dim() != 2:
        raise ValueError("onehot_encode: out must be a 2-D tensor (n, depth)")
    idx = to_index(indices, out).reshape(-1)
    if idx.numel() != out.shape[0]:
        raise ValueError(f"onehot_encode: {idx.numel()} indices for out of shape {tuple(out.shape)}")
    hit = idx.unsqueeze(1) == torch.arange(out.shape[1], device=out.device)
    return write_out(hit.to(out.dtype), out, "onehot_encode")  # type: ignore[no-any-return]


def from_dlpack(dlpack: Any) -> torch.Tensor:
    """A tensor sharing memory with a DLPack capsule or an object with ``__dlpack__``."""
    from torch.utils.dlpack import from_dlpack as _from_dlpack

    return _from_dlpack(dlpack)


def histogram(a: torch.Tensor, bins: Any = 10, range: Any = None) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: A002
    """(counts, bin_edges) of ``a``: ``bins`` equal bins over ``range`` (default: a's min..max), or the
    bin edges given as a tensor.  As in MXNet the edges are float32 and the counts int64, except
    without ``range`` and edges (MXNet then converts numpy's result: float32 counts)."""
    x = a.detach().reshape(-1)
    if isinstance(bins, torch.Tensor):
        edges = bins.to(x.dtype if x.is_floating_point() else torch.float64)
    else:
        if not isinstance(bins, int) or bins < 1:
            raise ValueError(f"histogram: bins must be a positive int or a tensor of edges, got {bins!r}")
        lo, hi = (float(x.min()), float(x.max())) if range is None else (float(range[0]), float(range[1]))
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = torch.linspace(lo, hi, bins + 1, dtype=torch.float64, device=x.device)
    xf = x.to(edges.dtype)
    counts_dtype = torch.float32 if range is None and not isinstance(bins, torch.Tensor) else torch.int64
    counts = torch.histogram(xf.cpu(), bins=edges.cpu()).hist.to(counts_dtype).to(x.device)
    return counts, edges.to(torch.float32)
