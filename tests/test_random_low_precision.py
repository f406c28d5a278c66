"""Low-precision samples are drawn in float32 and rounded, as MXNet does."""

from __future__ import annotations

import torch

import mxtorch as mx


def test_float16_uniform_is_drawn_in_float32():
    # drawn directly in float16, about 1 in 2048 samples of U[0, 1) would be exactly 0
    mx.random.seed(7)
    u = mx.nd.random.uniform(shape=(200_000,), dtype="float16")
    assert u.dtype == torch.float16
    assert int((u == 0).sum()) == 0
    assert abs(float(u.float().mean()) - 0.5) < 0.01


def test_float16_normal_matches_the_float32_draw():
    mx.random.seed(3)
    half = mx.nd.random.normal(0.0, 2.0, shape=(64,), dtype="float16")
    mx.random.seed(3)
    full = mx.nd.random.normal(0.0, 2.0, shape=(64,), dtype="float32")
    assert torch.equal(half, full.half())
