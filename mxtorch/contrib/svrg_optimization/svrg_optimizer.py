"""The optimizer an :class:`~mxtorch.contrib.svrg_optimization.SVRGModule` installs.

``_SVRGOptimizer`` wraps the optimizer the user chose: a parameter whose name contains
``full`` (the keys ``<param>_full`` through which the store sums the full gradients) is
overwritten with the pushed value (``_AssignmentOptimizer``); every other one is updated by the
wrapped optimizer.  Both are registered, as in MXNet, so ``mx.optimizer.create('_svrgoptimizer',
default_optimizer='sgd', ...)`` works.
"""

from __future__ import annotations

from typing import Any

import torch

from ... import optimizer as _opt

__all__ = ["_AssignmentOptimizer", "_SVRGOptimizer"]

# the keyword arguments of the base Optimizer that the wrapper keeps for itself (the wrapped
# optimizer gets all of them, with its own ones)
_BASE_PARAMS = (
    "rescale_grad", "param_idx2name", "wd", "clip_gradient", "learning_rate", "lr_scheduler", "sym",
    "begin_num_update", "multi_precision", "param_dict",
)


@_opt.register
class _AssignmentOptimizer(_opt.Optimizer):
    """Sets the weight to the pushed value (``weight[:] = grad``): no learning rate, no state."""

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        if self._update_listed(index, weight, grad, state):
            return
        with torch.no_grad():
            weight.copy_(grad.to_dense() if grad.layout != torch.strided else grad)


@_opt.register
class _SVRGOptimizer(_opt.Optimizer):
    """Routes ``*full*`` parameters to :class:`_AssignmentOptimizer` and the rest to
    ``default_optimizer`` (a name, created with the same keyword arguments, or an Optimizer)."""

    def __init__(self, default_optimizer: Any = "sgd", **kwargs: Any) -> None:
        super().__init__(**{k: v for k, v in kwargs.items() if k in _BASE_PARAMS})
        if isinstance(default_optimizer, str):
            self.default_opt = _opt.create(default_optimizer, **kwargs)
        elif isinstance(default_optimizer, _opt.Optimizer):
            self.default_opt = default_optimizer
        else:
            raise TypeError(
                "_SVRGOptimizer: default_optimizer must be an optimizer name or an "
                f"mx.optimizer.Optimizer, got {type(default_optimizer).__name__}"
            )
        self.aux_opt = _AssignmentOptimizer()

    def _name(self, index: Any) -> str:
        """The parameter name of ``index``: a name itself (a store keyed by names) or an index
        of ``param_idx2name``."""
        if isinstance(index, str):
            return index
        name = self.idx2name.get(index)
        if name is None:
            raise KeyError(
                f"_SVRGOptimizer: index {index!r} is not in param_idx2name ({sorted(self.idx2name)}); "
                "the SVRGModule builds that map, pass it when creating the optimizer yourself"
            )
        return name

    def _route(self, index: Any) -> _opt.Optimizer:
        return self.aux_opt if "full" in self._name(index) else self.default_opt

    def create_state(self, index: Any, weight: torch.Tensor) -> Any:
        return self._route(index).create_state(index, weight)

    def create_state_multi_precision(self, index: Any, weight: torch.Tensor) -> Any:
        return self._route(index).create_state_multi_precision(index, weight)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        if self._update_listed(index, weight, grad, state):
            return
        self._route(index).update(index, weight, grad, state)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state, strict=True):
                self._route(i).update_multi_precision(i, w, g, s)
            return
        self._route(index).update_multi_precision(index, weight, grad, state)
