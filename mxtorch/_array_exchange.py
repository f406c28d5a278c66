"""Handing an array's values out: to numpy (``x.asnumpy()``), to another framework (DLPack), once
the device has finished writing them (``x.wait_to_read()``).

These NDArray methods need nothing of the arrays layer, so the operators (``mx.nd.to_dlpack_for_read``)
and MXNet method mode (``np.all(x)`` answers through numpy) use them from here, below the NDArray
methods of :mod:`mxtorch.ndarray_methods` that hand them out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import util as _util

__all__ = ["asnumpy", "to_dlpack_for_read", "to_dlpack_for_write", "wait_to_read", "wait_to_write"]


def asnumpy(self: torch.Tensor) -> np.ndarray:
    """A detached copy of the tensor as a numpy array on the CPU (bfloat16 becomes float32).

    A sparse tensor (row_sparse, csr) gives its dense value, as MXNet's ``asnumpy`` does.  A 0-d
    tensor gives shape (1,) outside MXNet's NumPy mode: legacy MXNet arrays have at least one
    dimension (``x[0][0].asnumpy()[0]``), while ``mx.np`` code (``util.is_np_array()``) gets 0-d, and
    so does the one 0-d array legacy MXNet makes, ``mx.nd.array`` of a scalar.
    """
    t = self.detach()
    fresh = t.layout != torch.strided  # to_dense() already made a new tensor
    if fresh:
        t = t.to_dense()
    if t.dtype == torch.bfloat16:
        t = t.float()
    arr = t.cpu().numpy()
    out = arr.copy() if not fresh and self.device.type == "cpu" and t.dtype == self.dtype else arr
    if out.ndim == 0 and not _util.is_np_array() and not getattr(self, "_mx_zero_dim", False):
        out = out.reshape(1)
    return out


def wait_to_read(self: torch.Tensor) -> None:
    """Block until pending device work that writes this tensor is done (CUDA synchronise)."""
    if self.device.type == "cuda":
        torch.cuda.synchronize(self.device)


def wait_to_write(self: torch.Tensor) -> None:
    """Block until pending device work on this tensor is done (CUDA synchronise)."""
    wait_to_read(self)


def to_dlpack_for_read(self: torch.Tensor) -> Any:
    """A DLPack capsule of the tensor (MXNet's ``to_dlpack_for_read``)."""
    from torch.utils.dlpack import to_dlpack

    wait_to_read(self)
    return to_dlpack(self)


def to_dlpack_for_write(self: torch.Tensor) -> Any:
    """A DLPack capsule of the tensor that the consumer may write (MXNet's ``to_dlpack_for_write``)."""
    from torch.utils.dlpack import to_dlpack

    wait_to_write(self)
    return to_dlpack(self)
