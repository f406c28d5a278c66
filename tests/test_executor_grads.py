"""Executor gradient arrays keep their identity and never share memory with each other."""

from __future__ import annotations

import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError


def test_write_gradients_are_separate_arrays_even_when_autograd_shares_one_tensor() -> None:
    x, y = mx.sym.var("x"), mx.sym.var("y")
    ex = (x + y).simple_bind(mx.cpu(), x=(3,), y=(3,))
    gx, gy = ex.grad_dict["x"], ex.grad_dict["y"]
    for step in range(2):
        ex.forward(is_train=True, x=torch.ones(3), y=torch.ones(3))
        ex.backward(torch.full((3,), float(step + 2)))
        assert ex.grad_dict["x"] is gx and ex.grad_dict["y"] is gy  # same objects every step
        torch.testing.assert_close(gx, torch.full((3,), float(step + 2)))
        assert gx.untyped_storage().data_ptr() != gy.untyped_storage().data_ptr()
        gx.mul_(0)  # an in-place change to one does not touch the other
        torch.testing.assert_close(gy, torch.full((3,), float(step + 2)))


def test_write_gradients_of_a_network_equal_torch_autograd_each_step() -> None:
    data = mx.sym.var("data")
    out = mx.sym.MakeLoss(mx.sym.sum(mx.sym.FullyConnected(data, num_hidden=4, name="fc") ** 2))
    ex = out.simple_bind(mx.cpu(), data=(5, 3), grad_req={"fc_weight": "write", "fc_bias": "write"})
    held = ex.grad_dict["fc_weight"]
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        x, w, b = torch.randn(5, 3, generator=g), torch.randn(4, 3, generator=g), torch.randn(4, generator=g)
        ex.copy_params_from({"fc_weight": w, "fc_bias": b})
        ex.forward(is_train=True, data=x)
        ex.backward()
        wt, bt = w.clone().requires_grad_(), b.clone().requires_grad_()
        ((x @ wt.T + bt) ** 2).sum().backward()
        torch.testing.assert_close(held, wt.grad)
        torch.testing.assert_close(ex.grad_dict["fc_bias"], bt.grad)


def test_a_gradient_array_never_takes_the_callers_head_gradient_memory() -> None:
    # for x + y autograd hands the head gradient itself to both inputs: the arrays copy it, so a
    # later in-place change of the caller's tensor does not reach them
    x, y = mx.sym.var("x"), mx.sym.var("y")
    ex = (x + y).simple_bind(mx.cpu(), x=(3,), y=(3,))
    head = torch.full((3,), 2.0)
    ex.forward(is_train=True, x=torch.ones(3), y=torch.ones(3))
    ex.backward(head)
    head.add_(5.0)
    torch.testing.assert_close(ex.grad_dict["x"], torch.full((3,), 2.0))
    torch.testing.assert_close(ex.grad_dict["y"], torch.full((3,), 2.0))


def test_fully_connected_gradients_are_taken_without_a_copy() -> None:
    # autograd's weight gradient of FullyConnected is a view spanning a fresh storage: the gradient
    # array takes that memory (a new storage each backward) instead of copying into its old one
    data = mx.sym.var("data")
    out = mx.sym.MakeLoss(mx.sym.sum(mx.sym.FullyConnected(data, num_hidden=4, name="fc")))
    ex = out.simple_bind(mx.cpu(), data=(5, 3))
    held = ex.grad_dict["fc_weight"]
    ptrs = set()
    for _ in range(3):
        ex.forward(is_train=True, data=torch.randn(5, 3))
        ex.backward()
        assert ex.grad_dict["fc_weight"] is held
        ptrs.add(held.untyped_storage().data_ptr())
    assert len(ptrs) > 1


def test_a_non_loss_output_needs_a_head_gradient_as_in_mxnet() -> None:
    x, y = mx.sym.var("x"), mx.sym.var("y")
    ex = mx.sym.Group([mx.sym.MakeLoss(mx.sym.sum(x * x)), x * 3]).simple_bind(mx.cpu(), x=(3,))
    ex.forward(is_train=True, x=torch.ones(3))
    with pytest.raises(MXNetError, match=r"output '.*' is not a loss output .* pass out_grads"):
        ex.backward()
    # given for every output, the loss output ignores its own: d(sum x^2)/dx + 3 * g
    with pytest.raises(MXNetError, match=r"out_grads\[1\] has shape \(4,\) but output '.*' has shape \(3,\)"):
        ex.backward([torch.zeros(1), torch.full((4,), 2.0)])
    ex.backward([torch.zeros(1), torch.full((3,), 2.0)])
    torch.testing.assert_close(ex.grad_dict["x"], torch.full((3,), 8.0))
    # a head the gradient does not depend on (BlockGrad) needs none
    ex = mx.sym.Group([mx.sym.MakeLoss(mx.sym.sum(x * y)), mx.sym.BlockGrad(x)]).simple_bind(
        mx.cpu(), x=(3,), y=(3,)
    )
    ex.forward(is_train=True, x=torch.ones(3), y=torch.full((3,), 4.0))
    ex.backward()
    torch.testing.assert_close(ex.grad_dict["x"], torch.full((3,), 4.0))


def test_the_head_gradient_handed_to_a_loss_is_never_shared_with_a_gradient_array() -> None:
    # a loss head gets ones (made once, reused) that it ignores; changing a gradient array in
    # place must not change the next backward's gradients
    x, y = mx.sym.var("x"), mx.sym.var("y")
    ex = mx.sym.MakeLoss(x + y).simple_bind(mx.cpu(), x=(3,), y=(3,))
    for _ in range(3):
        ex.forward(is_train=True, x=torch.ones(3), y=torch.ones(3))
        ex.backward()
        torch.testing.assert_close(ex.grad_dict["x"], torch.ones(3))
        torch.testing.assert_close(ex.grad_dict["y"], torch.ones(3))
        ex.grad_dict["x"].mul_(7.0)
        ex.grad_dict["y"].add_(1.0)


def test_gradient_arrays_that_are_views_of_a_callers_buffer_are_written_in_place() -> None:
    # args_grad given as slices of one flat buffer (one all-reduce over all gradients): the arrays
    # must keep their memory so the buffer sees every gradient; taking autograd's fresh memory
    # would silently cut them off
    data = mx.sym.var("data")
    out = mx.sym.MakeLoss(mx.sym.sum(mx.sym.FullyConnected(data, num_hidden=4, name="fc") ** 2))
    flat = torch.zeros(4 * 3 + 4)
    grads = {"fc_weight": flat[:12].view(4, 3), "fc_bias": flat[12:]}
    x, w, b = torch.randn(5, 3), torch.randn(4, 3), torch.randn(4)
    ex = out.bind(mx.cpu(), {"data": x, "fc_weight": w, "fc_bias": b}, args_grad=grads)
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward()
        wt, bt = w.clone().requires_grad_(), b.clone().requires_grad_()
        ((x @ wt.T + bt) ** 2).sum().backward()
        assert wt.grad is not None and bt.grad is not None
        torch.testing.assert_close(flat, torch.cat([wt.grad.reshape(-1), bt.grad]))
