"""Online evaluation metrics (MXNet's ``mx.metric``), accumulating on the data's device."""

from __future__ import annotations

from .base import (
    CompositeEvalMetric,
    CustomMetric,
    EvalMetric,
    alias,
    check_label_shapes,
    create,
    np,
    register,
    registered_names,
)
from .classification import F1, MCC, PCC, Accuracy, TopKAccuracy
from .misc import Caffe, CrossEntropy, Loss, NegativeLogLikelihood, Perplexity, Torch
from .regression import MAE, MSE, RMSE, PearsonCorrelation

__all__ = [
    "EvalMetric",
    "CompositeEvalMetric",
    "CustomMetric",
    "Accuracy",
    "TopKAccuracy",
    "F1",
    "MCC",
    "PCC",
    "MAE",
    "MSE",
    "RMSE",
    "PearsonCorrelation",
    "CrossEntropy",
    "NegativeLogLikelihood",
    "Perplexity",
    "Loss",
    "Torch",
    "Caffe",
    "check_label_shapes",
    "register",
    "alias",
    "create",
    "np",
    "registered_names",
]
