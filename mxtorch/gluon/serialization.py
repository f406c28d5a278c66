"""Parameter files: safetensors on disk, written atomically, read without unpickling."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

import torch

from .._dtype import dtype_name
from ..base import MXNetError
from .parameter import Parameter

__all__ = ["save_tensors", "load_tensors", "load_into"]


def save_tensors(filename: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor],
                 metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` to ``filename`` as safetensors; a crash mid-write leaves the old file."""
    from safetensors.torch import save_file

    filename = os.fspath(filename)
    flat = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    folder = os.path.dirname(os.path.abspath(filename))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=folder)
    os.close(fd)
    try:
        save_file(flat, tmp, metadata={"format": "mxtorch", **(metadata or {})})
        os.replace(tmp, filename)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_tensors(filename: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """Read a safetensors file; a missing or corrupt file raises MXNetError naming it."""
    from safetensors.torch import load_file

    filename = os.fspath(filename)
    if not os.path.isfile(filename):
        raise MXNetError(f"parameter file {filename!r} does not exist")
    try:
        return load_file(filename)
    except Exception as e:  # safetensors raises its own error types for bad headers
        raise MXNetError(
            f"cannot read parameter file {filename!r}: it is not a valid safetensors file "
            f"(truncated or corrupt?): {e}"
        ) from e


def load_into(
    params: Mapping[str, Parameter],
    filename: str | os.PathLike[str],
    ctx: Any = None,
    allow_missing: bool = False,
    ignore_extra: bool = False,
    cast_dtype: bool = False,
    dtype_source: str = "current",
) -> None:
    """Copy the tensors of ``filename`` into ``params`` (matched by name), checking shapes."""
    if dtype_source not in ("current", "saved"):
        raise ValueError(f"dtype_source must be 'current' or 'saved', got {dtype_source!r}")
    loaded = load_tensors(filename)
    missing = [k for k in params if k not in loaded]
    if missing and not allow_missing:
        raise MXNetError(
            f"parameter file {os.fspath(filename)!r} lacks {len(missing)} parameter(s) of the model: "
            f"{missing[:10]}{' ...' if len(missing) > 10 else ''}; it has {sorted(loaded)[:10]}. "
            "Pass allow_missing=True to keep those parameters as they are"
        )
    extra = [k for k in loaded if k not in params]
    if extra and not ignore_extra:
        raise MXNetError(
            f"parameter file {os.fspath(filename)!r} has {len(extra)} parameter(s) the model does not: "
            f"{extra[:10]}{' ...' if len(extra) > 10 else ''}. Pass ignore_extra=True to skip them"
        )
    # Check every shape/dtype before changing anything, so a bad file leaves the model intact.
    plan: list[tuple[Parameter, torch.Tensor]] = []
    for name, p in params.items():
        if name not in loaded:
            continue
        t = loaded[name]
        shape = p.shape
        if shape is not None and len(shape) == t.dim():
            bad = any(s > 0 and s != ts for s, ts in zip(shape, t.shape))
        else:
            bad = shape is not None and p.is_initialized
        if bad:
            raise MXNetError(
                f"shape mismatch for parameter {name!r}: the model expects {shape}, "
                f"{os.fspath(filename)!r} has {tuple(t.shape)}"
            )
        if t.dtype != p.dtype:
            if cast_dtype:
                t = t.to(p.dtype) if dtype_source == "current" else t
            else:
                raise MXNetError(
                    f"dtype mismatch for parameter {name!r}: model {dtype_name(p.dtype)}, file "
                    f"{dtype_name(t.dtype)}; pass cast_dtype=True to convert"
                )
        plan.append((p, t))
    for p, t in plan:
        if cast_dtype and dtype_source == "saved" and t.dtype != p.dtype:
            p.cast(t.dtype)
        if not p.is_initialized:
            p.shape = tuple(t.shape)
            if p._deferred is None:
                p.initialize(init="zeros", ctx=ctx)
            else:
                p._finish_deferred_init()
        elif ctx is not None:
            p.reset_ctx(ctx)
        p.set_data(t.to(p.dtype))
