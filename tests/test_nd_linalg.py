"""``mx.nd.linalg``: MXNet's conventions (checked by reconstruction and hand computation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx

L = mx.nd.linalg
A = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=torch.float64)
SPD = torch.tensor([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 3.0]], dtype=torch.float64)
# a lower triangle; the 9s above it are ignored by the triangular operators
TRI = torch.tensor([[2.0, 9.0, 9.0], [1.0, 3.0, 9.0], [0.5, -1.0, 4.0]], dtype=torch.float64)


def test_products() -> None:
    b, c = torch.ones(3, 2, dtype=torch.float64), torch.eye(2, dtype=torch.float64)
    # rows of A sum to 6 and 15: A @ ones = [[6, 6], [15, 15]]; 2 * that + 0.5 * I
    assert L.gemm(A, b, c, alpha=2.0, beta=0.5).tolist() == [[12.5, 12.0], [30.0, 30.5]]
    assert L.gemm2(A, A, transpose_b=True).tolist() == [[14.0, 32.0], [32.0, 77.0]]
    assert L.syrk(A, alpha=0.5).tolist() == [[7.0, 16.0], [16.0, 38.5]]
    assert L.syrk(A, transpose=True)[0].tolist() == [17.0, 22.0, 27.0]
    # axis: the row axis of a (rows, batch, cols) layout
    a3 = torch.stack([A, 2 * A], dim=1)  # (2, 2, 3): rows, batch, cols
    got = L.gemm2(a3, a3, transpose_b=True, axis=0)
    assert got.shape == (2, 2, 2) and got[:, 1, :].tolist() == [[56.0, 128.0], [128.0, 308.0]]


def test_cholesky_and_triangular() -> None:
    low = L.potrf(SPD)
    assert torch.allclose(low @ low.T, SPD) and torch.equal(low, low.tril())
    assert torch.allclose(L.potri(low) @ SPD, torch.eye(3, dtype=torch.float64))
    t = TRI.tril()
    b = torch.arange(6.0, dtype=torch.float64).reshape(3, 2)
    assert torch.allclose(L.trmm(TRI, b, alpha=2.0), 2 * t @ b)
    assert torch.allclose(L.trmm(TRI, b.T, rightside=True, transpose=True), b.T @ t.T)
    x = L.trsm(TRI, b, alpha=2.0)
    assert torch.allclose(t @ x, 2 * b)
    y = L.trsm(TRI, b.T, transpose=True, rightside=True)
    assert torch.allclose(y @ t.T, b.T)
    assert float(L.sumlogdiag(SPD)) == pytest.approx(np.log(4 * 5 * 3))


def test_gelqf_and_syevd_conventions() -> None:
    q, low = L.gelqf(A)
    assert q.shape == (2, 3) and low.shape == (2, 2) and torch.equal(low, low.tril())
    assert torch.allclose(low @ q, A) and torch.allclose(q @ q.T, torch.eye(2, dtype=torch.float64))
    u, lam = L.syevd(SPD)
    assert torch.all(lam[1:] >= lam[:-1])  # ascending
    assert torch.allclose(u.T @ torch.diag(lam) @ u, SPD)
    rows = torch.arange(3)
    assert torch.all(u[rows, u.abs().argmax(dim=1)] > 0)  # each row's largest entry is positive
    with pytest.raises(mx.MXNetError, match="no more rows than columns"):
        L.gelqf(A.T)


def test_det_inverse_and_diagonals() -> None:
    assert float(L.det(SPD)) == pytest.approx(4 * 14 - 2 * 6)  # 4*(15-1) - 2*(6-0) = 44
    sign, logabs = L.slogdet(-SPD)
    assert float(sign) == -1.0 and float(logabs) == pytest.approx(np.log(44))
    assert torch.allclose(L.inverse(SPD) @ SPD, torch.eye(3, dtype=torch.float64))
    assert L.extractdiag(SPD, offset=1).tolist() == [2.0, 1.0]
    assert L.makediag(torch.tensor([1.0, 2.0]), offset=-1).tolist() == [[0, 0, 0], [1, 0, 0], [0, 2, 0]]


def test_gradients_flow_and_agree_across_precisions() -> None:
    x32 = torch.tensor([[0.3, -1.2, 0.7], [1.1, 0.4, -0.5]], requires_grad=True)
    x64 = x32.detach().double().requires_grad_(True)
    for x in (x32, x64):
        with mx.autograd.record():
            _, low = L.gelqf(x)
            mx.nd.sum(low).backward()
    assert x32.grad is not None and x64.grad is not None
    np.testing.assert_allclose(x32.grad.numpy(), x64.grad.numpy(), rtol=1e-5, atol=1e-5)
