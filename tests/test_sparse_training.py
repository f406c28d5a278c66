"""Training with row-sparse gradients through gluon.Trainer: local stores, 'horovod', the example.

Every run with ``Embedding(sparse_grad=True)`` is compared with the same model trained with
dense gradients, and the stores are watched to make sure the gradients they receive are
row_sparse (never densified on the way).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.testing import assert_close

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.distributed.testing import run_script, run_workers
from mxtorch.gluon import nn
from mxtorch.gluon.utils import split_and_load
from mxtorch.kvstore import LocalKVStore
from mxtorch.nd import sparse

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "recommend_mf.py"


class Recommender(gluon.HybridBlock):
    """Two embedding tables (row-sparse gradients or not) and a dense head."""

    def __init__(self, sparse_grad: bool) -> None:
        super().__init__()
        self.users = nn.Embedding(30, 4, sparse_grad=sparse_grad)
        self.items = nn.Embedding(20, 4, sparse_grad=sparse_grad)
        self.head = nn.Dense(1, in_units=4)

    def forward(self, u: torch.Tensor, i: torch.Tensor, use_items: bool = True) -> torch.Tensor:
        h = self.users(u)
        if use_items:
            h = h * self.items(i)
        return self.head(h).squeeze(-1)


def build(sparse_grad: bool, ctx: list[mx.Context]) -> Recommender:
    torch.manual_seed(7)
    net = Recommender(sparse_grad)
    net.initialize(mx.init.Normal(0.3), ctx=ctx)
    return net


def batch(step: int, part: int, n: int = 6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + part)
    users, items = torch.randint(0, 30, (n,), generator=g), torch.randint(0, 20, (n,), generator=g)
    return users, items, torch.randn(n, generator=g)


def weights(net: Recommender, ctx: mx.Context | None = None) -> dict[str, torch.Tensor]:
    return {name: p.data(ctx).detach().clone() for name, p in net._collect_params_with_prefix().items()}


class WatchedStore(LocalKVStore):
    """A 'device' store that records the storage type of every gradient pushed to it."""

    def __init__(self, name: str = "device") -> None:
        super().__init__(name)
        self.seen: list[tuple[Any, str]] = []

    def _record(self, key: Any, value: Any) -> None:
        keys = key if isinstance(key, (list, tuple)) else [key]
        values = value if isinstance(key, (list, tuple)) else [value]
        for k, v in zip(keys, values):
            for t in v if isinstance(v, (list, tuple)) else [v]:
                self.seen.append((k, sparse.stype(t)))

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        self._record(key, value)
        super().push(key, value, priority)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        self._record(key, value)
        super().pushpull(key, value, out, priority)


def train_local(sparse_grad: bool, kvstore: Any, ctx: list[mx.Context], optimizer: str,
                params: dict[str, Any], steps: int = 4) -> Recommender:
    net = build(sparse_grad, ctx)
    reduce_only = kvstore == "device_reduce_only"  # the store sums, every context updates itself
    trainer = gluon.Trainer(net.collect_params(), optimizer, dict(params),
                            kvstore="device" if reduce_only else kvstore,
                            update_on_kvstore=False if reduce_only else None)
    for step in range(steps):
        u, i, y = batch(step, 0, n=8)
        parts = list(zip(*(split_and_load(t, ctx) for t in (u, i, y))))
        with autograd.record():
            losses = [((net(pu, pi) - py) ** 2).sum() for pu, pi, py in parts]
        for loss in losses:
            loss.backward()
        if sparse_grad:
            for d in net.users.weight.list_data():
                assert sparse.stype(d.grad) == "row_sparse"
        trainer.step(8)
    return net


# Optimizers whose lazy update equals the dense one (no state decays on untouched rows, wd=0),
# and one with lazy_update=False (a dense update from row-sparse gradients).
OPTIMIZERS = [
    ("sgd", {"learning_rate": 0.2}),
    ("adagrad", {"learning_rate": 0.2}),
    ("adam", {"learning_rate": 0.05, "lazy_update": False}),
]


@pytest.mark.parametrize("optimizer, params", OPTIMIZERS, ids=[o for o, _ in OPTIMIZERS])
@pytest.mark.parametrize("kvstore", [None, "local", "device", "device_reduce_only", "watched"])
@pytest.mark.parametrize("n_ctx", [1, 2])
def test_sparse_training_equals_dense_reference(optimizer, params, kvstore, n_ctx):
    ctx = [mx.cpu(c) for c in range(n_ctx)]
    store = WatchedStore() if kvstore == "watched" else kvstore
    sparse_net = train_local(True, store, ctx, optimizer, params)
    dense_net = train_local(False, kvstore if kvstore != "watched" else "device", ctx, optimizer, params)
    for c in ctx:
        got, want = weights(sparse_net, c), weights(dense_net, c)
        for name in want:
            assert_close(got[name], want[name], rtol=1e-5, atol=1e-6, msg=name)
    if kvstore == "watched":
        kinds = dict(store.seen)
        assert kinds[0] == "row_sparse" and kinds[1] == "row_sparse"  # the two embedding tables
        assert {k for k, st in store.seen if st != "row_sparse"} == {2, 3}  # the dense head only


def test_lazy_momentum_through_the_trainer_leaves_untouched_rows_alone():
    ctx = [mx.cpu(0), mx.cpu(1)]
    net = build(True, ctx)
    before = net.users.weight.data().detach().clone()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.1},
                            kvstore="device")
    touched: set[int] = set()
    for step in range(3):
        u, i, y = batch(step, 0, n=4)
        touched |= set(u.tolist())
        parts = list(zip(*(split_and_load(t, ctx) for t in (u, i, y))))
        with autograd.record():
            losses = [((net(pu, pi) - py) ** 2).sum() for pu, pi, py in parts]
        for loss in losses:
            loss.backward()
        trainer.step(4)
    after = net.users.weight.data().detach()
    untouched = sorted(set(range(30)) - touched)
    assert untouched and torch.equal(after[untouched], before[untouched])
    assert not torch.equal(after[sorted(touched)], before[sorted(touched)])
    assert torch.equal(net.users.weight.data(mx.cpu(1)), after)  # both contexts pulled the same weights


# ---- 'horovod': two real processes ------------------------------------------------------------


def _steps() -> list[list[bool]]:
    # which rank uses the item table at each step: at step 1 rank 1 does not touch it (no gradient)
    return [[True, True], [True, False], [True, True]]


def horovod_worker() -> dict[str, Any]:
    kv = mx.kv.create("horovod")
    rank = kv.rank
    seen: list[tuple[Any, str]] = []
    original = kv.pushpull

    def watched(key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        keys = key if isinstance(key, (list, tuple)) else [key]
        values = value if isinstance(key, (list, tuple)) else [value]
        for k, v in zip(keys, values):
            for t in v if isinstance(v, (list, tuple)) else [v]:
                seen.append((k, sparse.stype(t)))
        original(key, value, out, priority)

    kv.pushpull = watched  # type: ignore[method-assign]
    net = build(True, [mx.cpu(0)])
    trainer = gluon.Trainer(net.collect_params(), "adagrad", {"learning_rate": 0.2}, kvstore=kv)
    for step, uses in enumerate(_steps()):
        u, i, y = batch(step, rank)
        with autograd.record():
            loss = ((net(u, i, use_items=uses[rank]) - y) ** 2).sum()
        loss.backward()
        if not uses[rank]:
            assert net.items.weight.data().grad is None
        trainer.step(u.numel() * kv.num_workers)  # the global batch: the store sums over workers
    return {"weights": weights(net), "seen": seen}


def horovod_reference() -> dict[str, torch.Tensor]:
    net = build(False, [mx.cpu(0)])
    trainer = gluon.Trainer(net.collect_params(), "adagrad", {"learning_rate": 0.2}, kvstore=None)
    for step, uses in enumerate(_steps()):
        with autograd.record():
            loss = sum(((net(*batch(step, r)[:2], use_items=uses[r]) - batch(step, r)[2]) ** 2).sum()
                       for r in range(2))
        loss.backward()
        trainer.step(12)
    return weights(net)


def test_horovod_trains_sparse_gradients_like_one_process():
    results = run_workers(horovod_worker, 2, timeout=120, env={"OMP_NUM_THREADS": "1"})
    want = horovod_reference()
    for res in results:
        for name, w in want.items():
            assert_close(res["weights"][name], w, rtol=1e-5, atol=1e-6, msg=name)
        kinds = {k: st for k, st in res["seen"]}
        assert kinds == {0: "row_sparse", 1: "row_sparse"}  # the dense head goes through the hooks


# ---- the example ------------------------------------------------------------------------------


def _run_example(*args: str) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=180,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _aucs(out: str) -> tuple[float, list[float]]:
    baseline = float(re.search(r"baseline popularity: held-out AUC ([0-9.]+)", out).group(1))  # type: ignore
    return baseline, [float(a) for a in re.findall(r"epoch \d+: .*held-out AUC ([0-9.]+)", out)]


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_recommend_example_beats_the_baselines():
    out = _run_example("--epochs", "2")
    baseline, aucs = _aucs(out)
    assert "baseline constant:   held-out AUC 0.5000" in out
    assert len(aucs) == 2 and aucs[1] > aucs[0] and aucs[1] > baseline + 0.05, out


@pytest.mark.slow
def test_recommend_example_on_two_workers_and_two_contexts():
    single = _run_example("--epochs", "1", "--contexts", "2", "--kvstore", "device")
    argv = [sys.executable, str(EXAMPLE), "--epochs", "1", "--kvstore", "horovod"]
    results = run_script(argv, 2, timeout=180, env={"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    for rc, _, err in results:
        assert rc == 0, err
    # the same global batches: the same held-out AUC as one process
    assert _aucs(results[0][1])[1] == _aucs(single)[1]
