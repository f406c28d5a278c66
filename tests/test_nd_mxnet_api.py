"""mx.nd's MXNet surface: out=/name= on every operator, MXNet's argument names, the
mxnet.ndarray.ndarray names, the sparse classes for isinstance, and the operators added for it."""

from __future__ import annotations

import inspect

import pytest
import torch

import mxtorch as mx
from mxtorch import nd


def test_every_operator_takes_out_and_name() -> None:
    for name in ("sum", "relu", "broadcast_add", "dot", "one_hot", "FullyConnected", "softmax", "cast",
                 "zeros_like", "split", "topk", "reshape"):
        params = inspect.signature(getattr(nd, name)).parameters
        assert "out" in params and "name" in params, name
    x = torch.arange(6.0).reshape(2, 3)
    o = torch.zeros(1)
    assert nd.sum(x, out=o) is o and o.tolist() == [15.0]
    o2 = torch.empty(2, 3)
    assert nd.relu(x - 2, out=o2, name="act") is o2 and o2.tolist() == [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]
    outs = [torch.zeros(2, 1), torch.zeros(2, 2)]
    res = nd.split_v2(x, [1], axis=1, out=outs)
    assert res[0] is outs[0] and outs[1].tolist() == [[1.0, 2.0], [4.0, 5.0]]
    w = torch.ones(4, 3)
    fc = nd.FullyConnected(x, w, None, num_hidden=4, no_bias=True, name="fc1")
    assert fc.shape == (2, 4)


def test_out_mismatch_is_a_clear_error() -> None:
    x = torch.ones(2, 3)
    with pytest.raises(ValueError, match=r"out= has shape \(2,\) but the result has shape \(1,\)"):
        nd.sum(x, out=torch.zeros(2))
    with pytest.raises(TypeError, match="dtype"):
        nd.sum(x, out=torch.zeros(1, dtype=torch.int32))
    with pytest.raises(ValueError, match="list of 2"):
        nd.split(torch.ones(2, 4), 2, axis=1, out=torch.zeros(2, 2))
    with pytest.raises(TypeError, match="must be a tensor"):
        nd.relu(x, out=[1, 2])


def test_out_write_is_recorded_by_autograd() -> None:
    a = torch.ones(3, requires_grad=True)
    o = torch.zeros(3)
    nd.broadcast_mul(a, a * 2, out=o)
    o.sum().backward()
    assert a.grad is not None and a.grad.tolist() == [4.0, 4.0, 4.0]


def test_argument_names_follow_mxnet() -> None:
    def names(fn: object) -> list[str]:
        params = inspect.signature(fn).parameters  # type: ignore[arg-type]
        return [p for p in params if p not in ("out", "name", "kwargs")]

    # MXNet 1.9.1's signatures (its API reference)
    assert names(nd.softmax)[:6] == ["data", "length", "axis", "temperature", "dtype", "use_length"]
    assert names(nd.log_softmax)[:5] == ["data", "axis", "temperature", "dtype", "use_length"]
    assert names(nd.softmin)[:5] == ["data", "axis", "temperature", "dtype", "use_length"]
    assert names(nd.power) == ["base", "exp"]
    assert names(nd.reshape_like) == ["lhs", "rhs", "lhs_begin", "lhs_end", "rhs_begin", "rhs_end"]
    assert names(nd.diag) == ["data", "k", "axis1", "axis2"]
    assert names(nd.sum) == ["data", "axis", "keepdims", "exclude"]
    assert names(nd.norm) == ["data", "ord", "axis", "out_dtype", "keepdims"]
    assert names(nd.clip) == ["data", "a_min", "a_max"]
    assert names(nd.dot) == ["lhs", "rhs", "transpose_a", "transpose_b", "forward_stype"]
    assert names(nd.sparse.retain) == ["data", "indices"]
    assert names(nd.sparse.cast_storage) == ["data", "stype"]
    assert nd.power(base=torch.tensor([2.0]), exp=3).tolist() == [8.0]
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert torch.allclose(nd.softmax(x, axis=0), torch.softmax(x, 0))


def test_reshape_like_ranges_and_diag_axes() -> None:
    a = torch.arange(24.0).reshape(2, 3, 4)
    # lhs axes [1, 3) replaced by rhs axes [0, 1): (2,) + (12,) + ()
    r = nd.reshape_like(a, torch.zeros(12, 2, 2), lhs_begin=1, lhs_end=3, rhs_begin=0, rhs_end=1)
    assert r.shape == (2, 12)
    assert nd.reshape_like(a, torch.zeros(4, 6), lhs_begin=-3, lhs_end=-1, rhs_begin=-1).shape == (6, 4)
    with pytest.raises(ValueError, match="sizes differ"):
        nd.reshape_like(a, torch.zeros(5, 5))
    # diagonal of the (axis 1, axis 2) planes, offset 1: a[b, i, i + 1]
    assert nd.diag(a, k=1, axis1=1, axis2=2).tolist() == [[1.0, 6.0, 11.0], [13.0, 18.0, 23.0]]


def test_mxnet_ndarray_module_names() -> None:
    from mxtorch.ndarray.ndarray import (  # the import MXNet's test_gluon.py does
        _GRAD_REQ_MAP,
        _STORAGE_TYPE_ID_TO_STR,
        _STORAGE_TYPE_STR_TO_ID,
        NDArray,
    )

    assert _STORAGE_TYPE_STR_TO_ID == {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}
    assert _STORAGE_TYPE_ID_TO_STR[1] == "row_sparse"
    assert _GRAD_REQ_MAP == {"null": 0, "write": 1, "add": 3}
    assert NDArray is mx.nd.NDArray and isinstance(torch.zeros(1), NDArray)
    assert mx.nd.ndarray is mx.ndarray.ndarray
    assert nd.moveaxis(torch.zeros(2, 3, 4), 0, -1).shape == (3, 4, 2)
    o = torch.zeros(3, 4)
    assert nd.onehot_encode(torch.tensor([1.0, 3.0, 0.0]), o) is o
    assert o.argmax(1).tolist() == [1, 3, 0] and o.sum().item() == 3.0
    counts, edges = nd.histogram(torch.tensor([0.0, 1.0, 1.0, 2.0, 5.0]), bins=5, range=(0, 10))
    assert counts.tolist() == [3, 1, 1, 0, 0] and counts.dtype == torch.int64
    assert edges.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert nd.true_divide(torch.tensor([3.0]), 2).tolist() == [1.5]


def test_sparse_classes_for_isinstance() -> None:
    import mxtorch.ndarray.sparse as mxsps

    csr = mxsps.csr_matrix(([2.0], [999], [0, 0, 1]), shape=(2, 1000), ctx=mx.cpu(0))
    rsp = torch.ones(3, 2).tostype("row_sparse")  # type: ignore[attr-defined]
    assert isinstance(csr, mxsps.CSRNDArray) and not isinstance(csr, mxsps.RowSparseNDArray)
    assert isinstance(rsp, mxsps.RowSparseNDArray) and not isinstance(rsp, mxsps.CSRNDArray)
    assert isinstance(csr, mxsps.BaseSparseNDArray) and isinstance(rsp, mxsps.BaseSparseNDArray)
    assert not isinstance(torch.ones(2), mxsps.BaseSparseNDArray)
    assert not isinstance(torch.ones(2, 2).to_sparse(), mxsps.RowSparseNDArray)  # 2 sparse dims
    assert isinstance(csr, mx.nd.NDArray)
    with pytest.raises(TypeError, match="csr_matrix"):
        mxsps.CSRNDArray()


def test_reset_arrays_and_finite_checks() -> None:
    a, b = torch.ones(2), torch.ones(3, dtype=torch.float16)
    assert nd.reset_arrays(a, b, num_arrays=2) == []
    assert a.tolist() == [0.0, 0.0] and b.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="num_arrays=3"):
        nd.reset_arrays(a, b, num_arrays=3)
    inf = torch.tensor([float("inf")])
    assert nd.all_finite(torch.ones(2)).tolist() == [1.0] and nd.all_finite(inf).tolist() == [0.0]
    assert nd.multi_all_finite(torch.ones(1), inf, num_arrays=2).tolist() == [0.0]
    sq = nd.multi_sum_sq(torch.tensor([1.0, 2.0]), torch.tensor([3.0]), num_arrays=2)
    assert sq.tolist() == [5.0, 9.0]
    assert nd.cumsum(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0).tolist() == [[1.0, 2.0], [4.0, 6.0]]


def test_depth_to_space_roundtrip() -> None:
    x = torch.arange(2 * 8 * 2 * 3.0).reshape(2, 8, 2, 3)
    y = nd.depth_to_space(x, 2)
    assert y.shape == (2, 2, 4, 6)
    # out[n, c, h*b + i, w*b + j] = x[n, (i*b + j)*C' + c, h, w] with C' = 2: out[0,0,0,1] = x[0,2,0,0]
    assert y[0, 0, 0, 1].item() == x[0, 2, 0, 0].item() == 12.0
    assert torch.equal(nd.space_to_depth(y, 2), x)
    with pytest.raises(ValueError, match="divisible"):
        nd.depth_to_space(torch.zeros(1, 3, 2, 2), 2)


def test_slice_assign_writes_the_region_of_nd_slice() -> None:
    # MXNet's _slice_assign / _crop_assign: lhs with lhs[begin:end:step] = rhs (numpy's slicing by
    # hand); out=lhs writes in place; the _scalar forms fill the region with a number
    x = torch.arange(24.0).reshape(2, 3, 4)
    rhs = -torch.arange(1.0, 7.0).reshape(2, 1, 3)
    got = nd._internal._crop_assign(x, rhs, begin=(0, 1, 0), end=(2, 2, 3))
    want = x.numpy().copy()
    want[0:2, 1:2, 0:3] = rhs.numpy()
    assert got.tolist() == want.tolist() and x[0, 1, 0] == 4.0  # a copy
    a = torch.arange(6.0)
    want_a = a.numpy().copy()
    want_a[5::-2] = [10.0, 20.0, 30.0]  # a negative step walks the region backwards
    assert nd._internal._slice_assign(a, torch.tensor([10.0, 20.0, 30.0]), begin=(5,), end=(None,),
                                      step=(-2,)).tolist() == want_a.tolist()
    nd._internal._crop_assign_scalar(x, scalar=5, begin=(1, 0, 1), end=(2, 3, 2), out=x)
    assert x[1, :, 1].tolist() == [5.0, 5.0, 5.0] and x[0, :, 1].tolist() == [1.0, 5.0, 9.0]
    with pytest.raises(ValueError, match=r"rhs has shape \(2,\).*\(3,\)"):
        nd._internal._slice_assign(a, torch.zeros(2), begin=(0,), end=(3,))
