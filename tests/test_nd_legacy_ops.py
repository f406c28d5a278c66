"""mx.nd operators MXNet 1.x code calls: legacy element ops, sampler aliases and *_like samplers,
random_pdf_* densities, nd.contrib / nd._internal, CachedOp, and the argument rules MXNet code
relies on (keepdims as 0/1, moveaxis refusing repeated axes, from_numpy handing memory over)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mxtorch as mx

nd = mx.nd


def test_choose_and_fill_element_0index() -> None:
    x = nd.array(np.arange(6).reshape(2, 3))
    assert nd.choose_element_0index(x, nd.array([2, 0])).tolist() == [2.0, 3.0]
    filled = nd.fill_element_0index(x, nd.array([9, 8]), nd.array([1, 2]))
    assert filled.tolist() == [[0.0, 9.0, 2.0], [3.0, 4.0, 8.0]]
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]  # a copy, the input is unchanged


def test_sampler_aliases_and_like_samplers() -> None:
    assert nd.uniform is nd.random.uniform and nd.random_normal is nd.random.normal
    assert nd.sample_gamma is nd.random.gamma and nd.random_uniform_like is nd.random.uniform_like
    lows, highs = nd.array([0.0, 10.0]), nd.array([1.0, 11.0])
    s = nd.sample_uniform(lows, highs, shape=(50,))
    assert s.shape == (2, 50) and float(s[0].max()) < 1.0 and float(s[1].min()) >= 10.0
    data = nd.ones((3, 4), dtype="float64")
    like = nd.random.normal_like(data, loc=5.0, scale=1e-30)  # MXNet: scale > 0
    assert like.shape == (3, 4) and like.dtype == torch.float64 and bool((like == 5.0).all())
    with pytest.raises(TypeError, match="data"):
        nd.random.uniform_like(None)


def test_pdfs_match_hand_computations() -> None:
    x = nd.array([[0.0, 1.0]], dtype="float64")
    mu, sigma = nd.array([0.0], dtype="float64"), nd.array([1.0], dtype="float64")
    pdf = nd.random_pdf_normal(x, mu, sigma)
    assert pdf.shape == (1, 2)
    assert pdf[0, 0].item() == pytest.approx(1 / math.sqrt(2 * math.pi))
    assert pdf[0, 1].item() == pytest.approx(math.exp(-0.5) / math.sqrt(2 * math.pi))
    assert nd.random_pdf_uniform(x, nd.array([-1.0]), nd.array([3.0]))[0, 0].item() == pytest.approx(0.25)
    lam = nd.array([2.0], dtype="float64")
    assert nd.random_pdf_exponential(x, lam, is_log=True)[0, 1].item() == pytest.approx(math.log(2) - 2)
    counts = nd.array([[2.0]], dtype="float64")
    assert nd.random_pdf_poisson(counts, nd.array([1.0])).item() == pytest.approx(math.exp(-1) / 2)
    # two failures before the first success at p = 0.5: 0.5 * 0.5**2
    nb = nd.random_pdf_negative_binomial(counts, nd.array([1.0]), nd.array([0.5]))
    assert nb.item() == pytest.approx(0.125)
    # mean 1, dispersion 1 is the negative binomial with k = 1, p = 1/2
    gnb = nd.random_pdf_generalized_negative_binomial(counts, nd.array([1.0]), nd.array([1.0]))
    assert gnb.item() == pytest.approx(0.125)
    # the density reads beta as a rate: Gamma(2, rate 1) at 1 is e**-1
    assert nd.random_pdf_gamma(nd.array([[1.0]]), nd.array([2.0]), nd.array([1.0])).item() == pytest.approx(
        math.exp(-1), rel=1e-6
    )
    # Dirichlet(1, 2): density 2 * x2
    d = nd.random_pdf_dirichlet(nd.array([[[0.2, 0.8], [0.5, 0.5]]]), nd.array([[1.0, 2.0]]))
    assert d.shape == (1, 2) and d.reshape(-1).tolist() == pytest.approx([1.6, 1.0], rel=1e-5)
    with pytest.raises(ValueError, match="parameters"):
        nd.random_pdf_normal(x, nd.array([0.0, 1.0]), sigma)


def test_pdf_gradient_is_the_analytic_one() -> None:
    x = nd.array([[0.5, -1.0]], dtype="float64")
    mu, sigma = nd.array([0.2], dtype="float64"), nd.array([1.5], dtype="float64")
    mu.attach_grad()
    with mx.autograd.record():
        lp = nd.random_pdf_normal(x, mu, sigma, is_log=True)
    lp.backward()
    # d/dmu log N(x; mu, s) = (x - mu) / s**2, summed over the samples
    assert mu.grad.item() == pytest.approx(((0.5 - 0.2) + (-1.0 - 0.2)) / 1.5**2)


def test_contrib_predicates_and_zipfian() -> None:
    data = nd.array([1.0, np.inf, -np.inf, np.nan])
    assert nd.contrib.isinf(data).tolist() == [0.0, 1.0, 1.0, 0.0]
    assert nd.contrib.isfinite(data).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert nd.contrib.isnan(data).dtype == torch.float32
    torch.manual_seed(0)
    sampled, exp_true, exp_sampled = nd.contrib.rand_zipfian(nd.array([0, 3]), 100, 20)
    assert sampled.shape == (100,) and int(sampled.min()) >= 0 and int(sampled.max()) < 20
    # expected count of class c: 100 * log((c + 2) / (c + 1)) / log(21)
    assert exp_true.tolist() == pytest.approx(
        [100 * math.log(2) / math.log(21), 100 * math.log(5 / 4) / math.log(21)], rel=1e-5
    )
    assert exp_sampled.shape == (100,)
    classes, tries = nd._internal._sample_unique_zipfian(50, shape=(2, 30))
    assert classes.shape == (2, 30) and tries.shape == (2,)
    for row in range(2):
        assert len(set(classes[row].tolist())) == 30 and int(tries[row]) >= 30


def test_reduction_keepdims_as_int_and_moveaxis_repeats() -> None:
    x = nd.ones((2, 3))
    assert nd.sum(x, axis=1, keepdims=1).shape == (2, 1)
    assert nd.norm(x, axis=1, keepdims=0).shape == (2,)
    with pytest.raises(ValueError, match="repeat"):
        nd.moveaxis(x, [0, 0], [0, 1])
    assert nd.moveaxis(nd.zeros((4, 1, 2, 3)), [3, 0], [1, 0]).shape == (4, 3, 1, 2)


def test_from_numpy_hands_the_memory_over() -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    t = nd.from_numpy(a)
    with pytest.raises(ValueError):
        a[0, 0] = 5.0  # read-only: the array owns the memory now
    t[0, 0] = 7.0
    assert a[0, 0] == 7.0
    with pytest.raises(ValueError, match="C-contiguous"):
        nd.from_numpy(np.ones((2, 3)).T)
    b = np.ones(3)
    c = nd.from_numpy(b, zero_copy=False)
    c[0] = 0.0
    assert b[0] == 1.0 and b.flags.writeable


def test_cpu_shared_context_and_np_shape_switch() -> None:
    ctx = mx.Context("cpu_shared", 0)
    z = nd.zeros((1, 2), ctx=ctx)
    assert z.context == ctx and z.device.type == "cpu"
    with mx.np_shape(True):
        assert mx.is_np_shape()


def test_cached_op_runs_a_graph_with_gradients() -> None:
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    op = nd.CachedOp(a * b + 2)
    x, y = nd.array([1.0, 2.0]), nd.array([3.0, 4.0])
    assert op(x, y).tolist() == [5.0, 10.0]
    out = nd.zeros((2,))
    op(x, y, out=out)
    assert out.tolist() == [5.0, 10.0]
    x.attach_grad()
    with mx.autograd.record():
        r = op(x, y)
    r.backward()
    assert x.grad.tolist() == [3.0, 4.0]
    with pytest.raises(mx.MXNetError, match="2 inputs"):
        op(x)


def test_expand_dims_method_copies_unless_inplace() -> None:
    data = nd.array([1.0, 2.0])
    copy = data.expand_dims(axis=0)
    view = data.expand_dims(axis=0, inplace=True)
    data[0] = -1.0
    assert copy.tolist() == [[1.0, 2.0]] and view.tolist() == [[-1.0, 2.0]]


@pytest.mark.parametrize(
    "key",
    [
        (slice(None),),
        (slice(1, 3),),
        (0, slice(None, None, 2)),
        (slice(None), 1),
        (slice(0, 1), slice(None)),
        (slice(None, None, -1),),
        (slice(0, 0),),
    ],
)
def test_basic_indexing_contiguity_follows_numpy(key: tuple) -> None:
    shape = (4, 5, 3)
    expected = np.empty(shape)[key].flags.contiguous
    assert nd.NDArray._basic_indexing_slice_is_contiguous(key, shape) == expected
