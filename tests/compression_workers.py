"""Rank functions for compressed allreduce tests (run through mxtorch.distributed.testing)."""

from __future__ import annotations

import math
import os
from typing import Any

import torch

import mxtorch as mx
from mxtorch import autograd, compression, gluon
from mxtorch.gluon import nn


def _grad(rank: int, step: int, n: int = 37) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 * rank + step)
    return torch.randn(n, generator=g)


def _expected_sum(replay: list[Any], grads: list[torch.Tensor], key: str) -> torch.Tensor:
    """What a compressed pushpull of ``grads`` (one per rank) must give: the sum of each rank's
    decompressed payload, or, for a summable compressor, the decompressed sum of the payloads
    (added in their own dtype, as the all-reduce does)."""
    sent = [replay[r].compress(g, key) for r, g in enumerate(grads)]
    if replay[0].summable:
        total = sent[0][0]
        for payload, _ in sent[1:]:
            total = total + payload
        return replay[0].decompress(total, sent[0][1])
    return sum(replay[r].decompress(payload, ctx) for r, (payload, ctx) in enumerate(sent))


def compressed_pushpull(params: dict[str, Any], world: int, steps: int = 3) -> dict[str, Any]:
    """pushpull with compression equals the sum over ranks of each rank's decompressed payload,
    computed here by replaying every rank's compressor locally."""
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    kv = mx.kv.create("horovod")
    kv.set_gradient_compression(params)
    replay = [compression.create(dict(params)) for _ in range(world)]
    max_err = 0.0
    for step in range(steps):
        got = _grad(rank, step)
        kv.pushpull("g", got)
        expected = _expected_sum(replay, [_grad(r, step) for r in range(world)], "g")
        max_err = max(max_err, float((got - expected).abs().max()))
    return {"max_err": max_err, "wire": kv.wire_bytes_sent, "last": got.clone()}


def compressed_pushpull_many(params: dict[str, Any], world: int) -> dict[str, Any]:
    """One pushpull of many keys: small ones sharing a payload bucket, one filling buckets on its
    own (its all-gather starts while later keys are compressed), an integer key in between."""
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    kv = mx.kv.create("horovod")
    kv.set_gradient_compression(params)
    replay = [compression.create(dict(params)) for _ in range(world)]
    sizes = {"a": 37, "b": (5, 7), "big": (700, 1024), "c": 3}
    max_err = 0.0
    for step in range(2):
        keys = list(sizes) + ["count"]
        vals = [_grad(rank, step, math.prod(s) if isinstance(s, tuple) else s).reshape(s)
                for s in sizes.values()]
        vals.append(torch.tensor([rank + 1, 10 * step], dtype=torch.int64))
        keys.insert(2, keys.pop())  # the integer key between the small ones and the big one
        vals.insert(2, vals.pop())
        kv.pushpull(keys, vals)
        for k, got in zip(keys, vals):
            if k == "count":
                assert got.tolist() == [sum(r + 1 for r in range(world)), 10 * step * world], got
                continue
            shape = sizes[k]
            n = math.prod(shape) if isinstance(shape, tuple) else shape
            expected = _expected_sum(replay, [_grad(r, step, n).reshape(shape) for r in range(world)], k)
            max_err = max(max_err, float((got - expected).abs().max()))
    return {"max_err": max_err}


def trainer_with_compression(params: dict[str, Any]) -> list[list[float]]:
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    torch.manual_seed(rank)  # different initial weights: the broadcast must make them equal
    net = nn.Dense(3, in_units=5)
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore="horovod", compression_params=params)
    x = torch.randn(8, 5, generator=torch.Generator().manual_seed(rank))
    for _ in range(3):
        with autograd.record():
            loss = (net(x) ** 2).mean(axis=1)
        loss.backward()
        trainer.step(8 * int(os.environ["WORLD_SIZE"]))  # the global batch: the store sums (MXNet)
    return net.weight.data().detach().tolist()


def powersgd_pushpull(world: int, steps: int, rank_r: int = 1) -> dict[str, Any]:
    """'horovod' + powersgd: every step's pushpull of a matrix equals the paper's algorithm
    replayed here for every rank (P = sum M_i Q, orthonormalized; Q = sum M_i^T P; P Q^T), a
    gradient sum of rank 1 comes back exact, a 1-d key is summed exactly."""
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    kv = mx.kv.create("horovod")
    kv.set_gradient_compression({"type": "powersgd", "rank": rank_r})
    rows, cols = 12, 10
    q = torch.randn(cols, rank_r, generator=torch.Generator().manual_seed(0))  # the seeded start
    residual = [torch.zeros(rows, cols) for _ in range(world)]
    u = torch.arange(1.0, 9.0)
    max_err = low_err = vec_err = 0.0
    got = {}
    for step in range(steps):
        grads = [_grad(r, step, rows * cols).view(rows, cols) for r in range(world)]
        lows = [torch.outer(u, _grad(r, 50 + step, 6)) for r in range(world)]  # the sum has rank 1
        vecs = [_grad(r, 90 + step, 7) for r in range(world)]
        got = {"m": grads[rank].clone(), "low": lows[rank].clone(), "b": vecs[rank].clone()}
        kv.pushpull(list(got), list(got.values()))
        # the replay
        ms = [g + res for g, res in zip(grads, residual)]
        p = torch.linalg.qr(sum(m @ q for m in ms)).Q
        q_each = [m.t() @ p for m in ms]
        q = sum(q_each)
        expected = p @ q.t()
        residual = [m - p @ qi.t() for m, qi in zip(ms, q_each)]
        max_err = max(max_err, float((got["m"] - expected).abs().max()))
        low_err = max(low_err, float((got["low"] - sum(lows)).abs().max()))
        vec_err = max(vec_err, float((got["b"] - sum(vecs)).abs().max()))
    comp = kv.compressor
    return {"max_err": max_err, "low_err": low_err, "vec_err": vec_err, "wire": kv.wire_bytes_sent,
            "last": got["m"].clone(), "low_residual": float(comp.residual("low").abs().max()),
            "residual_err": float((comp.residual("m").view(rows, cols) - residual[rank]).abs().max())}
