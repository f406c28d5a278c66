"""pruning.compact on graphs that are not one chain: the model zoo's ResNet (BasicBlock residual
adds, projection shortcuts), concatenations, functions called between layers."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.base import MXNetError
from mxtorch.contrib import pruning
from mxtorch.gluon import nn
from mxtorch.gluon.model_zoo import vision

X = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))


def count(net: gluon.Block) -> int:
    return sum(p.data().numel() for p in net.collect_params().values())


def randomize_batchnorm(net: gluon.Block) -> None:
    """Non-trivial BatchNorm statistics and affine values, as after training."""
    g = torch.Generator().manual_seed(3)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm):
            c = m.gamma.shape[0]
            m.gamma.set_data(torch.rand(c, generator=g) + 0.5)
            m.beta.set_data(torch.randn(c, generator=g) * 0.1)
            m.running_mean.set_data(torch.randn(c, generator=g) * 0.1)
            m.running_var.set_data(torch.rand(c, generator=g) + 0.5)


def resnet20() -> gluon.HybridBlock:
    mx.random.seed(0)
    net = vision.cifar_resnet20_v1(classes=10)
    net.initialize(mx.init.Xavier())
    net(X)
    randomize_batchnorm(net)
    return net


def predict(net: gluon.Block, x: torch.Tensor) -> torch.Tensor:
    with autograd.predict_mode():
        return net(x)


def test_resnet_all_layers_pruned_keeps_residual_channels():
    net = resnet20()
    pruning.Pruner("structured").apply(net, sparsity=0.5)
    small = pruning.compact(net, X)
    torch.testing.assert_close(predict(small, X), predict(net, X), rtol=1e-4, atol=1e-5)
    assert count(small) < count(net)
    # every block's first convolution lost half its filters, and its second convolution those inputs;
    # the second convolution's own outputs feed the residual add: all of them stay
    blocks = [b for b in small.modules() if isinstance(b, vision.BasicBlockV1)]
    assert len(blocks) == 9
    for b in blocks:
        c1, c2 = b.body[0], b.body[3]
        assert c1.weight.shape[0] == c2.weight.shape[1] == b.body[1].gamma.shape[0] == c2.weight.shape[0] // 2
    with pytest.raises(MXNetError, match=r"channels that cannot be removed: its output .*residual"):
        pruning.compact(net, X, strict=True)


def test_resnet_compactable_layers_only():
    net = resnet20()
    names = pruning.compactable(net, X)
    blocks = [b for b in net.modules() if isinstance(b, vision.BasicBlockV1)]
    assert sorted(names) == sorted(b.body[0].weight.name for b in blocks)  # the stem feeds a shortcut
    select = "(?:" + "|".join(map(re.escape, names)) + ")$"
    pruner = pruning.Pruner("structured", select=select)
    pruner.apply(net, sparsity=0.5)
    assert {k.rsplit(".", 1)[0] for k in pruner.masks if k.endswith("weight") and "body" in k}
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with autograd.record():  # a training step: BatchNorm statistics move; pruned channels stay zero
        loss = loss_fn(net(X[:2]), torch.arange(2))
    loss.backward()
    trainer.step(2)
    pruner.step()
    small = pruning.compact(net, X, strict=True)  # nothing pruned is left behind
    torch.testing.assert_close(predict(small, X), predict(net, X), rtol=1e-4, atol=1e-5)
    conv_weights = sum(b.body[0].weight.data().numel() + b.body[3].weight.data().numel() for b in blocks)
    assert count(net) - count(small) > 0.45 * conv_weights


class Branches(gluon.HybridBlock):
    """Two convolutions concatenated, a functional ReLU and reshape between layers."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2D(8, 3, padding=1, in_channels=3)
        self.b = nn.Conv2D(8, 3, padding=1, in_channels=3)
        self.c = nn.HybridSequential()  # (structured pruning masks the BatchNorm after a Conv2D in a
        self.c.add(nn.Conv2D(6, 3, padding=1, in_channels=16), nn.BatchNorm(in_channels=6))  # Sequential)
        self.out = nn.Dense(5, in_units=6 * 32 * 32)

    def forward(self, x):
        y = F.relu(self.c(torch.cat([self.a(x), self.b(x)], dim=1)))
        return self.out(y.reshape(y.shape[0], -1))


def test_concat_and_functions_between_layers():
    mx.random.seed(0)
    net = Branches()
    net.initialize()
    net(X)
    randomize_batchnorm(net)
    pruning.Pruner("structured").apply(net, sparsity=0.5)
    assert pruning.compactable(net, X) == [net.c[0].weight.name]
    small = pruning.compact(net, X)
    assert small.a.weight.shape == (8, 3, 3, 3) and small.c[0].weight.shape == (3, 16, 3, 3)
    assert small.c[1].gamma.shape == (3,) and small.out.weight.shape == (5, 3 * 32 * 32)
    torch.testing.assert_close(predict(small, X), predict(net, X), rtol=1e-4, atol=1e-5)
    with pytest.raises(MXNetError, match=f"{net.a.name} .*'cat'"):
        pruning.compact(net, X, strict=True)
