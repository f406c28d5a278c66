"""attach_grad's grad_req: 'write' replaces .grad at each backward, 'add' accumulates (MXNet)."""

import torch

import mxtorch as mx
from mxtorch import autograd


def _backward(x, k):
    with autograd.record():
        y = (k * x).sum()
    y.backward()


def test_write_replaces_the_gradient_in_place():
    x = mx.nd.ones((3,))
    x.attach_grad()
    g = x.grad
    _backward(x, 2.0)
    _backward(x, 3.0)
    assert torch.equal(x.grad, torch.full((3,), 3.0)) and x.grad is g


def test_add_accumulates_and_reattaching_switches():
    x = mx.nd.ones((2,))
    x.attach_grad("add")
    _backward(x, 2.0)
    _backward(x, 3.0)
    assert torch.equal(x.grad, torch.full((2,), 5.0))
    x.attach_grad("write")
    _backward(x, 2.0)
    _backward(x, 4.0)
    assert torch.equal(x.grad, torch.full((2,), 4.0))


def test_autograd_grad_leaves_dot_grad_alone():
    x = mx.nd.ones((2,))
    x.attach_grad()
    _backward(x, 3.0)
    with autograd.record():
        y = (5 * x).sum()
    (g,) = autograd.grad(y, [x])
    assert torch.equal(g, torch.full((2,), 5.0)) and torch.equal(x.grad, torch.full((2,), 3.0))


def test_plain_torch_leaves_still_accumulate():
    x = torch.ones(2, requires_grad=True)
    (2 * x).sum().backward()
    (3 * x).sum().backward()
    assert torch.equal(x.grad, torch.full((2,), 5.0))
