"""MXNet's ``mx.contrib.svrg_optimization``: stochastic variance-reduced gradient training.

:class:`SVRGModule` is a :class:`~mxtorch.module.Module` that keeps a second module holding a
snapshot of the weights; every ``update_freq`` epochs it averages the snapshot's gradients over
the whole data set, and each step it updates with ``g(w) - g(snapshot) + full gradient``
(Johnson & Zhang, 2013).  ``_SVRGOptimizer`` routes the ``<name>_full`` keys to an assignment
so that the store sums the full gradients of every device and worker.
"""

from __future__ import annotations

from .svrg_module import SVRGModule
from .svrg_optimizer import _AssignmentOptimizer, _SVRGOptimizer

__all__ = ["SVRGModule", "_SVRGOptimizer", "_AssignmentOptimizer"]
