"""Data-parallel training with horovod.mxnet's API (``mxtorch.horovod``) on the allreduce engine.

    mxtorch launch -n 2 python examples/horovod.py

Each worker trains a linear model on its shard of a small generated regression set; the
``DistributedTrainer`` averages the gradients over workers (Horovod's rule: ``step`` takes the
*local* batch), so every worker ends with the same weights. Run without the launcher it trains
alone (one process, the same global batches).
"""

import argparse

import torch

import mxtorch as mx
import mxtorch.horovod as hvd
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
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="the global batch")
    args = parser.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    x, y = make_data()
    mx.random.seed(42)
    net = nn.Dense(1, in_units=x.shape[1])
    net.initialize(mx.init.Normal(0.1))
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = gluon.loss.L2Loss()
    local = args.batch_size // size
    for epoch in range(args.epochs):
        total = 0.0
        for start in range(0, len(x), args.batch_size):  # global batch k, this worker's slice of it
            lo = start + rank * local
            xb, yb = x[lo:lo + local], y[lo:lo + local]
            with autograd.record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            trainer.step(local)  # Horovod averages over workers: the local batch
            total += float(loss.sum())
        print(f"rank={rank} epoch={epoch} loss={total / (len(x) // size):.6f}", flush=True)
    weight = net.weight.data().flatten().tolist()
    print(f"rank={rank} workers={size} weight={','.join(f'{v:.5f}' for v in weight)}", flush=True)


if __name__ == "__main__":
    main()
