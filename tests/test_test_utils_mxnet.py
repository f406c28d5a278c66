"""mx.test_utils' MXNet helpers (np_reduce, dtype tolerances, generator statistics, symbol
checks), mx.base's names, mx.contrib.autograd and mx.runtime."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import test_utils as tu


def test_star_import_hands_out_mxnet_module_imports() -> None:
    ns: dict[str, object] = {}
    exec("from mxtorch.test_utils import *", ns)
    import os
    import sys

    assert ns["np"] is np and ns["rnd"] is np.random and ns["sys"] is sys and ns["os"] is os
    assert ns["mx"] is mx and callable(ns["verify_generator"]) and callable(ns["np_reduce"])
    assert "torch" not in ns  # MXNet's module never imported torch: a star import must not bring it


def test_np_reduce_one_axis_at_a_time() -> None:
    dat = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    # sum over i, k of 12i + 4j + k = 48 + 32j + 12
    out = tu.np_reduce(dat, (0, 2), True, np.sum)
    assert out.shape == (1, 3, 1) and out.ravel().tolist() == [60.0, 92.0, 124.0]
    assert tu.np_reduce(dat, -1, False, np.max).tolist() == dat[..., 3].tolist()
    assert tu.np_reduce(dat, None, False, np.sum) == 276.0


def test_tolerances_by_dtype_dict_and_bool_exactness() -> None:
    f32 = np.zeros(3, np.float32)
    assert tu.get_tols(f32, f32, {np.dtype(np.float32): 0.5}, None) == (0.5, 1e-3)
    # a dict without the operand's dtype falls back to the default table
    assert tu.get_tols(np.zeros(3), np.zeros(3), {np.dtype(np.float32): 0.5}, None) == (1e-5, 1e-20)
    assert tu.effective_dtype(torch.zeros(1, dtype=torch.float16)) == np.dtype(np.float16)
    assert tu.effective_dtype(torch.zeros(1, dtype=torch.bfloat16)) is torch.bfloat16
    assert tu.default_rtols()[np.dtype(np.int32)] == 0
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.array([True, False]), np.array([True, True]), rtol=1, atol=1)
    # MXNet's almost_equal uses float64's tolerances when none are given
    assert not tu.almost_equal(np.float32(1.0), np.float32(1.0 + 1e-4))


def _uniform_buckets(n: int) -> tuple[list[tuple[float, float]], list[float]]:
    return tu.gen_buckets_probs_with_ppf(lambda p: p, n)


def test_verify_generator_accepts_the_right_distribution_and_rejects_a_wrong_one() -> None:
    np.random.seed(0)
    buckets, probs = _uniform_buckets(5)
    assert buckets[0] == (0.0, 0.2) and probs == [0.2] * 5
    ps = tu.verify_generator(lambda n: np.random.uniform(size=n), buckets, probs, nsamples=20000)
    assert len(ps) == 5 and all(0.0 <= p <= 1.0 for p in ps)
    with pytest.raises(AssertionError, match="Generator test fails"):
        tu.verify_generator(lambda n: np.random.uniform(size=n) ** 2, buckets, probs, nsamples=20000)


def test_chi_square_p_value_and_discrete_buckets() -> None:
    # 100 samples in 2 equal buckets, observed 60/40: statistic 4, p = P(chi2_1 > 4) = erfc(sqrt(2))
    samples = np.array([0] * 60 + [1] * 40)
    p, obs, exp = tu.chi_square_check(lambda n: samples, [0, 1], [0.5, 0.5], nsamples=100)
    assert obs.tolist() == [60, 40] and exp.tolist() == [50.0, 50.0]
    assert p == pytest.approx(math.erfc(math.sqrt(2.0)), rel=1e-6)
    assert tu.mean_check(lambda n: np.full(n, 0.001), 0.0, 1.0, nsamples=100)
    assert not tu.mean_check(lambda n: np.full(n, 1.0), 0.0, 1.0, nsamples=100)


def test_symbolic_checks_on_a_product() -> None:
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    prod = a * b
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    y = np.array([[5.0, 6.0], [7.0, 8.0]])
    tu.check_symbolic_forward(prod, [x, y], [x * y])
    tu.check_symbolic_forward(prod, {"a": x, "b": y}, [x * y], dtype=np.float64)
    with pytest.raises(AssertionError):
        tu.check_symbolic_forward(prod, [x, y], [x + y])
    ones = np.ones((2, 2))
    tu.check_symbolic_backward(prod, [x, y], [ones], [y, x])  # d(ab)/da = b
    tu.check_symbolic_backward(prod, [x, y], [2 * ones], {"a": 2 * y, "b": 2 * x}, grad_req="add")
    tu.check_numeric_gradient(prod, [x, y], dtype=np.float64, rtol=1e-3, atol=1e-5)
    tu.check_numeric_gradient(prod, [x, y], grad_nodes=["b"], dtype=np.float64)
    assert tu.simple_forward(prod, a=x, b=y).tolist() == (x * y).tolist()


def test_numeric_gradient_catches_a_wrong_backward() -> None:
    class Wrong(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):  # type: ignore[no-untyped-def]
            self.assign(out_data[0], req[0], in_data[0] * in_data[0])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):  # type: ignore[no-untyped-def]
            self.assign(in_grad[0], req[0], out_grad[0] * in_data[0])  # should be 2x

    @mx.operator.register("h6_wrong_square")
    class WrongProp(mx.operator.CustomOpProp):
        def list_arguments(self):  # type: ignore[no-untyped-def]
            return ["data"]

        def infer_shape(self, in_shape):  # type: ignore[no-untyped-def]
            return in_shape, [in_shape[0]], []

        def create_operator(self, ctx, shapes, dtypes):  # type: ignore[no-untyped-def]
            return Wrong()

    sym = mx.sym.Custom(mx.sym.Variable("data"), op_type="h6_wrong_square")
    with pytest.raises(AssertionError, match="NUMERICAL_data"):
        tu.check_numeric_gradient(sym, [np.array([1.0, 2.0, 3.0])], dtype=np.float64)


def test_rand_sparse_ndarray_shapes_and_parts() -> None:
    np.random.seed(1)
    rsp, (vals, ids) = tu.rand_sparse_ndarray((5, 3), "row_sparse", rsp_indices=np.array([1, 3]))
    dense = rsp.tostype("default").asnumpy()
    assert ids.tolist() == [1, 3] and vals.shape == (2, 3)
    assert (dense[[0, 2, 4]] == 0).all() and np.allclose(dense[[1, 3]], vals)
    csr, (indptr, indices, data) = tu.rand_sparse_ndarray((4, 6), "csr", density=0.5)
    assert csr.stype == "csr" and int(indptr[-1]) == 12 and data.shape[0] == 12
    assert (
        tu.create_sparse_array_zd((4, 2), "row_sparse", 0.9, rsp_indices=[2])
        .tostype("default")[2]
        .abs()
        .sum()
        > 0
    )


def test_base_names_mxnet_code_imports() -> None:
    from mxtorch.base import NotImplementedForSymbol, _as_list, integer_types, mx_real_t

    err = NotImplementedForSymbol(len, "+", 1)
    assert isinstance(err, mx.MXNetError)
    assert str(err) == (
        "Function len (namely operator \"+\") with arguments (<class 'int'>) "
        "is not implemented for Symbol and only available in NDArray."
    )
    assert mx_real_t is np.float32 and _as_list(3) == [3] and _as_list((1, 2)) == (1, 2)
    assert isinstance(np.int64(1), integer_types)


def test_contrib_autograd_sections_and_grad() -> None:
    from mxtorch.contrib import autograd as cag

    assert not mx.autograd.is_recording()
    with cag.train_section():
        assert mx.autograd.is_recording() and mx.autograd.is_training()
        with cag.test_section():
            assert not mx.autograd.is_recording() and not mx.autograd.is_training()
        assert mx.autograd.is_recording()
    assert not mx.autograd.is_recording() and not mx.autograd.is_training()
    assert torch.is_grad_enabled()  # leaving a section restores torch's grad mode as well
    grad_mode = torch.is_grad_enabled()
    try:
        assert cag.set_is_training(True) is False
        assert cag.set_is_training(False) is True
    finally:  # set_recording(False) also turns torch's grad mode off, as mx.autograd.set_recording does
        torch.set_grad_enabled(grad_mode)

    x = mx.nd.array([1.0, 2.0, 3.0])
    grads, loss = cag.grad_and_loss(lambda v: (v * v).sum())(x)
    assert grads[0].asnumpy().tolist() == [2.0, 4.0, 6.0] and float(loss.asscalar()) == 14.0
    g = cag.grad(lambda u, v: u * v, argnum=[1])(x, mx.nd.array([4.0, 5.0, 6.0]))
    assert g[0].asnumpy().tolist() == [1.0, 2.0, 3.0]


def test_runtime_features() -> None:
    feats = mx.runtime.Features()
    assert feats.is_enabled("INT64_TENSOR_SIZE") and not feats.is_enabled("TVM_OP")
    assert feats.is_enabled("cuda") == (torch.version.cuda is not None)
    with pytest.raises(RuntimeError, match="unknown"):
        feats.is_enabled("NO_SUCH_FEATURE")
