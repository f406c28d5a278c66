"""mx.gluon.contrib: the containers of contrib.nn, and the names MXNet code imports from there."""

from __future__ import annotations

import torch

import mxtorch as mx
from mxtorch.gluon import nn
from mxtorch.gluon.contrib.nn import Concurrent, HybridConcurrent


def _branches(net: nn.Sequential) -> nn.Sequential:
    with net.name_scope():
        net.add(nn.Dense(2, in_units=3), nn.Dense(4, in_units=3))
    net.initialize(mx.init.One())
    return net


def test_concurrent_concatenates_branches_on_the_last_axis_by_default() -> None:
    x = torch.arange(6.0).reshape(2, 3)
    for cls in (Concurrent, HybridConcurrent):
        net = _branches(cls())
        out = net(x)
        # weights of ones, zero bias: each unit gives the row sum (3 and 12)
        assert out.shape == (2, 6)
        assert out[:, 0].tolist() == [3.0, 12.0] and out[:, 5].tolist() == [3.0, 12.0]


def test_concurrent_axis_and_symbols() -> None:
    net = HybridConcurrent(axis=0)
    net.add(nn.Dense(2, in_units=3), nn.Dense(2, in_units=3))
    net.initialize()
    assert net(torch.ones(5, 3)).shape == (10, 2)
    graph = HybridConcurrent(axis=1, prefix="cc_")
    _branches(graph)
    out = graph(mx.sym.var("data"))
    _, shapes, _ = out.infer_shape(data=(5, 3))
    assert shapes == [(5, 6)]


def test_contrib_is_reachable_as_an_attribute() -> None:
    assert mx.gluon.contrib.nn.SyncBatchNorm is nn.SyncBatchNorm
    assert mx.gluon.contrib.nn.HybridConcurrent is HybridConcurrent


def test_interval_sampler() -> None:
    from mxtorch.gluon.contrib.data import IntervalSampler

    assert list(IntervalSampler(6, 3)) == [0, 3, 1, 4, 2, 5] and len(IntervalSampler(6, 3)) == 6
    assert list(IntervalSampler(7, 3, rollover=False)) == [0, 3, 6] and len(IntervalSampler(7, 3, False)) == 3
