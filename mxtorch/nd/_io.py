"""``nd.save`` / ``nd.load``: lists or dicts of tensors in MXNet's own format or safetensors (no pickle).

``save`` writes MXNet's binary NDArray format by default, so MXNet 1.x reads what MXNet code saved
through mxtorch; a ``.safetensors`` file name or ``format='safetensors'`` asks for safetensors
(see :func:`resolve_format`).  ``load`` tells the formats apart by the first bytes of the file (see
:func:`mxtorch.nd.mxnet_format.is_mxnet_file`), so files MXNet wrote with ``mx.nd.save``,
gluon ``.params`` files and Module checkpoints load as they are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..base import MXNetError
from ..checkpoint_io import atomic_write_bytes
from ..util import is_np_shape
from ._ndarray_type import returns_ndarray
from .mxnet_format import is_mxnet_file, read_mxnet, read_mxnet_file, write_mxnet

__all__ = ["save", "load", "load_frombuffer"]  # resolve_format / FORMATS: mxtorch's, not mx.nd names

_KIND_KEY = "mxtorch_container"
FORMATS = ("mxnet", "safetensors")
"""The file formats mxtorch writes: MXNet's binary NDArray format and safetensors."""


def resolve_format(fname: str | os.PathLike[str], format: str | None, what: str) -> str:
    """The format ``what`` writes ``fname`` in: ``format`` when given, else safetensors for a
    ``.safetensors`` name and MXNet's format for any other (MXNet code's files stay MXNet's)."""
    if format is None:
        return "safetensors" if os.fspath(fname).lower().endswith(".safetensors") else "mxnet"
    if format not in FORMATS:
        raise ValueError(f"{what}: format must be one of {FORMATS} (or None: MXNet's format unless the "
                         f"file name ends in .safetensors), got {format!r}")
    return format


def save(
    fname: str | os.PathLike[str],
    data: torch.Tensor | Sequence[torch.Tensor] | Mapping[str, torch.Tensor],
    format: str | None = None,
) -> None:
    """Save a tensor, a list of tensors or a dict of str -> tensor.

    By default in MXNet's NDArray format, which MXNet 1.x's ``mx.nd.load`` reads (see
    :func:`mxtorch.nd.mxnet_format.write_mxnet`; it also holds row_sparse and csr arrays).
    ``format='safetensors'`` or a file name ending in ``.safetensors`` writes safetensors (a list
    under the keys '0', '1', ...), which also holds dtypes MXNet lacks (int16, uint16 ...).
    """
    from safetensors.torch import save as save_bytes

    format = resolve_format(fname, format, "save")
    if isinstance(data, torch.Tensor):
        data = [data]
    if isinstance(data, Mapping):
        kind = "dict"
        items = list(data.items())
        for k, _ in items:
            if not isinstance(k, str):
                raise TypeError(f"save: dict keys must be str, got {type(k).__name__} {k!r}")
    elif isinstance(data, (list, tuple)):
        kind = "list"
        items = [(str(i), v) for i, v in enumerate(data)]
    else:
        raise TypeError(
            f"save: data must be a tensor, a list of tensors or a dict of tensors, got {type(data).__name__}"
        )
    flat: dict[str, torch.Tensor] = {}
    for k, v in items:
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"save: entry {k!r} is a {type(v).__name__}, expected a torch.Tensor")
    if format == "mxnet":
        arrays = dict(items) if kind == "dict" else [v for _, v in items]
        atomic_write_bytes(fname, write_mxnet(arrays, np_shape=is_np_shape()))
        return
    for k, v in items:
        flat[k] = v.detach().to("cpu").contiguous().clone()  # safetensors refuses shared storage
    atomic_write_bytes(fname, save_bytes(flat, metadata={"format": "mxtorch", _KIND_KEY: kind}))


def _unpack(tensors: dict[str, torch.Tensor], metadata: Mapping[str, str] | None, source: str) -> Any:
    if (metadata or {}).get(_KIND_KEY) == "list":
        if sorted(tensors) != sorted(str(i) for i in range(len(tensors))):
            raise MXNetError(f"{source}: a saved list must have the entries '0' .. '{len(tensors) - 1}', got "
                             f"{sorted(tensors)[:5]}")
        return [tensors[str(i)] for i in range(len(tensors))]
    return dict(tensors)


@returns_ndarray
def load(fname: str | os.PathLike[str]) -> list[torch.Tensor] | dict[str, torch.Tensor]:
    """Load what :func:`save` wrote: a list if a list was saved, else a dict (tensors on CPU)."""
    from safetensors import safe_open

    name = os.fspath(fname)
    arrays = read_mxnet_file(name, f"load: file {name!r} does not exist", np_shape=is_np_shape())
    if arrays is not None:
        return arrays
    try:
        with safe_open(name, framework="pt", device="cpu") as f:
            meta = f.metadata()
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open has no __iter__
    except Exception as e:  # safetensors raises its own error types for bad headers
        raise MXNetError(
            f"load: cannot read {name!r}: not a valid safetensors file (corrupt or truncated?): {e}"
        ) from e
    return _unpack(tensors, meta, f"load: {name!r}")  # type: ignore[no-any-return]


@returns_ndarray
def load_frombuffer(buf: bytes) -> list[torch.Tensor] | dict[str, torch.Tensor]:
    """Like :func:`load`, from the bytes of a saved file (safetensors or MXNet's format)."""
    import struct

    from safetensors.torch import load as st_load

    from ..bounded_json import loads as json_loads

    if is_mxnet_file(bytes(buf[:16])):
        return read_mxnet(bytes(buf), "load_frombuffer", np_shape=is_np_shape())
    try:
        tensors = st_load(bytes(buf))
        (n,) = struct.unpack("<Q", bytes(buf[:8]))
        meta = json_loads(bytes(buf[8 : 8 + n]), "the safetensors header", expect=dict).get("__metadata__")
    except Exception as e:
        raise MXNetError(
            f"load_frombuffer: the {len(buf)} bytes are not a valid safetensors file: {e}"
        ) from e
    return _unpack(tensors, meta if isinstance(meta, dict) else None, "load_frombuffer")  # type: ignore[no-any-return]
