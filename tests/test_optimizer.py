"""Tests of mxtorch.optimizer against numpy re-statements of MXNet 1.9's documented update rules."""

from __future__ import annotations

import io
import math
import pickle
from typing import Any

import numpy as np
import pytest
import torch

from mxtorch import optimizer as opt
from mxtorch.base import MXNetError
from mxtorch.lr_scheduler import FactorScheduler

RESCALE = 0.5
CLIP = 0.3
WD = 0.1
LR_MULT = {0: 1.0, 1: 0.5}
WD_MULT = {0: 1.0, 1: 2.0}
SHAPES = [(3, 4), (5,)]
STEPS = 4


# ------------------------------------------------------------------------------------------------
# numpy references, written from the formulas in MXNet's optimizer documentation
# ------------------------------------------------------------------------------------------------
def _g(grad: np.ndarray, rescale: float, clip: float | None) -> np.ndarray:
    g = grad * rescale
    if clip is not None:
        g = np.clip(g, -clip, clip)
    return g


def ref_sgd(w, grad, st, lr, wd, t, hp, r, c):
    g = _g(grad, r, c) + wd * w
    if hp.get("momentum", 0.0) == 0.0:
        return w - lr * g, st
    mom = hp["momentum"] * st - lr * g
    return w + mom, mom


def ref_nag(w, grad, st, lr, wd, t, hp, r, c):
    g = _g(grad, r, c) + wd * w
    m = hp.get("momentum", 0.0)
    if m == 0.0:
        return w - lr * g, st
    mom = m * st - lr * g
    return w + m * mom - lr * g, mom


def ref_adam(w, grad, st, lr, wd, t, hp, r, c):
    b1, b2, eps = hp.get("beta1", 0.9), hp.get("beta2", 0.999), hp.get("epsilon", 1e-8)
    g = grad * r + wd * w
    if c is not None:  # MXNet 1.9's Adam clips after adding the weight decay
        g = np.clip(g, -c, c)
    m, v = st
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g**2
    lr_t = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
    return w - lr_t * m / (np.sqrt(v) + eps), (m, v)


def ref_adamw(w, grad, st, lr, wd, t, hp, r, c):
    b1, b2, eps = hp.get("beta1", 0.9), hp.get("beta2", 0.999), hp.get("epsilon", 1e-6)
    g = _g(grad, r, c)
    m, v = st
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g**2
    lr_t = lr * math.sqrt(1 - b2**t) / (1 - b1**t) if hp.get("correct_bias", True) else lr
    return w - lr_t * (m / (np.sqrt(v) + eps) + wd * w), (m, v)


def ref_adagrad(w, grad, st, lr, wd, t, hp, r, c):
    eps = hp.get("eps", 1e-7)
    g = _g(grad, r, c)
    hist = st + g**2
    return w - lr * (g / np.sqrt(hist + eps) + wd * w), hist


def ref_adadelta(w, grad, st, lr, wd, t, hp, r, c):
    rho, eps = hp.get("rho", 0.9), hp.get("epsilon", 1e-5)
    g = _g(grad, r, c)
    acc_g, acc_d = st
    acc_g = rho * acc_g + (1 - rho) * g * g
    delta = np.sqrt(acc_d + eps) / np.sqrt(acc_g + eps) * g
    acc_d = rho * acc_d + (1 - rho) * delta * delta
    return w - (delta + wd * w), (acc_g, acc_d)  # no learning rate in MXNet 1.9's AdaDelta


def ref_rmsprop(w, grad, st, lr, wd, t, hp, r, c):
    g1, g2, eps = hp.get("gamma1", 0.9), hp.get("gamma2", 0.9), hp.get("epsilon", 1e-8)
    g = grad * r + wd * w
    if c is not None:
        g = np.clip(g, -c, c)
    if not hp.get("centered", False):
        n = g1 * st + (1 - g1) * g**2
        w = w - lr * g / np.sqrt(n + eps)
        st = n
    else:
        n, m, delta = st
        n = g1 * n + (1 - g1) * g**2
        m = g1 * m + (1 - g1) * g
        delta = g2 * delta - lr * g / np.sqrt(n - m**2 + eps)
        w = w + delta
        st = (n, m, delta)
    cw = hp.get("clip_weights")
    if cw:
        w = np.clip(w, -cw, cw)
    return w, st


def ref_ftrl(w, grad, st, lr, wd, t, hp, r, c):
    lamda1, beta = hp.get("lamda1", 0.01), hp.get("beta", 1.0)
    g = _g(grad, r, c)
    z, n = st
    z = z + g - (np.sqrt(n + g**2) - np.sqrt(n)) * w / lr
    n = n + g**2
    w = (np.sign(z) * lamda1 - z) / ((beta + np.sqrt(n)) / lr + wd) * (np.abs(z) > lamda1)
    return w, (z, n)


def ref_lamb(w, grad, st, lr, wd, t, hp, r, c):
    b1, b2, eps = hp.get("beta1", 0.9), hp.get("beta2", 0.999), hp.get("epsilon", 1e-6)
    g = _g(grad, r, c)
    m, v = st
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g**2
    if hp.get("bias_correction", True):
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    else:
        m_hat, v_hat = m, v
    u = m_hat / (np.sqrt(v_hat) + eps) + wd * w
    r1 = np.linalg.norm(w)
    if hp.get("lower_bound") is not None:
        r1 = max(r1, hp["lower_bound"])
    if hp.get("upper_bound") is not None:
        r1 = min(r1, hp["upper_bound"])
    r2 = np.linalg.norm(u)
    ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
    return w - lr * ratio * u, (m, v)


def ref_lars(w, grad, st, lr, wd, t, hp, r, c, name=""):
    eta, eps, momentum = hp.get("eta", 0.001), hp.get("eps", 0.0), hp.get("momentum", 0.0)
    w_norm = np.linalg.norm(w)
    g_norm = np.linalg.norm(grad * r)
    if name.endswith(("gamma", "beta", "bias")) or not (w_norm > 0 and g_norm > 0):
        lars = 1.0
    else:
        lars = eta * w_norm / (g_norm + wd * w_norm + eps)
    g = _g(grad, r, c) + wd * w
    if momentum == 0.0:
        return w - lr * lars * g, st
    mom = momentum * st - lr * lars * g
    return w + mom, mom


def ref_signum(w, grad, st, lr, wd, t, hp, r, c):
    momentum, wd_lh = hp.get("momentum", 0.9), hp.get("wd_lh", 0.0)
    if momentum == 0.0:
        return (1 - lr * (wd + wd_lh)) * w - lr * np.sign(_g(grad, r, c)), st
    g = _g(grad, r, c) + wd * w
    mom = momentum * st - (1 - momentum) * g  # MXNet keeps the negated average
    return (1 - lr * wd_lh) * w + lr * np.sign(mom), mom


def ref_ftml(w, grad, st, lr, wd, t, hp, r, c):
    b1, b2, eps = hp.get("beta1", 0.6), hp.get("beta2", 0.999), hp.get("epsilon", 1e-8)
    g = grad * r + wd * w
    if c is not None:
        g = np.clip(g, -c, c)
    d, v, z = st
    v = b2 * v + (1 - b2) * g**2
    d_t = (1 - b1**t) / lr * (np.sqrt(v / (1 - b2**t)) + eps)
    z = b1 * z + (1 - b1) * g - (d_t - b1 * d) * w
    return -z / d_t, (d_t, v, z)


def ref_adamax(w, grad, st, lr, wd, t, hp, r, c):
    b1, b2 = hp.get("beta1", 0.9), hp.get("beta2", 0.999)
    g = grad * r + wd * w
    if c is not None:
        g = np.clip(g, -c, c)
    m, u = st
    m = b1 * m + (1 - b1) * g
    u = np.maximum(b2 * u, np.abs(g))
    return w - lr / (1 - b1**t) * m / u, (m, u)


def ref_nadam(w, grad, st, lr, wd, t, hp, r, c):
    b1, b2, eps = hp.get("beta1", 0.9), hp.get("beta2", 0.999), hp.get("epsilon", 1e-8)
    decay = hp.get("schedule_decay", 0.004)
    g = grad * r + wd * w
    if c is not None:
        g = np.clip(g, -c, c)

    def mu(k):
        return b1 * (1 - 0.5 * 0.96 ** (k * decay))

    sched = math.prod(mu(k) for k in range(1, t + 1))
    sched_next = sched * mu(t + 1)
    m, v = st
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g**2
    m_bar = (1 - mu(t)) * g / (1 - sched) + mu(t + 1) * m / (1 - sched_next)
    return w - lr * m_bar / (np.sqrt(v / (1 - b2**t)) + eps), (m, v)


def ref_dcasgd(w, grad, st, lr, wd, t, hp, r, c):
    momentum, lamda = hp.get("momentum", 0.0), hp.get("lamda", 0.04)
    g = _g(grad, r, c)
    mom, prev = st if st is not None else (None, None)
    if prev is None:
        prev = w.copy()  # the state starts as a copy of the weight
        mom = np.zeros_like(w)
    step = -lr * (g + wd * w + lamda * g * g * (w - prev))
    mom = momentum * mom + step
    return w + mom, (mom, w.copy())


def _zeros_state(kind: str, shape: tuple[int, ...]) -> Any:
    z = np.zeros(shape)
    return {"none": None, "one": z, "two": (z, z.copy()), "three": (z, z.copy(), z.copy())}[kind]


# (registered name, kwargs, reference, state layout)
CASES = [
    ("sgd", {"learning_rate": 0.1}, ref_sgd, "none"),
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9}, ref_sgd, "one"),
    ("nag", {"learning_rate": 0.1, "momentum": 0.9}, ref_nag, "one"),
    ("nag", {"learning_rate": 0.1}, ref_nag, "none"),
    ("adam", {"learning_rate": 0.01}, ref_adam, "two"),
    ("adam", {"learning_rate": 0.01, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6}, ref_adam, "two"),
    ("adamw", {"learning_rate": 0.01}, ref_adamw, "two"),
    ("adamw", {"learning_rate": 0.01, "correct_bias": False}, ref_adamw, "two"),
    ("adagrad", {"learning_rate": 0.1}, ref_adagrad, "one"),
    ("adagrad", {"learning_rate": 0.1, "eps": 1e-3}, ref_adagrad, "one"),
    ("adadelta", {"learning_rate": 0.5, "rho": 0.8}, ref_adadelta, "two"),
    ("adadelta", {"learning_rate": 0.5, "epsilon": 1e-3}, ref_adadelta, "two"),
    ("rmsprop", {"learning_rate": 0.01}, ref_rmsprop, "one"),
    ("rmsprop", {"learning_rate": 0.01, "centered": True, "gamma2": 0.8, "gamma1": 0.7}, ref_rmsprop,
     "three"),
    ("rmsprop", {"learning_rate": 0.05, "clip_weights": 0.5}, ref_rmsprop, "one"),
    ("ftrl", {"learning_rate": 0.1, "lamda1": 0.05, "beta": 0.5}, ref_ftrl, "two"),
    ("lamb", {"learning_rate": 0.01}, ref_lamb, "two"),
    ("lamb", {"learning_rate": 0.01, "bias_correction": False, "upper_bound": 1.0}, ref_lamb, "two"),
    ("lamb", {"learning_rate": 0.01, "lower_bound": 5.0}, ref_lamb, "two"),
    ("lars", {"learning_rate": 0.1, "momentum": 0.9, "eta": 0.01}, ref_lars, "one"),
    ("lars", {"learning_rate": 0.1, "eps": 1e-3}, ref_lars, "none"),
    ("signum", {"learning_rate": 0.01, "wd_lh": 0.05}, ref_signum, "one"),
    ("signum", {"learning_rate": 0.01, "momentum": 0.0, "wd_lh": 0.05}, ref_signum, "none"),
    ("ftml", {"learning_rate": 0.05}, ref_ftml, "three"),
    ("ftml", {"learning_rate": 0.05, "beta1": 0.5, "beta2": 0.9, "epsilon": 1e-4}, ref_ftml, "three"),
    ("adamax", {"learning_rate": 0.01}, ref_adamax, "two"),
    ("adamax", {"learning_rate": 0.01, "beta1": 0.8, "beta2": 0.9}, ref_adamax, "two"),
    ("nadam", {"learning_rate": 0.01}, ref_nadam, "two"),
    ("nadam", {"learning_rate": 0.01, "beta1": 0.8, "schedule_decay": 0.1}, ref_nadam, "two"),
    ("dcasgd", {"learning_rate": 0.1}, ref_dcasgd, "none"),
    ("dcasgd", {"learning_rate": 0.1, "momentum": 0.5, "lamda": 0.5}, ref_dcasgd, "none"),
]


def _data(seed: int = 0) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    rng = np.random.default_rng(seed)
    weights = [rng.standard_normal(s) for s in SHAPES]
    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(STEPS)]
    return weights, grads


def _reference(ref, hp, kind, weights, grads, lr, lr_mult, wd_mult, rescale, clip, wd, names=None):
    ws = [w.copy() for w in weights]
    sts = [_zeros_state(kind, w.shape) for w in weights]
    for step, gs in enumerate(grads, start=1):
        for i in range(len(ws)):
            kw = {"name": names[i]} if names else {}
            lr_i = (lr(step) if callable(lr) else lr) * lr_mult[i]
            ws[i], sts[i] = ref(ws[i], gs[i], sts[i], lr_i, wd * wd_mult[i], step, hp, rescale, clip, **kw)
    return ws


@pytest.mark.parametrize("name,hp,ref,kind", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_update_matches_reference(name, hp, ref, kind):
    weights, grads = _data()
    o = opt.create(name, wd=WD, rescale_grad=RESCALE, clip_gradient=CLIP, **hp)
    o.set_lr_mult(dict(LR_MULT))
    o.set_wd_mult(dict(WD_MULT))
    ws = [torch.tensor(w) for w in weights]
    states = [o.create_state(i, w) for i, w in enumerate(ws)]
    for gs in grads:
        for i in range(len(ws)):
            g = torch.tensor(gs[i])
            o.update(i, ws[i], g, states[i])
            assert torch.equal(g, torch.tensor(gs[i])), "update must not modify the gradient"
    expected = _reference(
        ref, hp, kind, weights, grads, hp["learning_rate"], LR_MULT, WD_MULT, RESCALE, CLIP, WD
    )
    for got, want in zip(ws, expected):
        torch.testing.assert_close(got, torch.tensor(want), rtol=1e-9, atol=1e-11)
    assert o.num_update == STEPS


@pytest.mark.parametrize("name,hp,ref,kind", CASES[::3], ids=[c[0] for c in CASES[::3]])
def test_list_update_and_no_clip(name, hp, ref, kind):
    """MXNet 2.0 calling convention (lists), without clipping, with float32 tensors."""
    weights, grads = _data(1)
    o = opt.create(name, wd=WD, rescale_grad=2.0, **hp)
    o.set_lr_mult(dict(LR_MULT))
    o.set_wd_mult(dict(WD_MULT))
    ws = [torch.tensor(w, dtype=torch.float32) for w in weights]
    states = [o.create_state(i, w) for i, w in enumerate(ws)]
    for gs in grads:
        o.update([0, 1], ws, [torch.tensor(g, dtype=torch.float32) for g in gs], states)
    expected = _reference(ref, hp, kind, weights, grads, hp["learning_rate"], LR_MULT, WD_MULT, 2.0, None, WD)
    for got, want in zip(ws, expected):
        torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float32), rtol=2e-4, atol=2e-5)


def test_lars_skips_bias_and_uses_names():
    weights, grads = _data(2)
    names = ["dense0_weight", "dense0_bias"]
    hp = {"learning_rate": 0.1, "momentum": 0.9, "eta": 0.01}
    o = opt.LARS(wd=WD, rescale_grad=RESCALE, param_idx2name=dict(enumerate(names)), **hp)
    o.set_wd_mult({0: 1.0, 1: 1.0})  # keep wd on the bias too, so it shows in the update
    ws = [torch.tensor(w) for w in weights]
    states = [o.create_state(i, w) for i, w in enumerate(ws)]
    for gs in grads:
        for i in range(2):
            o.update(i, ws[i], torch.tensor(gs[i]), states[i])
    ones = {0: 1.0, 1: 1.0}
    expected = _reference(
        ref_lars, hp, "one", weights, grads, 0.1, ones, ones, RESCALE, None, WD, names=names
    )
    for got, want in zip(ws, expected):
        torch.testing.assert_close(got, torch.tensor(want), rtol=1e-9, atol=1e-11)


def test_lr_scheduler_drives_learning_rate():
    weights, grads = _data(3)
    sched = FactorScheduler(step=2, factor=0.5, base_lr=123.0)
    o = opt.SGD(learning_rate=0.2, momentum=0.9, lr_scheduler=sched)
    assert sched.base_lr == 0.2
    ws = [torch.tensor(w) for w in weights]
    states = [o.create_state(i, w) for i, w in enumerate(ws)]
    for gs in grads:
        o.update([0, 1], ws, [torch.tensor(g) for g in gs], states)
    ones = {0: 1.0, 1: 1.0}
    zero_wd = {0: 0.0, 1: 0.0}
    expected = _reference(
        ref_sgd, {"momentum": 0.9}, "one", weights, grads, sched, ones, zero_wd, 1.0, None, 0.0
    )
    for got, want in zip(ws, expected):
        torch.testing.assert_close(got, torch.tensor(want), rtol=1e-9, atol=1e-11)
    assert o.learning_rate == pytest.approx(0.2 * 0.5)  # num_update == 4 -> one decay


def test_learning_rate_cannot_be_set_with_scheduler():
    o = opt.SGD(learning_rate=0.1, lr_scheduler=FactorScheduler(step=10))
    with pytest.raises(opt.LRSchedulerConflictError, match="lr_scheduler"):
        o.learning_rate = 0.5
    with pytest.raises(MXNetError):
        o.set_learning_rate(0.5)
    with pytest.raises(UserWarning):  # what MXNet raises
        o.set_learning_rate(0.5)
    plain = opt.SGD(learning_rate=0.1)
    plain.learning_rate = 0.5
    assert plain.lr == 0.5 and plain.learning_rate == 0.5
    plain.set_learning_rate(-1)  # MXNet takes any finite rate (a negative one ascends)
    assert plain.lr == -1
    with pytest.raises(ValueError, match="nan"):
        plain.set_learning_rate(float("nan"))


def test_learning_rate_none_takes_scheduler_base_lr():
    sched = FactorScheduler(step=5, base_lr=0.3)
    o = opt.Optimizer(learning_rate=None, lr_scheduler=sched)
    assert o.lr == 0.3 and o.learning_rate == 0.3
    assert opt.Optimizer(learning_rate=None).lr == 0.01


def test_param_dict_multipliers_take_precedence():
    class P:
        def __init__(self, lr_mult: float, wd_mult: float) -> None:
            self.lr_mult, self.wd_mult = lr_mult, wd_mult

    o = opt.SGD(learning_rate=0.5, wd=0.2, param_dict={0: P(0.1, 3.0)})
    o.set_lr_mult({0: 7.0, 1: 2.0})
    o.set_wd_mult({1: 0.5})
    assert o._get_lr(0) == pytest.approx(0.05) and o._get_wd(0) == pytest.approx(0.6)
    assert o._get_lr(1) == pytest.approx(1.0) and o._get_wd(1) == pytest.approx(0.1)
    assert o._get_lr(2) == pytest.approx(0.5) and o._get_wd(2) == pytest.approx(0.2)


def test_multipliers_by_name_and_default_wd_mult():
    o = opt.SGD(learning_rate=1.0, wd=0.1, param_idx2name={0: "fc_weight", 1: "fc_bias", 2: "bn_gamma"})
    assert o._get_wd(0) == pytest.approx(0.1)
    assert o._get_wd(1) == 0.0  # names not ending in weight/gamma get no weight decay by default
    assert o._get_wd(2) == pytest.approx(0.1)
    o.set_lr_mult({"fc_bias": 2.0})
    o.set_wd_mult({"fc_bias": 1.0})
    assert o._get_lr(1) == pytest.approx(2.0) and o._get_wd(1) == pytest.approx(0.1)


def test_update_count_and_num_update():
    o = opt.SGD(begin_num_update=5)
    o._update_count(0)
    o._update_count([0, 1])
    o._update_count(2)
    assert o._index_update_count == {0: 7, 1: 6, 2: 6}
    assert o.num_update == 7


def test_no_autograd_history():
    o = opt.Adam(learning_rate=0.1, wd=0.01)
    w = torch.nn.Parameter(torch.randn(4, 3))
    (w * 2).sum().backward()
    st = o.create_state(0, w)
    o.update(0, w, w.grad, st)
    assert w.grad_fn is None and w.requires_grad and w.is_leaf
    assert all(s.grad_fn is None and not s.requires_grad for s in st)


# ------------------------------------------------------------------------------------------------
# fast path: update_multi == per-tensor update
# ------------------------------------------------------------------------------------------------
FUSED = [
    ("sgd", {"momentum": 0.0}),
    ("sgd", {"momentum": 0.9}),
    ("nag", {"momentum": 0.9}),
    ("nag", {"momentum": 0.0}),
    ("adam", {}),
    ("adamw", {}),
    ("adamw", {"correct_bias": False}),
]


@pytest.mark.parametrize("clip", [None, 0.3])
@pytest.mark.parametrize("name,hp", FUSED, ids=[f"{n}-{i}" for i, (n, _) in enumerate(FUSED)])
def test_update_multi_equals_single(name, hp, clip):
    torch.manual_seed(0)
    dtypes = [torch.float32, torch.float32, torch.float64, torch.float32]
    shapes = [(4, 3), (7,), (2, 2, 2), (5,)]

    def make():
        o = opt.create(name, learning_rate=0.05, wd=0.01, rescale_grad=0.7, clip_gradient=clip, **hp)
        o.set_lr_mult({1: 0.5})  # a second lr group
        o.set_wd_mult({3: 0.0})  # a second wd group
        return o

    base = [torch.randn(s, dtype=d) for s, d in zip(shapes, dtypes)]
    grads = [[torch.randn(s, dtype=d) for s, d in zip(shapes, dtypes)] for _ in range(3)]
    o1, o2 = make(), make()
    w1 = [b.clone() for b in base]
    w2 = [b.clone() for b in base]
    s1 = [o1.create_state(i, w) for i, w in enumerate(w1)]
    s2 = [o2.create_state(i, w) for i, w in enumerate(w2)]
    for gs in grads:
        for i in range(len(w1)):
            o1.update(i, w1[i], gs[i], s1[i])
        o2.update_multi(list(range(len(w2))), w2, gs, s2)
    for a, b in zip(w1, w2):
        assert torch.equal(a, b)
    assert o1._index_update_count == o2._index_update_count
    assert o1.num_update == o2.num_update == 3


def test_update_multi_bad_lists():
    o = opt.SGD()
    with pytest.raises(ValueError, match="equal length"):
        o.update_multi([0, 1], [torch.zeros(2)], [torch.zeros(2)], [None])
    with pytest.raises(TypeError, match="torch.Tensor"):
        o.update(0, np.zeros(2), torch.zeros(2), None)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        o.update(0, torch.zeros(2), torch.zeros(3), None)
    with pytest.raises(TypeError, match="list"):
        o.update([0, 1], torch.zeros(2), torch.zeros(2), None)
    with pytest.raises(MXNetError, match="momentum"):
        opt.SGD(momentum=0.9).update(0, torch.zeros(2), torch.zeros(2), None)
    with pytest.raises(MXNetError, match=r"\(mean, var\)"):
        opt.Adam().update_multi([0, 1], [torch.zeros(2)] * 2, [torch.zeros(2)] * 2, [None, None])
    with pytest.raises(TypeError, match="index 1"):
        opt.Adam().update_multi([0, 1], [torch.zeros(2), "w"], [torch.zeros(2)] * 2, [None, None])


# ------------------------------------------------------------------------------------------------
# multi-precision
# ------------------------------------------------------------------------------------------------
MP_CASES = [
    ("sgd", {"momentum": 0.9, "learning_rate": 0.1}),
    ("adam", {"learning_rate": 0.01}),
    ("adamw", {"learning_rate": 0.01}),
    ("rmsprop", {"learning_rate": 0.01, "centered": True}),
    ("lamb", {"learning_rate": 0.01}),
    ("adagrad", {"learning_rate": 0.1}),
    ("nag", {"momentum": 0.9, "learning_rate": 0.1}),
    ("lars", {"momentum": 0.9, "learning_rate": 0.1}),
    ("ftml", {"learning_rate": 0.05}),
    ("adamax", {"learning_rate": 0.01}),
    ("nadam", {"learning_rate": 0.01}),
    ("dcasgd", {"learning_rate": 0.1, "momentum": 0.5}),
    ("adadelta", {}),
    ("signum", {}),
    ("ftrl", {}),
]


@pytest.mark.parametrize("low", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name,hp", MP_CASES, ids=[c[0] for c in MP_CASES])
def test_multi_precision_master_matches_fp32(name, hp, low):
    torch.manual_seed(1)
    w_low = [torch.randn(6, 3).to(low), torch.randn(4).to(low)]
    grads = [[torch.randn(6, 3).to(low), torch.randn(4).to(low)] for _ in range(3)]
    mp = opt.create(name, multi_precision=True, wd=0.01, rescale_grad=0.5, **hp)
    ref = opt.create(name, wd=0.01, rescale_grad=0.5, **hp)
    w32 = [w.float() for w in w_low]
    mp_states = [mp.create_state_multi_precision(i, w) for i, w in enumerate(w_low)]
    ref_states = [ref.create_state(i, w) for i, w in enumerate(w32)]
    # MXNet's layouts: (momentum, master) for SGD, NAG, LARS; (master, inner state) for the others
    masters = [st[1] if name in ("sgd", "nag", "lars") else st[0] for st in mp_states]
    for master in masters:
        assert master.dtype == torch.float32
    for gs in grads:
        mp.update_multi_precision([0, 1], w_low, gs, mp_states)
        ref.update([0, 1], w32, [g.float() for g in gs], ref_states)
    for w, master, want in zip(w_low, masters, w32):
        assert w.dtype == low
        torch.testing.assert_close(master, want, rtol=1e-6, atol=1e-7)
        assert torch.equal(w, master.to(low))


def test_multi_precision_single_index_and_bad_state():
    o = opt.SGD(learning_rate=0.1, multi_precision=True)
    w = torch.ones(3, dtype=torch.float16)
    st = o.create_state_multi_precision(0, w)
    assert isinstance(st, tuple) and st[0] is None  # (momentum, master): no momentum state
    o.update_multi_precision(0, w, torch.full((3,), 0.5, dtype=torch.float16), st)
    torch.testing.assert_close(st[1], torch.full((3,), 0.95))
    with pytest.raises(MXNetError, match="master"):
        o.update_multi_precision(0, w, torch.ones(3, dtype=torch.float16), None)
    # fp32 weights pass straight through even with multi_precision
    w32 = torch.ones(2)
    o.update_multi_precision(1, w32, torch.ones(2), o.create_state_multi_precision(1, w32))
    torch.testing.assert_close(w32, torch.full((2,), 0.9))


def test_low_precision_without_multi_precision_warns():
    with pytest.warns(UserWarning, match="multi_precision"):
        opt.SGD().create_state_multi_precision(0, torch.zeros(2, dtype=torch.float16))


# ------------------------------------------------------------------------------------------------
# registry and argument checks
# ------------------------------------------------------------------------------------------------
ALIASES = ["sgd", "nag", "adam", "adamw", "adagrad", "adadelta", "rmsprop", "ftrl", "lamb", "lars", "signum"]


@pytest.mark.parametrize("alias", ALIASES)
def test_create_by_alias(alias):
    o = opt.create(alias.upper())
    assert type(o).__name__.lower() == alias
    assert isinstance(o, opt.Optimizer)


def test_documented_defaults():
    """MXNet 1.9's defaults."""
    assert opt.SGD().lr == 0.01 and opt.SGD().momentum == 0.0 and opt.SGD().lazy_update is True
    assert opt.NAG().momentum == 0.0 and opt.NAG().lr == 0.01
    a = opt.Adam()
    assert (a.lr, a.beta1, a.beta2, a.epsilon, a.lazy_update) == (0.001, 0.9, 0.999, 1e-8, True)
    assert opt.AdamW().epsilon == 1e-6 and opt.AdamW().correct_bias is True
    assert opt.AdaGrad().float_stable_eps == 1e-7 and opt.AdaGrad().lr == 0.01
    d = opt.AdaDelta()
    assert (d.rho, d.epsilon) == (0.9, 1e-5)
    r = opt.RMSProp()
    assert (r.lr, r.gamma1, r.gamma2, r.epsilon, r.centered, r.clip_weights) == (
        0.001,
        0.9,
        0.9,
        1e-8,
        False,
        None,
    )
    f = opt.Ftrl()
    assert (f.lr, f.lamda1, f.beta) == (0.1, 0.01, 1.0)
    la = opt.LAMB()
    assert (la.epsilon, la.lower_bound, la.upper_bound, la.bias_correction) == (1e-6, None, None, True)
    lr = opt.LARS()
    assert (lr.lr, lr.momentum, lr.eta, lr.eps, lr.lazy_update, lr.momentum_correction) == (
        0.01, 0.0, 0.001, 0.0, True, True)
    s = opt.Signum()
    assert (s.lr, s.momentum, s.wd_lh) == (0.01, 0.9, 0.0)
    fm = opt.FTML()
    assert (fm.lr, fm.beta1, fm.beta2, fm.epsilon) == (0.01, 0.6, 0.999, 1e-8)
    ax = opt.Adamax()
    assert (ax.lr, ax.beta1, ax.beta2) == (0.002, 0.9, 0.999)
    na = opt.Nadam()
    assert (na.lr, na.beta1, na.beta2, na.epsilon, na.schedule_decay) == (0.001, 0.9, 0.999, 1e-8, 0.004)
    dc = opt.DCASGD()
    assert (dc.lr, dc.momentum, dc.lamda) == (0.01, 0.0, 0.04)
    lb = opt.LBSGD()
    assert (lb.lr, lb.momentum, lb.warmup_strategy) == (0.01, 0.0, "linear")
    assert (lb.warmup_epochs, lb.batch_scale, lb.updates_per_epoch) == (5, 1, 32)
    assert opt.SGLD().lr == 0.01
    # only SGD, Adam, LARS (lazy_update), AdaGrad, Ftrl and contrib.GroupAdaGrad update row_sparse
    # gradients lazily
    lazy = {n for n, k in opt.Optimizer.opt_registry.items() if k.lazy_update or k().lazy_update}
    assert lazy == {"sgd", "ccsgd", "adam", "lars", "adagrad", "ftrl", "groupadagrad"}


def test_create_errors_and_instances():
    with pytest.raises(ValueError, match="unknown optimizer 'nope'.*adam"):
        opt.create("nope")
    o = opt.Adam()
    assert opt.create(o) is o
    with pytest.raises(ValueError, match="instance"):
        opt.create(o, learning_rate=0.1)
    assert isinstance(opt.create(opt.SGD, momentum=0.5), opt.SGD)
    with pytest.raises(TypeError):
        opt.create(3)  # type: ignore[arg-type]


def test_registering_a_taken_name_warns_and_replaces_as_mxnet():
    class Sgd(opt.Optimizer):
        pass

    try:
        with pytest.warns(UserWarning, match=r"optimizer 'sgd': .*Sgd replaces .*SGD"):
            opt.register(Sgd)
        assert type(opt.create("SGD")) is Sgd
    finally:
        opt.base._REGISTRY.remove("sgd")
        opt.register(opt.SGD)
    assert type(opt.create("sgd")) is opt.SGD

    class ZzTestOnlyOptimizer(opt.Optimizer):
        pass

    assert opt.register(ZzTestOnlyOptimizer) is ZzTestOnlyOptimizer
    assert opt.register(ZzTestOnlyOptimizer) is ZzTestOnlyOptimizer  # same class again: quiet
    assert isinstance(opt.create("zztestonlyoptimizer"), ZzTestOnlyOptimizer)
    assert opt.Optimizer.opt_registry["ZzTestOnlyOptimizer"] is ZzTestOnlyOptimizer
    opt.base._REGISTRY.remove("zztestonlyoptimizer")
    with pytest.raises(ValueError, match=r"unknown optimizer 'zztestonlyoptimizer': known optimizers are"):
        opt.create("zztestonlyoptimizer")
    with pytest.raises(TypeError):
        opt.register(int)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name,kwargs,exc,match",
    [
        ("sgd", {"learning_rate": float("inf")}, ValueError, "learning_rate"),
        ("sgd", {"learning_rate": True}, TypeError, "learning_rate"),
        ("sgd", {"momentum": 1.0}, ValueError, "momentum must be < 1.0, got 1.0"),
        ("sgd", {"wd": -1}, ValueError, "wd"),
        ("sgd", {"clip_gradient": 0}, ValueError, "clip_gradient must be > 0.0, got 0"),
        ("sgd", {"momentun": 0.9}, TypeError, "momentun"),
        ("adam", {"beta1": 1.0}, ValueError, "beta1"),
        ("adam", {"beta2": -0.1}, ValueError, "beta2"),
        ("adam", {"epsilon": float("nan")}, ValueError, "epsilon"),
        ("adamw", {"correct_bias": 1}, TypeError, "correct_bias"),
        ("rmsprop", {"gamma1": 1.5}, ValueError, "gamma1"),
        ("rmsprop", {"rho": 0.5, "gamma1": 0.7}, ValueError, "rho"),
        ("lbsgd", {"warmup_strategy": "cubic"}, ValueError, "warmup_strategy"),
        ("lbsgd", {"batch_scale": 0}, ValueError, "batch_scale"),
        ("rmsprop", {"clip_weights": -1.0}, ValueError, "clip_weights"),
        ("lamb", {"lower_bound": 2.0, "upper_bound": 1.0}, ValueError, "lower_bound"),
        ("ftrl", {"learning_rate": 0.0}, ValueError, "learning_rate must be > 0"),
        ("signum", {"momentum": 2}, ValueError, "momentum"),
        ("sgd", {"multi_precision": "yes"}, TypeError, "multi_precision"),
        ("sgd", {"lr_scheduler": 0.1}, TypeError, "lr_scheduler"),
    ],
)
def test_bad_hyper_parameters(name, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        opt.create(name, **kwargs)


def test_unknown_kwarg_lists_accepted_names():
    with pytest.raises(TypeError, match=r"beta3.*beta1"):
        opt.Adam(beta3=0.5)


def test_mxnet2_names_are_accepted():
    """MXNet 2.0 renamed AdaGrad's eps and RMSProp's gamma1/gamma2; both spellings work."""
    assert opt.AdaGrad(eps=1e-3).float_stable_eps == 1e-3
    assert opt.AdaGrad(epsilon=1e-4).float_stable_eps == 1e-4
    r = opt.RMSProp(gamma1=0.8, gamma2=0.7)
    assert (r.gamma1, r.gamma2) == (0.8, 0.7)
    r = opt.RMSProp(rho=0.6, momentum=0.5)
    assert (r.gamma1, r.gamma2) == (0.6, 0.5)


def test_fused_kwargs_accepted_for_compat():
    opt.SGD(use_fused_step=True, aggregate_num=4)


# ------------------------------------------------------------------------------------------------
# Updater
# ------------------------------------------------------------------------------------------------
def _train(updater, weights, grad_seq):
    for gs in grad_seq:
        updater([0, 1], gs, weights)


@pytest.mark.parametrize(
    "name,hp",
    [
        ("adam", {"learning_rate": 0.01}),
        ("sgd", {"momentum": 0.9}),
        ("sgd", {}),
        ("rmsprop", {"centered": True}),
        ("rmsprop", {}),
        ("ftml", {}),
        ("nadam", {}),
        ("dcasgd", {}),
        ("dcasgd", {"momentum": 0.5}),
        ("adamax", {}),
    ],
)
def test_updater_states_round_trip(name, hp):
    torch.manual_seed(2)
    w0 = [torch.randn(3, 2), torch.randn(4)]
    grads = [[torch.randn(3, 2), torch.randn(4)] for _ in range(5)]
    u1 = opt.get_updater(opt.create(name, wd=0.01, **hp))
    w1 = [w.clone() for w in w0]
    _train(u1, w1, grads[:3])
    blob = u1.get_states()
    assert isinstance(blob, bytes)

    u2 = opt.Updater(opt.create(name, wd=0.01, **hp))
    u2.set_states(blob)
    assert u2.optimizer.num_update == 3 and u2.optimizer._index_update_count == {0: 3, 1: 3}
    w2 = [w.clone() for w in w1]
    _train(u1, w1, grads[3:])
    _train(u2, w2, grads[3:])
    for a, b in zip(w1, w2):
        assert torch.equal(a, b)


def test_updater_single_index_calls_and_lazy_states():
    u = opt.Updater(opt.SGD(learning_rate=0.1, momentum=0.5))
    w = torch.ones(2)
    u(7, torch.ones(2), w)
    assert set(u.states) == {7} and isinstance(u.states[7], torch.Tensor)
    u(7, torch.ones(2), w)
    # mom: -0.1 then 0.5 * -0.1 - 0.1 = -0.15
    torch.testing.assert_close(w, torch.full((2,), 1 - 0.1 - 0.15))


def test_updater_dump_optimizer_restores_hyper_parameters():
    u1 = opt.Updater(opt.SGD(learning_rate=0.3, momentum=0.7, wd=0.02))
    u1.optimizer.set_lr_mult({0: 0.5})
    w = torch.ones(3)
    u1(0, torch.ones(3), w)
    blob = u1.get_states(dump_optimizer=True)
    u2 = opt.Updater(opt.SGD(learning_rate=1.0, momentum=0.1))
    u2.set_states(blob)
    o = u2.optimizer
    assert (o.lr, o.momentum, o.wd, o.lr_mult) == (0.3, 0.7, 0.02, {0: 0.5})
    with pytest.raises(MXNetError, match="'sgd'"):
        opt.Updater(opt.Adam()).set_states(blob)


def test_updater_multi_precision_round_trip():
    u1 = opt.Updater(opt.Adam(learning_rate=0.01, multi_precision=True))
    w = torch.randn(5).half()
    u1(0, torch.randn(5).half(), w)
    blob = u1.get_states()
    u2 = opt.Updater(opt.Adam(learning_rate=0.01, multi_precision=True))
    u2.set_states(blob)
    master, (m, v) = u2.states[0]
    torch.testing.assert_close(master, u1.states[0][0])
    g = torch.randn(5).half()
    w2 = w.clone()
    u1(0, g, w)
    u2(0, g, w2)
    assert torch.equal(w, w2)


_PWNED: list[int] = []


def _pwn() -> None:
    _PWNED.append(1)


class _Evil:
    def __reduce__(self):
        return (_pwn, ())


def test_set_states_rejects_corrupt_and_pickled_blobs():
    u = opt.Updater(opt.SGD())
    with pytest.raises(MXNetError, match="cannot load optimizer states"):
        u.set_states(b"\x00not a state blob\xff" * 3)
    with pytest.raises(MXNetError):
        u.set_states(pickle.dumps({0: _Evil()}))
    assert _PWNED == [], "set_states must never unpickle arbitrary objects"
    buf = io.BytesIO()
    torch.save([1, 2, 3], buf)
    with pytest.raises(MXNetError, match="list"):
        u.set_states(buf.getvalue())
    buf = io.BytesIO()
    torch.save({"format": "something else"}, buf)
    with pytest.raises(MXNetError, match="format"):
        u.set_states(buf.getvalue())
    with pytest.raises(TypeError):
        u.set_states("not bytes")  # type: ignore[arg-type]
    good = opt.Updater(opt.SGD()).get_states()
    with pytest.raises(MXNetError):
        u.set_states(good[: len(good) // 2])


def test_updater_needs_optimizer():
    with pytest.raises(TypeError):
        opt.Updater("sgd")  # type: ignore[arg-type]
