"""mx.contrib.tensorboard (LogMetricsCallback under Module.fit) and mxtorch.contrib.tensorboard's
SummaryWriter taking NDArrays; the event files are read back with tensorboard's EventAccumulator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import mxtorch as mx

pytest.importorskip("tensorboard", reason="the tensorboard extra: pip install 'mxtorch[tensorboard]'")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _events(folder: str) -> EventAccumulator:
    acc = EventAccumulator(folder, size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


def _mlp() -> Any:
    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=6, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(act, num_hidden=2, name="fc2"), name="softmax")


def test_log_metrics_callback_under_module_fit(tmp_path):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 4, generator=g)
    y = (x[:, 0] > 0).float()
    mod = mx.mod.Module(_mlp())
    seen: list[float] = []

    def record(param: Any) -> None:  # the value the callback after it writes
        seen.append(dict(param.eval_metric.get_name_value())["accuracy"])

    train_dir, eval_dir = str(tmp_path / "train"), str(tmp_path / "eval")
    train_cb = mx.contrib.tensorboard.LogMetricsCallback(train_dir, prefix="train")
    eval_cb = mx.contrib.tensorboard.LogMetricsCallback(eval_dir)
    hist = train_cb.node_histogram_visualization(prefix="w", node_names=["fc1_weight"])
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=6), eval_data=mx.io.NDArrayIter(x, y, batch_size=6),
            num_epoch=2, optimizer_params={"learning_rate": 0.5},
            batch_end_callback=[record, train_cb], eval_end_callback=eval_cb, epoch_end_callback=hist)
    train, evals = _events(train_dir), _events(eval_dir)
    scalars = train.Scalars("train-accuracy")
    assert [s.step for s in scalars] == list(range(8))  # 4 batches x 2 epochs
    np.testing.assert_allclose([s.value for s in scalars], seen, rtol=1e-6)
    assert evals.Tags()["scalars"] == ["accuracy"]  # no prefix: the metric's own name
    score = mod.score(mx.io.NDArrayIter(x, y, batch_size=6), "acc")[0][1]
    assert evals.Scalars("accuracy")[-1].value == pytest.approx(score)  # after the last epoch
    assert len(evals.Scalars("accuracy")) == 2
    histograms = train.Histograms("w-fc1_weight")
    assert [h.step for h in histograms] == [0, 1]
    assert histograms[0].histogram_value.num == 6 * 4


def test_summary_writer_takes_ndarrays(tmp_path):
    from mxtorch.contrib.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path))
    w.add_scalar("loss", mx.nd.array([0.25]), global_step=3)
    grad_x = mx.nd.ones((2,))
    grad_x.attach_grad()
    with mx.autograd.record():
        recorded = (grad_x * 1.5).sum()
    w.add_scalar("recorded", recorded, 4)  # an array autograd records
    sparse = mx.nd.sparse.row_sparse_array((torch.full((1, 3), 2.0), torch.tensor([1])), shape=(4, 3))
    w.add_histogram("sparse", sparse, 0)
    w.add_histogram("bf16", mx.nd.array([1.0, 2.0, 3.0], dtype="bfloat16"), 0)
    w.add_scalars("pair", {"a": mx.nd.array([1.0]), "b": mx.nd.array([2.0])}, 0)
    w.close()
    acc = _events(str(tmp_path))
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == [(3, 0.25)]
    assert acc.Scalars("recorded")[0].value == 3.0
    h = acc.Histograms("sparse")[0].histogram_value
    assert (h.num, h.sum, h.min, h.max) == (12, 6.0, 0.0, 2.0)  # the dense array: 9 zeros, three 2s
    assert acc.Histograms("bf16")[0].histogram_value.sum == 6.0
