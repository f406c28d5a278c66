"""Data-parallel training through MXNet's parameter server (``dist_sync``).

    mxtorch launch -n 2 -s 1 python examples/dist_sync.py

The launcher starts a scheduler, one server and two workers (MXNet's ``DMLC_*`` variables and a
per-job secret are set for each). The workers push gradients, the server sums them and runs the
optimizer (``update_on_kvstore``, the Trainer's default for this store), and the workers pull
the updated weights. MXNet's rule: the store sums, so ``trainer.step`` gets the *global* batch.
``--kvstore dist_async`` applies each push on arrival instead.
"""

import argparse

import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.gluon import nn


def make_data(n: int = 512, features: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed regression set: y = X w + noise, the same in every process."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=g)
    w = torch.arange(1.0, features + 1.0).unsqueeze(1) / features
    return x, x @ w + 0.01 * torch.randn(n, 1, generator=g)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kvstore", default="dist_sync")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="the global batch")
    args = parser.parse_args()
    torch.set_num_threads(1)
    kv = mx.kv.create(args.kvstore)
    x, y = make_data()
    mx.random.seed(42)
    net = nn.Dense(1, in_units=x.shape[1])
    net.initialize(mx.init.Normal(0.1))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    loss_fn = gluon.loss.L2Loss()
    sampler = gluon.data.SplitSampler(len(x), kv.num_workers, kv.rank)  # this worker's shard
    local_batch = args.batch_size // kv.num_workers
    loader = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=local_batch, sampler=sampler,
                                   last_batch="discard")
    for epoch in range(args.epochs):
        total, seen = 0.0, 0
        for xb, yb in loader:
            with autograd.record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            trainer.step(args.batch_size)  # the servers sum every worker's gradient: the global batch
            total, seen = total + float(loss.sum()), seen + len(xb)
        print(f"rank={kv.rank} epoch={epoch} loss={total / seen:.6f}", flush=True)
    weight = net.weight.data().flatten().tolist()
    print(f"rank={kv.rank} workers={kv.num_workers} servers={kv.num_servers} type={kv.type} "
          f"weight={','.join(f'{v:.5f}' for v in weight)}", flush=True)


if __name__ == "__main__":
    main()
