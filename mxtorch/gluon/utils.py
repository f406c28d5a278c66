"""Gluon utilities: split_data, split_and_load, clip_global_norm, check_sha1, download, HookHandle."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from ..context import Context, as_context
from .utils_download import check_sha1, download

__all__ = ["split_data", "split_and_load", "clip_global_norm", "check_sha1", "download", "HookHandle",
           "shape_is_known"]


def split_data(data: Any, num_slice: int, batch_axis: int = 0, even_split: bool = True) -> list[torch.Tensor]:
    """Split ``data`` into ``num_slice`` parts along ``batch_axis`` (views where possible).

    With ``even_split=True`` the size must divide evenly (else ``ValueError``); otherwise the
    first ``size % num_slice`` parts are one sample larger, as ``numpy.array_split`` and MXNet
    split (parts may be empty when there are fewer samples than parts).  Sparse arrays
    (row_sparse, csr) are split by rows into sparse parts (``batch_axis`` 0 only).
    """
    if not isinstance(data, torch.Tensor):
        data = torch.as_tensor(data)
    if isinstance(num_slice, bool) or not isinstance(num_slice, int) or num_slice < 1:
        raise ValueError(f"num_slice must be a positive int, got {num_slice!r}")
    if not -data.dim() <= batch_axis < max(data.dim(), 1):
        raise ValueError(f"batch_axis {batch_axis} is out of range for data with shape {tuple(data.shape)}")
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(
            f"data with shape {tuple(data.shape)} cannot be evenly split into {num_slice} slices along "
            f"axis {batch_axis}: use a batch size that is a multiple of {num_slice}, or even_split=False"
        )
    step, extra = divmod(size, num_slice)
    sizes = [step + 1 if i < extra else step for i in range(num_slice)]
    if data.layout != torch.strided:
        if batch_axis != 0:
            raise ValueError(f"a sparse array ({data.layout}) can only be split along axis 0, got "
                             f"batch_axis={batch_axis}")
        bounds = [sum(sizes[:i]) for i in range(num_slice + 1)]
        return [_sparse_rows(data, bounds[i], bounds[i + 1]) for i in range(num_slice)]
    if num_slice == 1:
        return [data]
    return list(torch.split(data, sizes, dim=batch_axis))


def _sparse_rows(data: torch.Tensor, begin: int, end: int) -> torch.Tensor:
    """Rows ``begin:end`` of a row_sparse or csr tensor, in the same storage type."""
    from ..nd import sparse

    shape = (end - begin, *data.shape[1:])
    if data.layout == torch.sparse_csr:
        ptr = data.crow_indices()
        lo, hi = int(ptr[begin]), int(ptr[end])
        with sparse._quiet_csr():
            part = torch.sparse_csr_tensor(ptr[begin:end + 1] - lo, data.col_indices()[lo:hi],
                                           data.values()[lo:hi], shape, check_invariants=False)
        return sparse._mx_sparse(part)
    ids, rows = sparse.row_sparse_parts(data)
    keep = (ids >= begin) & (ids < end)
    return sparse.from_row_parts(ids[keep] - begin, rows[keep], shape)


def split_and_load(
    data: Any,
    ctx_list: Sequence[Context] | Context,
    batch_axis: int = 0,
    even_split: bool = True,
) -> list[torch.Tensor]:
    """Split ``data`` into one part per context and move each part there.

    Each part is tagged with its context, so a block called on it uses that context's
    parameter copies (``cpu(0)`` and ``cpu(1)`` are distinct replicas).  With one context the
    whole of ``data`` is moved there.  Sparse arrays give sparse parts.
    """
    if isinstance(ctx_list, Context):
        ctx_list = [ctx_list]
    ctxs = [as_context(c) for c in ctx_list]
    if not ctxs:
        raise ValueError("ctx_list is empty: give at least one context")
    if not isinstance(data, torch.Tensor):
        data = torch.as_tensor(data, device=ctxs[0].torch_device)
    parts = split_data(data, len(ctxs), batch_axis, even_split) if len(ctxs) > 1 else [data]
    out = []
    for part, ctx in zip(parts, ctxs):
        dev = ctx.torch_device
        # non-blocking only towards a GPU: a GPU-to-CPU copy must be complete before the CPU reads it
        t = part.to(dev, non_blocking=dev.type != "cpu") if part.device != dev else part
        if len(ctxs) > 1:
            if t is data and t.layout == torch.strided:
                t = t.view_as(t)
            t._mx_ctx = ctx  # type: ignore[attr-defined,union-attr]
        out.append(t)
    return out


def clip_global_norm(arrays: Sequence[torch.Tensor], max_norm: float,
                     check_isfinite: bool = True) -> float | torch.Tensor:
    """Scale ``arrays`` in place so that their joint L2 norm is at most ``max_norm``.

    Returns the norm before clipping: a float with ``check_isfinite=True`` (which reads it on
    the host, and warns and leaves the arrays as they are when it is nan or inf), else a
    shape-(1,) tensor on the device of ``arrays[0]``, computed without waiting for it (a
    non-finite norm then spreads into the arrays, as in MXNet).
    """
    if not arrays:
        raise ValueError("clip_global_norm got no arrays")
    if max_norm <= 0:
        raise ValueError(f"max_norm must be positive, got {max_norm}")
    arrays = list(arrays)
    with torch.no_grad():
        dev = arrays[0].device
        dense = all(a.layout == torch.strided for a in arrays)
        norms = torch._foreach_norm(arrays) if dense else [_norm(a) for a in arrays]
        total = torch.linalg.vector_norm(torch.stack([n.to(dev, torch.float32) for n in norms]))
        if not check_isfinite:
            scale = torch.clamp(max_norm / (total + 1e-8), max=1.0)
            for a in arrays:
                a.mul_(scale.to(a.device, a.dtype))
            return total.reshape(1)
        total_f = float(total)
        if not math.isfinite(total_f):
            import warnings

            warnings.warn("clip_global_norm: the norm is not finite (nan or inf); arrays left as they are",
                          RuntimeWarning, stacklevel=2)
            return total_f
        scale_f = max_norm / (total_f + 1e-8)
        if scale_f < 1.0:
            if dense:
                torch._foreach_mul_(arrays, scale_f)
            else:
                for a in arrays:
                    a.mul_(scale_f)
    return total_f


def _norm(a: torch.Tensor) -> torch.Tensor:
    if a.layout == torch.strided:
        return torch.linalg.vector_norm(a)
    return torch.linalg.vector_norm(a.coalesce().values() if a.layout == torch.sparse_coo else a.values())


class HookHandle(RemovableHandle):
    """The handle of a hook registered on a Block: ``detach()`` (MXNet's name), ``remove()``
    (torch's) or leaving a ``with`` block removes the hook.  It is torch's ``RemovableHandle``."""

    def __init__(self, handle: RemovableHandle) -> None:  # noqa: D107 - adopts torch's handle
        self.__dict__.update(vars(handle))

    def detach(self) -> None:
        self.remove()


def shape_is_known(shape: Sequence[int] | None) -> bool:
    """Whether every dimension of ``shape`` is known (MXNet's legacy rule: 0 and -1 are unknown)."""
    if shape is None:
        return False
    return all(int(s) > 0 for s in shape)
