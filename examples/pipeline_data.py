"""Pipeline parallelism combined with data parallelism (``mxtorch.parallel``).

    mxtorch launch -n 4 python examples/pipeline_data.py              # dp=2 x pp=2
    mxtorch launch -n 2 python examples/pipeline_data.py --dp 1       # pp=2 alone

The network is cut into ``pp`` stages run by torch's 1F1B schedule; each stage is replicated
``dp`` times and its replicas sum their gradients through a 'horovod' store over their own
process group (``pnet.kvstore``). MXNet's rule holds: ``trainer.step(global_batch)`` gives the
update one process would make on the whole batch. The whole model is saved in one file that a
plain (unsplit) network loads.
"""

import argparse
import os
import tempfile

import torch

import mxtorch as mx
from mxtorch import gluon, parallel
from mxtorch.gluon import nn

CLASSES, FEATURES = 4, 8


def make_data(n: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """Four Gaussian blobs, the same in every process."""
    g = torch.Generator().manual_seed(0)
    centres = 3 * torch.randn(CLASSES, FEATURES, generator=g)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    return centres[labels] + torch.randn(n, FEATURES, generator=g), labels.float()


def build_net() -> nn.HybridSequential:
    mx.random.seed(42)  # every rank builds the same network (parallelize checks it)
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu", in_units=FEATURES), nn.Dense(32, activation="relu", in_units=32),
            nn.Dense(32, activation="relu", in_units=32), nn.Dense(CLASSES, in_units=32))
    net.initialize(mx.init.Xavier())
    return net


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dp", type=int, default=2, help="data-parallel replicas of each stage")
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="the global batch")
    parser.add_argument("--output", default=os.path.join(tempfile.gettempdir(), "pipeline_data.params"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cfg = parallel.ParallelConfig(dp=args.dp, pp=world // args.dp)
    pnet = parallel.parallelize(build_net(), cfg, micro_batches=args.micro_batches, schedule="1f1b",
                                kvstore="horovod" if args.dp > 1 else None)
    trainer = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9},
                            kvstore=pnet.kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = make_data()
    share = args.batch_size // args.dp
    for epoch in range(args.epochs):
        losses = []
        for start in range(0, len(x), args.batch_size):  # this replica's share of global batch k
            lo = start + pnet.dp_rank * share
            losses.append(pnet.train_step(x[lo:lo + share], y[lo:lo + share], loss_fn))
            trainer.step(args.batch_size)
        print(f"dp_rank={pnet.dp_rank} pp_rank={pnet.pp_rank} epoch={epoch} "
              f"loss={sum(losses) / len(losses):.4f}", flush=True)
    pnet.save_parameters(args.output)  # the whole model, gathered from the stages
    if int(os.environ.get("RANK", "0")) == 0:
        whole = build_net()
        whole.load_parameters(args.output)
        accuracy = float((whole(x).argmax(axis=1).float() == y).float().mean())
        print(f"whole model: stages={cfg.pp} replicas={cfg.dp} accuracy={accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
