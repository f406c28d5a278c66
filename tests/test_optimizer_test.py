"""MXNet's 'test' optimizer: the store holds the running sum of rescale_grad * pushes."""

from __future__ import annotations

import torch

import mxtorch as mx


def test_adds_the_rescaled_gradient_and_keeps_the_weight_in_its_state():
    opt = mx.optimizer.create("test", rescale_grad=2.0, learning_rate=5.0, wd=0.5)  # lr and wd unused
    upd = mx.optimizer.get_updater(opt)
    w = torch.ones(3)
    upd(0, torch.full((3,), 0.5), w)
    upd(0, torch.full((3,), 0.25), w)
    assert torch.equal(w, torch.full((3,), 1 + 2 * 0.5 + 2 * 0.25))
    assert torch.equal(upd.states[0], w)


def test_on_a_local_store_the_value_is_the_sum_of_pushes():
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.create("test", rescale_grad=3.0))
    kv.init("k", torch.zeros(2))
    kv.push("k", [torch.ones(2), torch.full((2,), 2.0)])  # two contexts: summed, then added x3
    out = torch.empty(2)
    kv.pull("k", out=out)
    assert torch.equal(out, torch.full((2,), 9.0))


def test_row_sparse_gradients_add_their_rows_only():
    upd = mx.optimizer.get_updater(mx.optimizer.create("test"))
    w = torch.ones(3, 2)
    upd(0, mx.nd.array([[0, 0], [1, 1], [0, 0]]).tostype("row_sparse"), w)
    assert torch.equal(w, torch.tensor([[1.0, 1], [2, 2], [1, 1]]))


def test_multi_precision_updates_the_fp32_master_copy():
    upd = mx.optimizer.get_updater(mx.optimizer.create("test", rescale_grad=2.0, multi_precision=True))
    w = torch.ones(3, dtype=torch.float16)
    upd(0, torch.full((3,), 0.25, dtype=torch.float16), w)
    assert w.dtype == torch.float16 and torch.equal(w, torch.full((3,), 1.5, dtype=torch.float16))
    master, _ = upd.states[0]
    assert master.dtype == torch.float32 and torch.equal(master, torch.full((3,), 1.5))
