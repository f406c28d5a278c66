"""mx.gluon.contrib: the containers of contrib.nn, and the names MXNet code imports from there."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon import nn
from mxtorch.gluon.contrib.data.text import WikiText2
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


def test_wikitext_reads_local_token_files(tmp_path) -> None:
    (tmp_path / "wiki.train.tokens").write_text(" a b a \n\n c a \n")
    (tmp_path / "wiki.valid.tokens").write_text("d a\n")
    train = WikiText2(str(tmp_path), "train", seq_len=3)
    # tokens a b a <eos> c a <eos>; indices <unk> 0, <eos> 1 (reserved), then by count: a 2, b 3, c 4
    assert train.vocabulary.idx_to_token == ["<unk>", "<eos>", "a", "b", "c"]
    assert train.frequencies == Counter({"a": 3, "b": 1, "c": 1})
    assert len(train) == 2  # 6 of the 7 tokens have a next token: two samples of 3
    data, label = train[1]
    assert data.tolist() == [1, 4, 2] and label.tolist() == [4, 2, 1] and data.dtype == torch.int32
    valid = WikiText2(str(tmp_path), "validation", vocab=train.vocabulary, seq_len=2)
    assert valid[0][0].tolist() == [0, 2] and valid[0][1].tolist() == [2, 1]  # 'd' is unknown
    with pytest.raises(MXNetError, match="wiki.test.tokens does not exist; mxtorch does not download"):
        WikiText2(str(tmp_path), "test")
