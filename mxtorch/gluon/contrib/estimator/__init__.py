"""MXNet's Gluon Estimator: ``Estimator(net, loss, ...).fit(train_loader, val_loader, epochs=...)``
runs the training loop, and event handlers plug into it at train/epoch/batch begin and end
(metrics, validation, logging, checkpoints, early stopping, the optimizer step); a
:class:`BatchProcessor` says what one batch does."""

from .batch_processor import BatchProcessor
from .estimator import Estimator
from .event_handler import (
    BatchBegin,
    BatchEnd,
    CheckpointHandler,
    EarlyStoppingHandler,
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
)

__all__ = ["Estimator", "BatchProcessor", "EventHandler", "TrainBegin", "TrainEnd", "EpochBegin",
           "EpochEnd", "BatchBegin", "BatchEnd", "StoppingHandler", "MetricHandler", "ValidationHandler",
           "LoggingHandler", "CheckpointHandler", "EarlyStoppingHandler", "GradientUpdateHandler"]
