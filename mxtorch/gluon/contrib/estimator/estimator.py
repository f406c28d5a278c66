"""The Estimator: MXNet's ready-made Gluon training loop.

``fit`` iterates a DataLoader for ``epochs`` epochs or ``batches`` batches; what happens around
each batch is the event handlers' (see :mod:`.event_handler`): the Estimator adds a
StoppingHandler, a GradientUpdateHandler (``trainer.step``), a MetricHandler, a
ValidationHandler (when ``val_data`` is given) and a LoggingHandler unless handlers of those
kinds are passed.  Training metrics are named ``'training <name>'``, validation metrics
``'validation <name>'``.
"""

from __future__ import annotations

import copy
import logging
import sys
import warnings
from typing import Any

from ....context import Context, cpu, gpu, num_gpus
from ....metric import Accuracy, EvalMetric
from ....metric import Loss as LossMetric
from ...data.dataloader import DataLoader
from ...loss import Loss, SoftmaxCrossEntropyLoss
from ...parameter_core import GluonUsageError
from ...trainer import Trainer
from .batch_processor import BatchProcessor
from .event_handler import (
    BatchBegin,
    BatchEnd,
    EpochBegin,
    EpochEnd,
    EventHandler,
    GradientUpdateHandler,
    LoggingHandler,
    MetricHandler,
    StoppingHandler,
    TrainBegin,
    TrainEnd,
    ValidationHandler,
    check_event_handlers,
    check_metrics,
)

__all__ = ["Estimator"]


class Estimator:
    """Train ``net`` with ``loss``: ``Estimator(net, loss, train_metrics=mx.metric.Accuracy(),
    trainer=gluon.Trainer(...)).fit(train_loader, val_loader, epochs=3)``.

    ``initializer`` initializes a net that is not initialized yet (on ``context``, default
    ``gpu(0)`` where there is a GPU, else ``cpu()``); without ``trainer``, SGD with learning rate
    0.001 (with a warning).  ``val_net`` / ``val_loss`` default to ``net`` / ``loss``;
    ``batch_processor`` replaces what one batch does (``fit_batch`` / ``evaluate_batch``).
    Messages go to ``estimator.logger`` (INFO and above to stdout, as MXNet's).
    """

    def __init__(self, net: Any, loss: Loss, train_metrics: Any = None, val_metrics: Any = None,
                 initializer: Any = None, trainer: Trainer | None = None, context: Any = None,
                 val_net: Any = None, val_loss: Loss | None = None, batch_processor: Any = None) -> None:
        self.net = net
        self.loss = self._check_loss(loss)
        self.val_loss = self.loss if val_loss is None else self._check_loss(val_loss)
        self.val_net = net if val_net is None else val_net
        self._train_metrics = check_metrics(train_metrics)
        self._val_metrics = check_metrics(val_metrics)
        self._name_metrics()
        self.logger = logging.Logger(name="Estimator", level=logging.INFO)
        self.logger.addHandler(logging.StreamHandler(sys.stdout))
        self.context = self._check_context(context)
        self._initialize(initializer)
        self.trainer = self._check_trainer(trainer)
        self.batch_processor = self._check_batch_processor(batch_processor)
        self.max_epoch: int | None = None
        self.max_batch: int | None = None
        self.batch_axis = 0

    # ---- construction --------------------------------------------------------------------
    @staticmethod
    def _check_loss(loss: Any) -> Loss:
        if not isinstance(loss, Loss):
            raise ValueError(f"loss must be a gluon.loss.Loss, got {loss!r}")
        return loss

    @staticmethod
    def _check_context(context: Any) -> list[Context]:
        if not context:
            if num_gpus() > 1:
                warnings.warn("several GPUs are visible and gpu(0) is used: pass context=[mx.gpu(0), ...] "
                              "to use more", stacklevel=3)
            return [gpu(0)] if num_gpus() > 0 else [cpu()]
        ctxs = [context] if isinstance(context, Context) else context
        if not isinstance(ctxs, list) or not all(isinstance(c, Context) for c in ctxs):
            raise ValueError(f"context must be a Context or a list of Contexts, e.g. mx.cpu(), "
                             f"got {context!r}")
        for c in ctxs:
            if c.device_type == "gpu" and c.device_id >= num_gpus():  # MXNet asserted this
                raise GluonUsageError(f"context {c} is not available: this machine has {num_gpus()} GPU(s)")
        return ctxs

    def _name_metrics(self) -> None:
        if not self._train_metrics:
            if isinstance(self.loss, SoftmaxCrossEntropyLoss):
                self._train_metrics.append(Accuracy())
            self._train_metrics.append(LossMetric(self.loss.name.rstrip("0123456789")))
        for metric in self._train_metrics:
            metric.name = "training " + metric.name
        if not self._val_metrics:
            self._val_metrics = [copy.deepcopy(m) for m in self._train_metrics]
        for metric in self._val_metrics:
            metric.name = metric.name.replace("training", "validation") if "training" in metric.name \
                else "validation " + metric.name

    def _initialize(self, initializer: Any) -> None:
        params = self.net.collect_params()
        ready = all(p.is_initialized or p._deferred is not None for p in params.values())
        if not ready:
            self.net.initialize(init=initializer, ctx=self.context)
        elif initializer is not None:
            warnings.warn("Network already fully initialized, skipping initialization: the initializer "
                          "is not used (call net.initialize(init, force_reinit=True) to re-initialize)",
                          stacklevel=3)

    def _check_trainer(self, trainer: Any) -> Trainer:
        if trainer is None:
            warnings.warn("No trainer specified, default SGD optimizer with learning rate 0.001 is used",
                          stacklevel=3)
            return Trainer(self.net.collect_params(), "sgd", {"learning_rate": 0.001})
        if not isinstance(trainer, Trainer):
            raise ValueError(f"trainer must be a gluon.Trainer, got {trainer!r}")
        return trainer

    @staticmethod
    def _check_batch_processor(processor: Any) -> Any:
        if processor is None:
            return BatchProcessor()
        if not callable(getattr(processor, "fit_batch", None)) or \
                not callable(getattr(processor, "evaluate_batch", None)):
            raise ValueError("batch_processor must have fit_batch() and evaluate_batch() methods")
        return processor

    @property
    def train_metrics(self) -> list[EvalMetric]:
        return self._train_metrics

    @property
    def val_metrics(self) -> list[EvalMetric]:
        return self._val_metrics

    # ---- loops ---------------------------------------------------------------------------
    def evaluate(self, val_data: DataLoader, batch_axis: int = 0, event_handlers: Any = None) -> None:
        """One pass over ``val_data`` with ``val_net`` / ``val_loss``, updating ``val_metrics``."""
        if not isinstance(val_data, DataLoader):
            raise ValueError("Estimator takes a gluon.data.DataLoader: wrap arrays with "
                             f"gluon.data.ArrayDataset, got {type(val_data).__name__}")
        for metric in self.val_metrics:
            metric.reset()
        handlers = self._prepare_default_validation_handlers(event_handlers)
        _, epoch_begin, batch_begin, batch_end, epoch_end, _ = self._categorize_handlers(handlers)
        for h in epoch_begin:
            h.epoch_begin(self)
        for batch in val_data:
            for h in batch_begin:
                h.batch_begin(self, batch=batch)
            _, label, pred, loss = self.batch_processor.evaluate_batch(self, batch, batch_axis)
            for h in batch_end:
                h.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
        for h in epoch_end:
            h.epoch_end(self)

    def fit(self, train_data: DataLoader, val_data: DataLoader | None = None, epochs: int | None = None,
            event_handlers: Any = None, batches: int | None = None, batch_axis: int = 0) -> None:
        """Train for ``epochs`` epochs or ``batches`` batches (exactly one of them)."""
        if not isinstance(train_data, DataLoader):
            raise ValueError("Estimator takes a gluon.data.DataLoader: wrap arrays with "
                             f"gluon.data.ArrayDataset, got {type(train_data).__name__}")
        if (not epochs) == (not batches):
            raise ValueError(f"fit: give exactly one of epochs or batches, got epochs={epochs}, "
                             f"batches={batches}")
        self.max_epoch, self.max_batch, self.batch_axis = epochs, batches, batch_axis
        handlers = self._prepare_default_handlers(val_data, event_handlers)
        by_event = self._categorize_handlers(handlers)
        train_begin, epoch_begin, batch_begin, batch_end, epoch_end, train_end = by_event
        for h in train_begin:
            h.train_begin(self)
        while True:
            for h in epoch_begin:
                h.epoch_begin(self)
            for batch in train_data:
                for h in batch_begin:
                    h.batch_begin(self, batch=batch)
                _, label, pred, loss = self.batch_processor.fit_batch(self, batch, batch_axis)
                stops = [h.batch_end(self, batch=batch, pred=pred, label=label, loss=loss) for h in batch_end]
                if any(stops):
                    break
            if any([h.epoch_end(self) for h in epoch_end]):
                break
        for h in train_end:
            h.train_end(self)

    # MXNet's names for the two steps below (MXNet code and tests call them)
    def _prepare_default_handlers(self, val_data: Any, event_handlers: Any) -> list[EventHandler]:
        """The training handlers: the given ones and the defaults, sorted by priority."""
        return self._with_defaults(event_handlers, self.train_metrics, True, val_data)

    def _prepare_default_validation_handlers(self, event_handlers: Any) -> list[EventHandler]:
        return self._with_defaults(event_handlers, self.val_metrics, False)

    @staticmethod
    def _categorize_handlers(handlers: list[EventHandler]) -> tuple[list[Any], ...]:
        """The handlers of each event: train begin, epoch begin, batch begin, batch end, epoch end,
        train end."""
        kinds = (TrainBegin, EpochBegin, BatchBegin, BatchEnd, EpochEnd, TrainEnd)
        return tuple([h for h in handlers if isinstance(h, kind)] for kind in kinds)

    def _with_defaults(self, event_handlers: Any, metrics: list[EvalMetric], training: bool,
                       val_data: Any = None) -> list[EventHandler]:
        handlers = check_event_handlers(event_handlers)
        added: list[EventHandler] = []
        if training:
            added.append(StoppingHandler(self.max_epoch, self.max_batch))
            if not any(isinstance(h, GradientUpdateHandler) for h in handlers):
                added.append(GradientUpdateHandler())
        if not any(isinstance(h, MetricHandler) for h in handlers):
            added.append(MetricHandler(metrics=metrics))
        if training and val_data is not None and not any(isinstance(h, ValidationHandler) for h in handlers):
            added.append(ValidationHandler(val_data=val_data, eval_fn=self.evaluate))
        if not any(isinstance(h, LoggingHandler) for h in handlers):
            added.append(LoggingHandler(metrics=metrics))
        if handlers and added:  # a user's handler must watch the metrics the Estimator updates
            known = {id(m) for m in self.train_metrics + self.val_metrics}
            for h in handlers:
                for attr in ("metrics", "monitor"):
                    refs = getattr(h, attr, None)
                    for m in refs if isinstance(refs, list) else [refs] if refs is not None else []:
                        if id(m) not in known:
                            raise ValueError(f"{type(h).__name__} refers to a metric {m!r} that is not "
                                             "one of estimator.train_metrics / val_metrics")
        handlers = handlers + added
        handlers.sort(key=lambda h: getattr(h, "priority", 0))
        return handlers

