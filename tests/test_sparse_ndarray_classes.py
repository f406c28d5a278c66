"""MXNet's sparse array classes (RowSparseNDArray, CSRNDArray) and their NDArray rules.

Expected values are worked out by hand from MXNet's documented storage formats: the csr matrix
[[1, 0, 2], [0, 0, 3], [4, 5, 0]] stores data [1, 2, 3, 4, 5], column indices [0, 2, 2, 0, 1] and
row pointers [0, 2, 3, 5]; as row_sparse, [[1, 0, 2], [0, 0, 0], [4, 5, 0]] stores rows 0 and 2.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.nd import sparse

M = [[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [4.0, 5.0, 0.0]]
R = [[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [4.0, 5.0, 0.0]]


def csr() -> torch.Tensor:
    return mx.nd.array(M).tostype("csr")


def rsp() -> torch.Tensor:
    return mx.nd.array(R).tostype("row_sparse")


def test_arrays_made_through_mxnet_api_have_mxnet_classes() -> None:
    for x in (csr(), sparse.csr_matrix(M), sparse.zeros("csr", (2, 3))):
        assert type(x) is sparse.CSRNDArray and x.stype == "csr"
    for x in (rsp(), sparse.row_sparse_array(R), sparse.zeros("row_sparse", (2, 3))):
        assert type(x) is sparse.RowSparseNDArray and x.stype == "row_sparse"
    assert isinstance(csr(), mx.nd.NDArray) and isinstance(csr(), sparse.BaseSparseNDArray)
    with pytest.raises(TypeError, match="csr_matrix"):
        sparse.CSRNDArray()


def test_data_indices_indptr_are_mxnet_arrays() -> None:
    c = csr()
    assert c.data.tolist() == [1, 2, 3, 4, 5] and c.indices.tolist() == [0, 2, 2, 0, 1]
    assert c.indptr.tolist() == [0, 2, 3, 5] and c._num_aux == 2
    assert type(c.data) is mx.nd.NDArray and c.indices.dtype == torch.int64
    r = rsp()
    assert r.data.tolist() == [[1, 0, 2], [4, 5, 0]] and r.indices.tolist() == [0, 2] and r._num_aux == 1
    r.data[0, 0] = 100.0  # a copy, as MXNet's: the array keeps its value
    assert r.asnumpy().tolist() == R


def test_torch_meaning_stays_for_plain_sparse_tensors() -> None:
    t = torch.tensor(R).to_sparse(1)
    assert t.indices().tolist() == [[0, 2]] and t.data is not None
    assert isinstance(t, sparse.RowSparseNDArray)  # isinstance asks for the storage type


def test_csr_row_indexing_gives_csr_rows() -> None:
    c = csr()
    assert type(c[1]) is sparse.CSRNDArray and c[1].asnumpy().tolist() == [[0, 0, 3]]
    assert c[-1].asnumpy().tolist() == [[4, 5, 0]]
    assert c[0:2].asnumpy().tolist() == M[:2] and c[1:].indptr.tolist() == [0, 1, 3]
    assert c[:] is c
    part = c[1:3, 1:3]
    assert type(part) is sparse.CSRNDArray and part.asnumpy().tolist() == [[0, 3], [5, 0]]
    s = mx.nd.slice(c, begin=(0, 1), end=(2, 3))
    assert type(s) is sparse.CSRNDArray and s.asnumpy().tolist() == [[0, 2], [0, 3]]
    assert mx.nd.slice(c, begin=(0,), end=(3,), step=(2,)).asnumpy().tolist() == [M[0], M[2]]


def test_row_sparse_indexing_is_whole_array_only() -> None:
    r = rsp()
    assert r[:] is r
    with pytest.raises(ValueError, match=r"x\[:\]"):
        r[1]


def test_assignment_keeps_identity_and_storage_type() -> None:
    r = sparse.zeros("row_sparse", (2, 3))
    same = r
    r[:] = 2
    assert r is same and type(r) is sparse.RowSparseNDArray and (r.asnumpy() == 2).all()
    c = sparse.zeros("csr", (3, 3))
    c[:] = np.array(M)
    assert type(c) is sparse.CSRNDArray and c.data.tolist() == [1, 2, 3, 4, 5]
    c[:] = rsp()
    assert c.asnumpy().tolist() == R and c.stype == "csr"


def test_copyto_dense_and_same_storage_and_context() -> None:
    c = csr()
    dense = mx.nd.zeros((3, 3))
    assert c.copyto(dense) is dense and dense.asnumpy().tolist() == M
    target = sparse.zeros("csr", (3, 3))
    mx.nd.array(M).copyto(target)
    assert target.stype == "csr" and target.indptr.tolist() == [0, 2, 3, 5]
    with pytest.raises(TypeError, match="csr array into a row_sparse"):
        c.copyto(sparse.zeros("row_sparse", (3, 3)))
    moved = c.copyto(mx.cpu(1))
    assert type(moved) is sparse.CSRNDArray and moved.context == mx.cpu(1) and moved.asnumpy().tolist() == M


def test_operations_give_mxnet_classes() -> None:
    r, c = rsp(), csr()
    assert type(r * 2) is sparse.RowSparseNDArray and (r * 2).data.tolist() == [[2, 0, 4], [8, 10, 0]]
    assert type(r + 1) is mx.nd.NDArray and (r + 1).asnumpy().tolist() == (np.array(R) + 1).tolist()
    assert type(c + mx.nd.ones((3, 3))) is mx.nd.NDArray
    expected = np.linalg.norm(np.array(M), axis=0)
    assert np.abs(c.norm(axis=0).asnumpy() - expected).max() < 1e-6  # MXNet's norm(axis=)
    clipped = r.clip(a_min=0.5, a_max=4.5)  # MXNet's clip keywords
    assert clipped.asnumpy().tolist() == np.clip(np.array(R), 0.5, 4.5).tolist()


def test_pickle_and_deepcopy_keep_the_class() -> None:
    for x in (csr(), rsp(), sparse.zeros("csr", (2, 2)), sparse.zeros("row_sparse", (2, 2))):
        for y in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
            assert type(y) is type(x) and y.asnumpy().tolist() == x.asnumpy().tolist()


def test_take_rows_of_csr_is_csr() -> None:
    out = mx.nd.take(csr(), mx.nd.array([2, 0, 2]))
    assert type(out) is sparse.CSRNDArray and out.asnumpy().tolist() == [M[2], M[0], M[2]]
    assert out.indptr.tolist() == [0, 2, 4, 6] and out.indices.tolist() == [0, 1, 0, 2, 0, 1]
    assert mx.nd.take(csr(), mx.nd.array([5, -1]), mode="wrap").asnumpy().tolist() == [M[2], M[2]]


def test_constructors_copy_and_check_their_input() -> None:
    vals = np.array([1.0, 2.0], dtype=np.float32)
    x = sparse.csr_matrix((vals, [0, 1], [0, 1, 2]), shape=(2, 2))
    vals[0] = 9.0  # the caller's memory is not the array's
    assert x.data.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="give the shape once"):
        sparse.row_sparse_array((2, 2), shape=(3, 2))
    with pytest.raises(ValueError, match="give the shape once"):
        sparse.csr_matrix((2, 2), shape=(3, 2))
    with pytest.raises(ValueError, match="give shape="):
        sparse.csr_matrix(([], [], [0, 0]))


def test_sparse_operator_errors_are_mxnet_errors() -> None:
    with pytest.raises(mx.base.MXNetError, match="invalid_arg"):
        sparse.retain(rsp(), invalid_arg=1)
    with pytest.raises(ValueError, match="row_sparse"):
        sparse.retain(mx.nd.ones((2, 2)), [0])


def test_sparse_namespace_has_mxnets_operators() -> None:
    x, w = mx.nd.ones((2, 3)), mx.nd.ones((4, 3)).tostype("row_sparse")
    b = mx.nd.array([[1.0], [2.0], [3.0], [4.0]])  # MXNet takes a (num_hidden, 1) bias
    out = sparse.FullyConnected(x, w, num_hidden=4, bias=b)
    assert out.asnumpy().tolist() == [[4.0, 5.0, 6.0, 7.0]] * 2
    with pytest.raises(AttributeError):
        sparse.no_such_operator  # noqa: B018



def test_sparse_elementwise_operators_broadcast() -> None:
    c = sparse.csr_matrix([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]])
    row, col = mx.nd.array([[10.0, 20.0, 30.0]]), mx.nd.array([[10.0], [100.0]])
    assert sparse.add(c, row).asnumpy().tolist() == [[11, 20, 32], [10, 20, 33]]
    assert sparse.subtract(mx.nd.array([1.0]), c).asnumpy().tolist() == [[0, 1, -1], [1, 1, -2]]
    product = sparse.multiply(c, col)  # a csr operand of the result's shape keeps csr
    assert type(product) is sparse.CSRNDArray and product.asnumpy().tolist() == [[10, 0, 20], [0, 0, 300]]
    with pytest.raises(ValueError, match="broadcast"):
        sparse.add(c, mx.nd.ones((3, 3)))
    assert mx.nd.cast_storage(c, stype="default").asnumpy().tolist() == [[1, 0, 2], [0, 0, 3]]


def test_dot_dense_with_transposed_csr() -> None:
    c = sparse.csr_matrix([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]])
    d = mx.nd.array([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]])
    # d @ c.T: rows of d against rows of c
    assert sparse.dot(d, c, transpose_b=True).asnumpy().tolist() == [[3, 3], [7, 9]]


def test_slice_takes_an_int_as_a_one_tuple() -> None:
    x = mx.nd.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert mx.nd.crop(x, begin=1, end=3).asnumpy().tolist() == [[3, 4], [5, 6]]
    assert mx.nd.slice(sparse.csr_matrix(M), begin=2, end=3).asnumpy().tolist() == [M[2]]


def test_numpy_sources_keep_their_dtype() -> None:
    # MXNet's rule: dtype defaults to a numpy source's own, float32 for lists
    x = sparse.csr_matrix(np.ones((2, 2), dtype=np.float64))
    assert x.dtype == torch.float64 and sparse.row_sparse_array([[1.0, 2.0]]).dtype == torch.float32
    parts = sparse.csr_matrix((np.array([1, 2], dtype=np.int32), [0, 1], [0, 1, 2]), shape=(2, 2))
    assert parts.dtype == torch.int32 and parts.data.tolist() == [1, 2]


def test_array_of_a_scipy_matrix_is_csr() -> None:
    scipy_sparse = pytest.importorskip("scipy.sparse")
    m = scipy_sparse.csr_matrix(np.array(M))
    x = mx.nd.array(m)
    assert type(x) is sparse.CSRNDArray and x.asnumpy().tolist() == M and x.dtype == torch.float64
