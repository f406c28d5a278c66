"""Contexts, dtypes and MXNet's default tolerances for ``mx.test_utils``.

Default tolerances follow MXNet's per-dtype table (the looser of the two operands' dtypes is
used when comparing):

=========  =======  =======
dtype      rtol     atol
=========  =======  =======
float16    1e-2     1e-1
bfloat16   2e-2     1e-1   (not in MXNet 1.x; chosen for bfloat16's 8-bit mantissa)
float32    1e-4     1e-3
float64    1e-5     1e-20
integers   0        0
=========  =======  =======
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from .. import context as _context
from ..context import Context, as_context, current_context


def default_context() -> Context:
    """The context tests run on: the one set by :func:`set_default_context`, else cpu(0)."""
    return current_context()


def set_default_context(ctx: Context | str) -> None:
    """Make ``ctx`` the default context of this thread (what ``current_context()`` returns)."""
    _context._state.ctx = as_context(ctx)


default_device = default_context
set_default_device = set_default_context


def default_dtype() -> type:
    """MXNet's default floating-point type, numpy.float32."""
    return np.float32


_RTOLS: dict[str, float] = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-4, "float64": 1e-5}
_ATOLS: dict[str, float] = {"float16": 1e-1, "bfloat16": 1e-1, "float32": 1e-3, "float64": 1e-20}
_EXACT = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


def _by_dtype(table: dict[str, float]) -> dict[Any, float]:
    # numpy cannot name bfloat16: its entry is keyed by torch.bfloat16 (what effective_dtype gives)
    out: dict[Any, float] = {np.dtype(k): v for k, v in table.items() if k != "bfloat16"}
    out[torch.bfloat16] = table["bfloat16"]
    out.update({np.dtype(k): 0 for k in _EXACT})
    return out


def default_rtols() -> dict[Any, float]:
    """Default relative tolerance keyed by ``numpy.dtype`` (integer and bool dtypes: 0), as MXNet
    (bfloat16's keyed by ``torch.bfloat16``)."""
    return _by_dtype(_RTOLS)


def default_atols() -> dict[Any, float]:
    """Default absolute tolerance keyed by ``numpy.dtype`` (integer and bool dtypes: 0), as MXNet."""
    return _by_dtype(_ATOLS)


def default_numeric_eps() -> dict[Any, float]:
    """Finite-difference step per dtype: powers of two, so adding one drops no bits of the input."""
    return {
        np.dtype(np.float16): 1.0 / 2**6,
        np.dtype(np.float32): 1.0 / 2**9,
        np.dtype(np.float64): 1.0 / 2**14,
    }


def _dtype_name(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return str(x.dtype).replace("torch.", "")
    if isinstance(x, torch.dtype):
        return str(x).replace("torch.", "")
    if isinstance(x, np.ndarray | np.generic):
        return x.dtype.name
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, float):
        return "float64"
    if isinstance(x, int):
        return "int64"
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return _dtype_name(dt) if isinstance(dt, torch.dtype) else np.dtype(dt).name
    return np.asarray(x).dtype.name


def effective_dtype(dat: Any) -> Any:
    """The dtype whose tolerance applies to ``dat``: its own (``numpy.dtype``; ``torch.bfloat16``
    for bfloat16 tensors, which numpy cannot name). MXNet lowers float32 to float16 on GPUs that
    compute float32 matmuls in TF32; torch keeps TF32 off by default, so no lowering here."""
    name = _dtype_name(dat)
    return torch.bfloat16 if name == "bfloat16" else np.dtype(name)


def get_tolerance(dat: Any, tol: Any, default_tol: dict[Any, float]) -> float:
    """``tol`` when it is a number; else its entry for ``dat``'s dtype (a dict of dtype to float),
    else ``default_tol``'s entry (0, exact, for a dtype it does not list)."""
    if isinstance(tol, numbers.Number):
        return float(tol)  # type: ignore[arg-type]
    dt = effective_dtype(dat)
    if tol and dt in tol:
        return float(tol[dt])
    return float(default_tol.get(dt, 0.0))


def _tol(table: dict[str, float], *dtypes: str) -> float:
    return max(table.get(d, 0.0) for d in dtypes) if dtypes else 0.0


def _name_of(dtype: Any) -> str:
    return (
        dtype
        if isinstance(dtype, str)
        else _dtype_name(dtype)
        if isinstance(dtype, torch.dtype)
        else np.dtype(dtype).name
    )


def get_rtol(rtol: float | None = None, dtype: Any = np.float64) -> float:
    """``rtol`` if given, else the default for ``dtype`` (float64, as MXNet, when not given)."""
    return rtol if rtol is not None else _tol(_RTOLS, _name_of(dtype))


def get_atol(atol: float | None = None, dtype: Any = np.float64) -> float:
    """``atol`` if given, else the default for ``dtype`` (float64, as MXNet, when not given)."""
    return atol if atol is not None else _tol(_ATOLS, _name_of(dtype))


def get_etol(etol: float | None = None) -> float:
    """The tolerated fraction of mismatching elements: ``etol``, default 0."""
    return 0.0 if etol is None else float(etol)


def get_tols(x: Any, y: Any, rtol: Any, atol: Any) -> tuple[float, float]:
    """(rtol, atol) for comparing x and y: numbers as given; None or a dict of dtype to float
    resolved per operand's dtype, the looser of the two."""
    rtols, atols = default_rtols(), default_atols()
    return (
        max(get_tolerance(x, rtol, rtols), get_tolerance(y, rtol, rtols)),
        max(get_tolerance(x, atol, atols), get_tolerance(y, atol, atols)),
    )
