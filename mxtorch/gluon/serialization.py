"""Parameter files: MXNet's NDArray format (or safetensors) on disk, written atomically, read without
unpickling; reading tells the two apart by their first bytes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

from ..base import MXNetError
from ..checkpoint_io import atomic_write_bytes
from ..nd._io import resolve_format
from ..nd.mxnet_format import read_mxnet_file, write_mxnet
from .parameter_core import Parameter

__all__ = ["save_tensors", "load_tensors", "load_named"]


def save_tensors(filename: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor],
                 metadata: dict[str, str] | None = None, format: str | None = None) -> None:
    """Write ``tensors`` to ``filename``; a crash mid-write leaves the old file.

    By default in MXNet's NDArray format, which MXNet's ``load_parameters`` and ``mx.nd.load``
    read (``metadata`` must then be empty: it has no place for it); ``format='safetensors'`` or a
    ``.safetensors`` file name writes safetensors (see :func:`mxtorch.nd._io.resolve_format`).
    """
    from safetensors.torch import save

    format = resolve_format(filename, format, "save_tensors")
    if format == "mxnet":
        if metadata:
            raise ValueError(f"save_tensors: MXNet's format has no place for metadata, got "
                             f"{sorted(metadata)}")
        atomic_write_bytes(filename, write_mxnet(dict(tensors)))
        return
    flat = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}  # no shared storage
    atomic_write_bytes(filename, save(flat, metadata={"format": "mxtorch", **(metadata or {})}))


def load_tensors(filename: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """Read a safetensors file or an MXNet NDArray file of named arrays (a gluon ``.params`` file or
    a Module checkpoint, whose ``arg:``/``aux:`` names are kept); a missing or corrupt file raises
    MXNetError naming it."""
    from safetensors.torch import load_file

    filename = os.fspath(filename)
    arrays = read_mxnet_file(filename, f"parameter file {filename!r} does not exist")
    if isinstance(arrays, list):
        if arrays:
            raise MXNetError(f"parameter file {filename!r} is an MXNet file of {len(arrays)} unnamed "
                             "arrays (saved from a list); parameters need a dict of names to arrays")
        return {}
    if arrays is not None:
        return arrays
    try:
        return load_file(filename)
    except Exception as e:  # safetensors raises its own error types for bad headers
        raise MXNetError(
            f"cannot read parameter file {filename!r}: it is not a valid safetensors file "
            f"(truncated or corrupt?): {e}"
        ) from e


def load_named(
    params: Mapping[str, Parameter],
    arrays: Mapping[str, torch.Tensor],
    source: str,
    ctx: Any = None,
    allow_missing: bool = False,
    ignore_extra: bool = False,
    cast_dtype: bool = False,
    dtype_source: str = "current",
) -> None:
    """Copy ``arrays`` into ``params`` by name (``source`` names the arrays in errors).

    One parameter may appear under several names (a block shared at several places): it is
    missing only when none of its names is in ``arrays``.  Every shape and dtype is checked
    before anything changes, so a bad file leaves the model as it was.
    """
    if dtype_source not in ("current", "saved"):
        raise ValueError(f"dtype_source must be 'current' or 'saved', got {dtype_source!r}")
    names: dict[int, list[str]] = {}
    by_id: dict[int, Parameter] = {}
    for name, p in params.items():
        names.setdefault(id(p), []).append(name)
        by_id[id(p)] = p
    missing = [ns[0] for ns in names.values() if not any(n in arrays for n in ns)]
    if missing and not allow_missing:
        raise MXNetError(
            f"{source} lacks {len(missing)} parameter(s) of the model: "
            f"{missing[:10]}{' ...' if len(missing) > 10 else ''}; it has {sorted(arrays)[:10]}"
            f"{' ...' if len(arrays) > 10 else ''}. Pass allow_missing=True to keep those parameters as "
            "they are"
        )
    extra = [k for k in arrays if k not in params]
    if extra and not ignore_extra:
        raise MXNetError(
            f"{source} has {len(extra)} parameter(s) the model does not: "
            f"{extra[:10]}{' ...' if len(extra) > 10 else ''}; the model has {list(params)[:10]}"
            f"{' ...' if len(params) > 10 else ''}. Pass ignore_extra=True to skip them"
        )
    plan: list[tuple[Parameter, torch.Tensor]] = []
    for pid, ns in names.items():
        found = next((n for n in ns if n in arrays), None)
        if found is None:
            continue
        p = by_id[pid]
        plan.append((p, p._check_load(arrays[found], cast_dtype, dtype_source, source, found)))
    for p, t in plan:
        p._load_init(t, ctx, cast_dtype, dtype_source)
