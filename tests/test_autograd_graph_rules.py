"""MXNet's rules for recorded graphs: a backward frees its graph (a second one from the same
head fails unless the first retained it); a torch program that never records with
``mx.autograd.record`` keeps torch's behaviour."""

from __future__ import annotations

import threading

import pytest
import torch

import mxtorch as mx
from mxtorch import autograd
from mxtorch.base import MXNetError


def _var() -> torch.Tensor:
    x = mx.nd.ones((2, 2))
    x.attach_grad()
    return x


def test_second_backward_without_retain_graph_fails() -> None:
    x = _var()
    with autograd.record():
        y = x + 1  # torch saves nothing for this node: only the rule makes the second call fail
    y.backward()
    with pytest.raises(MXNetError, match="retain_graph"):
        y.backward()
    torch.testing.assert_close(x.grad, torch.ones(2, 2))  # the refused call added nothing


def test_retain_graph_allows_another_backward() -> None:
    x = _var()
    x.attach_grad(grad_req="add")
    with autograd.record():
        y = x * 3
        y.backward(retain_graph=True)
        y.backward()
    torch.testing.assert_close(x.grad, torch.full((2, 2), 6.0))
    with pytest.raises(MXNetError):
        y.backward()


def test_module_functions_follow_the_rule() -> None:
    x = _var()
    with autograd.record():
        y = x + 1
    g = autograd.grad(y, x, retain_graph=True)
    torch.testing.assert_close(g, torch.ones(2, 2))
    autograd.backward(y)
    with pytest.raises(MXNetError):
        autograd.backward(y)
    with autograd.record():
        z = x - 1
    autograd.grad(z, x)
    with pytest.raises(MXNetError):
        z.backward()


def test_bad_head_grads_are_reported_before_the_freed_check() -> None:
    x = _var()
    with autograd.record():
        y = x + 1
    y.backward()
    with pytest.raises(ValueError, match="head_grads"):
        autograd.backward([y], head_grads=[None, None])


def test_torch_programs_that_never_record_keep_torch_behaviour() -> None:
    # the rule is per thread and starts with the first record(): a fresh thread is a torch program
    out: dict[str, object] = {}

    def torch_program() -> None:
        x = torch.ones(3, requires_grad=True)
        y = (x + 1).sum()
        y.backward()
        y.backward()  # torch allows it: the node saved no tensors
        out["grad"] = x.grad.clone()

    t = threading.Thread(target=torch_program)
    t.start()
    t.join()
    torch.testing.assert_close(out["grad"], torch.full((3,), 2.0))
