"""Tests of mxtorch.lr_scheduler against hand-computed values."""

from __future__ import annotations

import math

import pytest

from mxtorch import lr_scheduler as lrs
from mxtorch.optimizer import SGD, Optimizer


class _StatefulFactor:
    """MXNet's documented stateful FactorScheduler loop, for comparison."""

    def __init__(self, step: int, factor: float, stop: float, base: float) -> None:
        self.step, self.factor, self.stop, self.base, self.count = step, factor, stop, base, 0

    def __call__(self, n: int) -> float:
        while n > self.count + self.step:
            self.count += self.step
            self.base *= self.factor
            if self.base < self.stop:
                self.base = self.stop
        return self.base


@pytest.mark.parametrize(
    "n,want",
    [(0, 1.0), (1, 1.0), (3, 1.0), (4, 0.5), (6, 0.5), (7, 0.25), (10, 0.125), (13, 0.1), (100, 0.1)],
)
def test_factor_scheduler(n, want):
    s = lrs.FactorScheduler(step=3, factor=0.5, stop_factor_lr=0.1, base_lr=1.0)
    assert s(n) == pytest.approx(want)


def test_factor_scheduler_matches_mxnet_loop():
    s = lrs.FactorScheduler(step=4, factor=0.7, stop_factor_lr=0.05, base_lr=0.9)
    ref = _StatefulFactor(4, 0.7, 0.05, 0.9)
    for n in range(0, 60):
        assert s(n) == pytest.approx(ref(n)), n
    assert s(5) == pytest.approx(0.9 * 0.7)  # pure function: going back works


def test_factor_scheduler_warmup():
    s = lrs.FactorScheduler(step=5, factor=0.5, base_lr=1.0, warmup_steps=4, warmup_begin_lr=0.2)
    assert [s(n) for n in (0, 1, 2, 3)] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert s(4) == pytest.approx(1.0)
    assert s(5) == pytest.approx(1.0)
    assert s(6) == pytest.approx(0.5)
    c = lrs.FactorScheduler(step=5, base_lr=1.0, warmup_steps=4, warmup_begin_lr=0.2, warmup_mode="constant")
    assert c(3) == 0.2 and c(4) == 1.0


@pytest.mark.parametrize("n,want", [(0, 1.0), (2, 1.0), (3, 0.1), (5, 0.1), (6, 0.01), (1000, 0.01)])
def test_multifactor_scheduler(n, want):
    s = lrs.MultiFactorScheduler(step=[2, 5], factor=0.1, base_lr=1.0)
    assert s(n) == pytest.approx(want)


def test_multifactor_warmup():
    s = lrs.MultiFactorScheduler(step=[10], factor=0.5, base_lr=0.8, warmup_steps=4, warmup_begin_lr=0.0)
    assert s(1) == pytest.approx(0.2) and s(4) == pytest.approx(0.8) and s(11) == pytest.approx(0.4)


@pytest.mark.parametrize(
    "n,want", [(0, 1.0), (5, 0.1 + 0.9 * 0.25), (8, 0.1 + 0.9 * 0.04), (10, 0.1), (20, 0.1)]
)
def test_poly_scheduler(n, want):
    s = lrs.PolyScheduler(max_update=10, base_lr=1.0, pwr=2, final_lr=0.1)
    assert s(n) == pytest.approx(want)


def test_poly_scheduler_warmup():
    s = lrs.PolyScheduler(max_update=10, base_lr=1.0, pwr=1, warmup_steps=2, warmup_begin_lr=0.5)
    assert s(1) == pytest.approx(0.75)
    assert s(2) == pytest.approx(1.0)
    assert s(6) == pytest.approx(0.5)  # (1 - 4/8) ** 1
    assert s.max_steps == 8


@pytest.mark.parametrize(
    "n,want", [(0, 1.0), (5, 0.5), (10, 0.0), (11, 0.0), (2, (1 + math.cos(math.pi / 5)) / 2)]
)
def test_cosine_scheduler(n, want):
    s = lrs.CosineScheduler(max_update=10, base_lr=1.0, final_lr=0.0)
    assert s(n) == pytest.approx(want)


def test_cosine_scheduler_warmup_and_final():
    s = lrs.CosineScheduler(max_update=12, base_lr=0.4, final_lr=0.1, warmup_steps=2)
    assert s(1) == pytest.approx(0.2)
    assert s(7) == pytest.approx(0.25)  # half-way: final + (base - final) / 2
    assert s(12) == pytest.approx(0.1)


@pytest.mark.parametrize(
    "make,exc,match",
    [
        (lambda: lrs.FactorScheduler(step=0), ValueError, "step must be >= 1, got 0"),
        (lambda: lrs.FactorScheduler(step=2.5), TypeError, "step"),
        (lambda: lrs.FactorScheduler(step=2, factor=1.5), ValueError, r"factor must be in \(0, 1\]"),
        (lambda: lrs.FactorScheduler(step=2, factor=0), ValueError, "factor"),
        (lambda: lrs.MultiFactorScheduler(step=[3, 3]), ValueError, "strictly increasing"),
        (lambda: lrs.MultiFactorScheduler(step=[5, 2]), ValueError, "strictly increasing"),
        (lambda: lrs.MultiFactorScheduler(step=[0, 2]), ValueError, r"step\[0\]"),
        (lambda: lrs.MultiFactorScheduler(step=[]), TypeError, "non-empty"),
        (lambda: lrs.MultiFactorScheduler(step=[2], factor=2), ValueError, "factor"),
        (lambda: lrs.PolyScheduler(max_update=0), ValueError, "max_update"),
        (lambda: lrs.PolyScheduler(max_update=5, warmup_steps=5), ValueError, "warmup_steps"),
        (lambda: lrs.CosineScheduler(max_update=10, base_lr=-1), ValueError, "base_lr"),
        (lambda: lrs.LRScheduler(base_lr=0.1, warmup_begin_lr=0.5), ValueError, "warmup_begin_lr"),
        (lambda: lrs.LRScheduler(warmup_mode="cubic"), ValueError, "cubic"),
        (lambda: lrs.LRScheduler(warmup_steps=-1), ValueError, "warmup_steps"),
    ],
)
def test_bad_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_bad_num_update_and_base_class():
    s = lrs.FactorScheduler(step=2)
    with pytest.raises(ValueError, match="num_update"):
        s(-1)
    with pytest.raises(NotImplementedError):
        lrs.LRScheduler()(3)


def test_optimizer_sets_base_lr():
    s = lrs.CosineScheduler(max_update=10, base_lr=5.0)
    o = SGD(learning_rate=0.2, lr_scheduler=s)
    assert s.base_lr == 0.2 and s.warmup_final_lr == 0.2
    assert o.learning_rate == pytest.approx(0.2)
    o.num_update = 5
    assert o.learning_rate == pytest.approx(0.1)
    assert o._get_lr(0) == pytest.approx(0.1)
    # learning_rate=None keeps the scheduler's own base_lr
    s2 = lrs.PolyScheduler(max_update=4, base_lr=0.7)
    assert Optimizer(learning_rate=None, lr_scheduler=s2).learning_rate == pytest.approx(0.7)
