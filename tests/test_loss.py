"""mxtorch.gluon.loss against numpy versions of MXNet's formulas."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from mxtorch.base import MXNetError
from mxtorch.gluon import HybridBlock
from mxtorch.gluon import loss as gloss

RNG = np.random.default_rng(0)


def t(a: np.ndarray, grad: bool = False) -> torch.Tensor:
    x = torch.tensor(np.asarray(a), dtype=torch.float64)
    return x.requires_grad_(grad)


def batch_mean(x: np.ndarray, batch_axis: int = 0) -> np.ndarray:
    axes = tuple(d for d in range(x.ndim) if d != batch_axis % x.ndim)
    return x.mean(axis=axes) if axes else x


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def softplus(x: np.ndarray) -> np.ndarray:
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def check(out: torch.Tensor, ref: np.ndarray, shape: tuple[int, ...] | None = None) -> None:
    assert isinstance(out, torch.Tensor)
    if shape is not None:
        assert tuple(out.shape) == shape
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-7, atol=1e-9)


def backward_ok(out: torch.Tensor, *inputs: torch.Tensor) -> None:
    out.sum().backward()
    for x in inputs:
        assert x.grad is not None and torch.isfinite(x.grad).all()


# ---- element-wise regression / classification losses ----------------------------------------
def _elementwise_cases():
    """(loss factory, numpy element-wise formula, label generator)."""
    real = lambda s: RNG.normal(size=s)  # noqa: E731
    signed = lambda s: RNG.choice([-1.0, 1.0], size=s)  # noqa: E731
    binary = lambda s: RNG.integers(0, 2, size=s).astype(np.float64)  # noqa: E731
    prob = lambda s: RNG.uniform(0.05, 1, size=s)  # noqa: E731
    return [
        ("L1", lambda **k: gloss.L1Loss(**k), lambda p, y: np.abs(p - y), real),
        ("L2", lambda **k: gloss.L2Loss(**k), lambda p, y: 0.5 * (p - y) ** 2, real),
        ("Huber", lambda **k: gloss.HuberLoss(rho=0.7, **k),
         lambda p, y: np.where(np.abs(p - y) > 0.7, np.abs(p - y) - 0.35, (p - y) ** 2 / 1.4), real),
        ("Hinge", lambda **k: gloss.HingeLoss(margin=1.5, **k),
         lambda p, y: np.maximum(0, 1.5 - p * y), signed),
        ("SqHinge", lambda **k: gloss.SquaredHingeLoss(**k),
         lambda p, y: np.maximum(0, 1 - p * y) ** 2, signed),
        ("LogisticSigned", lambda **k: gloss.LogisticLoss(**k),
         lambda p, y: np.log1p(np.exp(-p * y)), signed),
        ("LogisticBinary", lambda **k: gloss.LogisticLoss(label_format="binary", **k),
         lambda p, y: np.log1p(np.exp(-p * (2 * y - 1))), binary),
        ("BCE", lambda **k: gloss.SigmoidBCELoss(**k),
         lambda p, y: -(y * np.log(1 / (1 + np.exp(-p))) + (1 - y) * np.log(1 - 1 / (1 + np.exp(-p)))), prob),
    ]


CASES = _elementwise_cases()


@pytest.mark.parametrize("name,make,fn,gen", CASES, ids=[c[0] for c in CASES])
def test_elementwise_2d_weights_and_grad(name, make, fn, gen):
    p, y = RNG.normal(size=(4, 5)), gen((4, 5))
    sw = RNG.uniform(0.5, 2, size=(4, 1))
    pred = t(p, grad=True)
    out = make()(pred, t(y))
    check(out, fn(p, y).mean(axis=1), (4,))
    # global weight and broadcast sample_weight
    out = make(weight=3.0)(pred, t(y), t(sw))
    scale = 3.0
    check(out, (fn(p, y) * sw * scale).mean(axis=1), (4,))
    backward_ok(out, pred)


@pytest.mark.parametrize("name,make,fn,gen", CASES, ids=[c[0] for c in CASES])
def test_elementwise_3d_and_batch_axis(name, make, fn, gen):
    p, y = RNG.normal(size=(3, 4, 2)), gen((3, 4, 2))
    check(make()(t(p), t(y)), fn(p, y).mean(axis=(1, 2)), (3,))
    # label of a different shape but the same size is reshaped like pred
    check(make()(t(p), t(y.reshape(3, 8))), fn(p, y).mean(axis=(1, 2)), (3,))
    check(make(batch_axis=1)(t(p), t(y)), fn(p, y).mean(axis=(0, 2)), (4,))


def test_l2_is_half_squared_error():
    out = gloss.L2Loss()(torch.tensor([[3.0]]), torch.tensor([[1.0]]))
    assert out.item() == pytest.approx(2.0)
    three, one = torch.tensor([[3.0]]), torch.tensor([[1.0]])
    assert gloss.L2Loss(weight=None)(three, one).item() == pytest.approx(2.0)
    assert gloss.L2Loss(weight=4)(three, one).item() == pytest.approx(8.0)


def test_label_size_mismatch_is_a_clear_error():
    with pytest.raises(MXNetError, match="same number of elements"):
        gloss.L1Loss()(torch.zeros(2, 3), torch.zeros(2, 2))
    with pytest.raises(MXNetError, match="broadcast"):
        gloss.L1Loss()(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(3, 1))
    with pytest.raises(TypeError, match="weight"):
        gloss.L1Loss(weight="2")


def test_sample_weight_per_sample_vector():
    p, y = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    sw = np.array([1.0, 0.0, 2.0])
    out = gloss.L1Loss()(t(p), t(y), t(sw[:, None]))
    check(out, np.abs(p - y).mean(1) * sw, (3,))
    # a python scalar works too
    check(gloss.L1Loss()(t(p), t(y), 0.5), np.abs(p - y).mean(1) * 0.5, (3,))


# ---- sigmoid BCE details ---------------------------------------------------------------------
def _bce_ref(p, y, pw=1.0, from_sigmoid=False):
    prob = p if from_sigmoid else 1 / (1 + np.exp(-p))
    eps = 1e-12 if from_sigmoid else 0.0
    return -(pw * y * np.log(prob + eps) + (1 - y) * np.log(1 - prob + eps))


def test_bce_pos_weight_and_from_sigmoid():
    p, y = RNG.normal(size=(4, 3)), RNG.integers(0, 2, size=(4, 3)).astype(np.float64)
    pw = np.array([[0.5, 2.0, 3.0]])
    pred = t(p, grad=True)
    out = gloss.SigmoidBinaryCrossEntropyLoss()(pred, t(y), pos_weight=t(pw))
    check(out, _bce_ref(p, y, pw).mean(1), (4,))
    backward_ok(out, pred)
    # keyword order as MXNet 2: (pred, label, sample_weight, pos_weight)
    sw = RNG.uniform(size=(4, 1))
    out = gloss.SigmoidBCELoss(weight=2.0)(t(p), t(y), t(sw), t(pw))
    check(out, (_bce_ref(p, y, pw) * sw * 2).mean(1))
    q = 1 / (1 + np.exp(-p))
    check(gloss.SigmoidBCELoss(from_sigmoid=True)(t(q), t(y)), _bce_ref(q, y, from_sigmoid=True).mean(1))
    check(gloss.SigmoidBCELoss(from_sigmoid=True)(t(q), t(y), pos_weight=t(pw)),
          _bce_ref(q, y, pw, from_sigmoid=True).mean(1))
    assert gloss.SigmoidBCELoss is gloss.SigmoidBinaryCrossEntropyLoss


def test_bce_is_stable_for_large_logits():
    pred = torch.tensor([[1000.0, -1000.0]], requires_grad=True)
    out = gloss.SigmoidBCELoss()(pred, torch.tensor([[0.0, 1.0]]))
    assert out.item() == pytest.approx(1000.0)
    out.backward()
    assert torch.isfinite(pred.grad).all()


# ---- softmax cross-entropy -------------------------------------------------------------------
def _sce_ref(p, label, axis=-1, sparse=True, from_logits=False):
    lp = p if from_logits else log_softmax(p, axis)
    if sparse:
        return -np.take_along_axis(lp, np.expand_dims(label.astype(np.int64), axis), axis)
    return -(lp * label).sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("label_dtype", [torch.int64, torch.int32, torch.float32])
def test_softmax_ce_sparse_2d(label_dtype):
    p, lab = RNG.normal(size=(6, 5)), RNG.integers(0, 5, size=6)
    pred = t(p, grad=True)
    out = gloss.SoftmaxCrossEntropyLoss()(pred, torch.tensor(lab).to(label_dtype))
    check(out, batch_mean(_sce_ref(p, lab)), (6,))
    backward_ok(out, pred)
    # (batch, 1) labels are accepted, as are sample weights and a global weight
    sw = RNG.uniform(size=(6, 1))
    out = gloss.SoftmaxCELoss(weight=0.5)(t(p), torch.tensor(lab).reshape(6, 1), t(sw))
    check(out, batch_mean(_sce_ref(p, lab) * sw * 0.5), (6,))
    assert gloss.SoftmaxCELoss is gloss.SoftmaxCrossEntropyLoss


def test_softmax_ce_sparse_equals_dense_and_from_logits():
    p, lab = RNG.normal(size=(5, 4)), RNG.integers(0, 4, size=5)
    onehot = np.eye(4)[lab]
    sparse = gloss.SoftmaxCELoss()(t(p), torch.tensor(lab))
    dense = gloss.SoftmaxCELoss(sparse_label=False)(t(p), t(onehot))
    check(sparse, dense.detach().numpy())
    lp = log_softmax(p)
    check(gloss.SoftmaxCELoss(from_logits=True)(t(lp), torch.tensor(lab)), sparse.detach().numpy())
    check(gloss.SoftmaxCELoss(from_logits=True, sparse_label=False)(t(lp), t(onehot)),
          sparse.detach().numpy())
    # a real distribution as dense label
    dist = RNG.dirichlet(np.ones(4), size=5)
    pred = t(p, grad=True)
    out = gloss.SoftmaxCELoss(sparse_label=False)(pred, t(dist))
    check(out, batch_mean(_sce_ref(p, dist, sparse=False)), (5,))
    backward_ok(out, pred)


@pytest.mark.parametrize("axis", [-1, 1, 2])
def test_softmax_ce_nd_and_axis(axis):
    p = RNG.normal(size=(3, 4, 5))
    red = list(p.shape)
    del red[axis]
    lab = RNG.integers(0, p.shape[axis], size=red)
    out = gloss.SoftmaxCELoss(axis=axis)(t(p), torch.tensor(lab))
    check(out, batch_mean(_sce_ref(p, lab, axis)), (3,))
    sw = RNG.uniform(size=(3, 1, 1))
    out = gloss.SoftmaxCELoss(axis=axis)(t(p), torch.tensor(lab).float(), t(sw))
    check(out, batch_mean(_sce_ref(p, lab, axis) * sw), (3,))
    onehot = np.moveaxis(np.eye(p.shape[axis])[lab], -1, axis)
    dense = gloss.SoftmaxCELoss(axis=axis, sparse_label=False)(t(p), t(onehot))
    check(dense, batch_mean(_sce_ref(p, lab, axis)), (3,))


def test_softmax_ce_batch_axis_1():
    p = RNG.normal(size=(4, 3, 5))  # (T, N, C)
    lab = RNG.integers(0, 5, size=(4, 3))
    out = gloss.SoftmaxCELoss(batch_axis=1)(t(p), torch.tensor(lab))
    check(out, batch_mean(_sce_ref(p, lab), 1), (3,))
    sw = RNG.uniform(size=(1, 3, 1))
    out = gloss.SoftmaxCELoss(batch_axis=1)(t(p), torch.tensor(lab), t(sw))
    check(out, batch_mean(_sce_ref(p, lab) * sw, 1), (3,))


def test_softmax_ce_bad_label_shape():
    with pytest.raises(MXNetError, match="sparse label"):
        gloss.SoftmaxCELoss()(torch.zeros(4, 3), torch.zeros(5, dtype=torch.long))


# ---- KL / Poisson details --------------------------------------------------------------------
def test_kldiv_sums_over_non_batch_axes():
    # MXNet 1.9's KLDivLoss sums label * (log(label) - pred) over every axis but batch_axis
    p, y = RNG.normal(size=(3, 4, 2)), RNG.uniform(0.05, 1, size=(3, 4, 2))
    elem = y * (np.log(y + 1e-12) - p)
    check(gloss.KLDivLoss()(t(p), t(y)), elem.sum(axis=(1, 2)), (3,))
    check(gloss.KLDivLoss(batch_axis=1)(t(p), t(y)), elem.sum(axis=(0, 2)), (4,))
    sw = RNG.uniform(size=(3, 1, 1))
    check(gloss.KLDivLoss(weight=2.0)(t(p), t(y), t(sw)), (elem * sw * 2).sum(axis=(1, 2)), (3,))
    # hand value: label (0.5, 0.5) against log-probs log(0.25), log(0.75)
    out = gloss.KLDivLoss()(torch.tensor([[math.log(0.25), math.log(0.75)]]), torch.tensor([[0.5, 0.5]]))
    assert out.item() == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(0.5 / 0.75), rel=1e-6)


def test_kldiv_from_logits_false_applies_log_softmax():
    p, y = RNG.normal(size=(3, 4)), RNG.dirichlet(np.ones(4), size=3)
    out = gloss.KLDivLoss(from_logits=False)(t(p), t(y))
    check(out, (y * (np.log(y + 1e-12) - log_softmax(p))).sum(1), (3,))
    out2 = gloss.KLDivLoss()(t(log_softmax(p)), t(y))
    check(out2, out.detach().numpy())


def test_poisson_is_one_mean_over_every_element():
    # MXNet 1.9 returns F.mean(loss): one value, batch included, shape (1,)
    p, y = RNG.normal(size=(4, 3)), RNG.uniform(0.05, 1, size=(4, 3))
    pred = t(p, grad=True)
    out = gloss.PoissonNLLLoss()(pred, t(y))
    check(out, np.array([(np.exp(p) - y * p).mean()]), (1,))
    backward_ok(out, pred)
    sw = RNG.uniform(size=(4, 1))
    check(gloss.PoissonNLLLoss(weight=3.0)(t(p), t(y), t(sw)),
          np.array([((np.exp(p) - y * p) * sw * 3).mean()]), (1,))
    from mxtorch import util
    with util.np_array(True):
        assert gloss.PoissonNLLLoss()(t(p), t(y)).shape == ()


def test_poisson_variants():
    rate, target = RNG.uniform(0.5, 3, size=(4, 3)), RNG.integers(0, 6, size=(4, 3)).astype(np.float64)
    pred = t(rate, grad=True)
    out = gloss.PoissonNLLLoss(from_logits=False)(pred, t(target))
    check(out, [(rate - target * np.log(rate + 1e-8)).mean()], (1,))
    backward_ok(out, pred)
    out = gloss.PoissonNLLLoss(compute_full=True)(t(np.log(rate)), t(target))
    with np.errstate(divide="ignore", invalid="ignore"):
        st = target * np.log(target) - target + 0.5 * np.log(2 * np.pi * target)
    st = np.where(target > 1, st, 0.0)
    check(out, [(rate - target * np.log(rate) + st).mean()], (1,))
    assert torch.isfinite(out).all()  # zero counts must not turn the Stirling term into nan


# ---- triplet / cosine / SDML -----------------------------------------------------------------
def test_triplet():
    p, pos, neg = (RNG.normal(size=(4, 2, 3)) for _ in range(3))
    pred = t(p, grad=True)
    out = gloss.TripletLoss(margin=0.5)(pred, t(pos), t(neg))
    ref = np.maximum(((pos - p) ** 2 - (neg - p) ** 2).sum(axis=(1, 2)) + 0.5, 0)
    check(out, ref, (4,))
    backward_ok(out, pred)
    sw = RNG.uniform(size=4)
    check(gloss.TripletLoss(weight=2)(t(p), t(pos), t(neg), t(sw)),
          np.maximum(((pos - p) ** 2 - (neg - p) ** 2).sum(axis=(1, 2)) + 1, 0) * sw * 2)


def test_cosine_embedding():
    a, b = RNG.normal(size=(6, 4)), RNG.normal(size=(6, 4))
    b[0] = a[0]
    lab = np.array([1, -1, 1, -1, -1, 1], dtype=np.float64)
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    for margin in (0.0, 0.2):
        x1 = t(a, grad=True)
        out = gloss.CosineEmbeddingLoss(margin=margin)(x1, t(b), t(lab))
        ref = np.where(lab == 1, 1 - cos, np.maximum(cos - margin, 0))
        check(out, ref[:, None], (6, 1))  # MXNet 1.9 returns one row per pair: (batch, 1)
        backward_ok(out, x1)
    assert out[0].item() == pytest.approx(0.0, abs=1e-12)
    sw = RNG.uniform(size=(6, 1))
    check(gloss.CosineEmbeddingLoss(weight=3)(t(a), t(b), t(lab), t(sw)),
          (np.where(lab == 1, 1 - cos, np.maximum(cos, 0)) * 3)[:, None] * sw)
    # a label that is neither 1 nor -1 contributes nothing
    check(gloss.CosineEmbeddingLoss()(t(a[:2]), t(b[:2]), t([0.0, 0.0])), np.zeros((2, 1)))
    # 3-D inputs: one pair per vector along the last axis
    a3, b3 = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 3, 4))
    cos3 = (a3 * b3).sum(-1) / (np.linalg.norm(a3, axis=-1) * np.linalg.norm(b3, axis=-1))
    check(gloss.CosineEmbeddingLoss()(t(a3), t(b3), t(np.ones(6))), (1 - cos3).reshape(6, 1), (6, 1))
    with pytest.raises(MXNetError, match="pair"):
        gloss.CosineEmbeddingLoss()(t(a), t(b), t(np.ones(5)))


def test_sdml():
    x1, x2 = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    d = ((x1[:, None, :] - x2[None, :, :]) ** 2).sum(2)
    s = 0.3
    lab = np.eye(4) * (1 - s) + (1 - np.eye(4)) * s / 3
    ref = (lab * (np.log(lab + 1e-12) - log_softmax(-d, 1))).sum(1)  # KLDivLoss sums
    a = t(x1, grad=True)
    out = gloss.SDMLLoss()(a, t(x2))
    check(out, ref, (4,))
    backward_ok(out, a)


# ---- CTC -------------------------------------------------------------------------------------
def _ctc_brute(probs: np.ndarray, label: list[int], blank: int) -> float:
    """-log of the summed probability of every path (T, C) that collapses to ``label``."""
    t_len, c = probs.shape
    total = 0.0
    for path in itertools.product(range(c), repeat=t_len):
        collapsed = [k for i, k in enumerate(path) if (i == 0 or k != path[i - 1])]
        if [k for k in collapsed if k != blank] == label:
            total += math.prod(probs[i, k] for i, k in enumerate(path))
    return -math.log(total)


def _softmax(x):
    return np.exp(log_softmax(x))


def test_ctc_hand_checked_example():
    # T=2, alphabet {a, blank}: label 'a' is produced by paths aa, a_, _a
    probs = np.array([[0.6, 0.4], [0.3, 0.7]])
    pred = t(np.log(probs)[None])  # NTC, log-probs are valid unnormalized scores
    out = gloss.CTCLoss()(pred, torch.tensor([[0]]))
    expected = -math.log(0.6 * 0.3 + 0.6 * 0.7 + 0.4 * 0.3)
    check(out, np.array([expected]), (1,))


def test_ctc_brute_force_3_steps_ntc_and_tnc():
    c = 3  # labels 0, 1; blank = 2 (last)
    scores = RNG.normal(size=(4, 3, c))  # (N, T, C)
    labels = np.array([[0, 1], [1, 1], [0, -1], [1, -1]])
    refs = np.array([
        _ctc_brute(_softmax(scores[i]), [int(v) for v in labels[i] if v >= 0], c - 1) for i in range(4)
    ])
    pred = t(scores, grad=True)
    out = gloss.CTCLoss()(pred, torch.tensor(labels))
    check(out, refs, (4,))
    backward_ok(out, pred)
    # TNC / TN layouts give the same values; float labels are accepted
    out2 = gloss.CTCLoss(layout="TNC", label_layout="TN")(
        t(scores.transpose(1, 0, 2)), torch.tensor(labels.T, dtype=torch.float32))
    check(out2, refs, (4,))


def test_ctc_lengths_and_weights():
    c = 3
    scores = RNG.normal(size=(2, 3, c))
    labels = np.array([[1, 0], [0, 1]])
    # pred_lengths cut the second sequence to 2 steps; label_lengths keep only the first label
    out = gloss.CTCLoss()(t(scores), torch.tensor(labels), torch.tensor([3, 2]), torch.tensor([2, 1]))
    refs = np.array([
        _ctc_brute(_softmax(scores[0]), [1, 0], 2),
        _ctc_brute(_softmax(scores[1, :2]), [0], 2),
    ])
    check(out, refs, (2,))
    out = gloss.CTCLoss(weight=2.0)(t(scores), torch.tensor(labels), sample_weight=t([0.5, 3.0]))
    refs = np.array([_ctc_brute(_softmax(scores[i]), list(labels[i]), 2) for i in range(2)])
    check(out, refs * np.array([0.5, 3.0]) * 2, (2,))


def test_ctc_bad_layout():
    with pytest.raises(ValueError, match="layout"):
        gloss.CTCLoss(layout="NCT")
    with pytest.raises(ValueError, match="label_layout"):
        gloss.CTCLoss(label_layout="TT")


# ---- block behaviour -------------------------------------------------------------------------
def test_losses_are_hybrid_blocks_and_repr():
    loss = gloss.L1Loss(weight=2)
    assert isinstance(loss, HybridBlock) and isinstance(loss, torch.nn.Module)
    assert repr(loss) == "L1Loss(batch_axis=0, w=2.0)"
    loss.hybridize()
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    for _ in range(2):
        torch.testing.assert_close(loss(x, y), (x - y).abs().mean(1) * 2)


def test_float32_stays_float32():
    x = torch.randn(3, 4, requires_grad=True)
    for lf in (gloss.L2Loss(), gloss.SoftmaxCELoss(), gloss.SigmoidBCELoss()):
        if isinstance(lf, gloss.SoftmaxCELoss):
            lab = torch.randint(0, 4, (3,))
        else:
            lab = torch.rand(3, 4, dtype=torch.float64)
        out = lf(x, lab)
        assert out.dtype == torch.float32 and out.shape == (3,)
