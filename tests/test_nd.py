"""mxtorch.nd against numpy references and MXNet's documented semantics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mxtorch.nd as nd
import mxtorch.random as mxrandom
from mxtorch.base import MXNetError
from mxtorch.context import context_of, cpu

RNG = np.random.default_rng(0)


def rnd(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def close(t: torch.Tensor, ref: np.ndarray, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    assert isinstance(t, torch.Tensor)
    got = t.detach().cpu().numpy()
    assert got.shape == np.shape(ref), (got.shape, np.shape(ref))
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------
# creation
# ---------------------------------------------------------------------------------------------


def test_array_of_a_scalar_is_zero_dim_as_in_mxnet() -> None:
    # MXNet 1.9: mx.nd.array(np.ones([])).shape == () and its asnumpy() is 0-d too, while a
    # reduction's torch 0-d result stands for MXNet's shape (1,)
    for scalar in (np.ones([]), 3, 2.5, np.float32(1.5)):
        a = nd.array(scalar)
        assert a.shape == () and a.dtype == torch.float32
        assert a.asnumpy().shape == () and a.asnumpy() == np.float32(scalar)
        assert a.asscalar() == np.float32(scalar)
    assert nd.array([1.0, 2.0]).sum().asnumpy().shape == (1,)
    assert (nd.array(2.0) * 3).asnumpy().shape == (1,)


def test_array_dtypes_and_ctx() -> None:
    a = nd.array(np.arange(6, dtype=np.float64).reshape(2, 3))
    assert a.dtype == torch.float32 and a.shape == (2, 3)
    assert nd.array([1, 2, 3]).dtype == torch.float32
    assert nd.array(np.arange(3), dtype="int64").dtype == torch.int64
    t = torch.arange(4, dtype=torch.int32)
    b = nd.array(t)
    assert b.dtype == torch.int32 and b.data_ptr() != t.data_ptr()
    assert nd.array(t, dtype=np.float16).dtype == torch.float16
    c = nd.array([1.0], ctx=cpu(1))
    assert context_of(c) == cpu(1)
    assert context_of(nd.zeros(2, ctx="cpu")) == cpu(0)
    assert isinstance(a, nd.NDArray)


def test_array_errors() -> None:
    with pytest.raises(TypeError, match="unknown dtype"):
        nd.zeros((2,), dtype="float33")
    with pytest.raises(TypeError):
        nd.array([[1, 2], [3]])
    with pytest.raises(ValueError, match="csr matrix is 2-D"):
        nd.zeros((2,), stype="csr")  # MXNet's stype is taken; a csr array still needs two dimensions
    with pytest.raises(ValueError, match="storage type"):
        nd.zeros((2,), stype="coo")
    with pytest.raises(ValueError, match="context"):
        nd.zeros((2,), ctx="tpu")


def test_simple_creation() -> None:
    close(nd.zeros(3), np.zeros(3))
    close(nd.ones((2, 3)), np.ones((2, 3)))
    close(nd.full((2, 2), 7), np.full((2, 2), 7.0))
    assert nd.empty((4, 1)).shape == (4, 1)
    assert nd.ones((2,), dtype="int8").dtype == torch.int8
    x = torch.zeros(2, 2, dtype=torch.float64)
    for like in (nd.zeros_like(x), nd.ones_like(x), nd.full_like(x, 3)):
        assert like.dtype == torch.float64 and like.shape == (2, 2)
    close(nd.full_like(x, 3), np.full((2, 2), 3.0))
    close(nd.eye(3), np.eye(3))
    close(nd.eye(3, 4, 1), np.eye(3, 4, 1))
    close(nd.eye(4, 3, -2), np.eye(4, 3, -2))
    close(nd.linspace(0, 1, 5), np.linspace(0, 1, 5).astype(np.float32))
    close(nd.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False).astype(np.float32))


def test_arange() -> None:
    close(nd.arange(5), np.arange(5, dtype=np.float32))
    close(nd.arange(2, 8, 2), np.arange(2, 8, 2, dtype=np.float32))
    close(nd.arange(0, 1, 0.3), np.arange(0, 1, 0.3).astype(np.float32))
    close(nd.arange(3, 0, -1), np.arange(3, 0, -1, dtype=np.float32))
    close(nd.arange(3, repeat=2), np.repeat(np.arange(3, dtype=np.float32), 2))
    assert nd.arange(4, dtype="int32").dtype == torch.int32
    with pytest.raises(ValueError, match="step"):
        nd.arange(0, 3, 0)


# ---------------------------------------------------------------------------------------------
# math and broadcasting
# ---------------------------------------------------------------------------------------------


def test_unary_math() -> None:
    x = rnd(3, 4)
    p = np.abs(x) + 0.1
    t, tp = torch.from_numpy(x), torch.from_numpy(p)
    cases = {
        "relu": (t, np.maximum(x, 0)),
        "sigmoid": (t, 1 / (1 + np.exp(-x))),
        "tanh": (t, np.tanh(x)),
        "softsign": (t, x / (1 + np.abs(x))),
        "exp": (t, np.exp(x)),
        "log": (tp, np.log(p)),
        "log1p": (tp, np.log1p(p)),
        "expm1": (t, np.expm1(x)),
        "sqrt": (tp, np.sqrt(p)),
        "rsqrt": (tp, 1 / np.sqrt(p)),
        "square": (t, x * x),
        "abs": (t, np.abs(x)),
        "sign": (t, np.sign(x)),
        "floor": (t, np.floor(x)),
        "ceil": (t, np.ceil(x)),
        "fix": (t, np.trunc(x)),
        "sin": (t, np.sin(x)),
        "cos": (t, np.cos(x)),
        "negative": (t, -x),
        "reciprocal": (tp, 1 / p),
        "cbrt": (t, np.cbrt(x)),
        "log2": (tp, np.log2(p)),
        "log10": (tp, np.log10(p)),
    }
    for name, (inp, ref) in cases.items():
        close(getattr(nd, name)(inp), ref.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_round_family() -> None:
    x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6])
    close(nd.round(x), np.array([-3, -2, -1, 1, 2, 3, 2, -3], dtype=np.float32))
    # MXNet rint: n.5 goes down
    close(
        nd.rint(torch.tensor([-2.1, -1.9, 1.5, 1.9, 2.1, -2.5])), np.array([-2, -2, 1, 2, 2, -3], np.float32)
    )
    close(nd.fix(x), np.trunc(x.numpy()))


def test_gamma_function() -> None:
    x = torch.tensor([0.5, 1.0, 4.0, -0.5, -1.5], dtype=torch.float64)
    import math

    close(nd.gamma(x), np.array([math.gamma(v) for v in x.tolist()]), rtol=1e-6)
    close(nd.gammaln(x[:3]), np.array([math.lgamma(v) for v in x[:3].tolist()]), rtol=1e-6)


def test_broadcast_binary() -> None:
    a, b = rnd(2, 1, 3), rnd(4, 1)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    close(nd.broadcast_add(ta, tb), a + b)
    close(nd.broadcast_sub(ta, tb), a - b)
    close(nd.broadcast_mul(ta, tb), a * b)
    close(nd.broadcast_div(ta, tb), a / b, rtol=1e-4)
    close(nd.broadcast_maximum(ta, tb), np.maximum(a, b))
    close(nd.broadcast_minimum(ta, tb), np.minimum(a, b))
    close(nd.broadcast_power(torch.abs(ta), tb), np.abs(a) ** b, rtol=1e-4)
    close(nd.broadcast_mod(ta, tb), np.mod(a, b), atol=1e-5)
    close(nd.add(ta, 2.0), a + 2)
    close(nd.subtract(1.0, ta), 1 - a)
    close(nd.multiply(ta, tb), a * b)
    close(nd.divide(ta, 2), a / 2)
    close(nd.maximum(ta, 0.0), np.maximum(a, 0))
    close(nd.minimum(0.5, ta), np.minimum(a, 0.5))
    close(nd.power(ta, 2), a**2)
    assert nd.add(2, 3) == 5.0


def test_integer_division_keeps_dtype() -> None:
    a = torch.tensor([7, -7, 9], dtype=torch.int32)
    out = nd.broadcast_div(a, torch.tensor([2, 2, 3], dtype=torch.int32))
    assert out.dtype == torch.int32 and out.tolist() == [3, -3, 3]


def test_comparisons_return_input_dtype() -> None:
    a = torch.tensor([[1.0, 2.0, 3.0]])
    b = torch.tensor([[2.0], [2.0]])
    an, bn = a.numpy(), b.numpy()
    for fn, ref in [
        (nd.broadcast_equal, an == bn),
        (nd.broadcast_not_equal, an != bn),
        (nd.broadcast_greater, an > bn),
        (nd.broadcast_greater_equal, an >= bn),
        (nd.broadcast_lesser, an < bn),
        (nd.broadcast_lesser_equal, an <= bn),
        (nd.equal, an == bn),
        (nd.not_equal, an != bn),
        (nd.greater, an > bn),
        (nd.lesser, an < bn),
    ]:
        out = fn(a, b)
        assert out.dtype == torch.float32
        close(out, ref.astype(np.float32))
    x = torch.tensor([0.0, 1.0, 2.0, 0.0])
    y = torch.tensor([0.0, 0.0, 3.0, 5.0])
    close(nd.broadcast_logical_and(x, y), np.array([0, 0, 1, 0], np.float32))
    close(nd.broadcast_logical_or(x, y), np.array([0, 1, 1, 1], np.float32))
    close(nd.broadcast_logical_xor(x, y), np.array([0, 1, 0, 1], np.float32))
    ints = torch.tensor([1, 5], dtype=torch.int32)
    assert nd.greater(ints, 2).dtype == torch.int32
    assert nd.broadcast_greater(ints, 2).tolist() == [0, 1]


def test_clip_where() -> None:
    x = rnd(3, 4)
    close(nd.clip(torch.from_numpy(x), -0.5, 0.5), np.clip(x, -0.5, 0.5))
    with pytest.raises(ValueError, match="a_min"):
        nd.clip(torch.from_numpy(x), 1, 0)
    c = (x > 0).astype(np.float32)
    y = rnd(3, 4)
    close(nd.where(torch.from_numpy(c), torch.from_numpy(x), torch.from_numpy(y)), np.where(c, x, y))
    c1 = np.array([1, 0, 1], np.float32)
    close(
        nd.where(torch.from_numpy(c1), torch.from_numpy(x[:, :]), torch.from_numpy(y)),
        np.where(c1[:, None] != 0, x, y),
    )


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------


def test_reductions() -> None:
    x = rnd(2, 3, 4)
    t = torch.from_numpy(x)
    for name, ref in [
        ("sum", np.sum),
        ("mean", np.mean),
        ("max", np.max),
        ("min", np.min),
        ("prod", np.prod),
    ]:
        fn = getattr(nd, name)
        close(fn(t), np.array([ref(x)]), rtol=1e-4)  # full reduction: shape (1,)
        close(fn(t, axis=1), ref(x, axis=1), rtol=1e-4)
        close(fn(t, axis=(0, 2), keepdims=True), ref(x, axis=(0, 2), keepdims=True), rtol=1e-4)
        close(fn(t, axis=1, exclude=True), ref(x, axis=(0, 2)), rtol=1e-4)
        close(fn(t, axis=-1), ref(x, axis=-1), rtol=1e-4)
    xn = x.copy()
    xn[0, 0, 0] = np.nan
    close(nd.nansum(torch.from_numpy(xn), axis=2), np.nansum(xn, axis=2), rtol=1e-5)
    close(nd.nanprod(torch.from_numpy(xn), axis=2), np.nanprod(xn, axis=2), rtol=1e-5)
    assert nd.mean(torch.tensor([1, 2], dtype=torch.int32)).dtype == torch.int32
    with pytest.raises(ValueError, match="out of range"):
        nd.sum(t, axis=3)


def test_arg_reductions_are_float32() -> None:
    x = rnd(3, 5)
    t = torch.from_numpy(x)
    out = nd.argmax(t, axis=1)
    assert out.dtype == torch.float32
    close(out, np.argmax(x, axis=1).astype(np.float32))
    close(nd.argmin(t, axis=0), np.argmin(x, axis=0).astype(np.float32))
    close(nd.argmax(t, axis=1, keepdims=True), np.argmax(x, axis=1)[:, None].astype(np.float32))
    close(nd.argmax(t), np.array([np.argmax(x)], np.float32))
    close(nd.argmax_channel(t), np.argmax(x, axis=-1).astype(np.float32))


def test_norm_and_moments() -> None:
    x = rnd(3, 4)
    t = torch.from_numpy(x)
    close(nd.norm(t), np.array([np.linalg.norm(x)]), rtol=1e-5)
    close(nd.norm(t, ord=1, axis=1), np.abs(x).sum(axis=1), rtol=1e-5)
    close(nd.norm(t, axis=0, keepdims=True), np.linalg.norm(x, axis=0, keepdims=True), rtol=1e-5)
    with pytest.raises(ValueError, match="ord"):
        nd.norm(t, ord=3)
    mean, var = nd.moments(t, axes=(1,))
    close(mean, x.mean(axis=1), rtol=1e-5)
    close(var, x.var(axis=1), rtol=1e-4)


def test_topk_sort() -> None:
    x = np.array([[0.3, 0.2, 0.4], [0.1, 0.3, 0.2]], np.float32)
    t = torch.from_numpy(x)
    idx = nd.topk(t, k=2)
    assert idx.dtype == torch.float32
    close(idx, np.array([[2, 0], [1, 2]], np.float32))
    close(nd.topk(t, axis=0, k=1), np.array([[0, 1, 0]], np.float32))
    close(nd.topk(t, k=2, ret_typ="value", is_ascend=True), np.array([[0.2, 0.3], [0.1, 0.2]], np.float32))
    v, i = nd.topk(t, k=1, ret_typ="both")
    close(v, np.array([[0.4], [0.3]], np.float32))
    close(i, np.array([[2], [1]], np.float32))
    close(nd.topk(t, k=2, ret_typ="mask"), np.array([[1, 0, 1], [0, 1, 1]], np.float32))
    assert nd.topk(t, k=1, dtype="int32").dtype == torch.int32
    close(nd.topk(t, axis=None, k=1), np.array([2], np.float32))
    with pytest.raises(ValueError, match="ret_typ"):
        nd.topk(t, ret_typ="nope")
    close(nd.sort(t), np.sort(x, axis=-1))
    close(nd.sort(t, axis=0, is_ascend=False), -np.sort(-x, axis=0))
    close(nd.argsort(t), np.argsort(x, axis=-1).astype(np.float32))
    close(nd.argsort(t, is_ascend=False), np.argsort(-x, axis=-1).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# reshape codes
# ---------------------------------------------------------------------------------------------

RESHAPE_CASES = [
    # (input shape, target, expected) worked out by hand from MXNet's rules
    ((2, 3, 4), (4, 0, 2), (4, 3, 2)),  # positive consumes an input dim, 0 copies the next
    ((2, 3, 4), (2, 0, 0), (2, 3, 4)),  # 0 copies
    ((2, 3, 4), (6, 1, -1), (6, 1, 4)),  # -1 infers
    ((2, 3, 4), (3, -1, 8), (3, 1, 8)),
    ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (-2,), (2, 3, 4)),  # -2 copies all the rest
    ((2, 3, 4), (2, -2), (2, 3, 4)),
    ((2, 3, 4), (-2, 1, 1), (2, 3, 4, 1, 1)),
    ((2, 3, 4), (-3, 4), (6, 4)),  # -3 merges two
    ((2, 3, 4, 5), (-3, -3), (6, 20)),
    ((2, 3, 4), (0, -3), (2, 12)),
    ((2, 3, 4), (-3, -2), (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), (1, 2, 3, 4)),  # -4 splits one into two
    ((2, 3, 4), (2, -4, -1, 3, -2), (2, 1, 3, 4)),
    ((2, 3, 4), (-4, 2, -1, -2), (2, 1, 3, 4)),
]


@pytest.mark.parametrize(("src", "target", "expected"), RESHAPE_CASES)
def test_reshape_codes(src: tuple[int, ...], target: tuple[int, ...], expected: tuple[int, ...]) -> None:
    x = np.arange(int(np.prod(src)), dtype=np.float32).reshape(src)
    out = nd.reshape(torch.from_numpy(x), target)
    close(out, x.reshape(expected))


def test_reshape_reverse() -> None:
    x = np.arange(10 * 5 * 4, dtype=np.float32).reshape(10, 5, 4)
    # left-to-right -1 would absorb 10*5; from the right, 0 copies the 4... then -1 is 50
    close(nd.reshape(torch.from_numpy(x), (-1, 0), reverse=True), x.reshape(50, 4))
    close(nd.reshape(torch.from_numpy(x), (-1, 0)), x.reshape(40, 5))
    y = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    close(nd.reshape(torch.from_numpy(y), (-2, -4, 2, 2), reverse=True), y.reshape(2, 3, 2, 2))


def test_reshape_errors() -> None:
    t = torch.zeros(2, 3, 4)
    with pytest.raises(MXNetError, match="size"):
        nd.reshape(t, (5, -1))
    with pytest.raises(MXNetError, match="only one -1"):
        nd.reshape(t, (-1, -1))
    with pytest.raises(MXNetError, match="-4"):
        nd.reshape(t, (-4, 3, -1, -2))
    with pytest.raises(MXNetError, match="beyond"):
        nd.reshape(t, (0, 0, 0, 0))
    with pytest.raises(MXNetError):
        nd.reshape(t, (7, 7))
    with pytest.raises(MXNetError, match="invalid value"):
        nd.reshape(t, (-5, 24))


def test_shape_ops() -> None:
    x = rnd(2, 3, 4)
    t = torch.from_numpy(x)
    close(nd.transpose(t), x.T)
    close(nd.transpose(t, axes=(1, 0, 2)), x.transpose(1, 0, 2))
    close(nd.swapaxes(t, 0, 2), np.swapaxes(x, 0, 2))
    close(nd.expand_dims(t, 1), x[:, None])
    close(nd.expand_dims(t, -1), x[..., None])
    close(nd.squeeze(torch.zeros(1, 3, 1)), np.zeros(3))
    close(nd.squeeze(torch.zeros(1, 3, 1), axis=2), np.zeros((1, 3)))
    assert nd.squeeze(torch.zeros(1, 1)).shape == (1,)
    with pytest.raises(ValueError, match="not 1"):
        nd.squeeze(t, axis=0)
    close(nd.flatten(t), x.reshape(2, 12))
    close(nd.Flatten(torch.zeros(5)), np.zeros((5, 1)))
    close(nd.reshape_like(t, torch.zeros(4, 6)), x.reshape(4, 6))
    close(nd.tile(t, (2, 1, 1)), np.tile(x, (2, 1, 1)))
    close(nd.tile(t, (2,)), np.tile(x, 2))
    close(nd.repeat(t, 2, axis=1), np.repeat(x, 2, axis=1))
    close(nd.repeat(t, 2), np.repeat(x, 2))
    close(nd.flip(t, 1), x[:, ::-1])
    close(nd.reverse(t, axis=(0, 2)), x[::-1, :, ::-1])


def test_concat_stack_split() -> None:
    a, b = rnd(2, 3), rnd(2, 5)
    close(nd.concat(torch.from_numpy(a), torch.from_numpy(b)), np.concatenate([a, b], axis=1))
    close(nd.concat(torch.from_numpy(a), torch.from_numpy(a), dim=0), np.concatenate([a, a], axis=0))
    close(nd.stack(torch.from_numpy(a), torch.from_numpy(a), axis=1), np.stack([a, a], axis=1))
    with pytest.raises(ValueError, match="do not fit"):
        nd.concat(torch.from_numpy(a), torch.from_numpy(b), dim=0)
    x = rnd(2, 6, 3)
    parts = nd.split(torch.from_numpy(x), num_outputs=3)
    assert isinstance(parts, list) and len(parts) == 3
    for p, r in zip(parts, np.split(x, 3, axis=1)):
        close(p, r)
    single = nd.split(torch.from_numpy(x), num_outputs=1, axis=0)
    assert isinstance(single, torch.Tensor)
    sq = nd.split(torch.from_numpy(x), num_outputs=2, axis=0, squeeze_axis=True)
    close(sq[1], x[1])
    with pytest.raises(ValueError, match="equal parts"):
        nd.split(torch.from_numpy(x), num_outputs=4)
    v2 = nd.split_v2(torch.from_numpy(x), [1, 4], axis=1)
    for p, r in zip(v2, np.split(x, [1, 4], axis=1)):
        close(p, r)


def test_broadcast_to_like_axis() -> None:
    x = rnd(1, 3, 1)
    t = torch.from_numpy(x)
    close(nd.broadcast_to(t, (2, 3, 4)), np.broadcast_to(x, (2, 3, 4)))
    close(nd.broadcast_to(t, (2, 0, 4)), np.broadcast_to(x, (2, 3, 4)))
    close(nd.broadcast_like(t, torch.zeros(5, 3, 2)), np.broadcast_to(x, (5, 3, 2)))
    close(
        nd.broadcast_like(t, torch.zeros(7, 9), lhs_axes=(0,), rhs_axes=(1,)), np.broadcast_to(x, (9, 3, 1))
    )
    close(nd.broadcast_axis(t, axis=(0, 2), size=(2, 3)), np.broadcast_to(x, (2, 3, 3)))
    with pytest.raises(ValueError, match="cannot broadcast"):
        nd.broadcast_to(t, (2, 4, 4))


def test_pad() -> None:
    x = rnd(1, 2, 3, 4)
    t = torch.from_numpy(x)
    pw = (0, 0, 0, 0, 1, 2, 2, 1)
    npw = [(0, 0), (0, 0), (1, 2), (2, 1)]
    close(nd.pad(t, mode="constant", pad_width=pw, constant_value=3), np.pad(x, npw, constant_values=3))
    close(nd.pad(t, mode="edge", pad_width=pw), np.pad(x, npw, mode="edge"))
    close(nd.pad(t, mode="reflect", pad_width=pw), np.pad(x, npw, mode="reflect"))
    with pytest.raises(ValueError, match="2 entries per axis"):
        nd.pad(t, pad_width=(1, 1))
    with pytest.raises(ValueError, match="first two axes"):
        nd.pad(t, mode="edge", pad_width=(1, 1, 0, 0, 0, 0, 0, 0))


def test_slicing() -> None:
    x = rnd(4, 5, 6)
    t = torch.from_numpy(x)
    close(nd.slice(t, begin=(1, None), end=(3, 4)), x[1:3, :4])
    close(nd.slice(t, begin=(None, 4, 0), end=(None, 0, 6), step=(1, -2, 3)), x[:, 4:0:-2, 0:6:3])
    close(nd.slice(t, begin=(-1,), end=(None,), step=(-1,)), x[-1::-1])
    close(nd.crop(t, begin=(0, 0), end=(2, 2)), x[:2, :2])
    close(nd.slice_axis(t, axis=1, begin=1, end=3), x[:, 1:3])
    close(nd.slice_axis(t, axis=-1, begin=-2, end=None), x[..., -2:])
    with pytest.raises(ValueError, match="not a valid range"):
        nd.slice_axis(t, axis=0, begin=3, end=1)
    close(nd.slice_like(t, torch.zeros(2, 3, 4)), x[:2, :3, :4])
    close(nd.slice_like(t, torch.zeros(2, 3), axes=(1,)), x[:, :3])


def test_take_pick() -> None:
    x = rnd(4, 3)
    t = torch.from_numpy(x)
    idx = np.array([[0, 3], [5, -1]], np.float32)
    close(nd.take(t, torch.from_numpy(idx)), np.take(x, np.clip(idx, 0, 3).astype(int), axis=0))
    close(nd.take(t, torch.from_numpy(idx), mode="wrap"), np.take(x, idx.astype(int), axis=0, mode="wrap"))
    close(nd.take(t, torch.tensor([2.0, 0.0]), axis=1), x[:, [2, 0]])
    with pytest.raises(IndexError, match="out of range"):
        nd.take(t, torch.tensor([7]), mode="raise")
    pidx = np.array([0, 2, 1, 1], np.float32)
    close(nd.pick(t, torch.from_numpy(pidx)), x[np.arange(4), pidx.astype(int)])
    close(nd.pick(t, torch.from_numpy(pidx), keepdims=True), x[np.arange(4), pidx.astype(int)][:, None])
    close(nd.pick(t, torch.tensor([3.0, 0.0, 1.0]), axis=0), x[[3, 0, 1], np.arange(3)])
    close(nd.pick(t, torch.tensor([5.0, 0.0, 0.0, 0.0])), np.array([x[0, 2], x[1, 0], x[2, 0], x[3, 0]]))


def test_gather_scatter_onehot() -> None:
    data = rnd(3, 4, 2)
    ind = np.array([[0, 2, 1], [3, 0, 1]])
    out = nd.gather_nd(torch.from_numpy(data), torch.from_numpy(ind))
    close(out, data[ind[0], ind[1]])
    vals = torch.tensor([1.0, 2.0, 3.0])
    sc = nd.scatter_nd(vals, torch.tensor([[0, 1, 2], [1, 0, 3]]), (3, 4))
    ref = np.zeros((3, 4), np.float32)
    ref[[0, 1, 2], [1, 0, 3]] = [1, 2, 3]
    close(sc, ref)
    oh = nd.one_hot(torch.tensor([1.0, 0.0, 3.0, -1.0]), 3, on_value=5, off_value=-1)
    close(oh, np.array([[-1, 5, -1], [5, -1, -1], [-1, -1, -1], [-1, -1, -1]], np.float32))
    assert nd.one_hot(torch.tensor([0]), 2, dtype="int32").dtype == torch.int32


# ---------------------------------------------------------------------------------------------
# linear algebra
# ---------------------------------------------------------------------------------------------


def test_dot() -> None:
    a, b = rnd(3, 4), rnd(4, 5)
    close(nd.dot(torch.from_numpy(a), torch.from_numpy(b)), np.dot(a, b), rtol=1e-4)
    close(nd.dot(torch.from_numpy(a.T.copy()), torch.from_numpy(b), transpose_a=True), a @ b, rtol=1e-4)
    close(nd.dot(torch.from_numpy(a), torch.from_numpy(b.T.copy()), transpose_b=True), a @ b, rtol=1e-4)
    v = rnd(4)
    close(nd.dot(torch.from_numpy(v), torch.from_numpy(v)), np.array([v @ v]), rtol=1e-4)
    x, y = rnd(2, 3, 4), rnd(4, 5, 6)
    close(nd.dot(torch.from_numpy(x), torch.from_numpy(y)), np.tensordot(x, y, axes=([2], [0])), rtol=1e-4)
    x2, y2 = rnd(4, 2, 3), rnd(5, 6, 4)
    close(
        nd.dot(torch.from_numpy(x2), torch.from_numpy(y2), transpose_a=True, transpose_b=True),
        np.tensordot(x2, y2, axes=([0], [2])),
        rtol=1e-4,
    )
    with pytest.raises(ValueError, match="cannot contract"):
        nd.dot(torch.from_numpy(a), torch.from_numpy(a))


def test_batch_dot() -> None:
    a, b = rnd(2, 3, 4), rnd(2, 4, 5)
    close(nd.batch_dot(torch.from_numpy(a), torch.from_numpy(b)), np.matmul(a, b), rtol=1e-4)
    close(
        nd.batch_dot(
            torch.from_numpy(a.transpose(0, 2, 1).copy()),
            torch.from_numpy(b.transpose(0, 2, 1).copy()),
            transpose_a=True,
            transpose_b=True,
        ),
        np.matmul(a, b),
        rtol=1e-4,
    )
    with pytest.raises(ValueError, match="do not fit"):
        nd.batch_dot(torch.from_numpy(a), torch.from_numpy(a))


# ---------------------------------------------------------------------------------------------
# NN operators
# ---------------------------------------------------------------------------------------------


def np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_family() -> None:
    x = rnd(2, 5)
    t = torch.from_numpy(x)
    close(nd.softmax(t), np_softmax(x))
    close(nd.softmax(t, axis=0), np_softmax(x, 0))
    close(nd.softmax(t, temperature=2.0), np_softmax(x / 2))
    close(nd.log_softmax(t), np.log(np_softmax(x)), atol=1e-5)
    close(nd.softmin(t), np_softmax(-x))
    length = torch.tensor([2.0, 4.0])
    out = nd.softmax(t, length=length, use_length=True)
    ref = np.zeros_like(x)
    ref[0, :2] = np_softmax(x[0, :2])
    ref[1, :4] = np_softmax(x[1, :4])
    close(out, ref)
    close(nd.SoftmaxActivation(torch.from_numpy(rnd(2, 3, 2)), mode="channel").sum(1), np.ones((2, 2)))
    y = rnd(2, 3, 2)
    close(nd.SoftmaxActivation(torch.from_numpy(y)), np_softmax(y.reshape(2, 6)).reshape(2, 3, 2))


def test_l2_normalization() -> None:
    x = np.array([[[1, 2], [3, 4]], [[2, 2], [5, 6]]], np.float32)
    t = torch.from_numpy(x)
    close(nd.L2Normalization(t, mode="instance"), x / np.sqrt((x**2).sum(axis=(1, 2), keepdims=True)))
    close(nd.L2Normalization(t, mode="channel"), x / np.sqrt((x**2).sum(axis=1, keepdims=True)))
    close(nd.L2Normalization(t, mode="spatial"), x / np.sqrt((x**2).sum(axis=2, keepdims=True)))
    # values from MXNet's docs
    close(nd.L2Normalization(t, mode="channel")[0, :, 0], np.array([0.31622776, 0.94868326], np.float32))


def test_activation_leaky() -> None:
    x = rnd(2, 3, 4)
    t = torch.from_numpy(x)
    close(nd.Activation(t, act_type="relu"), np.maximum(x, 0))
    close(nd.Activation(t, act_type="softrelu"), np.log1p(np.exp(x)), rtol=1e-5)
    close(nd.Activation(t, act_type="softsign"), x / (1 + np.abs(x)))
    with pytest.raises(ValueError, match="act_type"):
        nd.Activation(t, act_type="swishy")
    close(nd.LeakyReLU(t, slope=0.1), np.where(x > 0, x, 0.1 * x))
    g = np.array([0.1, 0.2, 0.3], np.float32)
    close(
        nd.LeakyReLU(t, gamma=torch.from_numpy(g), act_type="prelu"), np.where(x > 0, x, g[None, :, None] * x)
    )
    close(nd.LeakyReLU(t, act_type="elu", slope=0.5), np.where(x > 0, x, 0.5 * np.expm1(x)), rtol=1e-5)
    close(nd.LeakyReLU(t, act_type="rrelu", training=False), np.where(x > 0, x, (0.125 + 0.334) / 2 * x))
    close(nd.gelu(t), F.gelu(t).numpy())


def test_fully_connected() -> None:
    x, w, b = rnd(2, 3, 4), rnd(5, 12), rnd(5)
    out = nd.FullyConnected(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), num_hidden=5)
    close(out, x.reshape(2, 12) @ w.T + b, rtol=1e-4)
    w2 = rnd(5, 4)
    out2 = nd.FullyConnected(torch.from_numpy(x), torch.from_numpy(w2), torch.from_numpy(b), flatten=False)
    close(out2, x @ w2.T + b, rtol=1e-4)
    close(
        nd.FullyConnected(torch.from_numpy(x), torch.from_numpy(w), None, no_bias=True),
        x.reshape(2, 12) @ w.T,
        rtol=1e-4,
    )
    with pytest.raises(ValueError, match="num_hidden"):
        nd.FullyConnected(torch.from_numpy(x), torch.from_numpy(w), num_hidden=6)
    with pytest.raises(ValueError, match="features"):
        nd.FullyConnected(torch.from_numpy(x), torch.from_numpy(w2))


def test_convolution_shapes_and_values() -> None:
    x = torch.from_numpy(rnd(2, 4, 7, 7))
    w = torch.from_numpy(rnd(6, 2, 3, 3))
    b = torch.from_numpy(rnd(6))
    out = nd.Convolution(x, w, b, kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=6, num_group=2)
    close(out, F.conv2d(x, w, b, stride=2, padding=1, groups=2).numpy(), rtol=1e-4, atol=1e-5)
    x1 = torch.from_numpy(rnd(1, 2, 9))
    w1 = torch.from_numpy(rnd(3, 2, 3))
    assert nd.Convolution(x1, w1, None, kernel=(3,), dilate=(2,), num_filter=3, no_bias=True).shape == (
        1,
        3,
        5,
    )
    x3 = torch.from_numpy(rnd(1, 2, 4, 4, 4))
    w3 = torch.from_numpy(rnd(3, 2, 2, 2, 2))
    assert nd.Convolution(x3, w3, None, kernel=(2, 2, 2), num_filter=3, no_bias=True).shape == (1, 3, 3, 3, 3)
    # channel-last layout agrees with channel-first
    xl = x.permute(0, 2, 3, 1)
    wl = w.permute(0, 2, 3, 1)
    outl = nd.Convolution(
        xl, wl, b, kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=6, num_group=2, layout="NHWC"
    )
    close(outl.permute(0, 3, 1, 2), out.numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="kernel"):
        nd.Convolution(x, w, b, kernel=(5, 5), num_group=2)
    with pytest.raises(ValueError, match="channels"):
        nd.Convolution(x, w, b)


def test_deconvolution() -> None:
    x = torch.from_numpy(rnd(1, 4, 5, 5))
    w = torch.from_numpy(rnd(4, 3, 3, 3))
    out = nd.Deconvolution(x, w, kernel=(3, 3), stride=(2, 2), pad=(1, 1), adj=(1, 1), num_filter=3)
    close(out, F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1).numpy(), rtol=1e-4, atol=1e-5)
    assert out.shape == (1, 3, 10, 10)
    for tgt in [(10, 10), (11, 11), (9, 9)]:
        o = nd.Deconvolution(x, w, kernel=(3, 3), stride=(2, 2), target_shape=tgt, num_filter=3)
        assert o.shape[2:] == tgt


def test_pooling() -> None:
    xn = rnd(2, 3, 7, 7)
    x = torch.from_numpy(xn)
    close(nd.Pooling(x, kernel=(2, 2), stride=(2, 2)), F.max_pool2d(x, 2, 2).numpy())
    assert nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pooling_convention="full").shape == (2, 3, 4, 4)
    close(
        nd.Pooling(x, kernel=(3, 3), pool_type="avg", pad=(1, 1)),
        F.avg_pool2d(x, 3, 1, 1, count_include_pad=True).numpy(),
        atol=1e-6,
    )
    close(
        nd.Pooling(x, kernel=(3, 3), pool_type="avg", pad=(1, 1), count_include_pad=False),
        F.avg_pool2d(x, 3, 1, 1, count_include_pad=False).numpy(),
        atol=1e-6,
    )
    close(
        nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="sum"),
        F.avg_pool2d(x, 2, 2).numpy() * 4,
        atol=1e-5,
    )
    lp = nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="lp", p_value=2)
    close(lp, np.sqrt(F.avg_pool2d(x * x, 2, 2).numpy() * 4), rtol=1e-5)
    close(nd.Pooling(x, global_pool=True, pool_type="avg"), xn.mean(axis=(2, 3), keepdims=True), atol=1e-6)
    close(nd.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="max"), xn.max(axis=(2, 3), keepdims=True))
    x1 = torch.from_numpy(rnd(1, 2, 8))
    close(
        nd.Pooling(x1, kernel=(2,), stride=(2,), pool_type="sum"),
        F.avg_pool1d(x1, 2, 2).numpy() * 2,
        atol=1e-6,
    )
    close(
        nd.Pooling(x1, kernel=(3,), stride=(1,), pad=(2,)),
        F.max_pool1d(F.pad(x1, (2, 2), value=float("-inf")), 3, 1).numpy(),
    )
    assert nd.Pooling(torch.zeros(1, 1, 4, 4, 4), kernel=(2, 2, 2), stride=(2, 2, 2)).shape == (1, 1, 2, 2, 2)
    with pytest.raises(ValueError, match="pool_type"):
        nd.Pooling(x, kernel=(2, 2), pool_type="median")


def test_batchnorm_training_and_inference() -> None:
    xn = rnd(4, 3, 2, 2)
    x = torch.from_numpy(xn)
    gamma, beta = torch.tensor([1.0, 2.0, 0.5]), torch.tensor([0.0, 1.0, -1.0])
    mm, mv = torch.zeros(3), torch.ones(3)
    out = nd.BatchNorm(x, gamma, beta, mm, mv, eps=1e-5, momentum=0.9, fix_gamma=False, training=True)
    mean = xn.mean(axis=(0, 2, 3))
    var = xn.var(axis=(0, 2, 3))
    ref = (xn - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    ref = ref * gamma.numpy()[None, :, None, None] + beta.numpy()[None, :, None, None]
    close(out, ref, rtol=1e-4, atol=1e-5)
    close(mm, 0.1 * mean, rtol=1e-5, atol=1e-6)  # MXNet: running = 0.9*running + 0.1*batch
    close(mv, 0.9 + 0.1 * var, rtol=1e-5)
    inf = nd.BatchNorm(x, gamma, beta, mm, mv, eps=1e-5, fix_gamma=True, training=False)
    ref_inf = (xn - mm.numpy()[None, :, None, None]) / np.sqrt(mv.numpy()[None, :, None, None] + 1e-5)
    close(inf, ref_inf + beta.numpy()[None, :, None, None], rtol=1e-4, atol=1e-5)
    # axis=-1 (channel-last)
    xl = x.permute(0, 2, 3, 1)
    outl = nd.BatchNorm(
        xl, gamma, beta, torch.zeros(3), torch.ones(3), eps=1e-5, fix_gamma=False, axis=-1, training=True
    )
    close(outl.permute(0, 3, 1, 2), ref, rtol=1e-4, atol=1e-5)
    # use_global_stats ignores training
    g = nd.BatchNorm(x, gamma, beta, torch.zeros(3), torch.ones(3), use_global_stats=True, training=True)
    close(g, xn / np.sqrt(1 + 1e-3) + beta.numpy()[None, :, None, None], rtol=1e-4, atol=1e-5)


def test_dropout() -> None:
    x = torch.ones(200, 50)
    assert torch.equal(nd.Dropout(x, p=0.5, training=False), x)
    torch.manual_seed(0)
    y = nd.Dropout(x, p=0.5, training=True)
    vals = set(y.unique().tolist())
    assert vals <= {0.0, 2.0} and 0.4 < (y == 0).float().mean().item() < 0.6
    z = nd.Dropout(x, p=0.5, mode="always")
    assert (z == 0).any()
    s = nd.Dropout(torch.ones(4, 3, 10), p=0.5, axes=(2,), training=True)
    assert bool((s.std(dim=2) == 0).all())
    with pytest.raises(ValueError, match="p must"):
        nd.Dropout(x, p=1.5)


def test_embedding_norms() -> None:
    w = torch.from_numpy(rnd(10, 4))
    idx = torch.tensor([[1.0, 3.0], [9.0, 12.0]])
    out = nd.Embedding(idx, w, input_dim=10, output_dim=4)
    close(out, w.numpy()[[[1, 3], [9, 9]]])
    x = rnd(2, 3, 4)
    g, b = rnd(4), rnd(4)
    mu = x.mean(-1, keepdims=True)
    sd = np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    close(
        nd.LayerNorm(torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(b)),
        (x - mu) / sd * g + b,
        rtol=1e-4,
        atol=1e-5,
    )
    g3, b3 = rnd(3), rnd(3)
    mu1 = x.mean(1, keepdims=True)
    sd1 = np.sqrt(x.var(1, keepdims=True) + 1e-5)
    close(
        nd.LayerNorm(torch.from_numpy(x), torch.from_numpy(g3), torch.from_numpy(b3), axis=1),
        (x - mu1) / sd1 * g3[None, :, None] + b3[None, :, None],
        rtol=1e-4,
        atol=1e-5,
    )
    xi = rnd(2, 4, 3, 3)
    gi, bi = rnd(4), rnd(4)
    m = xi.mean(axis=(2, 3), keepdims=True)
    v = xi.var(axis=(2, 3), keepdims=True)
    close(
        nd.InstanceNorm(torch.from_numpy(xi), torch.from_numpy(gi), torch.from_numpy(bi)),
        (xi - m) / np.sqrt(v + 1e-3) * gi[None, :, None, None] + bi[None, :, None, None],
        rtol=1e-4,
        atol=1e-4,
    )
    grp = xi.reshape(2, 2, -1)
    gm, gv = grp.mean(-1, keepdims=True), grp.var(-1, keepdims=True)
    normed = ((grp - gm) / np.sqrt(gv + 1e-5)).reshape(xi.shape)
    close(
        nd.GroupNorm(torch.from_numpy(xi), torch.from_numpy(gi), torch.from_numpy(bi), num_groups=2),
        normed * gi[None, :, None, None] + bi[None, :, None, None],
        rtol=1e-4,
        atol=1e-4,
    )
    gg, bg = np.array([2.0, 3.0], np.float32), np.array([1.0, -1.0], np.float32)
    ref = normed.reshape(2, 2, 2, 3, 3) * gg[None, :, None, None, None] + bg[None, :, None, None, None]
    close(
        nd.GroupNorm(torch.from_numpy(xi), torch.from_numpy(gg), torch.from_numpy(bg), num_groups=2),
        ref.reshape(xi.shape),
        rtol=1e-4,
        atol=1e-4,
    )


def test_sequence_ops() -> None:
    x = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)  # (T, B, C)
    t = torch.from_numpy(x)
    ln = torch.tensor([1.0, 4.0, 2.0])
    m = nd.SequenceMask(t, ln, use_sequence_length=True, value=-1)
    ref = x.copy()
    for b, n in enumerate([1, 4, 2]):
        ref[n:, b] = -1
    close(m, ref)
    mb = nd.SequenceMask(t.transpose(0, 1), ln, use_sequence_length=True, value=-1, axis=1)
    close(mb, ref.transpose(1, 0, 2))
    close(nd.SequenceMask(t), x)
    last = nd.SequenceLast(t, ln, use_sequence_length=True)
    close(last, np.stack([x[0, 0], x[3, 1], x[1, 2]]))
    close(nd.SequenceLast(t), x[-1])
    rev = nd.SequenceReverse(t, ln, use_sequence_length=True)
    ref_r = x.copy()
    for b, n in enumerate([1, 4, 2]):
        ref_r[:n, b] = x[:n, b][::-1]
    close(rev, ref_r)
    close(nd.SequenceReverse(t), x[::-1])
    with pytest.raises(ValueError, match="entries"):
        nd.SequenceMask(t, torch.tensor([1.0]), use_sequence_length=True)


def test_misc_ops() -> None:
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    assert not nd.stop_gradient(x).requires_grad
    assert not nd.BlockGrad(x).requires_grad
    assert nd.identity(x).requires_grad
    close(nd.erf(torch.tensor([0.0, 1.0])), np.array([0.0, 0.8427008], np.float32))
    close(nd.cast(torch.tensor([1.7]), "int32"), np.array([1], np.int32))
    with pytest.raises(TypeError, match="unknown dtype"):
        nd.cast(torch.tensor([1.0]), "floaty")
    close(nd.add_n(torch.ones(2), torch.ones(2), torch.ones(2)), np.full(2, 3.0))
    close(nd.smooth_l1(torch.tensor([-2.0, 0.5]), 1.0), np.array([1.5, 0.125], np.float32))
    close(nd.shape_array(torch.zeros(2, 3)), np.array([2, 3]))
    nd.waitall()


def test_gradients_flow_through_nn_ops() -> None:
    x = torch.randn(2, 3, 5, 5, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    y = nd.Pooling(
        nd.Activation(nd.Convolution(x, w, None, kernel=(3, 3), num_filter=4, no_bias=True)),
        global_pool=True,
        pool_type="avg",
    )
    nd.sum(y).backward()
    assert x.grad is not None and w.grad is not None


# ---------------------------------------------------------------------------------------------
# save / load
# ---------------------------------------------------------------------------------------------


def test_save_load_roundtrip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    a, b = torch.randn(2, 3), torch.arange(4, dtype=torch.int32)
    f = tmp_path / "list.params"
    nd.save(str(f), [a, b])
    out = nd.load(str(f))
    assert isinstance(out, list) and len(out) == 2
    assert torch.equal(out[0], a) and torch.equal(out[1], b) and out[1].dtype == torch.int32
    many = [torch.full((1,), float(i)) for i in range(12)]
    nd.save(f, many)
    assert [t.item() for t in nd.load(f)] == list(range(12))
    d = {"arg:w": a, "aux:m": b}
    nd.save(tmp_path / "d.params", d)
    out_d = nd.load(tmp_path / "d.params")
    assert isinstance(out_d, dict) and set(out_d) == set(d) and torch.equal(out_d["arg:w"], a)
    nd.save(tmp_path / "one.params", a)
    assert torch.equal(nd.load(tmp_path / "one.params")[0], a)
    buf = (tmp_path / "d.params").read_bytes()
    assert set(nd.load_frombuffer(buf)) == set(d)


def test_load_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "corrupt.params"
    bad.write_bytes(b"\x00\x01not a safetensors file at all")
    with pytest.raises(MXNetError, match="corrupt.params"):
        nd.load(str(bad))
    with pytest.raises(MXNetError, match="does not exist"):
        nd.load(str(tmp_path / "missing.params"))
    with pytest.raises(TypeError, match="keys must be str"):
        nd.save(str(tmp_path / "x"), {1: torch.zeros(1)})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="torch.Tensor"):
        nd.save(str(tmp_path / "x"), [np.zeros(2)])  # type: ignore[list-item]


# ---------------------------------------------------------------------------------------------
# random
# ---------------------------------------------------------------------------------------------


def test_random_seed_reproducible() -> None:
    mxrandom.seed(42)
    a = [
        nd.random.uniform(shape=(3,)),
        nd.random.normal(shape=(2, 2)),
        nd.random.randint(0, 10, shape=(4,)),
        nd.random.gamma(2.0, 1.0, shape=(3,)),
        nd.random.poisson(3.0, shape=(3,)),
        nd.random.exponential(2.0, shape=(2,)),
        nd.random.shuffle(torch.arange(10)),
    ]
    mxrandom.seed(42)
    b = [
        nd.random.uniform(shape=(3,)),
        nd.random.normal(shape=(2, 2)),
        nd.random.randint(0, 10, shape=(4,)),
        nd.random.gamma(2.0, 1.0, shape=(3,)),
        nd.random.poisson(3.0, shape=(3,)),
        nd.random.exponential(2.0, shape=(2,)),
        nd.random.shuffle(torch.arange(10)),
    ]
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    mxrandom.seed(7)
    n1 = np.random.rand()
    mxrandom.seed(7)
    assert np.random.rand() == n1
    with pytest.raises(TypeError, match="seed_state"):
        mxrandom.seed("42")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        mxrandom.seed(1.5)  # type: ignore[arg-type]
    mxrandom.seed(3, ctx=cpu(0))
    mxrandom.seed(3, ctx="gpu:0")  # no such device here: a no-op, not an error


def test_random_shapes_and_params() -> None:
    u = nd.random.uniform(-1, 1, shape=(1000,))
    assert u.dtype == torch.float32 and u.shape == (1000,) and float(u.min()) >= -1 and float(u.max()) < 1
    assert nd.random.uniform().shape == (1,)
    lo = torch.tensor([0.0, 10.0])
    hi = torch.tensor([1.0, 11.0])
    s = nd.random.uniform(lo, hi, shape=(5,))
    assert s.shape == (2, 5) and bool((s[1] >= 10).all())
    n = nd.random.normal(torch.tensor([0.0, 100.0]), torch.tensor([1.0, 1.0]), shape=(50,))
    assert n.shape == (2, 50) and abs(float(n[1].mean()) - 100) < 1
    assert nd.random.randn(2, 3).shape == (2, 3)
    r = nd.random.randint(3, 5, shape=(100,))
    assert r.dtype == torch.int32 and set(r.unique().tolist()) <= {3, 4}
    with pytest.raises(ValueError, match="high"):
        nd.random.randint(5, 5)
    nb = nd.random.negative_binomial(3, 0.5, shape=(10,))
    assert nb.shape == (10,) and bool((nb >= 0).all())
    assert nd.random.generalized_negative_binomial(2.0, 0.5, shape=(4,)).shape == (4,)
    probs = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    m = nd.random.multinomial(probs, shape=(4,))
    assert m.dtype == torch.int32 and m.tolist() == [[1] * 4, [0] * 4]
    m2, lp = nd.random.multinomial(probs, get_prob=True)
    assert m2.tolist() == [1, 0] and torch.allclose(lp, torch.zeros(2))
    out = torch.empty(3)
    assert nd.random.uniform(shape=(3,), out=out) is out
    assert mxrandom.uniform is nd.random.uniform


def test_training_flag_follows_autograd() -> None:
    from mxtorch import autograd

    x = torch.ones(100, 10)
    assert torch.equal(nd.Dropout(x, p=0.5), x)  # not training outside a scope
    with autograd.train_mode():
        assert (nd.Dropout(x, p=0.5) == 0).any()
        mm = torch.zeros(10)
        nd.BatchNorm(x * 2, None, None, mm, torch.ones(10))
        close(mm, np.full(10, 0.2, np.float32))  # batch statistics updated the moving mean
    with autograd.predict_mode():
        assert torch.equal(nd.Dropout(x, p=0.5), x)


def test_more_nn_ops() -> None:
    x = torch.from_numpy(rnd(1, 2, 4, 4))
    xl = x.permute(0, 2, 3, 1)
    close(
        nd.Pooling(xl, kernel=(2, 2), stride=(2, 2), layout="NHWC").permute(0, 3, 1, 2),
        F.max_pool2d(x, 2).numpy(),
    )
    close(nd.LRN(x, nsize=3), F.local_response_norm(x, 3, alpha=1e-4, beta=0.75, k=2.0).numpy())
    up = nd.UpSampling(x, scale=2, sample_type="nearest")
    close(up, x.numpy().repeat(2, axis=2).repeat(2, axis=3))
    with pytest.raises(MXNetError, match="nearest"):
        nd.UpSampling(x, scale=2, sample_type="bilinear")
    y = rnd(2, 4)
    out = nd.log_softmax(torch.from_numpy(y), length=torch.tensor([2.0, 4.0]), use_length=True)
    close(out[0, :2], np.log(np_softmax(y[0, :2])), atol=1e-5)
    assert torch.isinf(out[0, 2:]).all()
    close(
        nd.softmax_cross_entropy(torch.from_numpy(y), torch.tensor([1.0, 3.0])),
        np.array([-np.log(np_softmax(y)[0, 1]) - np.log(np_softmax(y)[1, 3])]),
        rtol=1e-5,
    )


def test_comparison_operators_carry_mxnet_names_and_docs() -> None:
    for name in ("equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal",
                 "logical_and", "logical_or", "logical_xor"):
        fn = getattr(nd, f"broadcast_{name}")
        assert fn.__name__ == f"broadcast_{name}"
        assert fn.__doc__ and "1 or 0" in fn.__doc__
