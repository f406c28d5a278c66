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


def _softmax_grad(x: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    # d/dx of the summed cross-entropy = softmax(x) - onehot(label): SoftmaxOutput's gradient
    xt = x.clone().requires_grad_()
    torch.nn.functional.cross_entropy(xt, label.long(), reduction="sum").backward()
    assert xt.grad is not None
    return xt.grad


@pytest.mark.parametrize("grouped", [False, True])
def test_a_softmax_output_head_starts_the_backward_at_its_data(grouped: bool) -> None:
    # the executor starts the backward of a plain SoftmaxOutput head at the operator's data with
    # softmax - onehot (no autograd function in the graph): the gradients, the ignored head
    # gradient, a head listed twice (counted once) and the prediction must be the operator's
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    sm = mx.sym.SoftmaxOutput(fc, name="softmax")
    net = mx.sym.Group([sm, sm]) if grouped else sm
    ex = net.simple_bind(mx.cpu(), data=(6, 3), grad_req={"fc_weight": "write", "fc_bias": "write",
                                                          "data": "write", "softmax_label": "null"})
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(6, 3, generator=g), torch.randn(4, 3, generator=g), torch.randn(4, generator=g)
    label = torch.tensor([0.0, 3.0, 1.0, 2.0, 3.0, 0.0])
    ex.copy_params_from({"fc_weight": w, "fc_bias": b})
    outs = ex.forward(is_train=True, data=x, softmax_label=label)
    ex.backward([torch.full((6, 4), 7.0)] * len(outs))  # ignored by the loss head
    logits = x @ w.T + b
    dlogits = _softmax_grad(logits, label)
    for o in outs:
        torch.testing.assert_close(o, torch.softmax(logits, -1))
    torch.testing.assert_close(ex.grad_dict["fc_weight"], dlogits.T @ x)
    torch.testing.assert_close(ex.grad_dict["fc_bias"], dlogits.sum(0))
    torch.testing.assert_close(ex.grad_dict["data"], dlogits @ w)


def test_a_softmax_output_of_a_variable_gives_it_the_loss_gradient_in_its_own_array() -> None:
    # the backward's start is the argument itself: its gradient array gets a copy of the loss
    # gradient, which stays correct on the next step
    x = mx.sym.var("x")
    ex = mx.sym.SoftmaxOutput(x, name="softmax").simple_bind(
        mx.cpu(), x=(3, 5), grad_req={"x": "write", "softmax_label": "null"})
    held = ex.grad_dict["x"]
    label = torch.tensor([4.0, 0.0, 2.0])
    for seed in range(2):
        xv = torch.randn(3, 5, generator=torch.Generator().manual_seed(seed))
        ex.forward(is_train=True, x=xv, softmax_label=label)
        ex.backward()
        assert ex.grad_dict["x"] is held
        torch.testing.assert_close(held, _softmax_grad(xv, label))


def test_a_softmax_output_with_options_keeps_its_own_rule() -> None:
    # normalization='batch' and grad_scale are not the plain case: the operator's own backward
    data = mx.sym.var("data")
    net = mx.sym.SoftmaxOutput(data, name="softmax", normalization="batch", grad_scale=3.0)
    ex = net.simple_bind(mx.cpu(), data=(4, 3), grad_req={"data": "write", "softmax_label": "null"})
    xv, label = torch.randn(4, 3), torch.tensor([2.0, 0.0, 1.0, 1.0])
    ex.forward(is_train=True, data=xv, softmax_label=label)
    ex.backward()
    torch.testing.assert_close(ex.grad_dict["data"], _softmax_grad(xv, label) * 3.0 / 4)
