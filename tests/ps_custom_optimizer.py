"""A user's own optimizer, registered the MXNet way, for the parameter-server tests: the servers
can run it only if they import this module (MXTORCH_PS_SERVER_IMPORTS)."""

from __future__ import annotations

from typing import Any

import torch

from mxtorch.optimizer import Optimizer, register


@register
class HalfStepSGD(Optimizer):
    """weight -= lr * g / 2 + lr * momentum_sum, with a state (the running sum of steps), so that
    both the update rule and per-slice states on the servers are exercised."""

    def __init__(self, learning_rate: float = 0.1, decay: float = 0.5, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.decay = float(decay)

    def create_state(self, index: Any, weight: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(weight)

    def _step(self, index: Any, weight: torch.Tensor, grad: torch.Tensor, state: Any, lr: float,
              wd: float) -> None:
        g = grad * float(self.rescale_grad) + wd * weight
        state.mul_(self.decay).add_(g)
        weight.sub_(0.5 * lr * state)


def train(kvstore: Any, steps: int, part: int | None, parts: int) -> list[torch.Tensor]:
    """The parameters after ``steps`` steps of the tests' small regression with :class:`HalfStepSGD`."""
    import ps_workers as w

    return w.train_steps(kvstore, None, steps, part, parts, optimizer="halfstepsgd",
                         optimizer_params={"learning_rate": 0.2, "decay": 0.7, "wd": 0.01})


def dist_train(steps: int) -> list[torch.Tensor]:
    import mxtorch as mx

    kv = mx.kv.create("dist_sync")
    return train(kv, steps, kv.rank, kv.num_workers)


def dist_error() -> str:
    """The error a dist_sync Trainer step raises when the servers cannot build the optimizer."""
    import mxtorch as mx

    try:
        train(mx.kv.create("dist_sync"), 1, None, 1)
    except mx.MXNetError as e:
        return str(e)
    return "no error"
