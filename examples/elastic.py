"""An elastic job: workers lost (or added) while it trains, the job goes on.

    mxtorch launch --elastic 1:2 -n 2 python examples/elastic.py --checkpoint-dir runs/elastic \\
        --lose-worker-at-step 12
    mxtorch launch --join HOST:PORT        # a worker more (the first command prints the address)

``--elastic MIN:MAX`` runs one torch elastic agent per worker at a rendezvous the launcher
hosts. When a worker's host is lost, the others' next all-reduce fails, they exit, and their
agents restart them at the new world size; when one joins, the agents restart the workers with
it. Each (re)start restores the newest checkpoint, and ``ElasticBatchSampler`` cuts the same
global batches for any number of workers, so the job ends with the weights of an undisturbed
run. ``--lose-worker-at-step 12`` simulates losing a host: on the first start, the last worker
SIGKILLs its agent and itself after step 12.
"""

import argparse
import os
import signal

import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.checkpoint import CheckpointManager
from mxtorch.elastic import ElasticBatchSampler
from mxtorch.elastic.worker import die_with_agent
from mxtorch.gluon import nn
from mxtorch.kvstore import KVStoreError


def make_data(n: int = 512, features: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed regression set: y = X w + noise, the same in every process."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=g)
    w = torch.arange(1.0, features + 1.0).unsqueeze(1) / features
    return x, x @ w + 0.01 * torch.randn(n, 1, generator=g)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-dir", required=True, help="shared by every worker (a folder, s3://...)")
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=64, help="the global batch")
    parser.add_argument("--lose-worker-at-step", type=int, default=0, help="simulate a lost host (0: none)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    die_with_agent()  # a lost agent is a lost host: its worker must not go on alone
    world = int(os.environ.get("WORLD_SIZE", "1"))
    kv = mx.kv.create("horovod") if world > 1 else None
    rank = kv.rank if kv is not None else 0
    x, y = make_data()
    mx.random.seed(42)
    net = nn.Dense(1, in_units=x.shape[1])
    net.initialize(mx.init.Normal(0.1))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9}, kvstore=kv)
    mgr = CheckpointManager(args.checkpoint_dir, every_n_steps=5, async_save=False)
    step = resumed = mgr.restore(net=net, trainer=trainer)  # parameters and optimizer states
    print(f"rank={rank} workers={world} start_step={step}", flush=True)
    sampler = ElasticBatchSampler(len(x), args.batch_size, world, rank, seed=1)  # re-sharded for `world`
    loss_fn = gluon.loss.L2Loss()
    try:
        while step < args.steps:
            sampler.set_epoch(step // len(sampler))
            sampler.set_start(step % len(sampler))
            for ids in sampler:
                with autograd.record():
                    loss = loss_fn(net(x[ids]), y[ids])
                loss.backward()
                trainer.step(args.batch_size)  # the global batch, whatever the number of workers
                step += 1
                mgr.maybe_save(step, net=net, trainer=trainer)
                if step == args.lose_worker_at_step and world > 1 and rank == world - 1 and resumed == 0:
                    os.kill(os.getppid(), signal.SIGKILL)  # the agent: its host is gone ...
                    os.kill(os.getpid(), signal.SIGKILL)  # ... and this worker with it
                if step == args.steps:
                    break
    except KVStoreError as e:  # a worker is gone: leave, and the agents restart the job without it
        raise SystemExit(f"rank {rank} stops: {e}") from None
    mgr.close()
    weight = net.weight.data().flatten().tolist()
    print(f"rank={rank} workers={world} end_step={step} weight={','.join(f'{v:.6f}' for v in weight)}",
          flush=True)


if __name__ == "__main__":
    main()
