"""Gradient compression on the parameter server: what travels, and how a server decodes it.

A worker that compresses (``kv.set_gradient_compression({'type': '2bit', 'threshold': 0.5})``)
declares its compressor to every server as JSON (:func:`describe_compressor`; a server builds
its own copy with :func:`build_compressor`, which accepts registered compressor types and plain
parameters only).  The worker keeps the error-feedback residuals (per key, and per slice of a
key split over servers) and pushes each slice's payload tensors with ``Flag.COMPRESSED``; the
server rebuilds the dense gradient with :func:`decode_push` and aggregates it like any push.

The server needs nothing besides the payload and the key's shape and dtype: 2bit/1bit/fp16/
bf16/topk decode from the compressor's parameters alone; PowerSGD's payload is its factors
``[P, Q]`` (or ``[flat]`` for a tensor too small or not a matrix), and ``P @ Q.T`` needs no
state, so the server decodes it too (the warm-started ``Q`` stays with the worker).  Slices of
a key above ``MXNET_KVSTORE_BIGARRAY_BOUND`` are flat, so PowerSGD sends those uncompressed.

Pulls stay dense; a worker may opt in to narrower pulls with ``'pull': 'fp16'`` (or
``'bf16'``) in the compression parameters: float32 values then come back cast to that type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ... import compression
from ...compression.base import CompressionContext, CompressionError, Compressor
from ...profiler import span
from ..base import KVStoreError

__all__ = ["PULL_DTYPES", "describe_compressor", "build_compressor", "split_params", "decode_push"]

PULL_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
"""The ``'pull'`` options of the compression parameters."""
_SCALARS = (bool, int, float, str, type(None))


def split_params(params: Any) -> tuple[dict[str, Any], str | None]:
    """MXNet-style compression parameters -> (the compressor's, the pull option)."""
    if not isinstance(params, Mapping):
        raise KVStoreError(f"compression params are a dict like {{'type': '2bit', 'threshold': 0.5}}, got "
                           f"{type(params).__name__}: {params!r}")
    params = dict(params)
    pull = params.pop("pull", None)
    if pull is not None and pull not in PULL_DTYPES:
        raise KVStoreError(f"compression param 'pull' must be one of {sorted(PULL_DTYPES)} (narrower pulls "
                           f"of float32 values) or None (dense pulls), got {pull!r}")
    return params, pull


def describe_compressor(comp: Compressor) -> dict[str, Any]:
    """``{"type": name, "params": {...}}``: what a server needs to build the same compressor."""
    params = comp.params()
    bad = {k: v for k, v in params.items() if not isinstance(v, _SCALARS)}
    if not comp.name or bad:
        raise KVStoreError(f"compressor {comp!r} cannot be declared to the parameter servers: it needs a "
                           f"registered name and plain parameters (got {bad or 'no name'})")
    return {"type": comp.name, "params": dict(params)}


def build_compressor(desc: Any) -> Compressor | None:
    """The compressor a worker declared (None: it stopped compressing); raises :class:`KVStoreError`."""
    if desc is None:
        return None
    if not isinstance(desc, dict) or not isinstance(desc.get("type"), str) or \
            not isinstance(desc.get("params", {}), dict):
        raise KVStoreError(f"malformed compressor description {str(desc)[:120]!r}: expected "
                           "{'type': name, 'params': {...}}")
    params = desc.get("params", {})
    for k, v in params.items():
        if not isinstance(k, str) or k == "type" or not isinstance(v, _SCALARS):
            raise KVStoreError(f"compressor parameter {k!r}={v!r} is not a plain value")
    try:
        return compression.create({"type": desc["type"], **params})
    except (CompressionError, TypeError) as e:
        raise KVStoreError(f"cannot build compressor {desc['type']!r} with {params}: {e}; the servers know "
                           f"{compression.registered_names()} (register custom ones in a module the servers "
                           "import)") from e


def decode_push(comp: Compressor, tensors: list[torch.Tensor], shape: tuple[int, ...],
                dtype: torch.dtype) -> torch.Tensor:
    """The dense gradient of ``shape``/``dtype`` a pushed payload encodes.

    ``tensors`` come from the wire; ``shape``/``dtype`` are the server's own (the key's slice).
    Raises :class:`~mxtorch.compression.CompressionError`, and nothing else, for a payload that
    does not decode to exactly that: wrong count, dtype or shape of tensors, indices out of range,
    factors of another rank (each compressor's ``decompress`` checks its payload before it
    allocates or computes; any other error a custom compressor raises is turned into one).
    """
    if not dtype.is_floating_point:
        raise CompressionError(f"a {dtype} value is never compressed")
    extra: dict[str, Any] = {}
    if isinstance(comp, compression.PowerSGDCompressor):
        extra["low_rank"] = len(tensors) == 2
    ctx = CompressionContext(torch.Size(shape), dtype, torch.device("cpu"), extra)
    payload: Any = tensors[0] if len(tensors) == 1 else list(tensors)
    try:
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        with span("compression.decode", compressor=comp.name, bytes=nbytes):
            out = comp.decompress(payload, ctx)
    except CompressionError:
        raise
    except (RuntimeError, ValueError, TypeError, IndexError) as e:  # a custom compressor's own checks
        raise CompressionError(f"{comp.name} cannot decode a payload of {_describe(tensors)}: {e}") from e
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(shape) or out.dtype != dtype:
        got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise CompressionError(f"the payload decodes to {got}, expected {shape} {dtype}")
    return out


def _describe(tensors: list[torch.Tensor]) -> str:
    return ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in tensors) or "no tensors"
