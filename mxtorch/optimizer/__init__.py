"""MXNet's ``mxnet.optimizer`` on PyTorch: optimizers updating plain ``torch.Tensor`` weights in place.

``create('adam', learning_rate=1e-3)`` builds a registered optimizer by (case-insensitive) name;
``Updater``/``get_updater`` keep per-index states the way MXNet's KVStore does.  Every
optimizer of MXNet 1.9's registry is here with MXNet 1.9's update rule (``AdamW`` comes from
MXNet's contrib package).  Row_sparse gradients update only their rows where MXNet's does
(``lazy_update``; :mod:`mxtorch.optimizer.sparse`), else every row.
"""

from __future__ import annotations

from . import contrib
from .accumulate import Test
from .adadelta import AdaDelta
from .adagrad import AdaGrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .base import LRSchedulerConflictError, Optimizer, create, register
from .dcasgd import DCASGD
from .ftml import FTML
from .ftrl import Ftrl
from .lamb import LAMB
from .lars import LARS
from .lbsgd import LBSGD
from .nadam import Nadam
from .nag import NAG
from .rmsprop import RMSProp
from .sgd import SGD, ccSGD
from .sgld import SGLD
from .signum import Signum
from .sparse import update_rows
from .updater import Updater, get_updater

__all__ = [
    "Optimizer",
    "Updater",
    "register",
    "create",
    "get_updater",
    "LRSchedulerConflictError",
    "SGD",
    "ccSGD",
    "NAG",
    "Adam",
    "AdamW",
    "Adamax",
    "Nadam",
    "AdaGrad",
    "AdaDelta",
    "RMSProp",
    "Ftrl",
    "FTML",
    "LAMB",
    "LARS",
    "LBSGD",
    "DCASGD",
    "SGLD",
    "Signum",
    "Test",
    "update_rows",
    "contrib",
]
