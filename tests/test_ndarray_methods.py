"""The opt-in MXNet methods on torch.Tensor."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch

from mxtorch import ndarray_methods
from mxtorch.context import context_of, cpu

NAMES = {
    "asnumpy",
    "stype",
    "indptr",
    "asscalar",
    "as_in_context",
    "context",
    "ctx",
    "wait_to_read",
    "wait_to_write",
    "astype",
    "copyto",
    "attach_grad",
    "tostype",
}


@pytest.fixture
def enabled() -> Iterator[None]:
    was = ndarray_methods.is_enabled()
    ndarray_methods.enable()
    try:
        yield
    finally:
        if not was:
            ndarray_methods.disable()


def test_enable_disable_roundtrip() -> None:
    was = ndarray_methods.is_enabled()
    ndarray_methods.disable()
    try:
        assert not ndarray_methods.is_enabled()
        for n in NAMES:
            assert not hasattr(torch.Tensor, n)
        before = dict(torch.Tensor.__dict__)
        added = ndarray_methods.enable()
        assert set(added) == NAMES and ndarray_methods.is_enabled()
        assert ndarray_methods.enable() == added  # idempotent
        assert set(ndarray_methods.added_names()) == NAMES
        # torch's own attributes are untouched
        for keep in ("size", "shape", "T", "grad", "reshape", "flatten"):
            assert torch.Tensor.__dict__.get(keep, getattr(torch.Tensor, keep)) is before.get(
                keep, getattr(torch.Tensor, keep)
            )
        assert torch.zeros(2, 3).size() == (2, 3)
        ndarray_methods.disable()
        for n in NAMES:
            assert not hasattr(torch.Tensor, n)
        assert not ndarray_methods.is_enabled()
        ndarray_methods.disable()  # a second disable is harmless
    finally:
        if was:
            ndarray_methods.enable()


def test_existing_attribute_is_not_overridden() -> None:
    was = ndarray_methods.is_enabled()
    ndarray_methods.disable()
    sentinel = object()
    torch.Tensor.tostype = sentinel  # type: ignore[attr-defined]
    try:
        added = ndarray_methods.enable()
        assert "tostype" not in added
        assert torch.Tensor.tostype is sentinel  # type: ignore[attr-defined]
        ndarray_methods.disable()
        assert torch.Tensor.tostype is sentinel  # type: ignore[attr-defined]
    finally:
        del torch.Tensor.tostype  # type: ignore[attr-defined]
        if was:
            ndarray_methods.enable()


def test_asnumpy_asscalar(enabled: None) -> None:
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_(True)
    a = t.asnumpy()  # type: ignore[attr-defined]
    assert isinstance(a, np.ndarray) and a.shape == (2, 3)
    a[0, 0] = 100.0
    assert t[0, 0].item() == 0.0  # a copy, not a view
    assert torch.tensor([1.5], dtype=torch.bfloat16).asnumpy().dtype == np.float32  # type: ignore[attr-defined]
    s = torch.tensor([[2.5]]).asscalar()  # type: ignore[attr-defined]
    assert s == 2.5 and isinstance(s, np.float32)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        t.asscalar()  # type: ignore[attr-defined]


def test_context_and_as_in_context(enabled: None) -> None:
    t = torch.ones(2)
    assert t.context == cpu(0) and t.ctx == cpu(0)  # type: ignore[attr-defined]
    assert t.as_in_context(cpu(0)) is t  # type: ignore[attr-defined]
    u = t.as_in_context(cpu(1))  # type: ignore[attr-defined]
    assert u is not t and context_of(u) == cpu(1) and u.context == cpu(1)  # type: ignore[attr-defined]
    assert u.as_in_context("cpu:1") is u  # type: ignore[attr-defined]
    assert torch.equal(u, t)
    t.wait_to_read()  # type: ignore[attr-defined]
    t.wait_to_write()  # type: ignore[attr-defined]


def test_astype_copyto_tostype(enabled: None) -> None:
    t = torch.tensor([1.7, -2.2])
    i = t.astype("int32")  # type: ignore[attr-defined]
    assert i.dtype == torch.int32 and i.tolist() == [1, -2]
    assert t.astype(np.float32, copy=False) is t  # type: ignore[attr-defined]
    c = t.astype("float32")  # type: ignore[attr-defined]
    assert c is not t and torch.equal(c, t)
    with pytest.raises(TypeError, match="unknown dtype"):
        t.astype("floatish")  # type: ignore[attr-defined]
    dst = torch.zeros(2)
    assert t.copyto(dst) is dst and torch.equal(dst, t)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="shape"):
        t.copyto(torch.zeros(3))  # type: ignore[attr-defined]
    other = t.copyto(cpu(2))  # type: ignore[attr-defined]
    assert context_of(other) == cpu(2) and torch.equal(other, t)
    assert t.tostype("default") is t  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="csr"):
        t.tostype("csr")  # type: ignore[attr-defined]


def test_attach_grad(enabled: None) -> None:
    x = torch.tensor([1.0, 2.0])
    x.attach_grad()  # type: ignore[attr-defined]
    assert x.requires_grad and x._mx_grad_req == "write"  # type: ignore[attr-defined]
    assert x.grad is not None and torch.equal(x.grad, torch.zeros(2))
    (x * x).sum().backward()
    assert torch.equal(x.grad, torch.tensor([2.0, 4.0]))
    y = x * 3  # a non-leaf becomes a new leaf
    y.attach_grad("add")  # type: ignore[attr-defined]
    assert y.is_leaf and y.requires_grad and y._mx_grad_req == "add"  # type: ignore[attr-defined]
    z = torch.ones(2, requires_grad=True)
    z.attach_grad("null")  # type: ignore[attr-defined]
    assert not z.requires_grad and z.grad is None
    with pytest.raises(ValueError, match="grad_req"):
        x.attach_grad("sometimes")  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="floating-point"):
        torch.tensor([1, 2]).attach_grad()  # type: ignore[attr-defined]


def test_functions_usable_without_enable() -> None:
    t = torch.tensor([3.0])
    assert ndarray_methods.asscalar(t) == 3.0
    assert ndarray_methods.asnumpy(t).tolist() == [3.0]
    assert context_of(ndarray_methods.as_in_context(t, "cpu:3")) == cpu(3)
