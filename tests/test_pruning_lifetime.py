"""Pruning masks belong to the network: they stay enforced after the Pruner object is dropped and
garbage-collected (one process and 2 horovod workers), a later Pruner takes them over, remove()
ends them, and a dropped network is collected with its masks."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.contrib import pruning
from mxtorch.gluon import nn


def mlp(seed: int = 0, activation: str = "relu") -> nn.HybridSequential:
    mx.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation=activation, in_units=20),
            nn.Dense(24, activation=activation, in_units=32), nn.Dense(10, in_units=24))
    net.initialize(mx.init.Xavier())
    return net


def train(net: gluon.Block, trainer: gluon.Trainer, x: torch.Tensor, steps: int) -> None:
    y = torch.arange(x.shape[0]) % 10
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])


def regrown(net: gluon.Block, masks: dict[str, torch.Tensor]) -> int:
    """How many pruned entries are no longer exactly zero."""
    params = net._collect_params_with_prefix()
    return sum(int((params[k].data()[~m] != 0).sum()) for k, m in masks.items())


@pytest.mark.parametrize("method", ["l1", "random", "structured"])
def test_masks_outlive_the_pruner(method):
    x = torch.randn(16, 20)
    # tanh: a pruned channel's zero output still passes gradients back (relu's would not)
    net = mlp(activation="tanh" if method == "structured" else "relu")
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-2})
    train(net, trainer, x, 2)  # momentum built up before the masks exist
    pruner = pruning.Pruner(method)
    pruner.apply(net, sparsity=0.7)  # the pattern the docs show: the returned net, the Pruner not kept
    masks = pruner.masks
    del pruner
    gc.collect()
    before = {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()}
    train(net, trainer, x, 5)
    assert regrown(net, masks) == 0
    params = net._collect_params_with_prefix()  # the kept weights train
    assert all(not torch.equal(before[k][m], params[k].data()[m]) for k, m in masks.items())


def test_a_later_pruner_takes_the_masks_over():
    net = mlp()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    first = pruning.Pruner("l1")
    first.apply(net, sparsity=0.7)
    old = first.masks
    del first
    gc.collect()
    second = pruning.Pruner("random", seed=1)
    second.apply(net, sparsity=0.3)
    new = second.masks
    x = torch.randn(16, 20)
    train(net, trainer, x, 3)
    assert regrown(net, new) == 0
    # what only the first Pruner pruned trains again: its masks were replaced, not stacked
    only_old = {k: old[k] | ~new[k] for k in new}
    assert regrown(net, only_old) > 0


def test_remove_ends_the_masks():
    net = mlp()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    pruner = pruning.Pruner("l1")
    pruner.apply(net, sparsity=0.7)
    masks = pruner.masks
    pruner.remove()
    train(net, trainer, torch.randn(16, 20), 2)
    assert regrown(net, masks) > 0


def test_a_dropped_network_is_collected_with_its_masks():
    net = mlp()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    pruner = pruning.Pruner("l1")
    pruner.apply(net, sparsity=0.5)
    train(net, trainer, torch.randn(16, 20), 1)
    alive = weakref.ref(net)
    weight = weakref.ref(net[0].weight.data())
    del net, trainer, pruner
    gc.collect()
    assert alive() is None and weight() is None


def test_two_horovod_workers_keep_random_masks_without_the_pruner(run_ranks):
    import pruning_workers as w

    r0, r1 = run_ranks(w.random_masks_without_pruner, 2, 6, timeout=90)
    for k, m in r0["masks"].items():
        assert torch.equal(m, r1["masks"][k]), k  # the same seed: the same masks on both ranks
        assert bool((r0["weights"][k][~m] == 0).all()) and bool((r1["weights"][k][~m] == 0).all()), k
    for k in r0["weights"]:
        assert torch.equal(r0["weights"][k], r1["weights"][k]), k
