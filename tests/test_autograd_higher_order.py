"""Higher-order gradients through mx.autograd.grad(..., create_graph=True), hand-computed."""

import math

import torch

from mxtorch import autograd, nd


def _var(values: list[float]) -> torch.Tensor:
    x = nd.array(values)
    x.attach_grad()
    return x


def test_third_derivative_of_sin_with_head_gradients() -> None:
    # d/dx sin = cos, d2 = -sin, d3 = -cos; each head gradient multiplies the next order
    x = _var([0.0, math.pi / 2, 1.0])
    h1, h2, h3 = nd.array([1.0, 2.0, 3.0]), nd.array([0.5, 1.0, -1.0]), nd.array([2.0, 1.0, 1.0])
    with autograd.record():
        y = nd.sin(x)
        g1 = autograd.grad(y, x, head_grads=h1, create_graph=True)[0]
        g2 = autograd.grad(g1, x, head_grads=h2, create_graph=True)[0]
        g3 = autograd.grad(g2, x, head_grads=h3, create_graph=True)[0]
    xd = x.detach()
    torch.testing.assert_close(g1.detach(), torch.cos(xd) * h1)
    torch.testing.assert_close(g2.detach(), -torch.sin(xd) * h1 * h2)
    torch.testing.assert_close(g3.detach(), -torch.cos(xd) * h1 * h2 * h3)


def test_a_gradient_independent_of_the_variable_differentiates_to_zeros() -> None:
    # radians(x) = x * pi / 180: its gradient is a constant, so the second is 0 (not an error)
    x = _var([1.0, 2.0])
    with autograd.record():
        g1 = autograd.grad(nd.radians(x), x, create_graph=True)[0]
        g2 = autograd.grad(g1, x, create_graph=True)[0]
    torch.testing.assert_close(g1.detach(), torch.full((2,), math.pi / 180))
    torch.testing.assert_close(g2.detach(), torch.zeros(2))
    g2.backward()  # a head backward() accepts, as in MXNet


def test_abs_second_derivative_is_plain_zeros() -> None:
    # |x|'' = 0 away from 0; torch hands out a lazy ZeroTensor there, which NumPy cannot read
    x = _var([-2.0, 3.0])
    with autograd.record():
        g1 = autograd.grad(nd.abs(x), x, create_graph=True)[0]
        g2 = autograd.grad(g1, x, create_graph=True)[0]
    torch.testing.assert_close(g1.detach(), torch.tensor([-1.0, 1.0]))
    assert (g2.asnumpy() == 0).all()


def test_mixed_second_derivative_of_a_product() -> None:
    # y = x * w: dy/dx = w, d(dy/dx)/dw = 1 (times the head gradients)
    x, w = _var([1.0, 2.0]), _var([3.0, 4.0])
    hy, hx = nd.array([2.0, 5.0]), nd.array([1.0, -1.0])
    with autograd.record():
        gx = autograd.grad(x * w, [x], head_grads=hy, create_graph=True)[0]
        gw = autograd.grad(gx, [w], head_grads=hx, create_graph=True)[0]
    torch.testing.assert_close(gx.detach(), w.detach() * hy)
    torch.testing.assert_close(gw.detach(), hy * hx)


def test_the_callers_head_gradient_is_left_alone() -> None:
    # d(x + 1)/dx times the head gradient is the head gradient itself: handed back, not marked
    x, h = _var([1.0, 2.0]), nd.array([3.0, 4.0])
    with autograd.record():
        g = autograd.grad(x + 1, x, head_grads=h, create_graph=True)[0]
    assert not h.requires_grad and g.requires_grad
    torch.testing.assert_close(g.detach(), h)
