"""Rank functions of tests/test_checkpoint.py's distributed tests (run by run_workers in new
processes): a 2-worker allreduce job with 2-bit compression, Dropout and a sharded loader."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.checkpoint import CheckpointManager
from mxtorch.gluon import nn
from mxtorch.gluon.data import ArrayDataset, DataLoader, SplitSampler

N_SAMPLES, BATCH = 32, 4  # 4 batches per worker and epoch
TWO_BIT = {"type": "2bit", "threshold": 0.05}


def _parts(rank: int, seed: int):
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed + rank)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=10), nn.Dropout(0.5), nn.Dense(4, in_units=16))
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore="horovod", compression_params=TWO_BIT)
    g = torch.Generator().manual_seed(123)
    data = ArrayDataset(torch.randn(N_SAMPLES, 10, generator=g),
                        torch.randint(0, 4, (N_SAMPLES,), generator=g))
    loader = DataLoader(data, batch_size=BATCH, sampler=SplitSampler(N_SAMPLES, 2, rank, seed=5))
    return net, trainer, loader


def _train(net, trainer, loader, start: int, stop: int, mgr=None, save_at: int = -1) -> None:
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    step = start
    while step < stop:
        for x, y in loader:
            step += 1
            x = x + torch.from_numpy(np.random.normal(0, 0.01, x.shape).astype(np.float32)) * random.random()
            with autograd.record():
                loss = loss_fn(net(x), y.float())
            loss.backward()
            trainer.step(x.shape[0])
            if step == save_at:
                mgr.save(step, net=net, trainer=trainer, loader=loader, world_note="two")
            if step == stop:
                return


def _weights(net) -> list[torch.Tensor]:
    return [p.data().detach().clone() for p in net.collect_params().values()]


def train_and_save(uri: str, save_at: int, stop: int) -> dict[str, Any]:
    """The uninterrupted run to ``stop``; then a run that saves at ``save_at`` and goes on a little."""
    rank = int(os.environ["RANK"])
    net, trainer, loader = _parts(rank, seed=0)
    _train(net, trainer, loader, 0, stop)
    want = _weights(net)
    mgr = CheckpointManager(uri, async_save=True)
    net, trainer, loader = _parts(rank, seed=0)
    _train(net, trainer, loader, 0, save_at + 2, mgr, save_at)
    mgr.wait()
    residuals = trainer._kvstore.compressor.state_dict()["residuals"]
    return {"want": want, "rank": mgr.rank, "world": mgr.world_size,
            "has_residuals": any(float(r.abs().sum()) > 0 for r in residuals.values())}


def restore_and_finish(uri: str, stop: int) -> dict[str, Any]:
    rank = int(os.environ["RANK"])
    mgr = CheckpointManager(uri)  # first: it joins the job's process group itself
    assert (mgr.rank, mgr.world_size) == (rank, 2)
    net, trainer, loader = _parts(rank, seed=40 + rank)  # other weights, other RNG states
    step = mgr.restore(net=net, trainer=trainer, loader=loader)
    _train(net, trainer, loader, step, stop)
    return {"step": step, "extra": mgr.extra, "weights": _weights(net)}
