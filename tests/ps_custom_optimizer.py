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
    """The parameters after ``steps`` steps of a small regression with :class:`HalfStepSGD`."""
    from mxtorch import autograd, gluon
    from mxtorch.gluon import nn

    torch.manual_seed(0)
    net = nn.Sequential()
    net.add(nn.Dense(4, in_units=3, activation="tanh"), nn.Dense(1, in_units=4))
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "halfstepsgd", {"learning_rate": 0.2, "decay": 0.7,
                                                                  "wd": 0.01}, kvstore=kvstore)
    g = torch.Generator().manual_seed(1)
    loss_fn = gluon.loss.L2Loss()
    for _ in range(steps):
        x = torch.randn(8, 3, generator=g)
        y = x.sum(dim=1, keepdim=True)
        if part is not None:
            x, y = x[part::parts], y[part::parts]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])
    return [p.data().detach().clone() for p in net.collect_params().values()]


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
