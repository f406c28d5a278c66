"""mxtorch.test_utils."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import mxtorch.random as mxrandom
from mxtorch import test_utils as tu
from mxtorch.base import MXNetError
from mxtorch.context import cpu, current_context


def test_default_context_roundtrip() -> None:
    old = tu.default_context()
    try:
        tu.set_default_context(cpu(2))
        assert tu.default_context() == cpu(2) and current_context() == cpu(2)
        tu.set_default_context("cpu:0")
        assert tu.default_context() == cpu(0)
    finally:
        tu.set_default_context(old)


def test_default_tolerances() -> None:
    assert tu.get_rtol(None, np.float16) == 1e-2
    assert tu.get_rtol(None, np.float32) == 1e-4
    assert tu.get_rtol(None, np.float64) == 1e-5
    assert tu.get_atol(None, np.float32) == 1e-3
    assert tu.get_rtol(0.5, np.float32) == 0.5
    # the looser dtype of the pair wins
    assert tu.get_tols(torch.zeros(1, dtype=torch.float16), np.zeros(1), None, None) == (1e-2, 1e-1)
    assert tu.get_tols(np.zeros(1, np.int32), np.zeros(1, np.int64), None, None) == (0.0, 0.0)


def test_assert_almost_equal_accepts_mixed_inputs() -> None:
    a = torch.tensor([1.0, 2.0, 3.0])
    tu.assert_almost_equal(a, np.array([1.0, 2.0, 3.0], np.float32))
    tu.assert_almost_equal(a, a + 1e-5)
    tu.assert_almost_equal(torch.tensor(2.0), 2.0)
    tu.assert_almost_equal(a, np.array([1.0, 2.1, 3.0]), rtol=0.1, atol=0)
    tu.assert_almost_equal(torch.tensor([1.0], dtype=torch.bfloat16), np.array([1.0]))
    tu.assert_almost_equal(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), equal_nan=True)
    tu.assert_almost_equal(np.array([np.inf]), np.array([np.inf]))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))


def test_assert_almost_equal_message() -> None:
    a = np.zeros((3, 4), np.float32)
    b = a.copy()
    b[1, 2] = 0.5
    b[2, 0] = 0.01
    with pytest.raises(AssertionError) as ei:
        tu.assert_almost_equal(a, b, names=("mine", "ref"))
    msg = str(ei.value)
    assert "(1, 2)" in msg and "mine=" in msg and "ref=" in msg and "0.5" in msg
    assert "2 of 12" in msg
    with pytest.raises(AssertionError, match="shapes"):
        tu.assert_almost_equal(np.zeros(3), np.zeros(4))
    with pytest.raises(AssertionError, match="shapes differ"):
        tu.assert_almost_equal(np.zeros((1, 3)), np.zeros(3), use_broadcast=False)


def test_almost_equal_and_same() -> None:
    assert tu.almost_equal(np.ones(3), torch.ones(3, dtype=torch.float64))
    assert not tu.almost_equal(np.ones(3), np.ones(3) * 1.1)
    assert not tu.almost_equal(np.ones(3), np.ones(4))
    assert tu.almost_equal(np.ones(3), np.ones(3) * 1.1, rtol=0.2)
    assert tu.same(torch.tensor([1, 2]), np.array([1, 2]))
    assert not tu.same(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]))
    assert not tu.same(np.zeros((1, 2)), np.zeros(2))
    tu.assert_almost_equal_ignore_nan(np.array([np.nan, 1.0]), np.array([5.0, 1.0]))


def test_assert_exception() -> None:
    def boom(x: int) -> None:
        raise ValueError(x)

    tu.assert_exception(boom, ValueError, 3)
    with pytest.raises(AssertionError, match="did not raise"):
        tu.assert_exception(lambda: None, ValueError)
    with pytest.raises(ValueError):
        tu.assert_exception(boom, KeyError, 1)


def test_random_helpers() -> None:
    mxrandom.seed(11)
    s2, s3, sn = tu.rand_shape_2d(), tu.rand_shape_3d(4, 5, 6), tu.rand_shape_nd(5, dim=3)
    assert len(s2) == 2 and all(1 <= d <= 10 for d in s2)
    assert len(s3) == 3 and s3[0] <= 4 and s3[1] <= 5 and s3[2] <= 6
    assert len(sn) == 5 and all(1 <= d <= 3 for d in sn)
    mxrandom.seed(11)
    assert tu.rand_shape_2d() == s2
    arr = tu.random_arrays((2, 3))
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float32 and arr.shape == (2, 3)
    many = tu.random_arrays((2,), (), (1, 1))
    assert [m.shape for m in many] == [(2,), (), (1, 1)]
    t = tu.rand_ndarray((3, 4))
    assert isinstance(t, torch.Tensor) and t.shape == (3, 4) and t.dtype == torch.float32
    assert tu.rand_ndarray((2, 2), dtype="float64").dtype == torch.float64
    sparse = tu.rand_ndarray((50, 50), density=0.1)
    assert 0.02 < float((sparse != 0).float().mean()) < 0.2
    rows = tu.rand_ndarray((40, 3), stype="row_sparse", density=0.5)
    assert rows.stype == "row_sparse"
    kept = (rows.to_dense() != 0).any(dim=1)
    assert 5 < int(kept.sum()) < 35  # whole rows kept or dropped
    assert bool(((rows.to_dense() != 0).all(dim=1) == kept).all())
    assert tu.rand_ndarray((4, 5), stype="csr", density=0.5).stype == "csr"
    with pytest.raises(MXNetError, match="storage type must be"):
        tu.rand_ndarray((2, 2), stype="coo")


def test_env_helpers() -> None:
    key = "MXTORCH_TEST_UTILS_VAR"
    os.environ.pop(key, None)
    assert tu.set_env_var(key, "1", default_val="none") == "none"
    assert os.environ[key] == "1"
    with tu.environment(key, "2"):
        assert os.environ[key] == "2"
        with tu.environment({key: None, key + "_B": "x"}):
            assert key not in os.environ and os.environ[key + "_B"] == "x"
        assert os.environ[key] == "2" and key + "_B" not in os.environ
    assert os.environ[key] == "1"
    assert tu.set_env_var(key, None) == "1"
    assert key not in os.environ
    with pytest.raises(TypeError):
        with tu.environment(1, 2, 3):
            pass


def test_check_numeric_gradient() -> None:
    x = torch.randn(3, 4, dtype=torch.float64)
    w = torch.randn(4, 2, dtype=torch.float64)
    tu.check_numeric_gradient(lambda a, b: torch.tanh(a @ b), [x, w])
    tu.check_numeric_gradient(lambda a: [a.sin(), (a * a).sum(1)], x)
    tu.check_numeric_gradient(lambda a: torch.sigmoid(a), [torch.randn(5)], rtol=1e-2, atol=1e-3)

    class WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):  # type: ignore[no-untyped-def]
            return a * a

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            return g * 3.0

    with pytest.raises(AssertionError, match="NUMERICAL_input0"):
        tu.check_numeric_gradient(WrongGrad.apply, [x])
    with pytest.raises(TypeError, match="floating point"):
        tu.check_numeric_gradient(lambda a: a * 2, [torch.ones(2, dtype=torch.int64)], grad_nodes=[0])


# ---- helpers MXNet's optimizer tests use -----------------------------------------------------
def test_star_import_gives_mxnet_test_names() -> None:
    names: dict[str, object] = {}
    exec("from mxtorch.test_utils import *", names)
    for name in ("array", "assert_almost_equal", "compare_optimizer", "compare_ndarray_tuple", "rand_ndarray",
                 "default_context", "same", "rand_shape_nd", "assert_allclose", "same_array", "retry"):
        assert name in names, name
    w = names["array"]([1, 2], dtype=np.float32)  # type: ignore[operator]
    assert isinstance(w, torch.Tensor) and w.dtype == torch.float32


def test_compare_ndarray_tuple_skips_none_like_mxnet() -> None:
    t = torch.ones(2)
    tu.compare_ndarray_tuple(None, (t, t))  # a reference without state compares nothing
    tu.compare_ndarray_tuple((None, t), (t * 5, t))
    tu.compare_ndarray_tuple((t, (t, t)), (t, (t, t)))
    with pytest.raises(AssertionError):
        tu.compare_ndarray_tuple((t, t), (t, t * 2))
    with pytest.raises(AssertionError, match="structure"):
        tu.compare_ndarray_tuple((t, t), (t,))


def test_compare_optimizer_with_sparse_storage() -> None:
    from mxtorch import optimizer as opt

    mxrandom.seed(3)
    for w_stype, g_stype in (("default", "row_sparse"), ("row_sparse", "row_sparse"), ("csr", "csr")):
        shape = (3, 4) if w_stype == "csr" else (3, 4, 5)
        std = {"momentum": 0.9, "lazy_update": False}
        tu.compare_optimizer(opt.SGD(**std), opt.SGD(**std), shape, np.float32, w_stype, g_stype)
    with pytest.raises(AssertionError):  # a different rule is caught
        tu.compare_optimizer(opt.SGD(learning_rate=0.1), opt.SGD(learning_rate=0.2), (3, 4), np.float32)


def test_assert_allclose_same_array_retry_and_friends() -> None:
    tu.assert_allclose(np.array([1.0, np.nan]), np.array([1.0, np.nan]))  # equal_nan by default
    with pytest.raises(AssertionError):
        tu.assert_allclose(np.array([1.0]), np.array([1.0 + 1e-6]))
    a = torch.zeros(4)
    assert tu.same_array(a, a.view(4)) and not tu.same_array(a, a.clone()) and not tu.same_array(a, a[1:])
    calls = []

    @tu.retry(3)
    def flaky() -> None:
        calls.append(1)
        assert len(calls) == 2

    flaky()
    assert len(calls) == 2
    with pytest.raises(ValueError, match="positive"):
        tu.retry(0)
    assert list(tu.list_gpus()) == list(range(torch.cuda.device_count()))
    picked = tu.random_sample(list(range(10)), 4)
    assert len(set(picked)) == 4 and set(picked) <= set(range(10))
    (u,) = tu.random_uniform_arrays((2, 3), low=1.0, high=2.0)
    assert u.dtype == np.float32 and u.shape == (2, 3) and ((u >= 1) & (u < 2)).all()
