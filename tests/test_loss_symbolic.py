"""Gluon losses given symbols build MXNet graphs that compute what the tensor path computes
(MXNet's losses are HybridBlocks: ``loss(mx.sym.var('pred'), mx.sym.var('label'))``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.gluon import loss as gloss

torch.manual_seed(0)
PRED = torch.randn(4, 3)
LABEL = torch.randn(4, 3)
BIN = (torch.rand(4, 3) > 0.5).float()
SW = torch.rand(4, 1)

CASES = [
    ("l2_weighted", gloss.L2Loss(), [PRED, LABEL, SW]),
    ("bce", gloss.SigmoidBCELoss(), [PRED, BIN, SW]),
    ("bce_from_sigmoid", gloss.SigmoidBCELoss(from_sigmoid=True), [torch.sigmoid(PRED), BIN]),
    ("bce_pos_weight", gloss.SigmoidBCELoss(), [PRED, BIN, None, torch.rand(1, 3) + 0.5]),
    ("kl", gloss.KLDivLoss(from_logits=False), [PRED, torch.softmax(LABEL, -1)]),
    ("huber", gloss.HuberLoss(rho=0.7), [PRED, LABEL]),
    ("hinge", gloss.HingeLoss(), [PRED, BIN * 2 - 1]),
    ("squared_hinge", gloss.SquaredHingeLoss(margin=2), [PRED, BIN * 2 - 1, SW]),
    ("logistic", gloss.LogisticLoss(), [PRED, BIN * 2 - 1]),
    ("logistic_binary", gloss.LogisticLoss(label_format="binary"), [PRED, BIN]),
    ("triplet", gloss.TripletLoss(margin=0.5), [PRED, LABEL, torch.randn(4, 3)]),
    ("poisson_full", gloss.PoissonNLLLoss(compute_full=True), [PRED, torch.randint(0, 5, (4, 3)).float()]),
    ("poisson_rate", gloss.PoissonNLLLoss(from_logits=False),
     [PRED.abs() + 0.1, torch.randint(0, 5, (4, 3)).float()]),
    ("cosine", gloss.CosineEmbeddingLoss(margin=0.1), [PRED, LABEL, torch.tensor([1.0, -1, 1, -1])]),
    ("ctc", gloss.CTCLoss(), [torch.randn(2, 6, 4), torch.tensor([[0.0, 1, 1], [2, -1, -1]])]),
    ("ctc_lengths", gloss.CTCLoss(layout="TNC", label_layout="TN"),
     [torch.randn(6, 2, 4), torch.tensor([[0.0, 2], [1, 2], [2, 0]]), torch.tensor([6.0, 4]),
      torch.tensor([3.0, 1])]),
]


def _run_graph(loss: gloss.Loss, args: list[torch.Tensor | None]) -> torch.Tensor:
    syms = [None if a is None else mx.sym.var(f"in{i}") for i, a in enumerate(args)]
    graph = loss(*syms)
    assert isinstance(graph, mx.sym.Symbol)
    feed = {f"in{i}": a for i, a in enumerate(args) if a is not None}
    return graph.bind(mx.cpu(), feed).forward()[0]


@pytest.mark.parametrize("name,loss,args", CASES, ids=[c[0] for c in CASES])
def test_loss_graph_matches_tensor_path(name: str, loss: gloss.Loss, args: list[torch.Tensor | None]) -> None:
    expected = loss(*args)
    got = _run_graph(loss, args)
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    # MXNet's hybrid_forward with F = mx.nd gives the same numbers too
    via_nd = loss.hybrid_forward(mx.nd, *args)
    np.testing.assert_allclose(via_nd.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def test_hinge_graph_by_hand() -> None:
    # max(0, 1 - pred * label), averaged per sample: [(0 + 1.5) / 2, (2 + 0) / 2]
    pred = torch.tensor([[2.0, -0.5], [1.0, 3.0]])
    label = torch.tensor([[1.0, 1.0], [-1.0, 1.0]])
    np.testing.assert_allclose(_run_graph(gloss.HingeLoss(), [pred, label]).numpy(), [0.75, 1.0])


def test_ctc_operator_by_hand() -> None:
    # two steps, uniform scores over {blank, a}: p('a') = paths 'a-', '-a', 'aa' = 3/4
    data = torch.zeros(2, 1, 2)
    for blank, label in (("first", [[1.0]]), ("last", [[0.0]])):
        loss = mx.nd.CTCLoss(data, torch.tensor(label), blank_label=blank)
        np.testing.assert_allclose(loss.numpy(), [-np.log(0.75)], rtol=1e-6)
    # a label ends at its first padding value (0 with the blank first): the same as [[1]]
    padded = mx.nd.ctc_loss(data, torch.tensor([[1.0, 0.0]]))
    np.testing.assert_allclose(padded.numpy(), [-np.log(0.75)], rtol=1e-6)


def test_graph_trains_in_a_module() -> None:
    # the symbolic loss is differentiable end to end: a Module fits a linear model with it
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=1, name="fc")
    loss = mx.sym.make_loss(gloss.HuberLoss()(fc, mx.sym.var("label")))
    x = torch.randn(64, 3)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    it = mx.io.NDArrayIter(x, y, batch_size=16, label_name="label")
    mod = mx.mod.Module(loss, data_names=("data",), label_names=("label",))
    mod.fit(it, num_epoch=60, optimizer="adam", optimizer_params={"learning_rate": 0.05},
            eval_metric=mx.metric.Loss())
    assert mod.score(it, mx.metric.Loss())[0][1] < 0.05


def test_subclass_forward_is_traced() -> None:
    class Doubled(gloss.L1Loss):
        def forward(self, pred, label, sample_weight=None):  # type: ignore[no-untyped-def]
            return 2 * super().forward(pred, label, sample_weight)

    # a subclass with its own forward is not given L1's graph: its forward is run on the symbols
    pred, label = torch.tensor([[1.0, 2.0]]), torch.tensor([[0.0, 0.0]])
    assert Doubled()(pred, label).item() == pytest.approx(3.0)
    out = Doubled().hybrid_forward(mx.nd, pred, label)
    assert out.item() == pytest.approx(3.0)
