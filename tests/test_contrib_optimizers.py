"""mx.optimizer.contrib.GroupAdaGrad and mx.nd.contrib's fused AdamW operators, checked against
hand computations of MXNet's documented update rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mxtorch as mx


def test_group_adagrad_one_history_entry_per_row() -> None:
    opt = mx.optimizer.create("groupadagrad", learning_rate=0.5, eps=0.0, rescale_grad=2.0)
    assert isinstance(opt, mx.optimizer.contrib.GroupAdaGrad)
    w = torch.tensor([[1.0, 1.0], [2.0, 2.0]])
    g = torch.tensor([[0.5, 1.5], [0.0, 1.0]])
    state = opt.create_state(0, w)
    assert state.shape == (2, 1)
    opt.update(0, w, g, state)
    # row 0: g = (1, 3), history = (1 + 9) / 2 = 5; row 1: g = (0, 2), history = 4 / 2 = 2
    assert state.flatten().tolist() == pytest.approx([5.0, 2.0])
    want = [[1 - 0.5 * 1 / math.sqrt(5), 1 - 0.5 * 3 / math.sqrt(5)], [2.0, 2 - 0.5 * 2 / math.sqrt(2)]]
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-6)


def test_group_adagrad_refuses_weight_decay_and_non_matrices() -> None:
    opt = mx.optimizer.contrib.GroupAdaGrad(wd=0.1)
    w = torch.ones(2, 2)
    with pytest.raises(mx.MXNetError, match="weight decay"):
        opt.update(0, w, torch.ones(2, 2), opt.create_state(0, w))
    with pytest.raises(mx.MXNetError, match="2-D weights"):
        opt.create_state(1, torch.ones(3))


def _adamw_by_hand(w: float, g: float, m: float, v: float, scale: float, lr: float, eta: float,
                   wd: float, clip: float) -> tuple[float, float, float]:
    g = max(-clip, min(clip, g * scale))
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    return w - eta * (lr * m / (math.sqrt(v) + 1e-8) + wd * w), m, v


def test_adamw_update_follows_the_rule_and_writes_out() -> None:
    w, g = mx.nd.array([1.0, -2.0]), mx.nd.array([0.5, 3.0])
    m, v = mx.nd.array([0.1, 0.2]), mx.nd.array([0.01, 0.04])
    want = [_adamw_by_hand(wi, gi, mi, vi, 2.0, 0.1, 0.5, 0.01, 4.0)
            for wi, gi, mi, vi in zip([1.0, -2.0], [0.5, 3.0], [0.1, 0.2], [0.01, 0.04], strict=True)]
    mx.nd.contrib.adamw_update(w, g, m, v, mx.nd.array([2.0]), lr=0.1, eta=0.5, wd=0.01, clip_gradient=4.0,
                               out=w)
    np.testing.assert_allclose(w.asnumpy(), [x[0] for x in want], rtol=1e-5)
    np.testing.assert_allclose(m.asnumpy(), [x[1] for x in want], rtol=1e-5)
    np.testing.assert_allclose(v.asnumpy(), [x[2] for x in want], rtol=1e-5)


@pytest.mark.parametrize("scale", [0.0, float("nan"), float("inf")])
def test_adamw_update_is_skipped_for_a_zero_or_non_finite_rescale(scale: float) -> None:
    w, m, v = mx.nd.ones((3,)), mx.nd.ones((3,)), mx.nd.ones((3,))
    mx.nd.contrib.adamw_update(w, mx.nd.ones((3,)), m, v, mx.nd.array([scale]), lr=1, eta=1, wd=0.1, out=w)
    mx.nd.contrib.multi_adamw_update([w], [mx.nd.ones((3,))], [m], [v], scale, lrs=[1], etas=[1], out=[w])
    assert w.asnumpy().tolist() == m.asnumpy().tolist() == v.asnumpy().tolist() == [1.0, 1.0, 1.0]


def test_multi_precision_and_multi_tensor_forms_match_the_single_update() -> None:
    w32, g16 = mx.nd.array([1.0, 2.0]), mx.nd.array([0.25, -0.5]).astype("float16")
    m, v = mx.nd.zeros((2,)), mx.nd.zeros((2,))
    w16 = w32.astype("float16")
    ref_w, ref_m, ref_v = w32.copy(), m.copy(), v.copy()
    mx.nd.contrib.adamw_update(ref_w, g16.astype("float32"), ref_m, ref_v, 1.0, lr=0.1, eta=1.0, out=ref_w)
    mx.nd.contrib.multi_mp_adamw_update([w16], [g16], [m], [v], [w32], mx.nd.array([1.0]), lrs=[0.1],
                                        etas=[1.0], out=[w16])
    np.testing.assert_allclose(w32.asnumpy(), ref_w.asnumpy(), rtol=1e-6)  # the float32 master
    assert w16.dtype == torch.float16
    np.testing.assert_allclose(w16.asnumpy(), ref_w.asnumpy().astype(np.float16), rtol=1e-3)
    with pytest.raises(ValueError, match="2 weights but 1 lrs"):
        mx.nd.contrib.multi_adamw_update([w32, w32], [g16, g16], [m, m], [v, v], 1.0, lrs=[0.1], etas=1.0)
