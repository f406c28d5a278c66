"""Online evaluation metrics (MXNet's ``mx.metric``), accumulating on the data's device."""

from __future__ import annotations

from . import base
from .base import *  # noqa: F403  (base.__all__: EvalMetric, register, create, ...)
from .classification import F1, MCC, PCC, Accuracy, TopKAccuracy
from .misc import Caffe, CrossEntropy, Loss, NegativeLogLikelihood, Perplexity, Torch
from .regression import MAE, MSE, RMSE, PearsonCorrelation

__all__ = [
    *base.__all__,
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
]
