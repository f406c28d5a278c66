"""MXNet's ``mxnet.optimizer`` on PyTorch: optimizers updating plain ``torch.Tensor`` weights in place.

``create('adam', learning_rate=1e-3)`` builds a registered optimizer by (case-insensitive) name;
``Updater``/``get_updater`` keep per-index states the way MXNet's KVStore does.
Row_sparse gradients update only their rows (:mod:`mxtorch.optimizer.sparse`).
"""

from __future__ import annotations

from .accumulate import Test
from .adadelta import AdaDelta
from .adagrad import AdaGrad
from .adam import Adam
from .adamw import AdamW
from .base import LRSchedulerConflictError, Optimizer, Updater, create, get_updater, register
from .ftrl import Ftrl
from .lamb import LAMB
from .lars import LARS
from .nag import NAG
from .rmsprop import RMSProp
from .sgd import SGD
from .signum import Signum
from .sparse import update_rows

__all__ = [
    "Optimizer",
    "Updater",
    "register",
    "create",
    "get_updater",
    "LRSchedulerConflictError",
    "SGD",
    "NAG",
    "Adam",
    "AdamW",
    "AdaGrad",
    "AdaDelta",
    "RMSProp",
    "Ftrl",
    "LAMB",
    "LARS",
    "Signum",
    "Test",
    "update_rows",
]
