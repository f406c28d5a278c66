"""``mx.nd.linalg``: MXNet's batched linear-algebra operators (``linalg_gemm``, ``potrf``, ``gelqf``...).

Every operator works on the last two dimensions (``axis`` moves the row axis for gemm/gemm2) and
on any leading batch dimensions, and is differentiable through torch's autograd.  Conventions are
MXNet's: ``potrf`` gives the lower Cholesky factor L with A = L Lᵀ, ``potri`` takes that L and
gives A⁻¹, ``gelqf`` gives (Q, L) with A = L Q and orthonormal rows of Q, ``syevd`` gives (U, λ)
with A = Uᵀ diag(λ) U (eigenvectors in the rows of U, eigenvalues ascending, each row's largest
entry positive).
"""

from __future__ import annotations

import math

import torch

from ..base import MXNetError

__all__ = [
    "gemm", "gemm2", "potrf", "potri", "trmm", "trsm", "sumlogdiag", "syrk", "gelqf", "syevd",
    "inverse", "det", "slogdet", "extractdiag", "makediag", "extracttrian", "maketrian",
]


def _t(x: torch.Tensor, flag: bool) -> torch.Tensor:
    return x.transpose(-1, -2) if flag else x


def _rows_at(x: torch.Tensor, axis: int) -> torch.Tensor:
    """``x`` with its row axis ``axis`` moved to -2 (the columns stay last), MXNet's ``axis``."""
    return x if axis in (-2, x.dim() - 2) else x.movedim(axis, -2)


def _rows_back(x: torch.Tensor, axis: int) -> torch.Tensor:
    return x if axis in (-2, x.dim() - 2) else x.movedim(-2, axis)


def gemm(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, transpose_a: bool = False,  # noqa: N803
         transpose_b: bool = False, alpha: float = 1.0, beta: float = 1.0, axis: int = -2) -> torch.Tensor:
    """``alpha * op(A) @ op(B) + beta * C``."""
    a, b, c = (_rows_at(x, axis) for x in (A, B, C))
    return _rows_back(alpha * (_t(a, transpose_a) @ _t(b, transpose_b)) + beta * c, axis)


def gemm2(A: torch.Tensor, B: torch.Tensor, transpose_a: bool = False, transpose_b: bool = False,  # noqa: N803
          alpha: float = 1.0, axis: int = -2) -> torch.Tensor:
    """``alpha * op(A) @ op(B)``."""
    a, b = _rows_at(A, axis), _rows_at(B, axis)
    return _rows_back(alpha * (_t(a, transpose_a) @ _t(b, transpose_b)), axis)


def potrf(A: torch.Tensor, lower: bool = True) -> torch.Tensor:  # noqa: N803
    """The Cholesky factor of symmetric positive-definite A: lower L (A = L Lᵀ) or upper U (A = Uᵀ U)."""
    try:
        return torch.linalg.cholesky(A, upper=not lower)
    except RuntimeError as e:
        raise MXNetError(f"potrf: the matrix is not positive definite: {e}") from e


def potri(A: torch.Tensor, lower: bool = True) -> torch.Tensor:  # noqa: N803
    """The inverse of the matrix whose Cholesky factor is ``A`` (as potrf gives it)."""
    return torch.cholesky_inverse(A, upper=not lower)


def _triangle(A: torch.Tensor, lower: bool) -> torch.Tensor:  # noqa: N803
    return A.tril() if lower else A.triu()


def trmm(A: torch.Tensor, B: torch.Tensor, transpose: bool = False, rightside: bool = False,  # noqa: N803
         lower: bool = True, alpha: float = 1.0) -> torch.Tensor:
    """``alpha * op(A) @ B`` (``rightside``: ``alpha * B @ op(A)``) for triangular A."""
    a = _t(_triangle(A, lower), transpose)
    return alpha * (B @ a if rightside else a @ B)


def trsm(A: torch.Tensor, B: torch.Tensor, transpose: bool = False, rightside: bool = False,  # noqa: N803
         lower: bool = True, alpha: float = 1.0) -> torch.Tensor:
    """X solving ``op(A) @ X = alpha * B`` (``rightside``: ``X @ op(A) = alpha * B``), A triangular."""
    a = _triangle(A, lower)
    upper = lower == transpose  # transposing a lower triangle makes it upper
    return torch.linalg.solve_triangular(_t(a, transpose), alpha * B, upper=upper, left=not rightside)


def sumlogdiag(A: torch.Tensor) -> torch.Tensor:  # noqa: N803
    """The sum of the logarithms of the diagonal of each square matrix."""
    return torch.log(torch.diagonal(A, dim1=-2, dim2=-1)).sum(-1)


def syrk(A: torch.Tensor, transpose: bool = False, alpha: float = 1.0) -> torch.Tensor:  # noqa: N803
    """``alpha * A @ Aᵀ`` (``transpose``: ``alpha * Aᵀ @ A``)."""
    return alpha * (A.transpose(-1, -2) @ A if transpose else A @ A.transpose(-1, -2))


def gelqf(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: N803
    """The LQ factorization of each m x n matrix (m <= n): ``(Q, L)`` with A = L Q, L lower
    triangular (m x m), Q with orthonormal rows (m x n)."""
    if A.shape[-2] > A.shape[-1]:
        raise MXNetError(f"gelqf: needs matrices with no more rows than columns, got shape {tuple(A.shape)}")
    q, r = torch.linalg.qr(A.transpose(-1, -2))  # Aᵀ = q r, so A = rᵀ qᵀ
    return q.transpose(-1, -2), r.transpose(-1, -2)


def syevd(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: N803
    """The eigendecomposition of symmetric A: ``(U, lam)`` with A = Uᵀ diag(lam) U, ascending lam."""
    lam, vecs = torch.linalg.eigh(A)
    u = vecs.transpose(-1, -2)
    # MXNet's sign rule: each row's entry of largest magnitude (the first on ties) is positive
    k = u.abs().argmax(dim=-1, keepdim=True)
    sign = torch.where(torch.gather(u, -1, k) < 0, -1.0, 1.0).to(u.dtype)
    return u * sign, lam


def inverse(A: torch.Tensor) -> torch.Tensor:  # noqa: N803
    return torch.linalg.inv(A)


def det(A: torch.Tensor) -> torch.Tensor:  # noqa: N803
    return torch.linalg.det(A)


def slogdet(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: N803
    """``(sign, log|det|)`` of each square matrix."""
    sign, logabs = torch.linalg.slogdet(A)
    return sign, logabs


def extractdiag(A: torch.Tensor, offset: int = 0) -> torch.Tensor:  # noqa: N803
    """Diagonal ``offset`` (above the main one when positive) of each square matrix."""
    return torch.diagonal(A, offset=offset, dim1=-2, dim2=-1)


def makediag(A: torch.Tensor, offset: int = 0) -> torch.Tensor:  # noqa: N803
    """Square matrices with the vectors of A on diagonal ``offset``, zeros elsewhere."""
    return torch.diag_embed(A, offset=offset)


def _triangle_indices(m: int, offset: int, lower: bool) -> torch.Tensor:
    # row-major positions of the triangle: upper above diagonal offset > 0, lower below offset < 0,
    # and on offset 0 the triangle ``lower`` names (MXNet's rule)
    if offset > 0 or (offset == 0 and not lower):
        return torch.triu_indices(m, m, offset)
    return torch.tril_indices(m, m, offset)


def extracttrian(A: torch.Tensor, offset: int = 0, lower: bool = True) -> torch.Tensor:  # noqa: N803
    """The entries of each square matrix's triangle (see ``_triangle_indices``), row by row, as a vector."""
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise MXNetError(f"extracttrian: A must hold square matrices, got shape {tuple(A.shape)}")
    rows, cols = _triangle_indices(int(A.shape[-1]), int(offset), bool(lower)).to(A.device)
    return A[..., rows, cols]


def maketrian(A: torch.Tensor, offset: int = 0, lower: bool = True) -> torch.Tensor:  # noqa: N803
    """The inverse of :func:`extracttrian`: square matrices with the vectors of A in that triangle,
    zeros elsewhere (|offset| more rows and columns than the triangle's own size)."""
    count = int(A.shape[-1]) if A.dim() else 0
    n = (math.isqrt(8 * count + 1) - 1) // 2
    if A.dim() < 1 or n * (n + 1) // 2 != count or count == 0:
        raise MXNetError(f"maketrian: the last axis of A must have a triangular number of entries, "
                         f"got shape {tuple(A.shape)}")
    m = n + abs(int(offset))
    rows, cols = _triangle_indices(m, int(offset), bool(lower)).to(A.device)
    out = A.new_zeros((*A.shape[:-1], m, m))
    out[..., rows, cols] = A
    return out


# MXNet's mx.nd.linalg_<op> names of the same operators (the graph files call them _linalg_<op>)
TOP_LEVEL = {f"linalg_{name}": globals()[name] for name in __all__}
