"""Sparse arrays in a bound executor: MXNet's gradient of a sparse argument.

MXNet differentiates an operator with respect to a sparse input as it would its dense value
(``dot(lhs, csr)``'s gradient for the csr operand is the full ``dot(lhs.T, ograd)``), and writes
the gradient in the storage type of the gradient array the executor was bound with. So a sparse
argument enters a recorded run as a dense leaf, and the gradient is converted on the way out.
Dense arguments never come here.
"""

from __future__ import annotations

import torch

from .nd._sparse_ndarray import assign

__all__ = ["dense_leaf", "write_gradient"]


def dense_leaf(arg: torch.Tensor) -> torch.Tensor:
    """A leaf holding the dense values of sparse argument ``arg``, recording its gradient."""
    with torch._C.DisableTorchFunctionSubclass():
        return arg.detach().to_dense().requires_grad_(True)


def write_gradient(dst: torch.Tensor, g: torch.Tensor | None, req: str) -> None:
    """Write (``req`` 'write') or add (``'add'``) gradient ``g`` (None: zeros) into ``dst`` when either
    is sparse: ``dst`` keeps its identity and storage type."""
    with torch._C.DisableTorchFunctionSubclass(), torch.no_grad():
        if g is not None and g.layout != torch.strided:
            g = g.to_dense()
        if req == "write":
            value = g if g is not None else torch.zeros(dst.shape, dtype=dst.dtype, device=dst.device)
        elif g is None:
            return
        else:
            value = (dst.to_dense() if dst.layout != torch.strided else dst) + g.to(dst.dtype)
    assign(dst, value)
