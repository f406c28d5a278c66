"""MXNet's rules for recorded graphs: a backward frees its graph (a second one from the same
head fails unless the first retained it); a torch program that never records with
``mx.autograd.record`` keeps torch's behaviour."""

from __future__ import annotations

import json
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


def _recorded_plus_one(x: torch.Tensor) -> torch.Tensor:
    with autograd.record():
        return x + 1  # torch saves nothing for this node: only the rule makes a second backward fail


def test_second_backward_without_retain_graph_fails() -> None:
    x = _var()
    y = _recorded_plus_one(x)
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
    y = _recorded_plus_one(x)
    (g,) = autograd.grad(y, x, retain_graph=True)
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
    y = _recorded_plus_one(_var())
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


# ---- autograd.get_symbol ---------------------------------------------------------------------------
def _ops(s: object) -> list[str]:
    return [n["op"] for n in json.loads(s.tojson())["nodes"]]  # type: ignore[attr-defined]


def test_get_symbol_arguments_are_the_recorded_variables() -> None:
    x, z = mx.nd.array([1.0, 2.0]), mx.nd.array([3.0, 4.0])
    x.attach_grad()
    z.attach_grad()
    with autograd.record():
        y = x * x + 2 * x - 1
    assert autograd.get_symbol(y).list_arguments() == ["var0"]  # scalars are folded in, not arguments
    with autograd.record():
        y = x * x + 2 * z - 1
    s = autograd.get_symbol(y)
    assert s.list_arguments() == ["var0", "var1"]
    assert _ops(s)[:4] == ["null", "broadcast_mul", "null", "_mul_scalar"]


def test_get_symbol_graph_computes_what_was_recorded() -> None:
    x, z = mx.nd.array([1.0, 2.0]), mx.nd.array([0.5, -1.0])
    x.attach_grad()
    z.attach_grad()
    with autograd.record():
        y = (x * z).exp() / 2 + x.sum() - z / x
    s = autograd.get_symbol(y)
    got = s.eval(var0=x.detach(), var1=z.detach())[0]
    want = torch.exp(torch.tensor([0.5, -2.0])) / 2 + 3.0 - torch.tensor([0.5, -0.5])
    torch.testing.assert_close(got, want)


def test_get_symbol_names_an_operation_it_cannot_run() -> None:
    x = mx.nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = torch.cumsum(x, 0)
    s = autograd.get_symbol(y)
    assert s.list_arguments() == ["var0"] and _ops(s)[-1] == "_torch_op"
    with pytest.raises(MXNetError, match="CumsumBackward0"):
        s.eval(var0=x.detach())


def test_get_symbol_of_a_hybridized_block_is_one_cached_op_or_inlined() -> None:
    net = mx.gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(mx.gluon.nn.Dense(4, activation="relu"), mx.gluon.nn.Dense(2))
    net.initialize()
    data = mx.nd.ones((3, 5))
    net.hybridize()  # MXNet's default inline_limit=2: three operators stay one _CachedOp
    with autograd.record():
        out = net(data)
    feed = {"null0": data, **{k: p.data().detach() for k, p in net.collect_params().items()}}
    s = autograd.get_symbol(out)
    assert s.list_arguments() == ["null0", *net.collect_params().keys()]
    assert _ops(s) == ["null"] * 5 + ["_CachedOp"]
    torch.testing.assert_close(s.eval(**feed)[0], out.detach())
    net.hybridize(inline_limit=3)
    with autograd.record():
        out = net(data)
    s = autograd.get_symbol(out)
    assert _ops(s).count("FullyConnected") == 2 and "_CachedOp" not in _ops(s)
    torch.testing.assert_close(s.eval(**feed)[0], out.detach())


def test_get_symbol_needs_a_recorded_array() -> None:
    with pytest.raises(MXNetError, match="record"):
        autograd.get_symbol(mx.nd.ones((2,)))
