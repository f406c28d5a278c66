"""mx.nd's optimizer update operators, each checked on one element by hand from MXNet's formulas."""

from __future__ import annotations

import math

import pytest

import mxtorch as mx

nd = mx.nd


def one(v: float):  # type: ignore[no-untyped-def]
    return nd.array([v])


def test_sgd_family() -> None:
    # g = clip(0.5 * 2, 0.6) = 0.6; (1 - 0.1 * 0.5) * 1 - 0.1 * 0.6
    assert nd.sgd_update(
        one(1), one(2), lr=0.1, wd=0.5, rescale_grad=0.5, clip_gradient=0.6
    ).item() == pytest.approx(0.89)
    w, mom = one(1), one(0.5)
    nd.sgd_mom_update(w, one(2), mom, lr=0.1, momentum=0.9, out=w)  # mom = 0.45 - 0.2
    assert mom.item() == pytest.approx(0.25) and w.item() == pytest.approx(1.25)
    w, mom = one(1), one(1)
    nd.nag_mom_update(w, one(1), mom, lr=0.1, momentum=0.5, out=w)  # mom = 0.5 - 0.1; w = 1 + 0.5 * 0.4 - 0.1
    assert mom.item() == pytest.approx(0.4) and w.item() == pytest.approx(1.1)


def test_sign_methods() -> None:
    assert nd.signsgd_update(one(1), one(-3), lr=0.1, wd=0.5).item() == pytest.approx(1.05)
    mom = one(0)
    w = nd.signum_update(one(1), one(2), mom, lr=0.1, momentum=0.5, wd_lh=0.1)  # mom = -1; 0.99 - 0.1
    assert mom.item() == pytest.approx(-1.0) and w.item() == pytest.approx(0.89)


def test_adaptive_methods() -> None:
    m, v = one(0), one(0)
    w = nd.adam_update(one(1), one(2), m, v, lr=0.1, beta1=0.5, beta2=0.5, epsilon=0.0)
    assert (m.item(), v.item()) == pytest.approx((1.0, 2.0)) and w.item() == pytest.approx(
        1 - 0.1 / math.sqrt(2)
    )
    n = one(0)
    w = nd.rmsprop_update(one(1), one(2), n, lr=0.1, gamma1=0.5, epsilon=0.0)
    assert n.item() == pytest.approx(2.0) and w.item() == pytest.approx(1 - 0.2 / math.sqrt(2))
    n, g, delta = one(0), one(0), one(0)
    w = nd.rmspropalex_update(one(1), one(2), n, g, delta, lr=0.1, gamma1=0.5, gamma2=0.5, epsilon=0.0)
    assert (n.item(), g.item(), delta.item()) == pytest.approx(
        (2.0, 1.0, -0.2)
    ) and w.item() == pytest.approx(0.8)


def test_ftml_and_ftrl() -> None:
    d, v, z = one(0), one(0), one(0)
    # v = 0.5; d_t = (1 - 0.5) / 0.5 * sqrt(0.5 / 0.5) = 1; z = 0.5 * 1 - 1 * 1; w = -z / d_t
    w = nd.ftml_update(one(1), one(1), d, v, z, lr=0.5, beta1=0.5, beta2=0.5, epsilon=0.0, t=1)
    assert (d.item(), v.item(), z.item(), w.item()) == pytest.approx((1.0, 0.5, -0.5, 0.5))
    with pytest.raises(ValueError, match="step number"):
        nd.ftml_update(one(1), one(1), d, v, z, lr=0.5)
    z, n = one(0), one(0)
    w = nd.ftrl_update(one(0), one(1), z, n, lr=1.0, lamda1=0.1, beta=1.0)  # z = 1, n = 1
    assert (z.item(), n.item()) == pytest.approx((1.0, 1.0)) and w.item() == pytest.approx((0.1 - 1) / 2)
    assert (
        nd.ftrl_update(one(0), one(0.05), one(0), one(0), lr=1.0, lamda1=0.1).item() == 0.0
    )  # |z| <= lamda1


def test_update_needs_a_learning_rate() -> None:
    with pytest.raises(TypeError, match="lr"):
        nd.sgd_update(one(1), one(1))
