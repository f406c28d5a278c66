"""Worker of the cluster tests: a small, deterministic data-parallel training job.

Every rank trains the same MLP on its own synthetic shard with a Gluon Trainer on the chosen
KVStore, prints ``step N loss L`` after each step, and finally saves its parameters to
``OUT.rank<R>`` (``save_parameters``: MXNet's format).
Run it under any launcher (``RANK``/``WORLD_SIZE``/... or
``DMLC_*`` set); the same job on loopback and across namespace hosts must end with the same
parameters.

  python cluster_train.py --out /tmp/p --steps 20 [--kvstore horovod] [--compression 2bit]
  python cluster_train.py --out /tmp/p --steps 0 --max-seconds 120   # until killed (fault tests)
  python cluster_train.py --out /tmp/p --kvstore dist_sync --pause-after 5 --pause-dir D
      # after step 5 (and a barrier) rank 0 creates D/paused; every rank waits for D/resume
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=20, help="0: until --max-seconds (fault tests)")
    ap.add_argument("--max-seconds", type=float, default=120.0, help="a job never runs longer than this")
    ap.add_argument("--kvstore", default="horovod")
    ap.add_argument("--compression", default=None, help="'2bit', 'fp16', ... (threshold 0.5 for 2bit)")
    ap.add_argument("--step-sleep", type=float, default=0.0, help="seconds between steps")
    ap.add_argument("--pause-after", type=int, default=0, help="pause after this step (needs --pause-dir)")
    ap.add_argument("--pause-dir", default=None, help="where the pause is signalled (paused / resume files)")
    args = ap.parse_args()
    torch.set_num_threads(1)

    import mxtorch as mx
    from mxtorch import autograd, gluon
    from mxtorch.gluon import nn

    torch.manual_seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(64, activation="relu", in_units=32), nn.Dense(64, activation="relu", in_units=64),
            nn.Dense(4, in_units=64))
    net.initialize(mx.init.Xavier())
    kv = mx.kv.create(args.kvstore)
    compression = None
    if args.compression:
        compression = {"type": args.compression}
        if args.compression in ("1bit", "2bit"):
            compression["threshold"] = 0.5
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9},
                            kvstore=kv, compression_params=compression)
    rank = kv.rank
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(256, 32, generator=g)
    y = torch.randint(0, 4, (256,), generator=g)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    deadline = time.monotonic() + args.max_seconds
    step = 0
    live = kv.num_workers
    while (args.steps == 0 or step < args.steps) and time.monotonic() < deadline:
        # read before the step: a peer cannot leave before this step's round, which needs this
        # worker's push, so an elastic job's count is not changed by a peer finishing first
        live = kv.num_workers
        lo = (step * 32) % 256
        xb, yb = x[lo:lo + 32], y[lo:lo + 32]
        with autograd.record():
            loss = loss_fn(net(xb), yb)
        loss.backward()
        trainer.step(32)
        step += 1
        print(f"step {step} loss {float(loss.detach().mean()):.6f}", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)
        if step == args.pause_after and args.pause_dir:
            pause(kv, args.pause_dir, deadline)
    net.save_parameters(f"{args.out}.rank{rank}")
    print(f"done rank {rank} of {live} on {os.environ.get('MXTORCH_CLUSTER_HOST', 'loopback')}",
          flush=True)
    return 0


def pause(kv, folder: str, deadline: float) -> None:
    """Everyone has finished the step (barrier); rank 0 says so; all wait until the test resumes them."""
    kv.barrier()
    if kv.rank == 0:
        with open(os.path.join(folder, "paused"), "w") as f:
            f.write("paused\n")
    print("paused", flush=True)
    while not os.path.exists(os.path.join(folder, "resume")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"nobody created {folder}/resume")
        time.sleep(0.05)
    print("resumed", flush=True)


if __name__ == "__main__":
    sys.exit(main())
