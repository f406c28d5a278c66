"""Matrix factorization for click prediction with row-sparse embedding gradients.

Users and items get factor vectors and biases from ``nn.Embedding(..., sparse_grad=True)``:
each batch touches a few hundred of the rows, so gradients are row_sparse, the KVStore moves
only those rows and the optimizer updates only them (lazy update).  Before each forward pass
the batch's rows are read with ``param.row_sparse_data(ids)``: when the KVStore holds the
weights (a parameter server, ``--kvstore dist_sync``) that pulls exactly those rows from it
(``row_sparse_pull``); locally it reads the local copy.

The data is generated (fixed seed): a low-rank preference matrix ``P = U V^T + b_user + b_item``
and implicit feedback: each user sees random items and clicks with probability
``sigmoid(P)``.  A held-out tenth of the impressions measures the AUC of the predicted click
scores; a trivial model (a constant, or item popularity) is printed for comparison.

    python examples/recommend_mf.py                          # kvstore 'local', one context
    python examples/recommend_mf.py --contexts 2 --kvstore device
    mxtorch launch -n 2 python examples/recommend_mf.py --kvstore horovod
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.gluon import nn


class MatrixFactorization(gluon.HybridBlock):
    """``logit(user, item) = <u_user, v_item> + b_user + b_item + b``, embeddings with sparse gradients."""

    def __init__(self, num_users: int, num_items: int, factors: int) -> None:
        super().__init__()
        init = mx.init.Normal(0.05)
        self.user_factors = nn.Embedding(num_users, factors, sparse_grad=True, weight_initializer=init)
        self.item_factors = nn.Embedding(num_items, factors, sparse_grad=True, weight_initializer=init)
        self.user_bias = nn.Embedding(num_users, 1, sparse_grad=True, weight_initializer="zeros")
        self.item_bias = nn.Embedding(num_items, 1, sparse_grad=True, weight_initializer="zeros")
        self.bias = gluon.Parameter("bias", shape=(1,), init="zeros")

    def prefetch(self, users: torch.Tensor, items: torch.Tensor) -> None:
        """Make the batch's rows current (MXNet's ``row_sparse_data``; a pull from a parameter server)."""
        for emb, ids in ((self.user_factors, users), (self.user_bias, users),
                         (self.item_factors, items), (self.item_bias, items)):
            emb.weight.row_sparse_data(ids)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        dot = (self.user_factors(users) * self.item_factors(items)).sum(-1)
        return dot + self.user_bias(users).squeeze(-1) + self.item_bias(items).squeeze(-1) + self.bias.data()


def make_clicks(num_users: int, num_items: int, rank: int, per_user: int,
                seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(users, items, clicks) impressions from a random low-rank preference matrix (fixed seed)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(num_users, rank, generator=g) * (4.0 / rank) ** 0.5
    v = torch.randn(num_items, rank, generator=g)
    user_bias = 0.5 * torch.randn(num_users, generator=g)
    item_bias = 0.5 * torch.randn(num_items, generator=g) - 1.0  # most impressions are not clicked
    users = torch.arange(num_users).repeat_interleave(per_user)
    items = torch.randint(0, num_items, (users.numel(),), generator=g)
    pref = (u[users] * v[items]).sum(-1) + user_bias[users] + item_bias[items]
    clicks = (torch.rand(users.numel(), generator=g) < torch.sigmoid(pref)).float()
    order = torch.randperm(users.numel(), generator=g)
    return users[order], items[order], clicks[order]


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve (Mann-Whitney U; tied scores share their mean rank)."""
    pos = labels > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    sorted_scores, order = torch.sort(scores.double())
    ranks = torch.empty_like(sorted_scores)
    ranks[order] = torch.arange(1, scores.numel() + 1, dtype=torch.float64)
    uniq, inverse, counts = torch.unique_consecutive(sorted_scores, return_inverse=True, return_counts=True)
    if uniq.numel() < scores.numel():  # average the ranks of ties
        first = torch.cumsum(counts, 0) - counts + 1
        mean_rank = (first + (counts - 1) / 2.0).double()
        ranks[order] = mean_rank[inverse]
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def log_loss(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return float(torch.nn.functional.binary_cross_entropy_with_logits(logits, labels))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kvstore", default="local", help="KVStore: local, device, horovod, dist_sync, ... "
                   "(default local; with one context a local store is skipped, as in MXNet)")
    p.add_argument("--contexts", type=int, default=1, help="CPU replicas per process (default 1)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=1024, help="global batch size")
    p.add_argument("--optimizer", default="adagrad", help="any mxtorch optimizer (default adagrad)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--wd", type=float, default=1e-4)
    p.add_argument("--factors", type=int, default=16)
    p.add_argument("--users", type=int, default=2000)
    p.add_argument("--items", type=int, default=500)
    p.add_argument("--impressions-per-user", type=int, default=100)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: the batches are small, more threads mostly add overhead)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    users, items, clicks = make_clicks(args.users, args.items, rank=8, per_user=args.impressions_per_user,
                                       seed=args.seed)
    n_test = users.numel() // 10
    test = (users[:n_test], items[:n_test], clicks[:n_test])
    train = (users[n_test:], items[n_test:], clicks[n_test:])

    kv = mx.kv.create(args.kvstore)
    rank, workers = kv.rank, kv.num_workers
    ctx = [mx.cpu(i) for i in range(args.contexts)]
    net = MatrixFactorization(args.users, args.items, args.factors)
    net.initialize(ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), args.optimizer, {"learning_rate": args.lr, "wd": args.wd},
                            kvstore=kv)
    loss_fn = gluon.loss.SigmoidBinaryCrossEntropyLoss()

    # Baselines on the held-out impressions: one constant score (AUC 0.5), and item popularity.
    rate = float(train[2].mean())
    const = torch.full_like(test[2], float(torch.logit(torch.tensor(rate))))
    shown = torch.bincount(train[1], minlength=args.items).float()
    clicked = torch.bincount(train[1], weights=train[2], minlength=args.items)
    popularity = torch.logit((clicked + rate) / (shown + 1.0))[test[1]]
    if rank == 0:
        print(f"{train[0].numel()} training / {n_test} held-out impressions, {args.users} users, "
              f"{args.items} items, click rate {rate:.3f}; kvstore {kv.type!r}, {workers} worker(s) x "
              f"{len(ctx)} context(s)")
        print(f"baseline constant:   held-out AUC {auc(const, test[2]):.4f}  "
              f"log-loss {log_loss(const, test[2]):.4f}")
        print(f"baseline popularity: held-out AUC {auc(popularity, test[2]):.4f}  "
              f"log-loss {log_loss(popularity, test[2]):.4f}")

    # Every worker trains on its own share of each global batch.
    local_batch = args.batch_size // workers
    history: dict[str, float] = {}
    for epoch in range(args.epochs):
        start = time.perf_counter()
        perm = torch.randperm(train[0].numel(), generator=torch.Generator().manual_seed(args.seed + epoch))
        steps = train[0].numel() // args.batch_size
        total = 0.0
        for s in range(steps):
            first = s * args.batch_size + rank * local_batch
            idx = perm[first:first + local_batch]
            u, i, y = train[0][idx], train[1][idx], train[2][idx]
            net.prefetch(u, i)
            parts = list(zip(*(gluon.utils.split_and_load(t, ctx) for t in (u, i, y))))
            with autograd.record():
                losses = [loss_fn(net(pu, pi), py) for pu, pi, py in parts]
            for loss in losses:
                loss.backward()
            trainer.step(local_batch * workers)  # the global batch: stores sum over workers (MXNet)
            total += sum(float(loss.detach().sum()) for loss in losses)
        with torch.no_grad():
            net.prefetch(test[0], test[1])
            logits = net(test[0], test[1])
        history = {"epoch": epoch + 1, "train_loss": total / (steps * local_batch),
                   "auc": auc(logits, test[2]), "log_loss": log_loss(logits, test[2])}
        if rank == 0:
            print(f"epoch {epoch + 1}: train loss {history['train_loss']:.4f}  held-out AUC "
                  f"{history['auc']:.4f}  log-loss {history['log_loss']:.4f}  "
                  f"({time.perf_counter() - start:.1f} s)")
    history["baseline_popularity_auc"] = auc(popularity, test[2])
    history["baseline_constant_log_loss"] = log_loss(const, test[2])
    return history


if __name__ == "__main__":
    main()
