"""Gluon parameters (MXNet's ``mxnet.gluon.parameter``): the public names, gathered from
:mod:`.parameter_core` (Parameter, Constant), :mod:`.parameter_dict` (ParameterDict) and
:mod:`.block` (as_parameters, which also accepts blocks)."""

from __future__ import annotations

from ..base import DeferredInitializationError
from .block import as_parameters
from .parameter_core import (
    Constant,
    GluonUsageError,
    Parameter,
    forward_context,
    numpy_dtype,
    wrap_torch_parameter,
)
from .parameter_dict import ParameterDict

__all__ = [
    "Parameter",
    "Constant",
    "ParameterDict",
    "DeferredInitializationError",
    "GluonUsageError",
    "forward_context",
    "as_parameters",
    "numpy_dtype",
    "wrap_torch_parameter",
]
