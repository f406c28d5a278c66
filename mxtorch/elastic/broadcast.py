"""Broadcast a state tree (tensors and JSON values, :mod:`mxtorch.stateful`) from one rank to all.

The root sends the tree's outline as JSON (each tensor replaced by its dtype and shape), then
the tensors' bytes, one flat buffer per dtype.  The receivers bound the outline before parsing
it and check every tensor it announces before allocating, so nothing from a peer is unpickled
or trusted blindly.  Tuples arrive as lists (JSON has no tuple).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .. import bounded_json
from ..distributed.env import DistributedError
from ..profiler import span

__all__ = ["broadcast_tree", "MAX_OUTLINE_BYTES", "MAX_TENSOR_ELEMENTS"]

MAX_OUTLINE_BYTES = 64 << 20
MAX_TENSOR_ELEMENTS = 1 << 36
_TENSOR_TAG = "__mxtorch_tensor__"
_DTYPES = {str(t): t for t in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
                               torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
                               torch.complex64, torch.complex128)}


def _outline(value: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        if str(value.dtype) not in _DTYPES:
            raise TypeError(f"cannot broadcast a tensor of dtype {value.dtype}")
        tensors.append(value.detach())
        return {_TENSOR_TAG: len(tensors) - 1, "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, (list, tuple)):
        return [_outline(v, tensors) for v in value]
    if isinstance(value, dict):
        return {str(k): _outline(v, tensors) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot broadcast a {type(value).__name__}: a state holds tensors and JSON values only")


def _specs(outline: Any, found: list[tuple[torch.dtype, list[int]]], where: str) -> None:
    if isinstance(outline, list):
        for v in outline:
            _specs(v, found, where)
    elif isinstance(outline, dict):
        if _TENSOR_TAG in outline:
            dtype, shape = _DTYPES.get(str(outline.get("dtype"))), outline.get("shape")
            if (dtype is None or outline[_TENSOR_TAG] != len(found) or not isinstance(shape, list)
                    or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d for d in shape)
                    or math.prod(shape) > MAX_TENSOR_ELEMENTS):
                raise DistributedError(f"{where}: a tensor entry of the state outline is malformed: "
                                       f"{str(outline)[:120]}")
            found.append((dtype, shape))
        else:
            for v in outline.values():
                _specs(v, found, where)


def _rebuild(outline: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(outline, list):
        return [_rebuild(v, tensors) for v in outline]
    if isinstance(outline, dict):
        if _TENSOR_TAG in outline:
            return tensors[outline[_TENSOR_TAG]]
        return {k: _rebuild(v, tensors) for k, v in outline.items()}
    return outline


def _device(backend: str) -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")


def broadcast_tree(tree: Any, root: int = 0) -> Any:
    """``root``'s ``tree`` on every rank of the default process group (its own on the root).

    Every rank calls it; the others' ``tree`` is ignored (None is fine).  Fresh tensors on the
    receivers, on the CPU (or the current CUDA device with a NCCL-only group)."""
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return tree
    me, device = dist.get_rank(), _device(str(dist.get_backend()))
    where = f"rank {me}: the state broadcast from rank {root}"
    with span("mxtorch/elastic.sync"):
        tensors: list[torch.Tensor] = []
        raw = b""
        if me == root:
            import json

            raw = json.dumps(_outline(tree, tensors)).encode()
        size = torch.tensor([len(raw)], dtype=torch.int64, device=device)
        dist.broadcast(size, root)
        n = int(size.item())
        if not 0 <= n <= MAX_OUTLINE_BYTES:
            raise DistributedError(f"{where}: the outline would be {n} bytes (at most {MAX_OUTLINE_BYTES})")
        data = (torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(device) if me == root
                else torch.empty(n, dtype=torch.uint8, device=device))
        dist.broadcast(data, root)
        if me == root:
            received: Any = tree
        else:
            outline = bounded_json.loads(bytes(data.cpu().numpy()), where, DistributedError,
                                         max_bytes=MAX_OUTLINE_BYTES)
            specs: list[tuple[torch.dtype, list[int]]] = []
            _specs(outline, specs, where)
            tensors = [torch.empty(shape, dtype=dtype, device=device) for dtype, shape in specs]
        for dtype in sorted({t.dtype for t in tensors}, key=str):  # one flat buffer per dtype
            members = [t for t in tensors if t.dtype == dtype]
            wire = torch.uint8 if dtype == torch.bool else dtype  # gloo has no bool
            flat = (torch.cat([t.reshape(-1).to(device, wire) for t in members]) if me == root
                    else torch.empty(sum(t.numel() for t in members), dtype=wire, device=device))
            dist.broadcast(flat, root)
            if me != root:
                offset = 0
                for t in members:
                    t.copy_(flat[offset:offset + t.numel()].view(t.shape).to(dtype))
                    offset += t.numel()
        if me != root:
            received = _rebuild(outline, tensors)
        return received
