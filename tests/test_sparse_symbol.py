"""Sparse arrays in symbols and executors (MXNet's rules, worked by hand)."""

from __future__ import annotations

import numpy as np
import pytest
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


def test_sparse_retain_symbol_keeps_rows_and_their_gradient():
    data = mx.nd.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]).tostype("row_sparse")
    sym = mx.sym.sparse.retain(data=mx.sym.var("data"), indices=mx.sym.var("indices"))
    grad = mx.nd.sparse.zeros("row_sparse", (3, 2))
    exe = sym.bind(mx.cpu(), args={"data": data, "indices": mx.nd.array([2.0, 0.0])},
                   args_grad={"data": grad}, grad_req={"data": "write", "indices": "null"})
    exe.forward(is_train=False)
    assert np.array_equal(dense(exe.outputs[0]), [[1, 2], [0, 0], [5, 6]])
    exe.forward(is_train=True)
    exe.backward(torch.ones(3, 2))
    assert np.array_equal(dense(grad), [[1, 1], [0, 0], [1, 1]])  # only the kept rows pass it on


def test_square_sum_of_row_sparse():
    x = mx.nd.array([[0.0, 0.0], [1.0, 2.0], [0.0, 3.0]]).tostype("row_sparse")
    kept = mx.nd._internal._square_sum(x, axis=1, keepdims=True)
    assert kept.stype == "row_sparse" and sparse.indices(kept).tolist() == [1, 2]
    assert np.array_equal(dense(kept), [[0], [5], [9]])
    assert np.array_equal(mx.nd._internal._square_sum(x, axis=0).asnumpy(), [1, 13])
    out = mx.sym._internal._square_sum(mx.sym.var("x"), axis=1)
    assert np.array_equal(out.bind(mx.cpu(), {"x": x}).forward()[0].asnumpy(), [0, 5, 9])


def test_simple_bind_allocates_mxnet_arrays_in_their_storage_types():
    # SparseEmbedding: a row_sparse weight argument, a row_sparse gradient, outputs known at bind
    data, weight = mx.sym.var("data"), mx.sym.var("w", stype="row_sparse")
    emb = mx.sym.contrib.SparseEmbedding(data=data, weight=weight, input_dim=4, output_dim=2, name="e")
    exe = emb.simple_bind(mx.cpu(), grad_req={"data": "null", "w": "write"}, data=(3,))
    assert exe.arg_dict["w"].stype == "row_sparse" and exe.grad_dict["w"].stype == "row_sparse"
    assert exe.outputs[0].shape == (3, 2)  # before the first forward, as MXNet allocates them
    exe.arg_dict["data"][:] = np.array([3, 1, 3])  # numpy values assigned into the bound array
    exe.arg_dict["w"][:] = mx.nd.array([[0.0, 0], [1, 1], [0, 0], [2, 3]]).tostype("row_sparse")
    exe.forward(is_train=True)
    assert np.array_equal(exe.outputs[0].asnumpy(), [[2, 3], [1, 1], [2, 3]])
    exe.backward([torch.ones(3, 2)])
    g = exe.grad_dict["w"]
    assert g.stype == "row_sparse" and np.array_equal(dense(g), [[0, 0], [1, 1], [0, 0], [2, 2]])
    # Embedding gives a dense gradient array unless sparse_grad=True
    plain = mx.sym.Embedding(data=data, weight=mx.sym.var("w"), input_dim=4, output_dim=2)
    assert plain.simple_bind(mx.cpu(), data=(3,)).grad_dict["w"].stype == "default"
    rows = mx.sym.Embedding(data=data, weight=mx.sym.var("w"), input_dim=4, output_dim=2, sparse_grad=True)
    assert rows.simple_bind(mx.cpu(), data=(3,)).grad_dict["w"].stype == "row_sparse"
    # stype_dict overrides the variable's storage type
    exe = plain.simple_bind(mx.cpu(), stype_dict={"w": "row_sparse"}, data=(3,))
    assert exe.arg_dict["w"].stype == "row_sparse"


def test_scatter_operators_compute_only_where_lhs_stores_values():
    lhs = mx.nd.array([[0.0, 0.0], [4.0, 6.0], [0.0, 0.0]]).tostype("row_sparse")
    rhs = mx.nd.array([[0.0, 0.0], [2.0, 3.0], [1.0, 1.0]])
    out = mx.nd._internal._scatter_elemwise_div(lhs, rhs)  # 0/0 rows stay unstored: no NaN
    assert out.stype == "row_sparse" and sparse.indices(out).tolist() == [1]
    assert np.array_equal(dense(out), [[0, 0], [2, 2], [0, 0]])
    plus = mx.sym._internal._scatter_plus_scalar(mx.sym.var("lhs"), 9)
    res = plus.bind(mx.cpu(), args={"lhs": lhs, "rhs": 9}).forward()[0]  # extra names: ignored
    assert res.stype == "row_sparse" and np.array_equal(dense(res), [[0, 0], [13, 15], [0, 0]])
    csr = mx.nd.array([[0.0, 2.0], [0.0, 0.0]]).tostype("csr")
    minus = mx.nd._internal._scatter_minus_scalar(csr, 1.0)
    assert minus.stype == "csr" and np.array_equal(dense(minus), [[0, 1], [0, 0]])


def test_quadratic_keeps_csr_when_zero_maps_to_zero():
    csr = mx.nd.array([[0.0, 2.0], [1.0, 0.0]]).tostype("csr")
    kept = mx.nd.contrib.quadratic(csr, a=1.0, b=2.0, c=0.0)  # x^2 + 2x
    assert kept.stype == "csr" and np.array_equal(dense(kept), [[0, 8], [3, 0]])
    shifted = mx.nd.contrib.quadratic(csr, a=1.0, b=2.0, c=1.0)
    assert shifted.stype == "default" and np.array_equal(shifted.asnumpy(), [[1, 9], [4, 1]])


def test_batch_norm_on_sparse_arrays_falls_back_to_dense_values():
    x = mx.nd.array([[1.0, 0.0], [3.0, 2.0]]).tostype("row_sparse")
    gamma, beta = torch.ones(2), torch.zeros(2)
    mean, var = mx.nd.sparse.zeros("row_sparse", (2,)), mx.nd.array([1.0, 1.0]).tostype("row_sparse")
    args = {"x": x, "g": gamma, "b": beta}
    aux = {"m": mean, "v": var}
    bn = mx.sym.BatchNorm(mx.sym.var("x"), mx.sym.var("g"), mx.sym.var("b"), mx.sym.var("m"), mx.sym.var("v"),
                          fix_gamma=False, eps=1e-6, momentum=0.5)
    out = bn.bind(mx.cpu(), args=args, aux_states=aux).forward(is_train=True)[0]
    assert np.allclose(out.asnumpy(), [[-1, -1], [1, 1]], atol=1e-4)  # each column normalized
    assert mean.stype == "row_sparse" and np.allclose(dense(mean), [1.0, 0.5])  # 0.5*0 + 0.5*(2, 1)
    refused = mx.sym.BatchNorm(mx.sym.var("x"), mx.sym.var("g"), mx.sym.var("b"), mx.sym.var("m"),
                               mx.sym.var("v"), fix_gamma=True)
    with pytest.raises(mx.MXNetError, match="fix_gamma=True is not supported for sparse"):
        refused.bind(mx.cpu(), args=args, aux_states=aux).forward()
