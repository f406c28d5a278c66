"""MXNet's engine semantics for an operator's run-time check: the call returns, the failure is
raised at the next read of the result or of anything computed from it (asnumpy, wait_to_read,
asscalar) or at mx.nd.waitall(), once; arrays with array parameters are not checked."""

from __future__ import annotations

import pytest

import mxtorch as mx
from mxtorch.nd._failed import FailedArray


def test_a_bad_number_parameter_fails_at_the_read_not_the_call() -> None:
    a = mx.nd.random.normal(0, -1, (2, 2))  # no error here
    b = mx.nd.dot(mx.nd.ones((2, 2)), a) + 1  # nor in what is computed from it
    assert isinstance(b, FailedArray)
    with pytest.raises(mx.MXNetError, match="scale parameter in gaussian has to be positive"):
        b.asnumpy()
    a.asnumpy()  # raised once: the arrays now read (meaningless values), as in MXNet
    mx.nd.waitall()


@pytest.mark.parametrize("make", [
    lambda: mx.nd.random.uniform(1, 0, (3,)),
    lambda: mx.nd.random.gamma(0, 1, (3,)),
    lambda: mx.nd.random.exponential(-1, (3,)),
    lambda: mx.nd.random.poisson(-1, (3,)),
    lambda: mx.nd.random.negative_binomial(-1, 0.5, (3,)),
    lambda: mx.nd.random.generalized_negative_binomial(-1, 0.5, (3,)),
])
def test_each_samplers_check_is_deferred(make) -> None:  # noqa: ANN001
    x = make()
    with pytest.raises(mx.MXNetError):
        x.wait_to_read()


def test_waitall_raises_the_oldest_pending_failure_and_clears_all() -> None:
    first = mx.nd.random.normal(0, 0, (2,))
    second = mx.nd.random.uniform(2, 1, (2,))
    with pytest.raises(mx.MXNetError, match="gaussian"):
        mx.nd.waitall()
    mx.nd.waitall()  # nothing left
    first.asnumpy()
    second.asnumpy()


def test_rows_of_a_failed_array_share_its_failure() -> None:
    a, b = mx.nd.random.normal(0, -1, (2, 2))
    with pytest.raises(mx.MXNetError):
        a.asnumpy()
    b.asnumpy()  # the one failure was raised already


def test_gluon_forward_of_a_failed_input_fails_at_wait_to_read() -> None:
    net = mx.gluon.nn.Sequential()
    net.add(mx.gluon.nn.Dense(4, in_units=3), mx.gluon.nn.Dropout(1))
    net.initialize()
    z = net(mx.nd.random.normal(1, -2, (2, 3)))
    with pytest.raises(mx.MXNetError):
        z.wait_to_read()


def test_array_parameters_and_valid_numbers_are_not_failures() -> None:
    x = mx.nd.random.normal(mx.nd.zeros((2,)), mx.nd.array([-1.0, 1.0]))  # MXNet checks numbers only
    assert not isinstance(x, FailedArray)
    x.asnumpy()
    assert not isinstance(mx.nd.random.uniform(0, 1, (2,)), FailedArray)
    mx.nd.waitall()
