"""Resume a distributed job exactly after a kill (``mxtorch.checkpoint.CheckpointManager``).

    mxtorch launch -n 2 --max-restarts 1 python examples/resume.py --checkpoint-dir runs/resume \\
        --crash-at-step 13

Every 5 steps the workers commit a checkpoint (parameters, the Trainer's optimizer states, every
RNG; verified and atomic). ``--crash-at-step 13`` simulates a machine failure: on a fresh start,
worker 1 SIGKILLs itself after step 13. The launcher then restarts every worker
(``--max-restarts``), each restores the newest checkpoint (step 10) and the job ends with the
weights of an uninterrupted run. Without ``--max-restarts``, start the same command again: it
resumes the same way. The data order depends only on the step, so the resumed job takes exactly
the global batches the killed one would have.
"""

import argparse
import os
import signal

import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.checkpoint import CheckpointManager
from mxtorch.elastic import ElasticBatchSampler
from mxtorch.gluon import nn


def make_data(n: int = 512, features: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed regression set: y = X w + noise, the same in every process."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=g)
    w = torch.arange(1.0, features + 1.0).unsqueeze(1) / features
    return x, x @ w + 0.01 * torch.randn(n, 1, generator=g)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-dir", required=True, help="a folder or any fsspec URI (s3://...)")
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=64, help="the global batch")
    parser.add_argument("--crash-at-step", type=int, default=0, help="simulate a failure (0: none)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    kv = mx.kv.create("horovod") if world > 1 else None  # the store sets up the process group
    rank = kv.rank if kv is not None else 0
    x, y = make_data()
    mx.random.seed(42)
    net = nn.Dense(1, in_units=x.shape[1])
    net.initialize(mx.init.Normal(0.1))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9}, kvstore=kv)
    mgr = CheckpointManager(args.checkpoint_dir, every_n_steps=5, async_save=False)
    step = resumed = mgr.restore(net=net, trainer=trainer)  # 0 when there is no checkpoint yet
    print(f"rank={rank} workers={world} start_step={step}", flush=True)
    sampler = ElasticBatchSampler(len(x), args.batch_size, world, rank, seed=1)
    loss_fn = gluon.loss.L2Loss()
    while step < args.steps:
        sampler.set_epoch(step // len(sampler))
        sampler.set_start(step % len(sampler))
        for ids in sampler:
            with autograd.record():
                loss = loss_fn(net(x[ids]), y[ids])
            loss.backward()
            trainer.step(args.batch_size)  # the store sums the workers' gradients: the global batch
            step += 1
            mgr.maybe_save(step, net=net, trainer=trainer)
            if step == args.crash_at_step and rank == world - 1 and resumed == 0:
                os.kill(os.getpid(), signal.SIGKILL)  # a fresh start loses this worker here
            if step == args.steps:
                break
    mgr.close()
    weight = net.weight.data().flatten().tolist()
    print(f"rank={rank} workers={world} end_step={step} weight={','.join(f'{v:.6f}' for v in weight)}",
          flush=True)


if __name__ == "__main__":
    main()
