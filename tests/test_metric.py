"""Tests of mxtorch.metric against values computed by hand / with numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mxtorch.metric as metric
from mxtorch.metric import base as metric_base


def _onehot_scores(pred_labels: list[int], num_classes: int = 2) -> torch.Tensor:
    scores = torch.full((len(pred_labels), num_classes), 0.1)
    scores[torch.arange(len(pred_labels)), torch.tensor(pred_labels)] = 0.9
    return scores


# ---------------------------------------------------------------------------------------------- accuracy
def test_accuracy_argmax_and_label_predictions() -> None:
    acc = metric.Accuracy()
    assert acc.get()[0] == "accuracy" and math.isnan(acc.get()[1])
    preds = [torch.tensor([[0.3, 0.7], [0.0, 1.0], [0.4, 0.6]])]
    labels = [torch.tensor([0, 1, 1])]
    acc.update(labels, preds)
    assert acc.get() == ("accuracy", pytest.approx(2 / 3))
    # predictions already given as labels (same shape as the labels), as numpy arrays, not in a list
    acc.update(np.array([1.0, 0.0]), np.array([1.0, 1.0]))
    assert acc.get()[1] == pytest.approx(3 / 5)
    assert acc.num_inst == 5 and acc.sum_metric == 3
    assert isinstance(acc.get()[1], float)


def test_accuracy_axis_zero() -> None:
    acc = metric.Accuracy(axis=0)
    # classes along axis 0: columns are samples
    acc.update(torch.tensor([1, 0, 2]), torch.tensor([[0.1, 0.8, 0.1], [0.7, 0.1, 0.1], [0.2, 0.1, 0.8]]))
    assert acc.get()[1] == pytest.approx(1.0)


def test_topk_accuracy_k3() -> None:
    rng = np.random.default_rng(999)
    preds = rng.random((10, 10)).astype(np.float32)
    labels = np.array([2, 6, 9, 2, 3, 4, 7, 8, 9, 6])
    top3 = np.argsort(-preds, axis=1)[:, :3]
    expected = np.mean([labels[i] in top3[i] for i in range(10)])
    m = metric.TopKAccuracy(top_k=3)
    assert m.name == "top_k_accuracy_3"
    m.update([torch.from_numpy(labels)], [torch.from_numpy(preds)])
    assert m.get()[1] == pytest.approx(expected)
    # hand-made case: label 0 is third best in row 0, worst in row 1
    m2 = metric.TopKAccuracy(top_k=3)
    m2.update(torch.tensor([0, 0]), torch.tensor([[0.2, 0.5, 0.4, 0.1], [0.1, 0.5, 0.4, 0.3]]))
    assert m2.get()[1] == pytest.approx(0.5)
    # top_k larger than the number of classes counts everything as a hit
    m3 = metric.TopKAccuracy(top_k=5)
    m3.update(torch.tensor([1, 0]), torch.rand(2, 3))
    assert m3.get()[1] == 1.0


def test_topk_accuracy_k1_equals_accuracy() -> None:
    preds = torch.rand(20, 5, generator=torch.Generator().manual_seed(0))
    labels = torch.randint(0, 5, (20,), generator=torch.Generator().manual_seed(1))
    top1, acc = metric.TopKAccuracy(), metric.Accuracy()
    top1.update(labels, preds)
    acc.update(labels, preds)
    assert top1.get()[1] == pytest.approx(acc.get()[1])
    with pytest.raises(ValueError, match="top_k"):
        metric.TopKAccuracy(top_k=0)
    with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
        top1.update(torch.zeros(2), torch.zeros(2, 3, 4))


# ------------------------------------------------------------------------------------------------ F1 / MCC
# batch 1: labels [0,1,1,0,1] preds [0,1,0,1,1] -> tp=2 fp=1 fn=1 tn=1
# batch 2: labels [1,1,1,0]   preds [1,0,0,0]   -> tp=1 fp=0 fn=2 tn=1
_B1 = ([0, 1, 1, 0, 1], [0, 1, 0, 1, 1])
_B2 = ([1, 1, 1, 0], [1, 0, 0, 0])


def _feed(m: metric.EvalMetric) -> None:
    for labels, preds in (_B1, _B2):
        m.update([torch.tensor(labels)], [_onehot_scores(preds)])


def test_f1_macro_and_micro() -> None:
    macro, micro = metric.F1(), metric.F1(average="micro")
    _feed(macro)
    _feed(micro)
    # batch 1: p = r = 2/3 -> f1 = 2/3; batch 2: p = 1, r = 1/3 -> f1 = 0.5
    assert macro.get() == ("f1", pytest.approx((2 / 3 + 0.5) / 2))
    # all: tp=3 fp=1 fn=3 -> p = 3/4, r = 1/2 -> f1 = 0.6
    assert micro.get() == ("f1", pytest.approx(0.6))
    assert micro.num_inst == 9 and macro.num_inst == 2


def test_f1_degenerate_and_label_predictions() -> None:
    m = metric.F1()
    m.update(torch.tensor([0, 0, 0]), torch.tensor([0, 0, 0]))  # no positives at all: F1 is 0
    assert m.get()[1] == 0.0
    with pytest.raises(ValueError, match="binary"):
        m.update(torch.tensor([0, 1, 2]), _onehot_scores([0, 1, 1]))
    with pytest.raises(ValueError, match="average"):
        metric.F1(average="weighted")


def test_mcc_macro_and_micro() -> None:
    macro, micro = metric.MCC(), metric.MCC(average="micro")
    _feed(macro)
    _feed(micro)
    # batch 1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6; batch 2: (1*1 - 0*2) / sqrt(1*3*1*3) = 1/3
    assert macro.get() == ("mcc", pytest.approx((1 / 6 + 1 / 3) / 2))
    # all: tp=3 fp=1 fn=3 tn=2 -> (6 - 3) / sqrt(4*6*3*5)
    assert micro.get()[1] == pytest.approx(3 / math.sqrt(360))
    # zero factors in the denominator are replaced by 1
    m = metric.MCC()
    m.update(torch.tensor([1, 1]), _onehot_scores([1, 1]))
    assert m.get()[1] == 0.0


# ---------------------------------------------------------------------------------------------- regression
def test_mae_mse_rmse_average_per_batch() -> None:
    l1, p1 = np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.0, 1.0])
    l2, p2 = np.array([[0.0], [4.0]]), np.array([1.0, 1.0])  # (N,1) labels vs (N,) predictions
    d1, d2 = l1 - p1, l2.ravel() - p2
    expected = {
        "mae": (np.abs(d1).mean() + np.abs(d2).mean()) / 2,
        "mse": ((d1**2).mean() + (d2**2).mean()) / 2,
        "rmse": (np.sqrt((d1**2).mean()) + np.sqrt((d2**2).mean())) / 2,
    }
    for name, value in expected.items():
        m = metric.create(name)
        m.update([torch.tensor(l1)], [torch.tensor(p1, dtype=torch.float32)])
        m.update(l2, p2)
        assert m.get() == (name, pytest.approx(value)), name
        assert m.num_inst == 2


def test_regression_shape_mismatch_states_both_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        metric.MAE().update(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        metric.MSE().update(torch.zeros(2, 3), torch.zeros(2, 4))


def test_pearson_macro_and_micro() -> None:
    rng = np.random.default_rng(3)
    batches = [(rng.random(8), rng.random(8)) for _ in range(3)]
    macro, micro = metric.PearsonCorrelation(), metric.create("pearsonr", average="micro")
    for label, pred in batches:
        macro.update([torch.tensor(label)], [torch.tensor(pred)])
        micro.update([torch.tensor(label)], [torch.tensor(pred)])
    expected_macro = np.mean([np.corrcoef(p, lab)[0, 1] for lab, p in batches])
    all_l = np.concatenate([b[0] for b in batches])
    all_p = np.concatenate([b[1] for b in batches])
    assert macro.get() == ("pearsonr", pytest.approx(expected_macro))
    assert micro.get()[1] == pytest.approx(np.corrcoef(all_p, all_l)[0, 1])
    with pytest.raises(ValueError, match=r"\(4,\).*\(4, 1\)"):
        macro.update(torch.zeros(4), torch.zeros(4, 1))


# ------------------------------------------------------------------------------------------ probabilities
def test_cross_entropy_and_nll() -> None:
    probs = np.array([[0.3, 0.7], [0.0, 1.0], [0.4, 0.6]])
    labels = np.array([0, 1, 1])
    expected = np.mean(-np.log(probs[np.arange(3), labels] + 1e-12))
    ce = metric.CrossEntropy()
    ce.update([torch.tensor(labels)], [torch.tensor(probs, dtype=torch.float32)])
    assert ce.get() == ("cross-entropy", pytest.approx(expected, rel=1e-6))
    nll = metric.create("nll_loss")
    nll.update(labels, probs)
    assert nll.get() == ("nll-loss", pytest.approx(expected))
    with pytest.raises(ValueError, match=r"\(2,\).*\(3, 2\)"):
        ce.update(torch.tensor([0, 1]), torch.tensor(probs))


def test_perplexity_with_ignore_label() -> None:
    probs = torch.tensor([[0.1, 0.9], [0.6, 0.4], [0.5, 0.5], [0.2, 0.8]])
    labels = torch.tensor([1, 0, -1, 1])  # -1 is ignored (and clipped, so it does not index out of range)
    ppl = metric.Perplexity(ignore_label=-1)
    ppl.update([labels], [probs])
    expected = math.exp(-(math.log(0.9) + math.log(0.6) + math.log(0.8)) / 3)
    assert ppl.get() == ("perplexity", pytest.approx(expected))
    assert ppl.num_inst == 3
    # without ignore_label the -1 entry counts (clipped to class 0: p = 0.5)
    plain = metric.Perplexity(ignore_label=None)
    plain.update([labels], [probs])
    expected_all = math.exp(-(math.log(0.9) + math.log(0.6) + math.log(0.5) + math.log(0.8)) / 4)
    assert plain.get()[1] == pytest.approx(expected_all)


def test_log_metrics_round_as_mxnet_in_the_prediction_dtype() -> None:
    # MXNet takes the logs of float32 predictions in float32 and sums them in float32 (a
    # compensated sum: the exact sum rounded once); only then does Python's float take over.
    # By hand: p = 0.8, 0.8, 1.0 -> the batch loss is -(2 * float32(log 0.8)) in float32.
    probs = torch.tensor([[0.8, 0.2], [0.2, 0.8], [0.0, 1.0]])
    labels = torch.tensor([0, 1, 1])
    log08 = np.log(np.float32(0.8))  # float32 arithmetic, as MXNet's
    batch = float(-(log08 + log08 + np.float32(0.0)))
    ppl = metric.Perplexity(ignore_label=None)
    ppl.update([labels], [probs])
    assert ppl.get()[1] == math.exp(batch / 3)
    # float64 logs give another double: the rule is visible at this precision
    assert math.exp(-2 * math.log(float(np.float32(0.8))) / 3) != math.exp(batch / 3)
    ce = metric.CrossEntropy(eps=0.0)
    ce.update([labels], [probs])
    assert ce.get()[1] == batch / 3
    # float64 predictions keep float64 logs
    ppl64 = metric.Perplexity(ignore_label=None)
    ppl64.update([labels], [probs.double()])
    assert ppl64.get()[1] == math.exp(-2 * math.log(float(np.float32(0.8))) / 3)


def test_perplexity_class_axis_1() -> None:
    logits = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0))
    probs = torch.softmax(logits, dim=1)  # (B, C, T)
    labels = torch.tensor([[0, 4, 2], [1, 1, 3]])
    ppl = metric.Perplexity(ignore_label=None, axis=1)
    ppl.update(labels, probs)
    picked = probs.gather(1, labels.unsqueeze(1)).squeeze(1)
    assert ppl.get()[1] == pytest.approx(math.exp(-picked.log().mean().item()), rel=1e-5)
    with pytest.raises(ValueError, match=r"\(2, 4\).*\(2, 5, 3\)"):
        ppl.update(torch.zeros(2, 4), probs)


def test_loss_metric() -> None:
    m = metric.create("loss")
    m.update(None, [torch.tensor([1.0, 2.0, 3.0])])
    m.update(None, torch.tensor([4.0]))
    assert m.get() == ("loss", pytest.approx(2.5))
    assert metric.create("torch").get()[0] == "torch"


# -------------------------------------------------------------------------------------- reset / global
def test_reset_and_global() -> None:
    acc = metric.Accuracy()
    acc.update(torch.tensor([1, 1]), torch.tensor([1, 0]))
    acc.reset_local()
    assert math.isnan(acc.get()[1])
    acc.update(torch.tensor([1]), torch.tensor([1]))
    assert acc.get()[1] == 1.0
    assert acc.get_global()[1] == pytest.approx(2 / 3)
    acc.reset()
    assert math.isnan(acc.get()[1]) and math.isnan(acc.get_global()[1])
    assert acc.num_inst == 0 and acc.sum_metric == 0
    f1 = metric.F1(average="micro")
    _feed(f1)
    f1.reset()
    assert math.isnan(f1.get()[1])
    ((name, value),) = acc.get_name_value()
    assert name == "accuracy" and math.isnan(value)


def test_update_does_not_read_values_back() -> None:
    """Updates run on 'meta' tensors, which have no values: any read-back would raise."""
    labels, scores = torch.zeros(4, dtype=torch.int64, device="meta"), torch.empty(4, 2, device="meta")
    for m in [
        metric.Accuracy(),
        metric.TopKAccuracy(2),
        metric.F1(),
        metric.MCC(average="micro"),
        metric.MAE(),
        metric.RMSE(),
        metric.CrossEntropy(),
        metric.Perplexity(ignore_label=0),
        metric.Loss(),
    ]:
        m.update([labels], [scores])
        m.update([labels], [scores])
    pc = metric.PearsonCorrelation(average="micro")
    pc.update(torch.empty(4, device="meta"), torch.empty(4, device="meta"))
    pc.update(torch.empty(4, device="meta"), torch.empty(4, device="meta"))


# ------------------------------------------------------------------------------------ composite / custom
def test_composite() -> None:
    comp = metric.CompositeEvalMetric(["acc", metric.F1()])
    comp.add("ce")
    comp.update([torch.tensor([0, 1, 1])], [torch.tensor([[0.3, 0.7], [0.0, 1.0], [0.4, 0.6]])])
    names, values = comp.get()
    assert names == ["accuracy", "f1", "cross-entropy"]
    assert values[0] == pytest.approx(2 / 3)
    assert isinstance(comp.get_metric(1), metric.F1)
    with pytest.raises(ValueError, match="out of range"):
        comp.get_metric(3)
    assert [n for n, _ in comp.get_name_value()] == names
    comp.reset()
    assert all(math.isnan(v) for v in comp.get()[1])


def test_custom_metric_and_np() -> None:
    def abs_err(label: np.ndarray, pred: np.ndarray) -> float:
        assert isinstance(label, np.ndarray) and isinstance(pred, np.ndarray)
        return float(np.abs(label - pred).sum())

    m = metric.np(abs_err)
    assert m.name == "abs_err"
    m.update([torch.tensor([1.0, 2.0])], [torch.tensor([0.0, 2.0])])
    m.update([torch.tensor([1.0])], [torch.tensor([4.0])])
    assert m.get() == ("abs_err", pytest.approx(2.0))
    pairs = metric.CustomMetric(lambda lab, pred: ((lab == pred).sum(), lab.size))
    assert pairs.name == "custom(<lambda>)"
    pairs.update(torch.tensor([1, 2, 3]), torch.tensor([1, 0, 3]))
    assert pairs.get()[1] == pytest.approx(2 / 3)
    extra = metric.CustomMetric(abs_err, name="e", allow_extra_outputs=True)
    extra.update([torch.zeros(1)], [torch.ones(1), torch.ones(3)])  # extra outputs are ignored
    assert extra.get() == ("e", 1.0)
    with pytest.raises(ValueError, match="1.*2"):
        metric.CustomMetric(abs_err).update([torch.zeros(1)], [torch.ones(1), torch.ones(3)])


# -------------------------------------------------------------------------------------------- create
@pytest.mark.parametrize(
    ("name", "klass"),
    [
        ("acc", metric.Accuracy),
        ("Accuracy", metric.Accuracy),
        ("top_k_accuracy", metric.TopKAccuracy),
        ("top_k_acc", metric.TopKAccuracy),
        ("F1", metric.F1),
        ("mcc", metric.MCC),
        ("mae", metric.MAE),
        ("MSE", metric.MSE),
        ("rmse", metric.RMSE),
        ("ce", metric.CrossEntropy),
        ("cross-entropy", metric.CrossEntropy),
        ("nll_loss", metric.NegativeLogLikelihood),
        ("perplexity", metric.Perplexity),
        ("pearsonr", metric.PearsonCorrelation),
        ("loss", metric.Loss),
    ],
)
def test_create_by_name(name: str, klass: type) -> None:
    assert type(metric.create(name)) is klass


def test_create_other_forms_and_errors() -> None:
    acc = metric.Accuracy()
    assert metric.create(acc) is acc
    assert isinstance(metric.create(lambda lab, pred: 0.0), metric.CustomMetric)
    comp = metric.create(["acc", "mae"])
    assert isinstance(comp, metric.CompositeEvalMetric) and len(comp.metrics) == 2
    top = metric.create("top_k_accuracy", top_k=3)
    assert top.name == "top_k_accuracy_3"
    again = metric.create(**top.get_config())
    assert isinstance(again, metric.TopKAccuracy) and again.top_k == 3 and again.name == "top_k_accuracy_3"
    with pytest.raises(ValueError, match=r"'nope'.*accuracy"):
        metric.create("nope")
    with pytest.raises(TypeError):
        metric.create(3)


def test_registering_a_taken_name_warns_and_replaces_as_mxnet() -> None:
    class Accuracy(metric.EvalMetric):
        pass

    original = metric.Accuracy
    try:
        with pytest.warns(UserWarning, match=r"metric 'accuracy': .*Accuracy replaces .*metric"):
            metric.register(Accuracy)
        assert metric.base._REGISTRY.get("accuracy") is Accuracy
    finally:
        metric.base._REGISTRY.remove("accuracy")
        metric.base._REGISTRY.add("accuracy", original)
    assert metric.base._REGISTRY.get("acc") is original

    @metric.register
    class MyUniqueTestMetric(metric.EvalMetric):
        def __init__(self) -> None:
            super().__init__("mine")

    assert isinstance(metric.create("myuniquetestmetric"), MyUniqueTestMetric)
    metric.register(MyUniqueTestMetric)  # the same class again is a no-op
    metric_base._REGISTRY.remove("myuniquetestmetric")


def test_mismatched_number_of_arrays() -> None:
    with pytest.raises(ValueError, match=r"labels 2 .* predictions 1"):
        metric.Accuracy().update([torch.zeros(2), torch.zeros(2)], [torch.zeros(2, 3)])
    with pytest.raises(ValueError, match=r"\(4,\).*\(3, 2\)"):
        metric.Accuracy().update(torch.zeros(4), torch.zeros(3, 2))


# ----------------------------------------------------------------------------------------- MXNet 1.9 rules
class _UserMetric(metric.EvalMetric):
    """A user metric written the MXNet way: it only touches sum_metric / num_inst."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("user", **kwargs)

    def update(self, labels, preds) -> None:  # type: ignore[no-untyped-def]
        for label, pred in zip(labels, preds):
            self.sum_metric += float((label == pred).sum())
            self.num_inst += label.numel()


def test_user_metric_without_global_stats_reads_local_through_get_global() -> None:
    m = _UserMetric()
    m.update([torch.tensor([1, 0, 1, 1])], [torch.tensor([1, 1, 1, 1])])
    assert m.get() == ("user", pytest.approx(0.75))
    assert m.get_global() == ("user", pytest.approx(0.75))  # not nan: falls back to get()
    assert m.get_global_name_value() == [("user", pytest.approx(0.75))]
    # declared global stats are read as such (the subclass keeps them itself)
    g = _UserMetric(has_global_stats=True)
    g.update([torch.tensor([1])], [torch.tensor([1])])
    assert math.isnan(g.get_global()[1])
    assert "has_global_stats" not in g.get_config()
    # the built-in metrics keep global statistics across reset_local
    acc = metric.Accuracy()
    acc.update([torch.tensor([1, 0])], [torch.tensor([1, 1])])
    acc.reset_local()
    assert math.isnan(acc.get()[1]) and acc.get_global()[1] == pytest.approx(0.5)


def test_create_from_config_dict_and_json() -> None:
    acc = metric.create({"metric": "acc", "axis": 0})
    assert isinstance(acc, metric.Accuracy) and acc.axis == 0
    comp = metric.create(["acc", "mae"])
    again = metric.create(**comp.get_config())  # children come back as config dicts
    assert isinstance(again, metric.CompositeEvalMetric)
    assert [type(m) for m in again.metrics] == [metric.Accuracy, metric.MAE]
    top = metric.create('["top_k_accuracy", {"top_k": 3}]')
    assert isinstance(top, metric.TopKAccuracy) and top.name == "top_k_accuracy_3"
    assert isinstance(metric.create(metric="mse"), metric.MSE)
    with pytest.raises(TypeError, match="extra arguments"):
        metric.create({"metric": "acc"}, 1)


def _pcc_ref(pred: list[int], label: list[int], k: int) -> float:
    cm = np.zeros((k, k))
    for i, j in zip(pred, label):
        cm[i, j] += 1
    n, x, y = cm.sum(), cm.sum(1), cm.sum(0)
    return float((np.diag(cm) * n - x * y).sum() / np.sqrt((x * (n - x)).sum() * (y * (n - y)).sum()))


def test_pcc_binary_equals_mcc_and_multiclass() -> None:
    pred, label = [1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 1, 1]
    pcc, mcc = metric.create("pcc"), metric.MCC(average="micro")
    pcc.update([torch.tensor(label)], [_onehot_scores(pred)])
    mcc.update([torch.tensor(label)], [_onehot_scores(pred)])
    # hand: tp=2 fp=1 fn=1 tn=2 -> (4 - 1) / sqrt(3*3*3*3) = 1/3
    assert pcc.get() == ("pcc", pytest.approx(1 / 3)) and mcc.get()[1] == pytest.approx(1 / 3)
    # a third class grows the matrix; pooled over updates, one instance per update
    pcc.update([torch.tensor([2, 2, 0])], [torch.tensor([2, 1, 0])])
    assert pcc.num_inst == 2
    assert pcc.get()[1] == pytest.approx(_pcc_ref(pred + [2, 1, 0], label + [2, 2, 0], 3))
    assert pcc.sum_metric == pytest.approx(2 * pcc.get()[1])
    pcc.reset_local()
    assert math.isnan(pcc.get()[1])
    assert pcc.get_global()[1] == pytest.approx(_pcc_ref(pred + [2, 1, 0], label + [2, 2, 0], 3))
    # constant predictions leave a zero factor under the root: nan, as MXNet
    const = metric.PCC()
    const.update([torch.tensor([0, 1])], [torch.tensor([1, 1])])
    assert math.isnan(const.get()[1])
    with pytest.raises(ValueError, match=">= 0"):
        metric.PCC().update([torch.tensor([-1, 0])], [torch.tensor([0, 0])])


def test_binary_metrics_keep_mxnet_signature_and_names():
    # MXNet: F1(name='f1', output_names=None, label_names=None, average='macro'), MCC likewise
    assert (metric.F1().name, metric.MCC().name) == ("f1", "mcc")
    m = metric.MCC("m", ["out"], ["lab"], "micro")
    assert (m.name, m.output_names, m.label_names, m.average) == ("m", ["out"], ["lab"], "micro")
    assert metric.create("f1", average="micro").average == "micro"


def test_package_exports_everything_base_exports():
    from mxtorch.metric import base

    for name in base.__all__:
        assert name in metric.__all__ and getattr(metric, name) is getattr(base, name)


def test_statistics_read_as_python_numbers_and_can_be_assigned():
    m = metric.Accuracy()
    m.update([torch.tensor([1, 0])], [torch.tensor([[0.0, 1.0], [1.0, 0.0]])])
    stats = (m.sum_metric, m.num_inst, m.global_sum_metric, m.global_num_inst)
    assert stats == (2, 2, 2, 2) and all(type(v) is int for v in stats)
    m.sum_metric, m.num_inst, m.global_sum_metric, m.global_num_inst = 1, 4, 3, 6  # MXNet code assigns these
    assert m.get() == ("accuracy", 0.25) and m.get_global() == ("accuracy", 0.5)


@pytest.mark.parametrize(
    "cls, default",
    [(metric.MAE, "mae"), (metric.MSE, "mse"), (metric.RMSE, "rmse"), (metric.Loss, "loss"),
     (metric.Torch, "torch"), (metric.Caffe, "caffe"), (metric.PearsonCorrelation, "pearsonr")],
)
def test_named_metrics_keep_mxnet_signature(cls, default):
    # MXNet: MAE(name='mae', output_names=None, label_names=None), ... ; every built-in keeps global stats
    m = cls()
    assert m.name == default and m.output_names is None and m._has_global_stats
    m = cls("x", ["out"], ["lab"])
    assert (m.name, m.output_names, m.label_names) == ("x", ["out"], ["lab"])
    assert metric.create(**m.get_config()).name == "x"


@pytest.mark.parametrize("cls", [metric.F1, metric.MCC, metric.PearsonCorrelation])
def test_averaged_metrics_round_trip_through_get_config(cls):
    m = cls("x", average="micro")
    again = metric.create(**m.get_config())
    assert type(again) is cls and (again.name, again.average) == ("x", "micro") and again._has_global_stats
