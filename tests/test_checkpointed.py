"""Activation checkpointing of Gluon blocks (mxtorch.parallel.split.checkpointed): the backward
recomputes the forward in the forward's training mode, even when it runs outside record()."""

from __future__ import annotations

import torch

import mxtorch as mx
from mxtorch import autograd
from mxtorch.gluon import nn
from mxtorch.parallel.planner import profile_layers
from mxtorch.parallel.split import chain_units, checkpointed


def _block(seed: int = 0):
    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, padding=1, in_channels=2), nn.BatchNorm(in_channels=4), nn.Activation("relu"),
            nn.Dropout(0.5))
    net.initialize(mx.init.Xavier())
    return net


def _grads(net, x, ckpt: bool):
    for p in net.collect_params().values():
        p.data().grad = None
    inp = x.clone().requires_grad_()
    torch.manual_seed(7)  # the same Dropout mask in both runs
    with autograd.record():
        y = checkpointed(net, inp) if ckpt else net(inp)
    y.backward(torch.ones_like(y))  # outside record(): predict mode
    return [inp.grad] + [p.data().grad for p in net.collect_params().values() if p.grad_req != "null"]


def test_backward_outside_record_recomputes_in_training_mode():
    x = torch.randn(3, 2, 5, 5)
    plain, ckpt = _block(), _block()
    for a, b in zip(_grads(plain, x, False), _grads(ckpt, x, True), strict=True):
        torch.testing.assert_close(a, b)


def test_profiling_a_net_with_batchnorm_times_its_checkpointed_layers():
    # `mxtorch plan --model resnet50_v1` failed here: the recomputed BatchNorm ran in predict mode
    net = nn.HybridSequential()
    net.add(_block(), nn.Flatten(), nn.Dense(3, in_units=4 * 25))
    net.initialize(mx.init.Xavier())
    costs = profile_layers(chain_units(net), torch.randn(4, 2, 5, 5), repeats=1)
    assert len(costs) >= 2 and all(c.fwd_s >= 0 for c in costs)
