"""MXNet's variable rules in mx.autograd: the gradient array mark_variables / attach_grad give is
the one a backward fills (also for sparse variables, in the requested storage type), _fresh_grad
says whether a backward wrote it, and a sparse head gets a head gradient of ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx

nd = mx.nd


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_sparse_variable_gradient_lands_in_the_marked_array(stype: str) -> None:
    x = nd.array([[1.0, 2.0], [3.0, 4.0]]).tostype(stype)
    g = nd.zeros((2, 2))
    mx.autograd.mark_variables([x], [g])
    with mx.autograd.record():
        y = x * x
    mx.autograd.backward([y])  # a sparse head: ones in every entry
    assert g.tolist() == [[2.0, 4.0], [6.0, 8.0]]  # d(x*x)/dx = 2x, in the array the caller holds


def test_attach_grad_keeps_the_requested_storage_type() -> None:
    csr = nd.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]]).tostype("csr")
    w = nd.ones((3, 2))
    w.attach_grad(stype="row_sparse")
    assert w.grad.stype == "row_sparse"
    with mx.autograd.record():
        y = nd.dot(csr, w)
    y.backward()
    # d sum(csr @ w) / dw = csr.T @ ones
    assert w.grad.stype == "row_sparse"
    np.testing.assert_allclose(w.grad.asnumpy(), np.array([[2.0, 2.0], [1.0, 1.0], [0.0, 0.0]]))


_STYPES = ["default", "row_sparse", "csr"]


def _gradient_after_two_passes(stype: str, grad_stype: str | None, req: str) -> torch.Tensor:
    x = nd.array([[0.0, 2.0], [3.0, 0.0]]).tostype(stype)
    x.attach_grad(grad_req=req, stype=grad_stype)
    assert x.grad.stype == (grad_stype or stype) and x.detach().stype == stype
    w = nd.array([[1.0, 2.0], [3.0, 4.0]])
    for _ in range(2):
        with mx.autograd.record():
            y = (x * w).sum()
        y.backward()
        assert x.grad.stype == (grad_stype or stype)  # every backward keeps the requested type
    return x.grad.to_dense()


@pytest.mark.parametrize("req", ["write", "add"])
@pytest.mark.parametrize("grad_stype", _STYPES)
@pytest.mark.parametrize("stype", _STYPES)
def test_any_gradient_storage_type_on_any_array(stype: str, grad_stype: str, req: str) -> None:
    # MXNet: attach_grad(stype=) gives any array a gradient of any storage type (torch attaches
    # only its own layout, or COO on a dense array); the value does not depend on the storage
    # type, and 'add' sums the two passes where 'write' keeps the last
    got = _gradient_after_two_passes(stype, grad_stype, req)
    assert got.tolist() == _gradient_after_two_passes(stype, None, req).tolist()
    if stype != "csr":  # d sum(x * w) / dx = w (torch's csr product keeps x's pattern)
        assert got.tolist() == ([[1.0, 2.0], [3.0, 4.0]] if req == "write" else [[2.0, 4.0], [6.0, 8.0]])


def test_mark_variables_takes_a_csr_gradient_for_a_dense_variable() -> None:
    x = nd.ones((2, 2))
    g = nd.zeros((2, 2), stype="csr")
    mx.autograd.mark_variables([x], [g])
    assert x.grad is g and type(x * 2) is nd.NDArray  # operations on x give MXNet arrays (not its class)
    with mx.autograd.record():
        y = (x * nd.array([[1.0, 0.0], [0.0, 5.0]])).sum()
    y.backward()
    assert x.grad.stype == "csr" and x.grad.to_dense().tolist() == [[1.0, 0.0], [0.0, 5.0]]
    x.grad = None  # torch's rule for None still holds
    assert x.grad is None


def test_fresh_grad_tracks_backward_writes() -> None:
    x, y = nd.ones((2,)), nd.ones((2,))
    mx.autograd.mark_variables([x, y], [nd.zeros((2,)), nd.zeros((2,))])
    assert not x._fresh_grad and not y._fresh_grad
    with mx.autograd.record():
        out = x.detach() * 2 + y
    out.backward()
    assert y._fresh_grad and not x._fresh_grad  # x was cut off by detach
    y._fresh_grad = False
    assert not y._fresh_grad


def test_autograd_star_import_gives_ndarray_and_symbol() -> None:
    ns: dict[str, object] = {}
    exec("from mxtorch.autograd import *", ns)
    assert ns["NDArray"] is torch.Tensor and ns["Symbol"] is mx.sym.Symbol
    assert callable(ns["mark_variables"]) and callable(ns["record"])


@pytest.mark.parametrize("stypes", [("default", "csr"), ("csr", "default"), ("csr", "row_sparse")])
def test_recorded_ops_mixing_csr_with_other_storage_differentiate(stypes: tuple[str, str]) -> None:
    # every entry stored: a sparse variable's gradient covers its stored entries (torch's rule)
    a = np.array([[1.0, 0.5, 2.0], [0.25, 3.0, 1.5]], dtype=np.float32)
    b = np.array([[4.0, 5.0, 0.5], [6.0, 0.75, 7.0]], dtype=np.float32)
    x, y = nd.array(a).tostype(stypes[0]), nd.array(b).tostype(stypes[1])
    gx, gy = nd.zeros((2, 3)), nd.zeros((2, 3))
    mx.autograd.mark_variables([x, y], [gx, gy])
    with mx.autograd.record():
        out = x + x * y
    mx.autograd.backward([out])
    np.testing.assert_allclose(out.asnumpy(), a + a * b)
    np.testing.assert_allclose(gx.asnumpy(), 1 + b)  # d/dx (x + x*y) = 1 + y
    np.testing.assert_allclose(gy.asnumpy(), a)
