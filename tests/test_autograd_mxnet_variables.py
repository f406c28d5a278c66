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
