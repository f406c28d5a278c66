"""Memory an executor's arrays share: a gradient array adopting a fresh gradient's storage, an
output array viewed at a smaller shape (a reshaped executor's outputs)."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["adopt", "first_elements"]


def adopt(dst: torch.Tensor, g: torch.Tensor, taken: set[int]) -> bool:
    """Let gradient array ``dst`` take ``g``'s memory instead of copying it, when that is safe:
    ``g`` is a fresh, whole, contiguous gradient of ``dst``'s layout that no other gradient array
    of this backward took (autograd hands one tensor to several inputs of an addition) and that is
    not a head gradient (the caller's, or the ones this executor fills in, are in ``taken`` from
    the start); ``dst`` is not a view of another array (its base would not see the new memory).
    ``g`` may be a view (a reshape of an operator's fresh output, as for FullyConnected's weight)
    when it spans its whole storage.  The array object stays, so everyone holding it sees the new
    values.  Returns whether it did."""
    if g.storage_offset() or dst._base is not None or not g.is_contiguous():
        return False
    if g.shape != dst.shape or g.dtype != dst.dtype or g.device != dst.device:
        return False
    storage = g.untyped_storage()
    ptr = storage.data_ptr()
    if ptr in taken or storage.nbytes() != g.nbytes:
        return False
    taken.add(ptr)
    dst.set_(g)  # type: ignore[call-overload]  # set_(Tensor) exists; the stubs lack it
    return True


def first_elements(arr: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """``arr``'s first elements as an array of ``shape`` (sharing memory) when it has enough of
    them and is contiguous, else new zeros of ``shape``."""
    n = int(np.prod(shape))
    if arr.is_contiguous() and arr.numel() >= n:
        return arr.detach().reshape(-1)[:n].view(shape)
    return torch.zeros(shape, dtype=arr.dtype, device=arr.device)
