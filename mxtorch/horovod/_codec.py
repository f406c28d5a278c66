"""The JSON wire format of ``broadcast_object`` and ``allgather_object``.

Objects cross process boundaries as UTF-8 JSON behind a short magic prefix; nothing received is
ever unpickled, so a peer cannot make this process run code.  Supported values:

* JSON types: ``None``, ``bool``, ``int``, ``float`` (NaN and infinities included), ``str``,
  ``list``, and ``dict`` (any keys of supported types, not only strings);
* ``tuple`` (comes back as a tuple), ``bytes``/``bytearray`` (come back as ``bytes``);
* ``torch.Tensor`` of a numeric or bool dtype (comes back on the CPU, contiguous, without
  ``requires_grad``);
* ``numpy.ndarray`` and numpy scalars of a numeric or bool dtype (no object or structured dtypes).

Anything else (sets, custom classes, objects with ``__reduce__``) is refused when encoding, with
the path of the offending value in the message.  Non-JSON values are written as tagged objects
``{"__mxtorch__": <tag>, ...}``; a user dict that happens to contain that key is tagged too, so
decoding is unambiguous.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np
import torch

from .. import bounded_json
from ..base import MXNetError

__all__ = ["ObjectEncodingError", "ObjectDecodingError", "encode", "decode", "MAGIC"]

MAGIC = b"MXTJSON1\n"
"""Every payload starts with these bytes; anything else is refused before parsing."""

_TAG = "__mxtorch__"

_TORCH_DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
_TORCH_NAMES = {v: k for k, v in _TORCH_DTYPES.items()}
_NUMPY_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex


class ObjectEncodingError(MXNetError, TypeError):
    """An object cannot be sent: it holds a value of an unsupported type."""


class ObjectDecodingError(MXNetError, ValueError):
    """Received bytes are not a valid mxtorch JSON payload (they are never unpickled)."""


# ---- encoding ------------------------------------------------------------------------------------
def encode(obj: Any) -> bytes:
    """``obj`` as payload bytes (``MAGIC`` + UTF-8 JSON); raises :class:`ObjectEncodingError`."""
    try:
        tree = _to_json(obj, "obj")
    except RecursionError:
        raise ObjectEncodingError("cannot send obj: it is nested too deeply or contains itself") from None
    return MAGIC + json.dumps(tree, separators=(",", ":"), allow_nan=True).encode("utf-8")


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _to_json(obj: Any, path: str) -> Any:
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)  # int subclasses (IntEnum, ...) travel as plain ints
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, list):
        return [_to_json(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return {_TAG: "tuple", "items": [_to_json(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and _TAG not in obj:
            return {k: _to_json(v, f"{path}[{k!r}]") for k, v in obj.items()}
        items = [[_to_json(k, f"{path}.key({k!r})"), _to_json(v, f"{path}[{k!r}]")] for k, v in obj.items()]
        return {_TAG: "dict", "items": items}
    if isinstance(obj, (bytes, bytearray)):
        return {_TAG: "bytes", "data": _b64(bytes(obj))}
    if isinstance(obj, torch.Tensor):
        return _tensor_to_json(obj, path)
    if isinstance(obj, np.ndarray):
        return _ndarray_to_json(obj, path, "ndarray")
    if isinstance(obj, np.generic):
        return _ndarray_to_json(np.asarray(obj), path, "npscalar")
    raise ObjectEncodingError(
        f"cannot send {path}: values of type {type(obj).__module__}.{type(obj).__qualname__} are not "
        "supported (objects travel as JSON, never pickle). Supported: None, bool, int, float, str, "
        "list, tuple, dict, bytes, torch.Tensor and numpy arrays of numeric/bool dtype"
    )


def _tensor_to_json(t: torch.Tensor, path: str) -> dict[str, Any]:
    name = _TORCH_NAMES.get(t.dtype)
    if name is None:
        raise ObjectEncodingError(
            f"cannot send {path}: tensor dtype {t.dtype} is not supported; supported: {sorted(_TORCH_DTYPES)}"
        )
    if t.layout != torch.strided:
        raise ObjectEncodingError(
            f"cannot send {path}: only dense (strided) tensors are supported, got {t.layout}"
        )
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return {_TAG: "tensor", "dtype": name, "shape": list(t.shape), "data": _b64(raw)}


def _ndarray_to_json(a: np.ndarray, path: str, tag: str) -> dict[str, Any]:
    dt = a.dtype
    if dt.kind not in _NUMPY_KINDS or dt.fields is not None or dt.subdtype is not None:
        raise ObjectEncodingError(
            f"cannot send {path}: numpy dtype {dt} is not supported (only bool, integer, float and complex)"
        )
    raw = np.ascontiguousarray(a).tobytes()
    return {_TAG: tag, "dtype": dt.str, "shape": list(a.shape), "data": _b64(raw)}


# ---- decoding ------------------------------------------------------------------------------------
def decode(payload: bytes, source: str = "a peer") -> Any:
    """The object in ``payload``; raises :class:`ObjectDecodingError` for anything malformed."""
    raw = bytes(payload)
    if not raw.startswith(MAGIC):
        hint = " (it looks like a pickle)" if raw[:1] == b"\x80" else ""
        raise ObjectDecodingError(
            f"refusing {len(raw)} bytes from {source}: they are not an mxtorch JSON payload{hint}; "
            f"payloads start with {MAGIC!r}, these start with {raw[:12]!r}. mxtorch never unpickles "
            "received data"
        )
    # no size limit: the payload is already in memory, and broadcast objects can be large
    tree = bounded_json.loads(raw[len(MAGIC):], f"the payload from {source}", ObjectDecodingError,
                              max_bytes=len(raw))
    try:
        return _from_json(tree, source)
    except RecursionError:
        raise ObjectDecodingError(f"the payload from {source} is nested too deeply") from None


def _from_json(node: Any, source: str) -> Any:
    if isinstance(node, list):
        return [_from_json(v, source) for v in node]
    if not isinstance(node, dict):
        return node
    tag = node.get(_TAG)
    if tag is None:
        return {k: _from_json(v, source) for k, v in node.items()}
    try:
        if tag == "tuple":
            return tuple(_from_json(v, source) for v in node["items"])
        if tag == "dict":
            out = {}
            for pair in node["items"]:
                k, v = pair
                out[_hashable(_from_json(k, source), source)] = _from_json(v, source)
            return out
        if tag == "bytes":
            return base64.b64decode(node["data"], validate=True)
        if tag == "tensor":
            return _tensor_from_json(node, source)
        if tag in ("ndarray", "npscalar"):
            arr = _ndarray_from_json(node, source)
            return arr[()] if tag == "npscalar" else arr
    except ObjectDecodingError:
        raise
    except (KeyError, TypeError, ValueError) as err:
        raise ObjectDecodingError(f"malformed {tag!r} entry in the payload from {source}: {err}") from err
    raise ObjectDecodingError(f"unknown tag {tag!r} in the payload from {source}")


def _hashable(key: Any, source: str) -> Any:
    if isinstance(key, list):
        raise ObjectDecodingError(f"a dict key in the payload from {source} is a list, which is unhashable")
    return key


def _shape(node: dict[str, Any]) -> tuple[int, ...]:
    shape = node["shape"]
    if not isinstance(shape, list) or len(shape) > 32 or \
            not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape) or \
            math.prod(max(s, 1) for s in shape) > 1 << 62:  # exact, before numpy or torch sees it
        raise ValueError(f"bad shape {shape!r:.100}")
    return tuple(shape)


def _tensor_from_json(node: dict[str, Any], source: str) -> torch.Tensor:
    dtype = _TORCH_DTYPES.get(node["dtype"])
    if dtype is None:
        raise ObjectDecodingError(f"unsupported tensor dtype {node['dtype']!r} in the payload from {source}")
    shape = _shape(node)
    raw = base64.b64decode(node["data"], validate=True)
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(raw) != numel * itemsize:
        raise ObjectDecodingError(
            f"tensor entry from {source} has {len(raw)} data bytes, expected {numel * itemsize} for "
            f"{node['dtype']}{list(shape)}"
        )
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape).clone()


def _ndarray_from_json(node: dict[str, Any], source: str) -> np.ndarray:
    dt = np.dtype(str(node["dtype"]))
    if dt.kind not in _NUMPY_KINDS or dt.fields is not None or dt.subdtype is not None:
        raise ObjectDecodingError(f"unsupported numpy dtype {dt} in the payload from {source}")
    shape = _shape(node)
    raw = base64.b64decode(node["data"], validate=True)
    numel = math.prod(shape)
    if len(raw) != numel * dt.itemsize:
        raise ObjectDecodingError(
            f"ndarray entry from {source} has {len(raw)} data bytes, expected {numel * dt.itemsize}"
        )
    return np.frombuffer(raw, dtype=dt).reshape(shape).copy()
