"""Gradient compression: MXNet's ``'2bit'``/``'1bit'`` quantizers and friends, Horovod-style.

>>> from mxtorch import compression
>>> c = compression.create({'type': '2bit', 'threshold': 0.5})
>>> payload, ctx = c.compress(torch.ones(20), key='w')
>>> c.wire_bytes(payload)        # 20 values -> 2 int32 words
8
>>> c.decompress(payload, ctx)[:3]
tensor([0.5000, 0.5000, 0.5000])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch  # noqa: F401  (used by the docstring example)

from ..registry import Registry
from .base import CompressionContext, CompressionError, Compressor, Key, Payload
from .cast import BF16Compressor, CastCompressor, FP16Compressor
from .powersgd import PowerSGDCompressor
from .quantize import OneBitCompressor, TwoBitCompressor, pack_codes, unpack_codes
from .topk import TopKCompressor

__all__ = [
    "BF16Compressor", "CastCompressor", "CompressionContext", "CompressionError", "Compressor",
    "FP16Compressor", "Key", "OneBitCompressor", "Payload", "PowerSGDCompressor", "TopKCompressor",
    "TwoBitCompressor", "create", "pack_codes", "register", "registered_names", "unpack_codes",
]

_REGISTRY: Registry[Callable[..., Compressor]] = Registry("compression type", error=CompressionError)


def register(name: str, factory: Callable[..., Compressor]) -> None:
    """Make ``factory`` (usually a :class:`Compressor` subclass) known to :func:`create` as ``name``.

    The rules of :class:`mxtorch.registry.Registry` (case-insensitive; another factory under a
    taken name replaces it with a warning).
    """
    _REGISTRY.register(factory, name=name)


def registered_names() -> list[str]:
    return _REGISTRY.names()


def create(params: Mapping[str, Any] | Compressor) -> Compressor:
    """Build a compressor from MXNet-style parameters, e.g. ``{'type': '2bit', 'threshold': 0.5}``.

    The other keys are the compressor's constructor arguments.  A :class:`Compressor` is
    returned as is.
    """
    if isinstance(params, Compressor):
        return params
    if not isinstance(params, Mapping):
        raise TypeError(f"compression params are a dict like {{'type': '2bit', 'threshold': 0.5}}, "
                        f"got {type(params).__name__}: {params!r}")
    if "type" not in params:
        raise CompressionError(f"compression params need a 'type' (one of {registered_names()}), "
                               f"got {dict(params)!r}")
    kind = params["type"]
    factory = _REGISTRY[kind]
    kwargs = {k: v for k, v in params.items() if k != "type"}
    try:
        return factory(**kwargs)
    except TypeError as e:
        raise CompressionError(f"bad parameters {kwargs!r} for compression type {kind!r}: {e}") from e


for _cls in (TwoBitCompressor, OneBitCompressor, FP16Compressor, BF16Compressor, TopKCompressor,
             PowerSGDCompressor):
    register(_cls.name, _cls)
del _cls
