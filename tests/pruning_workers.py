"""Worker functions for tests/test_pruning.py, run in real processes by ``run_workers``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _pruned_job(kvstore: str,
                update_on_kvstore: bool | None) -> tuple[Any, Any, Any, Any, Callable[[], None]]:
    """A small MLP (each rank's own random weights: identical only through the store), its Trainer on
    ``kvstore``, an applied gradual L1 Pruner, and one training step on this rank's own data."""
    torch.set_num_threads(1)
    import mxtorch as mx
    from mxtorch import autograd, gluon
    from mxtorch.contrib import pruning
    from mxtorch.gluon import nn

    kv = mx.kv.create(kvstore)
    mx.random.seed(100 + kv.rank)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=8), nn.Dense(4, in_units=16))
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9,
                                                          "wd": 1e-3}, kvstore=kv,
                            update_on_kvstore=update_on_kvstore)
    pruner = pruning.Pruner("l1", schedule="polynomial", sparsity=0.75, begin_step=1, end_epoch=2,
                            steps_per_epoch=3, frequency=2)
    pruner.apply(net)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    g = torch.Generator().manual_seed(7 + kv.rank)

    def train_step() -> None:
        x = torch.randn(6, 8, generator=g)
        y = torch.randint(0, 4, (6,), generator=g)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(6 * kv.num_workers)

    return kv, net, trainer, pruner, train_step


def gradual_horovod(steps: int) -> dict[str, Any]:
    """Gradual L1 pruning of a small MLP under the 'horovod' store: every rank starts from its own
    random weights (the store broadcasts rank 0's) and trains on its own data; returns the masks
    after every step and the final weights."""
    from mxtorch.contrib import pruning

    kv, net, trainer, pruner, train_step = _pruned_job("horovod", None)
    masks: list[dict[str, torch.Tensor]] = []
    for _ in range(steps):
        train_step()
        pruner.step()
        masks.append(pruner.masks)
    weights = {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()}
    return {"masks": masks, "weights": weights, "sparsity": pruning.sparsity(net)["total"]}


def gradual_ps(kvstore: str, update_on_kvstore: bool | None, steps: int) -> dict[str, Any]:
    """Gradual L1 pruning of a small MLP on a parameter-server store ('dist_sync' / 'dist_async'),
    with the optimizer on the servers (``update_on_kvstore=True``) or on the workers.  Returns the
    masks after every step, whether the pruned weights were exactly zero after every step, how many
    pruned entries the last pull brought back non-zero (the servers' copies), and the weights."""
    from mxtorch.contrib import pruning

    kv, net, trainer, pruner, train_step = _pruned_job(kvstore, update_on_kvstore)
    params = net._collect_params_with_prefix()
    masks: list[dict[str, torch.Tensor]] = []
    zero_after_step: list[bool] = []
    pulled_nonzero = 0
    for _ in range(steps):
        train_step()
        before = pruner.masks
        pulled_nonzero = sum(int((params[k].data()[~m] != 0).sum()) for k, m in before.items())
        pruner.step()
        now = pruner.masks
        masks.append(now)
        zero_after_step.append(all(bool((params[k].data()[~m] == 0).all()) for k, m in now.items()))
    kv.barrier()
    weights = {k: p.data().detach().clone() for k, p in params.items()}
    return {"masks": masks, "zero": zero_after_step, "weights": weights, "pulled_nonzero": pulled_nonzero,
            "update_on_kvstore": trainer._update_on_kvstore, "sparsity": pruning.sparsity(net)["total"]}


def random_masks_without_pruner(steps: int) -> dict[str, Any]:
    """One-shot ``random`` pruning of a small MLP under the 'horovod' store, the Pruner dropped and
    garbage-collected before training: the masks (the same seed on every rank) must stay enforced
    by the network itself.  Returns the masks and the weights after ``steps`` training steps."""
    import gc

    import mxtorch as mx
    from mxtorch import autograd, gluon
    from mxtorch.contrib import pruning
    from mxtorch.gluon import nn

    torch.set_num_threads(1)
    kv = mx.kv.create("horovod")
    mx.random.seed(100 + kv.rank)  # each rank its own initial weights: rank 0's are broadcast
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=8), nn.Dense(4, in_units=16))
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9,
                                                          "wd": 1e-3}, kvstore=kv)
    pruner = pruning.Pruner("random", seed=5)
    pruner.apply(net, sparsity=0.6)
    masks = pruner.masks
    del pruner
    gc.collect()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    g = torch.Generator().manual_seed(7 + kv.rank)
    for _ in range(steps):
        x = torch.randn(6, 8, generator=g)
        y = torch.randint(0, 4, (6,), generator=g)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(6 * kv.num_workers)
    weights = {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()}
    return {"masks": masks, "weights": weights}
