"""Sparse arrays in symbols and executors (MXNet's rules, worked by hand)."""

from __future__ import annotations

import numpy as np
import torch

import mxtorch as mx
from mxtorch.nd import sparse


def dense(t: torch.Tensor) -> np.ndarray:
    return np.asarray(sparse.tostype(t.detach(), "default"))


def test_gradient_of_a_csr_argument_is_that_of_its_dense_values():
    # out = lhs @ rhs with rhs csr: d(sum(out * g))/d rhs = lhs.T @ g everywhere, not only where
    # rhs stores values (MXNet's dot backward)
    lhs = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    rhs = mx.nd.array([[0.0, 5.0], [0.0, 0.0]]).tostype("csr")
    out = mx.sym.sparse.dot(mx.sym.var("lhs"), mx.sym.var("rhs", stype="csr"))
    grad = torch.zeros(2, 2)
    exe = out.bind(mx.cpu(), args={"lhs": lhs, "rhs": rhs}, args_grad={"rhs": grad},
                   grad_req={"lhs": "null", "rhs": "write"})
    exe.forward(is_train=True)
    assert np.allclose(exe.outputs[0].asnumpy(), [[0, 5], [0, 15]])
    g = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    exe.backward([g])
    assert torch.equal(grad, lhs.t() @ g)


def test_gradient_array_keeps_its_storage_type():
    # reshape(w) then dot: the gradient of w lands in the row_sparse array it was bound with
    x = mx.nd.array([[1.0], [0.0]]).tostype("csr")  # (2, 1)
    w = torch.arange(4.0).reshape(2, 2)
    gw = mx.nd.sparse.zeros("row_sparse", (2, 2))
    out = mx.sym.sparse.dot(mx.sym.var("x", stype="csr"), mx.sym.reshape(mx.sym.var("w"), (1, 4)))
    exe = out.bind(mx.cpu(), args={"x": x, "w": w}, args_grad={"w": gw}, grad_req={"x": "null", "w": "write"})
    exe.forward(is_train=True)
    exe.backward(torch.ones(2, 4))
    assert gw.stype == "row_sparse"  # the same array, its storage type kept
    assert np.array_equal(dense(gw), np.ones((2, 2)))  # x.T @ ones = [[1, 1, 1, 1]], reshaped
    # grad_req 'add' adds into it
    exe2 = out.bind(mx.cpu(), args={"x": x, "w": w}, args_grad={"w": gw}, grad_req={"x": "null", "w": "add"})
    exe2.forward(is_train=True)
    exe2.backward(torch.ones(2, 4))
    assert np.array_equal(dense(gw), 2 * np.ones((2, 2)))


def test_cast_storage_passes_the_gradient_through():
    x = mx.sym.var("x")
    y = mx.sym.cast_storage(x, stype="csr") * 3
    value = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    grad = torch.zeros(2, 2)
    exe = y.bind(mx.cpu(), args={"x": value}, args_grad={"x": grad})
    exe.forward(is_train=True)
    exe.backward(torch.ones(2, 2))
    assert torch.equal(grad, torch.full((2, 2), 3.0))  # every entry, stored or not


def test_dot_of_transposed_csr_and_row_sparse_is_row_sparse():
    a = mx.nd.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]]).tostype("csr")
    r = mx.nd.array([[1.0, 2.0], [0.0, 0.0]]).tostype("row_sparse")
    out = mx.nd.sparse.dot(a, r, transpose_a=True)  # a.T @ r
    assert out.stype == "row_sparse"
    assert np.array_equal(dense(out), [[0, 0], [1, 2], [0, 0]])


def test_softmax_output_with_probability_labels():
    # a label of the data's shape is a distribution: the gradient is softmax(x) - label
    data = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    label = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    y = mx.sym.SoftmaxOutput(mx.sym.var("x"), mx.sym.var("l"))
    grad = torch.zeros(2, 2)
    exe = y.bind(mx.cpu(), args={"x": data, "l": mx.nd.array(label).tostype("csr")}, args_grad={"x": grad},
                 grad_req={"x": "write", "l": "null"})
    exe.forward(is_train=True)
    exe.backward()
    assert torch.allclose(grad, torch.full((2, 2), 0.5) - label)
