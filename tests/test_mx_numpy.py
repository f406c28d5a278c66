"""mx.np (mxtorch.numpy): NumPy-style functions on torch tensors with MXNet's dtype rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import numpy as mnp


def test_module_is_mx_np() -> None:
    assert mx.np is mnp and mx.numpy is mnp
    assert mnp.ndarray is torch.Tensor and mnp.float32 is np.float32


def test_creation_defaults_to_float32() -> None:
    assert mnp.array([1, 2]).dtype == torch.float32  # Python data: MXNet's default dtype
    assert mnp.array(np.array([1, 2], dtype=np.int64)).dtype == torch.int64  # numpy keeps its dtype
    assert mnp.array(torch.ones(2, dtype=torch.int32)).dtype == torch.int32
    assert mnp.array(3.0).shape == ()  # 0-d, unlike mx.nd.array
    assert mnp.zeros((2, 3)).dtype == torch.float32 and mnp.ones(2, dtype="int32").dtype == torch.int32
    assert mnp.full((2,), 3).dtype == torch.float32 and mnp.full((2,), 3).tolist() == [3.0, 3.0]
    assert mnp.arange(3).tolist() == [0.0, 1.0, 2.0] and mnp.arange(3).dtype == torch.float32
    assert mnp.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert mnp.eye(2, 3, k=1).tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert mnp.zeros_like(torch.ones(2, dtype=torch.int64)).dtype == torch.int64
    with pytest.raises(NotImplementedError, match="order"):
        mnp.zeros(2, order="F")
    with pytest.raises(TypeError, match="numeric"):
        mnp.array(["a"])


def test_reductions_are_0d_with_mxnet_dtypes() -> None:
    x = mnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert mnp.sum(x).shape == () and mnp.sum(x).item() == 21.0
    assert mnp.sum(x, axis=1, keepdims=True).tolist() == [[6.0], [15.0]]
    assert mnp.sum(torch.ones(2, 3, dtype=torch.int32)).dtype == torch.int32  # not torch's int64
    assert mnp.sum(torch.ones(2, dtype=torch.bool)).dtype == torch.int64
    assert mnp.mean(torch.arange(4, dtype=torch.int32)).dtype == torch.float32
    assert mnp.mean(torch.arange(4, dtype=torch.int32)).item() == 1.5
    assert mnp.max(x, axis=0).tolist() == [4.0, 5.0, 6.0] and mnp.min(x).item() == 1.0
    assert mnp.argmax(x, axis=1).dtype == torch.int64 and mnp.argmax(x).item() == 5
    assert mnp.prod(x, axis=(0, 1)).item() == 720.0
    assert mnp.std(mnp.array([1.0, 3.0])).item() == 1.0
    assert mnp.var(mnp.array([1.0, 3.0]), ddof=1).item() == 2.0
    assert mnp.cumsum(x).tolist() == [1.0, 3.0, 6.0, 10.0, 15.0, 21.0]


def test_joining_and_splitting() -> None:
    x = mnp.random.uniform(size=(12, 5, 3))
    assert x.dtype == torch.float32 and x.shape == (12, 5, 3)
    assert bool((x >= 0).all()) and bool((x < 1).all())
    parts = mnp.split(x, 3, axis=0)
    assert [p.shape[0] for p in parts] == [4, 4, 4]
    assert torch.equal(mnp.concatenate(parts, axis=0), x)
    assert np.array_equal(mnp.concatenate(parts, axis=0).asnumpy(), x.asnumpy())  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="array_split"):
        mnp.split(x, 5, axis=1 - 1)
    assert [p.shape[1] for p in mnp.array_split(x, 3, axis=1)] == [2, 2, 1]
    assert [p.shape[0] for p in mnp.split(x, [3, 10])] == [3, 7, 2]
    assert mnp.concatenate([x, x], axis=None).shape == (360,)
    assert mnp.stack([x, x], axis=-1).shape == (12, 5, 3, 2)
    with pytest.raises(TypeError, match="list or tuple"):
        mnp.concatenate(x)


def test_dot_and_elementwise() -> None:
    a = mnp.array([1.0, 2.0, 3.0])
    assert mnp.dot(a, a).shape == () and mnp.dot(a, a).item() == 14.0
    m = mnp.arange(6).reshape(2, 3)
    assert mnp.dot(m, a).tolist() == [8.0, 26.0]
    b = mnp.ones((2, 3, 4))
    assert mnp.dot(b, mnp.ones((5, 4, 2))).shape == (2, 3, 5, 2)  # last axis with second-to-last
    assert mnp.add(2, a).tolist() == [3.0, 4.0, 5.0] and mnp.add(2, a).dtype == torch.float32
    assert mnp.divide(torch.tensor([3], dtype=torch.int32), 2).dtype == torch.float32
    assert mnp.sqrt(torch.tensor([4], dtype=torch.int32)).dtype == torch.float32
    assert mnp.round(mnp.array([0.5, 1.5, 2.5])).tolist() == [0.0, 2.0, 2.0]  # NumPy halves-to-even
    out = mnp.zeros(3)
    assert mnp.multiply(a, a, out=out) is out and out.tolist() == [1.0, 4.0, 9.0]
    assert mnp.where(a > 1, a, 0.0).tolist() == [0.0, 2.0, 3.0]


def test_random_is_seeded_and_numpy_shaped() -> None:
    mx.random.seed(7)
    u1 = mnp.random.uniform(-1, 1, size=(3,))
    mx.random.seed(7)
    assert torch.equal(mnp.random.uniform(-1, 1, size=(3,)), u1)
    assert mnp.random.uniform().shape == ()
    assert mnp.random.normal(size=(2, 2)).dtype == torch.float32
    r = mnp.random.randint(0, 5, size=(100,))
    assert r.dtype == torch.int64 and int(r.min()) >= 0 and int(r.max()) < 5
    with pytest.raises(ValueError, match="high"):
        mnp.random.randint(3, 3)
    c = mnp.random.choice(4, size=(4,), replace=False)
    assert sorted(c.tolist()) == [0, 1, 2, 3]
    x = mnp.arange(5)
    mnp.random.shuffle(x)
    assert sorted(x.tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_linalg_norm() -> None:
    assert mnp.linalg.norm(mnp.ones((3, 4))).item() == pytest.approx(12 ** 0.5)
    assert mnp.linalg.norm(mnp.array([3.0, 4.0])).item() == 5.0
    assert mnp.linalg.norm(mnp.array([[3.0, -4.0]]), ord=1, axis=1).tolist() == [7.0]
