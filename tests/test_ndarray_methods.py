"""The opt-in MXNet methods on torch.Tensor."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from mxtorch import ndarray_methods
from mxtorch.context import context_of, cpu

NAMES = {
    "asnumpy", "stype", "indptr", "asscalar", "as_in_context", "context", "ctx", "wait_to_read",
    "wait_to_write", "astype", "copyto", "attach_grad", "tostype", "copy", "as_nd_ndarray", "as_np_ndarray",
    "slice_assign_scalar", "slice_assign", "to_dlpack_for_read", "to_dlpack_for_write", "asscipy",
    "check_format", "retain", "reshape_like", "zeros_like", "ones_like", "broadcast_axes", "broadcast_like",
    "pad", "split_v2", "slice", "slice_axis", "slice_like", "one_hot", "pick", "argmax_channel",
    "shape_array", "size_array", "expand_dims", "depth_to_space", "space_to_depth", "nanprod", "rint",
    "degrees", "radians", "cbrt", "rcbrt", "softmin", "_basic_indexing_slice_is_contiguous", "_fresh_grad",
}

# The public methods and properties of MXNet 1.9's NDArray, RowSparseNDArray and CSRNDArray
# (the API surface, from its reference documentation).
MXNET_NDARRAY_API = (
    "as_np_ndarray as_nd_ndarray reshape reshape_like zeros_like ones_like broadcast_axes repeat pad "
    "swapaxes split split_v2 slice slice_axis slice_like take one_hot pick sort topk argsort argmax "
    "argmax_channel argmin clip abs sign flatten shape_array size_array expand_dims tile transpose flip "
    "depth_to_space space_to_depth diag sum nansum prod nanprod mean max min norm round rint fix floor "
    "ceil trunc sin cos tan arcsin arccos arctan degrees radians sinh cosh tanh arcsinh arccosh arctanh "
    "exp expm1 log log10 log2 log1p sqrt rsqrt cbrt rcbrt square reciprocal relu sigmoid softmax "
    "log_softmax softmin squeeze broadcast_to broadcast_like wait_to_read ndim shape size context ctx "
    "dtype stype T asnumpy asscalar astype copyto copy slice_assign_scalar slice_assign as_in_context "
    "attach_grad grad detach backward tostype to_dlpack_for_read to_dlpack_for_write "
    "indices indptr data retain asscipy check_format"
).split()


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


def test_every_mxnet_name_is_added_or_resolved() -> None:
    was = ndarray_methods.is_enabled()
    ndarray_methods.disable()
    try:
        torch_has = {n for n in MXNET_NDARRAY_API if hasattr(torch.Tensor, n)}
        added = set(ndarray_methods.enable())
    finally:
        if not was:
            ndarray_methods.disable()
    for name in MXNET_NDARRAY_API:
        if name in torch_has:
            assert name in ndarray_methods.COLLISIONS or name in ndarray_methods.ELEMENTWISE_SAME, name
        else:
            assert name in added, name
    for name in ndarray_methods.COLLISIONS:
        assert hasattr(torch.Tensor, name), f"{name} is not a torch name: it should be added, not listed"


def test_docs_list_every_collision() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "migrating.md").read_text()
    section = page.split("# Migrating from MXNet", 1)[1].split("\n## ", 1)[0]
    for name in ndarray_methods.COLLISIONS:
        assert f"| `x.{name}` |" in section, f"docs/migrating.md's collision table has no row for x.{name}"


def test_torch_meaning_is_kept_for_collisions(enabled: None) -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    assert x.size() == (2, 3, 4) and x.size(1) == 3
    assert x.flatten().shape == (24,)
    assert [t.shape[0] for t in x.split(1)] == [1, 1]
    assert x.reshape(shape=(4, 6)).shape == (4, 6)
    with pytest.raises(RuntimeError):
        x.reshape(0, -1)  # MXNet's code 0 is mx.nd.reshape's, not the method's
    assert x.repeat(2, 1, 1).shape == (4, 3, 4)
    assert torch.tensor([0.5, 1.5, 2.5]).round().tolist() == [0.0, 2.0, 2.0]
    assert x.dtype == torch.float32
    for name in ndarray_methods.COLLISIONS:
        assert name not in ndarray_methods.added_names()


def test_operator_methods_follow_mx_nd(enabled: None) -> None:
    from mxtorch import nd

    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert torch.equal(x.one_hot(3), nd.one_hot(x, 3))  # type: ignore[attr-defined]
    assert x.pick(torch.tensor([2, 0]), axis=1).tolist() == [3.0, 4.0]  # type: ignore[attr-defined]
    assert x.slice_axis(axis=1, begin=1, end=3).tolist() == [[2.0, 3.0], [5.0, 6.0]]  # type: ignore[attr-defined]
    assert x.expand_dims(0).shape == (1, 2, 3)  # type: ignore[attr-defined]
    assert x.reshape_like(torch.zeros(3, 2)).shape == (3, 2)  # type: ignore[attr-defined]
    assert x.zeros_like().tolist() == [[0.0] * 3] * 2  # type: ignore[attr-defined]
    assert x.size_array().tolist() == [6] and x.shape_array().tolist() == [2, 3]  # type: ignore[attr-defined]
    assert torch.tensor([-2.5, 1.5]).rint().tolist() == [-3.0, 1.0]  # type: ignore[attr-defined]
    assert torch.tensor([8.0]).cbrt().tolist() == [2.0]  # type: ignore[attr-defined]
    assert x.split_v2(3, axis=1)[2].tolist() == [[3.0], [6.0]]  # type: ignore[attr-defined]
    # depth_to_space: channel (i*b + j)*C' + c lands at offset (i, j) of channel c (MXNet's DCR order)
    d = torch.arange(8.0).reshape(1, 8, 1, 1)
    assert d.depth_to_space(2)[0, 1].tolist() == [[1.0, 3.0], [5.0, 7.0]]  # type: ignore[attr-defined]
    assert torch.equal(d.depth_to_space(2).space_to_depth(2), d)  # type: ignore[attr-defined]


def test_copy_and_front_end_conversions(enabled: None) -> None:
    x = torch.ones(2, 2, requires_grad=True)
    c = x.copy()  # type: ignore[attr-defined]
    assert c is not x and torch.equal(c, x) and not c.requires_grad
    assert x.as_nd_ndarray() is x and x.as_np_ndarray() is x  # type: ignore[attr-defined]
    u = torch.ones(2, 3).as_in_context(cpu(1))  # type: ignore[attr-defined]
    assert context_of(u.copy()) == cpu(1)  # type: ignore[attr-defined]


def test_slice_assign(enabled: None) -> None:
    x = torch.zeros(3, 4)
    assert x.slice_assign_scalar(2.0, (0, 1), (2, 3)) is x  # type: ignore[attr-defined]
    assert x.sum().item() == 8.0 and x[0, 1] == 2.0 and x[0, 3] == 0.0 and x[2].sum() == 0
    x.slice_assign(torch.ones(1, 2), (2, 0), (3, 4), (1, 2))  # type: ignore[attr-defined]
    assert x[2].tolist() == [1.0, 0.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="one entry per sliced axis"):
        x.slice_assign_scalar(1.0, (0,), (1, 2))  # type: ignore[attr-defined]


def test_dlpack_roundtrip(enabled: None) -> None:
    from mxtorch import nd

    x = torch.arange(4.0)
    y = nd.from_dlpack(x.to_dlpack_for_read())  # type: ignore[attr-defined]
    assert torch.equal(y, x)
    nd.from_dlpack(x.to_dlpack_for_write())[0] = 9.0  # type: ignore[attr-defined]
    assert x[0] == 9.0  # shared memory


def test_sparse_methods(enabled: None) -> None:
    from mxtorch.nd import sparse

    r = torch.tensor([[0.0, 0.0], [1.0, 2.0], [0.0, 3.0]]).tostype("row_sparse")  # type: ignore[attr-defined]
    r.check_format()  # type: ignore[attr-defined]
    assert sparse.indices(r.retain(torch.tensor([2]))).tolist() == [2]  # type: ignore[attr-defined]
    c = torch.tensor([[0.0, 5.0], [6.0, 0.0]]).tostype("csr")  # type: ignore[attr-defined]
    c.check_format()  # type: ignore[attr-defined]
    torch.ones(2).check_format()  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="csr"):
        r.asscipy()  # type: ignore[attr-defined]
    scipy_sparse = pytest.importorskip("scipy.sparse")
    s = c.asscipy()  # type: ignore[attr-defined]
    assert isinstance(s, scipy_sparse.csr_matrix) and s.toarray().tolist() == [[0.0, 5.0], [6.0, 0.0]]


def _run(code: str, value: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("MXTORCH_TENSOR_METHODS", None)
    if value is not None:
        env["MXTORCH_TENSOR_METHODS"] = value
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_opt_out_leaves_torch_untouched() -> None:
    code = (
        "import torch; before = set(vars(torch.Tensor)); import mxtorch; "
        "assert set(vars(torch.Tensor)) == before, sorted(set(vars(torch.Tensor)) - before); "
        "assert not hasattr(torch.ones(1), 'asnumpy'); print('untouched')"
    )
    for value in ("0", "off", "false"):
        res = _run(code, value)
        assert res.returncode == 0 and "untouched" in res.stdout, res.stderr
    res = _run("import torch, mxtorch; print(torch.ones(1).asnumpy().tolist())", None)
    assert res.returncode == 0 and "[1.0]" in res.stdout, res.stderr


def test_malformed_switch_is_a_clear_error() -> None:
    res = _run("import mxtorch", "maybe")
    assert res.returncode != 0
    assert "MXTORCH_TENSOR_METHODS='maybe'" in res.stderr and "set it to 1" in res.stderr


def test_asnumpy_of_a_0d_tensor_has_one_dimension_outside_numpy_mode():
    import mxtorch as mx
    from mxtorch.util import np_array

    x = mx.nd.ones((2, 2)) * 3
    assert x[0][0].asnumpy().shape == (1,) and x[0][0].asnumpy()[0] == 3.0  # legacy MXNet: no 0-d arrays
    assert x[0][0].asscalar() == 3.0
    with np_array():  # mx.np code sees numpy's 0-d result
        assert x[0][0].asnumpy().shape == ()


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_the_backward_rule_follows_the_same_switch() -> None:
    code = (
        "import torch; torch_backward = torch.Tensor.backward; import mxtorch as mx\n"
        "x = torch.ones(3, requires_grad=True)\n"
        "try:\n"
        "    (x * 2).backward()\n"
        "    print('mxnet rule', x.grad.tolist())\n"
        "except RuntimeError:\n"
        "    print('torch rule', torch.Tensor.backward is torch_backward)\n"
        "mx.autograd.backward(x * 3)  # the function applies the rule either way\n"
        "print(x.grad.tolist())\n"
    )
    res = _run(code, "0")
    assert res.returncode == 0 and res.stdout.split("\n")[:2] == ["torch rule True", "[3.0, 3.0, 3.0]"], res
    res = _run(code + "mx.ndarray_methods.disable(); print(torch.Tensor.backward is torch_backward)\n", None)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:3] == ["mxnet rule [2.0, 2.0, 2.0]", "[5.0, 5.0, 5.0]", "True"], res.stdout
