"""Rank functions for the distributed AMP tests (run through mxtorch.distributed.testing)."""

from __future__ import annotations

import os
from typing import Any

import torch

import mxtorch as mx
from mxtorch import amp, autograd, gluon
from mxtorch.gluon import nn


def overflow_on_one_rank(bad_rank: int) -> dict[str, Any]:
    """Two steps with a 'horovod' store; in the first, only ``bad_rank`` gets an inf gradient."""
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    torch.manual_seed(0)
    net = nn.Dense(2, in_units=3)
    net.initialize(mx.init.Xavier())
    kv = mx.kv.create("horovod")
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore=kv)
    scaler = amp.init_trainer(trainer)
    start_scale = scaler.loss_scale
    before = net.weight.data().detach().clone()
    x = torch.ones(4, 3) * (rank + 1)
    with autograd.record():
        loss = net(x).sum()
        if rank == bad_rank:
            loss = loss * float("inf")
    with amp.scale_loss(loss, trainer) as scaled:
        autograd.backward(scaled)
    trainer.step(4 * kv.num_workers)  # the global batch: the store sums (MXNet)
    skipped = bool(torch.equal(net.weight.data().detach(), before))
    after_overflow_scale = scaler.loss_scale
    with autograd.record():
        loss = net(x).sum()
    with amp.scale_loss(loss, trainer) as scaled:
        autograd.backward(scaled)
    trainer.step(4 * kv.num_workers)  # the global batch: the store sums (MXNet)
    return {"skipped": skipped, "start": start_scale, "after": after_overflow_scale,
            "weight": net.weight.data().detach().tolist(),
            "moved": not torch.equal(net.weight.data().detach(), before)}
