"""Gluon utilities: split_data, split_and_load, clip_global_norm."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ..base import MXNetError
from ..context import Context, as_context

__all__ = ["split_data", "split_and_load", "clip_global_norm", "check_sha1"]


def split_data(data: Any, num_slice: int, batch_axis: int = 0, even_split: bool = True) -> list[torch.Tensor]:
    """Split ``data`` into ``num_slice`` parts along ``batch_axis``.

    With ``even_split=True`` the size must divide evenly; otherwise the last parts are one
    sample smaller, as in MXNet.
    """
    if not isinstance(data, torch.Tensor):
        data = torch.as_tensor(data)
    if num_slice < 1:
        raise ValueError(f"num_slice must be >= 1, got {num_slice}")
    size = data.shape[batch_axis]
    if size < num_slice:
        raise MXNetError(
            f"too many slices for data with shape {tuple(data.shape)}: {size} samples along axis "
            f"{batch_axis} cannot be split into {num_slice} parts (one per context); use a batch of at "
            f"least {num_slice} samples or fewer contexts"
        )
    if even_split and size % num_slice != 0:
        raise MXNetError(
            f"data with shape {tuple(data.shape)} cannot be evenly split into {num_slice} slices along "
            f"axis {batch_axis}: use a batch size divisible by {num_slice}, or even_split=False"
        )
    if num_slice == 1:
        return [data]
    step = size // num_slice
    if even_split:
        return list(torch.split(data, step, dim=batch_axis))
    extra = size - step * num_slice
    sizes = [step + 1 if i < extra else step for i in range(num_slice)]
    return list(torch.split(data, sizes, dim=batch_axis))


def split_and_load(
    data: Any,
    ctx_list: Sequence[Context] | Context,
    batch_axis: int = 0,
    even_split: bool = True,
) -> list[torch.Tensor]:
    """Split ``data`` into one part per context and move each part there.

    Each part is tagged with its context, so a block called on it uses that context's
    parameter copies (``cpu(0)`` and ``cpu(1)`` are distinct replicas).
    """
    if isinstance(ctx_list, Context):
        ctx_list = [ctx_list]
    ctxs = [as_context(c) for c in ctx_list]
    if not ctxs:
        raise ValueError("ctx_list is empty: give at least one context")
    if not isinstance(data, torch.Tensor):
        data = torch.as_tensor(data)
    parts = split_data(data, len(ctxs), batch_axis, even_split)
    out = []
    for part, ctx in zip(parts, ctxs):
        dev = ctx.torch_device
        t = part.to(dev, non_blocking=True) if part.device != dev else part
        if len(ctxs) > 1:
            if t is data:
                t = t.view_as(t)
            t._mx_ctx = ctx  # type: ignore[attr-defined]
        out.append(t)
    return out


def clip_global_norm(arrays: Sequence[torch.Tensor], max_norm: float, check_isfinite: bool = True) -> float:
    """Scale ``arrays`` in place so that their joint L2 norm is at most ``max_norm``.

    Returns the norm before clipping.  A non-finite norm warns (and leaves the arrays) when
    ``check_isfinite`` is True.
    """
    if not arrays:
        raise ValueError("clip_global_norm got no arrays")
    if max_norm <= 0:
        raise ValueError(f"max_norm must be positive, got {max_norm}")
    with torch.no_grad():
        dev = arrays[0].device
        norms = torch._foreach_norm(list(arrays)) if hasattr(torch, "_foreach_norm") else [
            a.norm() for a in arrays]
        total = torch.linalg.vector_norm(torch.stack([n.to(dev, torch.float32) for n in norms]))
        total_f = float(total)
        if check_isfinite and not math.isfinite(total_f):
            import warnings

            warnings.warn("clip_global_norm: the norm is not finite (nan or inf); arrays left as they are",
                          RuntimeWarning, stacklevel=2)
            return total_f
        scale = max_norm / (total_f + 1e-8)
        if scale < 1.0:
            torch._foreach_mul_(list(arrays), scale)
    return total_f


def check_sha1(filename: str, sha1_hash: str) -> bool:
    """True if the file's SHA-1 equals ``sha1_hash``."""
    import hashlib

    h = hashlib.sha1()
    with open(filename, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest() == sha1_hash
