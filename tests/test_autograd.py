import pytest
import torch

from mxtorch import autograd


def test_record_and_pause_states():
    assert not autograd.is_recording() and not autograd.is_training()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        assert torch.is_grad_enabled()
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
            assert not torch.is_grad_enabled()
        with autograd.predict_mode():
            assert autograd.is_recording() and not autograd.is_training()
    with autograd.record(train_mode=False):
        assert autograd.is_recording() and not autograd.is_training()
    with autograd.train_mode():
        assert autograd.is_training() and not autograd.is_recording()
    assert not autograd.is_recording() and not autograd.is_training()


def test_state_restored_after_exception():
    with pytest.raises(RuntimeError):
        with autograd.record():
            raise RuntimeError("boom")
    assert not autograd.is_recording()
    assert torch.is_grad_enabled()


def test_vector_backward_uses_ones_head_gradient():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with autograd.record():
        y = x * x
    y.backward()  # MXNet semantics: head gradient of ones
    torch.testing.assert_close(x.grad, 2 * x.detach())


def test_scalar_backward_unchanged_and_explicit_gradient():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([3.0, 3.0]))
    x.grad = None
    (x * 3).backward(torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(x.grad, torch.tensor([3.0, 0.0]))


def test_backward_and_grad_functions():
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    with autograd.record():
        y = x ** 3
    (g,) = autograd.grad(y, [x], retain_graph=True)
    torch.testing.assert_close(g, 3 * x.detach() ** 2)
    autograd.backward(y, head_grads=torch.tensor([2.0, 1.0]))
    torch.testing.assert_close(x.grad, torch.tensor([6.0, 12.0]))
    with pytest.raises(ValueError, match="head_grads"):
        autograd.backward([y], head_grads=[None, None])


def test_grad_of_unused_variable_is_zero():
    x = torch.ones(2, requires_grad=True)
    z = torch.ones(3, requires_grad=True)
    with autograd.record():
        y = (x * 2).sum()
    gx, gz = autograd.grad(y, [x, z])
    torch.testing.assert_close(gz, torch.zeros(3))


# ---- MXNet 1.9 rules ---------------------------------------------------------------------------
def test_grad_returns_a_list_even_for_a_tensor_variable():
    # MXNet 1.9.1 wraps a lone variable in a list before choosing the return type: always a list
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with autograd.record():
        y = x * x
    g = autograd.grad(y, x, retain_graph=True)
    assert isinstance(g, list) and len(g) == 1
    torch.testing.assert_close(g[0], 2 * x.detach())
    (g2,) = autograd.grad([y], [x])
    torch.testing.assert_close(g2, 2 * x.detach())
    with pytest.raises(ValueError, match="empty"):
        autograd.grad(y, [])


def test_grad_create_graph_gives_second_derivative():
    x = torch.tensor([1.0, 3.0], requires_grad=True)
    with autograd.record():
        y = x ** 3
        (dy,) = autograd.grad(y, x, create_graph=True)  # retain_graph follows create_graph
    dy.backward()
    torch.testing.assert_close(x.grad, 6 * x.detach())


def test_mark_variables_writes_into_the_given_buffers():
    x, z = torch.tensor([1.0, 2.0]), torch.tensor([3.0])
    gx, gz = torch.full((2,), 9.0), torch.full((1,), 5.0)
    autograd.mark_variables([x, z], [gx, gz], grad_reqs=["write", "add"])
    for _ in range(2):
        with autograd.record():
            y = (x * x).sum() + 2 * z.sum()
        y.backward()
    torch.testing.assert_close(gx, 2 * x)  # 'write': the buffer holds the last gradient
    torch.testing.assert_close(gz, torch.tensor([5.0 + 2 + 2]))  # 'add': added to what was there
    assert x.grad is gx and z.grad is gz
    with pytest.raises(ValueError, match="shape"):
        autograd.mark_variables(x, torch.zeros(3))
    with pytest.raises(ValueError, match="one gradient"):
        autograd.mark_variables([x, z], [gx])


class _DivMul(autograd.Function):
    def forward(self, x, y):
        assert not autograd.is_recording()  # forward runs with recording off, as MXNet
        self.save_for_backward(x, y)
        return x / y, x * y

    def backward(self, dm, dn):
        x, y = self.saved_tensors
        return dm / y + dn * y, dn * x - dm * x / y / y


def test_mxnet_style_function_instance():
    x = torch.tensor([1.0, 2.0, 4.0], requires_grad=True)
    y = torch.tensor([2.0, 0.5, 1.0], requires_grad=True)
    f = _DivMul()
    with autograd.record():
        m, n = f(x, y)
        autograd.backward([m, n])
    # hand: d(x/y + x*y)/dx = 1/y + y ; d/dy = x - x/y^2
    torch.testing.assert_close(x.grad, 1 / y.detach() + y.detach())
    torch.testing.assert_close(y.grad, x.detach() - x.detach() / y.detach() ** 2)
    with pytest.raises(RuntimeError, match="only once"):
        f(x, y)
    # without recording the forward result comes back unrecorded
    m2, _ = _DivMul()(torch.ones(2), torch.ones(2))
    assert not m2.requires_grad


def test_mxnet_style_function_chain_and_errors():
    class AddOne(autograd.Function):
        def forward(self, x):
            return x + 1

        def backward(self, dy):
            return dy * 2  # deliberately not the true derivative: backward is the user's

    x = torch.zeros(3, requires_grad=True)
    with autograd.record():
        out = x
        for _ in range(3):
            out = AddOne()(out)
    out.backward()
    torch.testing.assert_close(out.detach(), torch.full((3,), 3.0))
    torch.testing.assert_close(x.grad, torch.full((3,), 8.0))

    class BadArity(autograd.Function):
        def forward(self, a, b):
            return a + b

        def backward(self, dy):
            return dy

    a = torch.ones(2, requires_grad=True)
    with autograd.record():
        s = BadArity()(a, torch.ones(2))
    with pytest.raises(ValueError, match="one per input"):
        s.backward()


def test_tensor_backward_takes_mxnet_keywords():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with autograd.record():
        y = x * 3
    y.backward(out_grad=torch.tensor([1.0, 2.0]), retain_graph=True, train_mode=False)
    torch.testing.assert_close(x.grad, torch.tensor([3.0, 6.0]))
    with pytest.raises(TypeError, match="out_grad"):
        y.backward(torch.ones(2), out_grad=torch.ones(2))
