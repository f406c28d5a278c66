"""mx.sym.random: symbolic samplers with number or symbol parameters, *_like samplers, seeding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx

nd = mx.nd


def test_symbolic_sampler_with_number_parameters_is_seeded_like_nd() -> None:
    x = mx.sym.Variable("X")
    y = mx.sym.random.uniform(low=2.0, high=3.0, shape=(4, 5), dtype=np.float16) + x
    exe = y.bind(mx.cpu(), {"X": nd.zeros((4, 5), dtype="float16")})
    mx.random.seed(7)
    first = exe.forward()[0].clone()
    mx.random.seed(7)
    again = exe.forward()[0]
    assert first.dtype == torch.float16 and torch.equal(first, again)
    assert 2.0 <= float(first.min()) and float(first.max()) <= 3.0


def test_symbolic_sampler_with_symbol_parameters_draws_per_entry() -> None:
    lo, hi = mx.sym.Variable("lo"), mx.sym.Variable("hi")
    s = mx.sym.random.uniform(lo, hi, shape=(50,))
    assert s.list_arguments() == ["lo", "hi"]
    out = s.bind(mx.cpu(), {"lo": nd.array([0.0, 10.0]), "hi": nd.array([1.0, 11.0])}).forward()[0]
    assert out.shape == (2, 50) and float(out[0].max()) < 1.0 and float(out[1].min()) >= 10.0
    with pytest.raises(TypeError, match="as a symbol, or none"):
        mx.sym.random.uniform(lo, 1.0)


def test_like_samplers_and_randn_follow_data() -> None:
    data = mx.sym.ones((3, 2))
    out = mx.sym.random.normal_like(data, loc=4.0, scale=1e-30).bind(mx.cpu(), {}).forward()[0]
    assert out.shape == (3, 2) and bool((out == 4.0).all())
    r = mx.sym.random.randn(loc=1.0, scale=1e-30, dtype="float64", data=data).bind(mx.cpu(), {}).forward()[0]
    assert r.dtype == torch.float64 and bool((r == 1.0).all())
    # exponential_like takes the rate: mean 1 / lam
    mx.random.seed(0)
    e = nd.random.exponential_like(nd.ones((20000,)), lam=4.0)
    assert float(e.mean()) == pytest.approx(0.25, rel=0.05)


def test_pdf_in_half_precision_is_computed_in_float32() -> None:
    x = nd.array([[1.0]], dtype="float16")
    p = nd.random_pdf_poisson(x, nd.array([1.0], dtype="float16"))
    assert p.dtype == torch.float16 and p.item() == pytest.approx(np.exp(-1.0), rel=1e-3)


def test_context_strings_in_mxnet_form() -> None:
    assert mx.context.as_context("cpu(0)") == mx.cpu(0)
    assert mx.context.as_context("gpu(1)") == mx.gpu(1)


def test_symbolic_rand_zipfian_matches_the_expected_counts() -> None:
    true = mx.sym.var("true_classes")
    outs = mx.sym.contrib.rand_zipfian(true, 200, 20)
    exe = mx.sym.Group(outs).bind(mx.cpu(), {"true_classes": nd.array([0, 3]).astype("int32")})
    sampled, exp_true, exp_sampled = exe.forward()
    assert sampled.dtype == torch.int64 and sampled.shape == (200,)
    assert 0 <= int(sampled.min()) and int(sampled.max()) < 20
    # 200 * log((c + 2) / (c + 1)) / log(21)
    want = [200 * np.log(2) / np.log(21), 200 * np.log(5 / 4) / np.log(21)]
    assert exp_true.tolist() == pytest.approx(want, rel=1e-5)
    c = sampled.double()
    torch.testing.assert_close(exp_sampled.double(), 200 * torch.log((c + 2) / (c + 1)) / np.log(21),
                               rtol=1e-5, atol=1e-5)
