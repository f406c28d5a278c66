import pytest
import torch

import mxtorch as mx
from mxtorch.context import as_context, context_of


def test_contexts_are_distinct_and_hashable():
    assert mx.cpu(0) != mx.cpu(1)
    assert mx.cpu(1) == mx.cpu(1)
    assert mx.cpu() == mx.cpu(0)
    assert mx.gpu(0) != mx.cpu(0)
    assert len({mx.cpu(0), mx.cpu(1), mx.cpu(0)}) == 2
    assert repr(mx.gpu(2)) == "gpu(2)"


def test_torch_device_mapping():
    assert mx.cpu(3).torch_device == torch.device("cpu")
    assert mx.gpu(1).torch_device == torch.device("cuda", 1)


def test_current_context_scope():
    assert mx.current_context() == mx.cpu(0)
    with mx.cpu(1):
        assert mx.current_context() == mx.cpu(1)
        with mx.gpu(0):
            assert mx.current_context() == mx.gpu(0)
        assert mx.current_context() == mx.cpu(1)
    assert mx.current_context() == mx.cpu(0)


def test_as_context_parsing_and_errors():
    assert as_context("cpu:1") == mx.cpu(1)
    assert as_context("gpu") == mx.gpu(0)
    assert as_context("cuda:2") == mx.gpu(2)
    assert as_context(torch.device("cpu")) == mx.cpu(0)
    with pytest.raises(ValueError, match="cannot read context"):
        as_context("tpu:0")
    with pytest.raises(ValueError, match="non-negative"):
        mx.Context("cpu", -1)


def test_context_of_tag():
    t = torch.zeros(2)
    assert context_of(t) == mx.cpu(0)
    t._mx_ctx = mx.cpu(1)
    assert context_of(t) == mx.cpu(1)


def test_num_gpus_is_int():
    assert isinstance(mx.num_gpus(), int)
