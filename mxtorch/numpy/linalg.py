"""``mx.np.linalg``: the linear algebra MXNet code most often calls, with NumPy's argument names."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["norm", "inv", "det", "svd", "cholesky", "solve"]

Tensor = torch.Tensor


def norm(x: Tensor, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A002
    """Vector or matrix norm, as ``numpy.linalg.norm`` (Frobenius / 2-norm when ``ord`` is None)."""
    if axis is None and ord is None:
        return torch.linalg.vector_norm(x.reshape(-1), keepdim=False).reshape(
            (1,) * x.dim() if keepdims else ())
    if isinstance(axis, int) or (axis is None and x.dim() == 1):
        return torch.linalg.vector_norm(x, ord=2 if ord is None else ord, dim=axis, keepdim=keepdims)
    return torch.linalg.norm(x, ord=ord, dim=axis, keepdim=keepdims)


def inv(a: Tensor) -> Tensor:
    """The inverse of a (batch of) square matrix."""
    return torch.linalg.inv(a)


def det(a: Tensor) -> Tensor:
    """The determinant of a (batch of) square matrix."""
    return torch.linalg.det(a)


def svd(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(u, s, v^T) with ``a = u @ diag(s) @ v^T`` (reduced)."""
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    return u, s, vh


def cholesky(a: Tensor) -> Tensor:
    """The lower Cholesky factor of a symmetric positive-definite matrix."""
    return torch.linalg.cholesky(a)


def solve(a: Tensor, b: Tensor) -> Tensor:
    """x with ``a @ x = b``."""
    return torch.linalg.solve(a, b)
