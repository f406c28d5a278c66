"""``mx.engine``'s bulk size (recorded; eager results are the same with any size) and the
MXNetError a GPU context gets on a machine without that GPU (as MXNet's CPU build raises)."""

from __future__ import annotations

import pytest
import torch

import mxtorch as mx


def test_set_bulk_size_returns_the_previous_size_and_bulk_restores_it() -> None:
    start = mx.engine.set_bulk_size(4)
    try:
        with mx.engine.bulk(16):
            assert mx.engine.set_bulk_size(16) == 16
            x = mx.nd.ones((3,))
            for _ in range(5):
                x += 1
        assert mx.engine.set_bulk_size(4) == 4
        assert x.asnumpy().tolist() == [6.0, 6.0, 6.0]
    finally:
        mx.engine.set_bulk_size(start)


def test_negative_bulk_size_is_refused() -> None:
    with pytest.raises(mx.MXNetError, match="size must be an int >= 0"):
        mx.engine.set_bulk_size(-1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_allocating_on_a_missing_gpu_raises_mxnet_error() -> None:
    with pytest.raises(mx.MXNetError, match="gpu\\(0\\) was asked for"):
        mx.nd.ones((2,), ctx=mx.gpu(0))
    with pytest.raises(mx.MXNetError):
        mx.nd.random.uniform(0, 1, (2,), ctx=mx.gpu(0))
    assert mx.gpu(0).device_typeid == 2  # naming the context alone is fine
