"""Sparse arrays in a bound executor: MXNet's gradient of a sparse argument.

MXNet differentiates an operator with respect to a sparse input as it would its dense value
(``dot(lhs, csr)``'s gradient for the csr operand is the full ``dot(lhs.T, ograd)``), and writes
the gradient in the storage type of the gradient array the executor was bound with. So a sparse
argument enters a recorded run as a dense leaf, and the gradient is converted on the way out.
Dense arguments never come here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .nd._sparse_ndarray import assign

__all__ = ["dense_leaf", "write_gradient", "head_gradient", "storage_types"]

_STYPE_IDS = {"0": "default", "1": "row_sparse", "2": "csr"}
# operators whose gradient with respect to their weight input is row_sparse (MXNet's backward
# storage inference): the argument feeding it gets a row_sparse gradient array from simple_bind
_ROW_SPARSE_GRAD_OPS = {"_contrib_SparseEmbedding": None, "Embedding": "sparse_grad"}


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


def head_gradient(g: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
    """A head gradient in the head's layout: a sparse one for a dense output is read as its values."""
    if g.layout != torch.strided and head.layout == torch.strided:
        with torch._C.DisableTorchFunctionSubclass():
            return g.to_dense()
    return g


def storage_types(symbol: Any, stype_dict: Mapping[str, str] | None) -> tuple[dict[str, str], set[str]]:
    """(argument -> storage type MXNet's simple_bind allocates it in: ``stype_dict``, else the
    variable's ``stype``; the arguments whose gradient array is row_sparse)."""
    stypes = {n.name: _STYPE_IDS.get(n.attrs.get("__storage_type__", "0"), "default")
              for n in symbol._nodes() if n.is_variable}
    stypes.update(dict(stype_dict or {}))
    sparse_grads = set()
    for n in symbol._nodes():
        if n.is_variable or n.op not in _ROW_SPARSE_GRAD_OPS or len(n.inputs) < 2:
            continue
        flag = _ROW_SPARSE_GRAD_OPS[n.op]
        if flag is None or str(n.attrs.get(flag, "False")).lower() in ("true", "1"):
            weight = n.inputs[1][0]
            if weight.is_variable:
                sparse_grads.add(weight.name)
    return {k: v for k, v in stypes.items() if v != "default"}, sparse_grads
