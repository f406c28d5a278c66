"""MXNet computes elementwise math on sparse arrays through a dense fallback; so does mxtorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.nd import sparse


def test_row_sparse_minus_scalar_and_dense_fall_back_to_dense():
    a = (mx.nd.ones((4, 3)) * 2).tostype("row_sparse")
    assert isinstance(a, sparse.SparseNDArray) and a.stype == "row_sparse"
    np.testing.assert_array_equal((a - 2).asnumpy(), np.zeros((4, 3)))  # torch alone refuses this
    np.testing.assert_array_equal((a - mx.nd.ones((4, 3))).asnumpy(), np.ones((4, 3)))
    np.testing.assert_array_equal((mx.nd.ones((4, 3)) + a).asnumpy(), np.full((4, 3), 3.0))


def test_operations_sparse_kernels_support_stay_sparse():
    a = mx.nd.array([[0, 1], [0, 0], [2, 0]]).tostype("row_sparse")
    b = a * 3
    assert b.stype == "row_sparse" and isinstance(b, sparse.SparseNDArray)
    np.testing.assert_array_equal(b.asnumpy(), [[0, 3], [0, 0], [6, 0]])


def test_csr_plus_scalar():
    c = mx.nd.array([[0, 1, 0], [2, 0, 0]]).tostype("csr")
    assert isinstance(c, sparse.CSRNDArray)
    np.testing.assert_array_equal((c + 1).asnumpy(), [[1, 2, 1], [3, 1, 1]])


def test_a_real_error_is_not_hidden_by_the_fallback():
    a = mx.nd.ones((4, 3)).tostype("row_sparse")
    with pytest.raises(RuntimeError):
        a + mx.nd.ones((5, 3))  # shapes that do not broadcast fail dense too: the first error is raised


def test_dense_tensors_never_become_sparse_arrays():
    x = torch.ones(3)
    assert type(x + 1) is torch.Tensor and type(mx.nd.ones((2, 2))) is not sparse.SparseNDArray


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_nd_zeros_and_empty_take_a_storage_type(stype):
    z = mx.nd.zeros((4, 4), stype=stype, dtype="float16")
    assert z.stype == stype and z.dtype == torch.float16 and tuple(z.shape) == (4, 4)
    np.testing.assert_array_equal(z.asnumpy(), np.zeros((4, 4), dtype=np.float16))
    assert mx.nd.empty((4, 4), stype=stype).stype == stype
    assert mx.nd.zeros((4, 4), stype="default").stype == "default"


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_comparisons_of_sparse_arrays_follow_mxnet(stype):
    # MXNet: 1/0 in the array's dtype; with a number the result stays sparse exactly when
    # `0 op number` is false (unstored zeros stay unstored), else dense; array op array is dense
    a = mx.nd.array([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 3.0]]).tostype(stype)
    dense = a.asnumpy()
    cases = [("a > 0", dense > 0, stype), ("a >= 0", dense >= 0, "default"), ("a != 0", dense != 0, stype),
             ("a == 0", dense == 0, "default"), ("a == 2", dense == 2, stype),
             ("a < 1", dense < 1, "default"),
             ("a <= -1", dense <= -1, stype), ("0 < a", dense > 0, stype), ("1 == a", dense == 1, stype),
             ("a == a", dense == dense, "default"), ("a > mx.nd.ones((3, 3))", dense > 1, "default")]
    for expr, want, want_stype in cases:
        got = eval(expr)
        assert got.stype == want_stype and got.dtype == torch.float32, expr
        np.testing.assert_array_equal(got.asnumpy(), want.astype(np.float32), err_msg=expr)
    assert (mx.nd.ones((2, 2)) > 0).dtype == torch.bool  # dense tensors keep torch's comparisons


def test_getnnz_counts_stored_values_of_a_csr_matrix():
    # [[1, 0, 2], [0, 0, 0], [0, 3, 0]] stores 3 values: rows 2, 0, 1; columns 1, 1, 1
    c = mx.nd.sparse.csr_matrix(([1.0, 2.0, 3.0], [0, 2, 1], [0, 2, 2, 3]), shape=(3, 3))
    assert mx.nd.contrib.getnnz(c).tolist() == [3]
    assert mx.nd.contrib.getnnz(c, axis=1).tolist() == [2, 0, 1]
    assert mx.nd.contrib.getnnz(c, axis=0).tolist() == [1, 1, 1]
    assert mx.nd.contrib.getnnz(c, axis=1).dtype == torch.int64
    with pytest.raises(ValueError, match="csr matrix"):
        mx.nd.contrib.getnnz(mx.nd.ones((2, 2)))


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_writes_into_a_sparse_array_land_in_it(stype):
    # MXNet's storage fallback for writes: x[:] = v, copyto(x) and x += v change x itself and keep
    # its storage type (torch's sparse kernels refuse these; a dense copy must not take the write)
    x = mx.nd.zeros((2, 3), stype=stype)
    x[:] = mx.nd.array([[0.0, 5.0, 0.0], [0.0, 0.0, 0.0]])
    assert x.stype == stype and x.asnumpy().tolist() == [[0.0, 5.0, 0.0], [0.0, 0.0, 0.0]]
    same = x
    mx.nd.array([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]]).copyto(x)
    assert x is same and x.stype == stype and x.asnumpy().tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]]
    x[:] = 4
    assert x.stype == stype and (x.asnumpy() == 4).all()
    x += mx.nd.ones((2, 3))
    assert x is same and x.stype == stype and (x.asnumpy() == 5).all()
