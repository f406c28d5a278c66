"""dtype names as MXNet users write them ('float32', np.float16, 'bfloat16') mapped to torch."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["to_torch_dtype", "dtype_name"]

_BY_NAME: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float": torch.float32,
    "float64": torch.float64,
    "double": torch.float64,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int": torch.int32,
    "int64": torch.int64,
    "long": torch.int64,
    "bool": torch.bool,
    "bool_": torch.bool,
}


def to_torch_dtype(dtype: Any, default: torch.dtype | None = torch.float32) -> torch.dtype:
    """Turn a dtype given as a string, numpy dtype/type or torch dtype into a torch dtype.

    ``None`` gives ``default``.  Raises ``TypeError`` naming the value and the known names.
    """
    if dtype is None:
        if default is None:
            raise TypeError("a dtype is required here")
        return default
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        key = dtype.lower().replace("torch.", "").replace("numpy.", "")
        if key in _BY_NAME:
            return _BY_NAME[key]
    else:
        try:
            np_dtype = np.dtype(dtype)
            # MXNet's numpy stand-in for bfloat16 (what Parameter.dtype gives for one) is a record
            key = "bfloat16" if np_dtype.names == ("bfloat16",) else np_dtype.name
        except TypeError:
            key = ""
        if key in _BY_NAME:
            return _BY_NAME[key]
    raise TypeError(
        f"unknown dtype {dtype!r}: expected a torch dtype, a numpy dtype or one of {sorted(_BY_NAME)}"
    )


def dtype_name(dtype: torch.dtype) -> str:
    """'float32' for torch.float32, as MXNet prints dtypes."""
    return str(dtype).replace("torch.", "")
