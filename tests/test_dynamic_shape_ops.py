"""Operators whose output shape depends on the data: nd.contrib.boolean_mask (MXNet 1.9's doc example)."""

import pytest
import torch

import mxtorch as mx
from mxtorch.gluon import HybridBlock


def test_boolean_mask_keeps_the_flagged_rows_and_routes_their_gradient() -> None:
    data = mx.nd.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    data.attach_grad()
    with mx.autograd.record():
        out = mx.nd.contrib.boolean_mask(data, mx.nd.array([0, 1, 1]))
    out.backward(mx.nd.array([[1, 1, 1], [2, 2, 2]]))
    torch.testing.assert_close(out.detach(), torch.tensor([[4.0, 5, 6], [7, 8, 9]]))
    torch.testing.assert_close(data.grad, torch.tensor([[0.0, 0, 0], [1, 1, 1], [2, 2, 2]]))
    assert mx.nd.contrib.boolean_mask(data, mx.nd.zeros(3)).shape == (0, 3)


def test_boolean_mask_in_a_hybridized_block() -> None:
    class Masked(HybridBlock):
        def hybrid_forward(self, F, x, index):  # type: ignore[no-untyped-def]
            return F.contrib.boolean_mask(x, index)

    net = Masked()
    net.hybridize()
    out = net(mx.nd.array([[1.0], [2.0], [3.0]]), mx.nd.array([1, 0, 1]))
    torch.testing.assert_close(out.detach(), torch.tensor([[1.0], [3.0]]))


def test_boolean_mask_refuses_a_mismatched_index_or_another_axis() -> None:
    data = mx.nd.ones((3, 2))
    with pytest.raises(ValueError, match="one entry per row"):
        mx.nd.contrib.boolean_mask(data, mx.nd.ones(2))
    with pytest.raises(ValueError, match="axis=0"):
        mx.nd.contrib.boolean_mask(data, mx.nd.ones(2), axis=1)

