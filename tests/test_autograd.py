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
