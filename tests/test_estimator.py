"""mx.gluon.contrib.estimator: Estimator.fit / evaluate and the event handlers (MXNet's API)."""

from __future__ import annotations

import os

import pytest
import torch

import mxtorch as mx
from mxtorch import gluon
from mxtorch.gluon.contrib.estimator import (
    BatchEnd,
    CheckpointHandler,
    EarlyStoppingHandler,
    EpochEnd,
    Estimator,
    LoggingHandler,
)


def _loader(n: int = 64, batch: int = 16, seed: int = 0) -> gluon.data.DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).float()  # a linearly separable 2-class problem
    return gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=batch)


def _estimator(lr: float = 0.5) -> Estimator:
    torch.manual_seed(0)
    net = gluon.nn.Dense(2, in_units=4)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    return Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(),
                     trainer=trainer)


class _Counter(EpochEnd, BatchEnd):
    def __init__(self) -> None:
        self.batches = self.epochs = 0

    def batch_end(self, estimator, *args, **kwargs):  # type: ignore[no-untyped-def]
        assert set(kwargs) == {"batch", "pred", "label", "loss"}
        self.batches += 1
        return False

    def epoch_end(self, estimator, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.epochs += 1
        return False


def test_fit_trains_and_names_metrics() -> None:
    est = _estimator()
    assert [m.name for m in est.train_metrics] == ["training accuracy"]
    assert [m.name for m in est.val_metrics] == ["validation accuracy"]
    counter = _Counter()
    est.fit(_loader(), val_data=_loader(seed=1), epochs=8, event_handlers=[counter])
    assert (counter.epochs, counter.batches) == (8, 32)  # 4 batches an epoch
    assert est.train_metrics[0].get()[1] > 0.9
    assert est.val_metrics[0].get()[1] > 0.85  # the validation handler evaluated every epoch


def test_fit_by_batches_stops_mid_epoch_and_steps_once_per_batch() -> None:
    est = _estimator()
    counter = _Counter()
    est.fit(_loader(), batches=6, event_handlers=[counter])
    assert counter.batches == 6 and counter.epochs == 2  # the batch limit ends the second epoch early
    with pytest.raises(ValueError, match="exactly one of epochs or batches"):
        est.fit(_loader(), epochs=1, batches=1)
    with pytest.raises(ValueError, match="DataLoader"):
        est.fit([(torch.ones(1, 4), torch.ones(1))], epochs=1)


def test_default_metrics_follow_the_loss() -> None:
    net = gluon.nn.Dense(1, in_units=4)
    with pytest.warns(UserWarning, match="No trainer specified"):
        est = Estimator(net, gluon.loss.L2Loss())
    assert [m.name for m in est.train_metrics] == ["training l2loss"]
    assert net.weight.is_initialized  # initialized on the estimator's context


def test_early_stopping_and_foreign_metrics() -> None:
    est = _estimator(lr=0.0)  # nothing improves
    stop = EarlyStoppingHandler(monitor=est.train_metrics[0], patience=2)
    counter = _Counter()
    est.fit(_loader(), epochs=20, event_handlers=[stop, counter])
    assert counter.epochs == 3 and stop.stop_training  # best at epoch 0, two epochs without gain
    with pytest.raises(ValueError, match="not one of estimator.train_metrics"):
        est.fit(_loader(), epochs=1, event_handlers=[LoggingHandler(metrics=[mx.metric.Accuracy()])])


def test_checkpoints_rotate_and_resume(tmp_path: os.PathLike[str]) -> None:
    est = _estimator()
    ckpt = CheckpointHandler(str(tmp_path), model_prefix="m", max_checkpoints=2, save_best=True,
                             monitor=est.train_metrics[0])
    est.fit(_loader(), epochs=3, event_handlers=[ckpt])
    names = sorted(os.listdir(tmp_path))
    # named by the epoch and the batches done (4 an epoch); the oldest (epoch0batch4) was removed
    assert names == ["m-best.params", "m-best.states", "m-epoch1batch8.params", "m-epoch1batch8.states",
                     "m-epoch2batch12.params", "m-epoch2batch12.states"]
    weight = est.net.weight.data().detach().clone()
    # a new run resumes from the latest checkpoint and trains only the epochs left
    est2 = _estimator()
    resume = CheckpointHandler(str(tmp_path), model_prefix="m", resume_from_checkpoint=True)
    counter = _Counter()
    est2.fit(_loader(), epochs=5, event_handlers=[resume, counter])
    assert counter.epochs == 2
    assert not torch.equal(est2.net.weight.data(), weight)  # trained on from the loaded weights
    assert "m-epoch4batch20.params" in os.listdir(tmp_path)


def test_handler_order_and_unavailable_gpus() -> None:
    est = _estimator()
    stop = EarlyStoppingHandler(monitor=est.val_metrics[0])
    handlers = est._prepare_default_handlers(val_data=None, event_handlers=[stop])
    # priorities: the optimizer step, then metrics, then the rest, logging last
    assert [type(h).__name__ for h in handlers] == [
        "GradientUpdateHandler", "MetricHandler", "EarlyStoppingHandler", "StoppingHandler", "LoggingHandler"]
    by_event = est._categorize_handlers(handlers)
    assert [len(x) for x in by_event] == [3, 2, 1, 4, 3, 2]
    with pytest.raises(AssertionError, match="not available"):
        Estimator(est.net, est.loss, trainer=est.trainer, context=[mx.gpu(mx.context.num_gpus())])
    with pytest.raises(ValueError, match="context must be"):
        Estimator(est.net, est.loss, trainer=est.trainer, context="cpu")


def test_checkpoint_saves_the_graph_of_a_hybridized_net(tmp_path: os.PathLike[str]) -> None:
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(2, in_units=4))
    net.initialize()
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer)
    est.fit(_loader(), batches=2, event_handlers=[CheckpointHandler(str(tmp_path), "h", epoch_period=None,
                                                                      batch_period=1)])
    graph = mx.sym.load(os.path.join(tmp_path, "h-symbol.json"))
    assert graph.infer_shape(data=(5, 4))[1] == [(5, 2)]
    assert sorted(os.listdir(tmp_path))[:2] == ["h-epoch0batch0.params", "h-epoch0batch0.states"]
