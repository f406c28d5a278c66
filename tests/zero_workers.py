"""Rank functions for the sharded data-parallel (ZeRO) tests (run through mxtorch.distributed.testing)."""

from __future__ import annotations

import os
from typing import Any

import torch

import mxtorch as mx
from mxtorch import autograd, gluon, parallel
from mxtorch.gluon import nn
from mxtorch.parallel.zero import optimizer_state_bytes

STEPS = 5
GLOBAL_BATCH = 8
ADAM = {"learning_rate": 0.05, "wd": 0.01}


def tiny_net() -> nn.HybridSequential:
    """Four equal Dense layers (8 -> 8): whole-parameter shards split evenly over 2 and 4 ranks."""
    torch.manual_seed(0)
    net = nn.HybridSequential()
    for _ in range(4):
        net.add(nn.Dense(8, in_units=8, activation="tanh"))
    net.initialize(mx.init.Xavier())
    return net


def global_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(GLOBAL_BATCH, 8, generator=g), torch.randn(GLOBAL_BATCH, 8, generator=g)


def train(trainer_of: Any, rank: int, world: int) -> tuple[list[torch.Tensor], int]:
    """``STEPS`` Adam steps of this rank's slice of each global batch; the weights and the
    optimizer-state bytes held (measured between steps, after the last)."""
    net = tiny_net()
    trainer = trainer_of(net)
    loss_fn = gluon.loss.L2Loss()
    per = GLOBAL_BATCH // world
    for step in range(STEPS):
        x, y = global_batch(step)
        x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(GLOBAL_BATCH)  # the global batch: gradients are summed (MXNet's rule)
    weights = [p.data().detach().clone() for p in net.collect_params().values()]
    return weights, optimizer_state_bytes(trainer)


def reference() -> tuple[list[torch.Tensor], int]:
    """One process on the whole global batch with a plain Trainer."""
    return train(lambda net: gluon.Trainer(net.collect_params(), "adam", ADAM, kvstore=None), 0, 1)


def zero_stages(save_to: str) -> dict[str, Any]:
    """Train with zero=1 and zero=2 over the whole job; rank 0 saves the zero=2 model's file."""
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out: dict[str, Any] = {}
    for zero in (1, 2):
        mesh = parallel.Mesh(parallel.ParallelConfig(dp=world, zero=zero))
        holder: dict[str, Any] = {}

        def make(net: Any, mesh: Any = mesh, holder: dict[str, Any] = holder) -> Any:
            holder["net"] = net
            return mesh.trainer(net.collect_params(), "adam", ADAM)

        weights, state_bytes = train(make, rank, world)
        out[zero] = {"weights": weights, "state_bytes": state_bytes}
        if zero == 2 and rank == 0:
            holder["net"].save_parameters(save_to)
    return out
