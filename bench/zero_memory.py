"""Sharded data parallelism: the training state each rank holds with zero 0, 1, 2 and 3.

``--ranks`` processes (gloo, 127.0.0.1, one thread each) run two Adam steps of ``--layers`` Dense
layers of ``--width`` units (the whole job's batch is ``--batch``)
and report, per rank, the bytes of parameters held between steps (after the step), the most
parameter bytes held during the forward passes (zero=3 gathers one layer at a time and, from the
second step on, prefetches the next), the most gradient bytes held during backward (measured in
the gradient hooks: zero=2's own, inside the ones that reduce each bucket; the others' by a hook
on each parameter after its gradient accumulated), the bytes of gradients still held after the
reduction (measured inside the step, right before the optimizer runs) and of optimizer states
after the step; the same run in one process is the replica's.  zero 1-3 run a ZeroTrainer (zero=2
with ``--bucket-kib`` buckets; default: one layer's weight and bias); zero=0 is the 'allreduce'
store, whose bucket copies of the gradients are not counted.

    python bench/zero_memory.py [--ranks 2] [--width 512] [--layers 4] [--batch 16] [--bucket-kib N]
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _net(width: int, layers: int) -> Any:
    import mxtorch as mx
    from mxtorch.gluon import nn

    torch.manual_seed(0)
    net = nn.HybridSequential()
    for _ in range(layers):
        net.add(nn.Dense(width, in_units=width, activation="tanh"))
    net.initialize(mx.init.Xavier())
    return net


def _gradient_bytes(trainer: Any) -> int:
    """Bytes of gradients this process holds for ``trainer`` now (a ZeroTrainer counts its own:
    zero=2's buckets, zero=3's slices)."""
    if hasattr(trainer, "gradient_bytes"):
        return int(trainer.gradient_bytes())
    whole = [p._data[0].grad for p in trainer._params if p._data[0].grad is not None]
    return sum(g.numel() * g.element_size() for g in whole)


def rank_run(width: int, layers: int, batch: int, zero: int, bucket_bytes: int) -> dict[str, int]:
    """Two Adam steps on this rank's share of the batch; the bytes held (see the module docstring)."""
    from mxtorch import autograd, gluon, parallel
    from mxtorch.parallel.zero import optimizer_state_bytes, parameter_bytes

    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    net = _net(width, layers)
    adam = {"learning_rate": 1e-3}
    if world > 1 and zero:
        trainer = parallel.ZeroTrainer(net.collect_params(), "adam", adam, zero=zero,
                                       bucket_bytes=bucket_bytes, measure_gradient_bytes=True)
    elif world > 1:
        trainer = parallel.Mesh(parallel.ParallelConfig(dp=world)).trainer(net.collect_params(), "adam", adam)
    else:
        trainer = gluon.Trainer(net.collect_params(), "adam", adam, kvstore=None)
    seen: dict[str, int] = {"peak parameters": 0, "peak gradients": 0}
    run_update = trainer._update

    def update(ignore_stale_grad: bool = False) -> None:  # measure between reduction and update
        seen["gradients"] = _gradient_bytes(trainer)
        run_update(ignore_stale_grad)

    def after_grad(_t: torch.Tensor) -> None:
        seen["peak gradients"] = max(seen["peak gradients"], _gradient_bytes(trainer))

    for p in net.collect_params().values():
        p.list_data()[0].register_post_accumulate_grad_hook(after_grad)

    def during_forward(_block: Any, _inputs: Any) -> None:  # after zero=3's gather (an earlier hook)
        seen["peak parameters"] = max(seen["peak parameters"], parameter_bytes(trainer))

    trainer._update = update
    for layer in net:
        layer.register_forward_pre_hook(during_forward)
    x = torch.randn(batch // world, width)
    for _ in range(2):  # zero=3 prefetches from the second step on (the first records the order)
        with autograd.record():
            loss = net(x).square().mean()
        loss.backward()
        trainer.step(batch)
    seen["peak gradients"] = max(seen["peak gradients"], getattr(trainer, "peak_gradient_bytes", None) or 0)
    seen["parameters"] = parameter_bytes(trainer)
    seen["optimizer states"] = optimizer_state_bytes(trainer)
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--bucket-kib", type=int, default=None,
                    help="zero 1/2 gradient bucket size (default: one layer's weight and bias)")
    args = ap.parse_args()
    from mxtorch.distributed.testing import run_workers

    bucket = args.bucket_kib * 1024 if args.bucket_kib else 4 * (args.width + 1) * args.width
    replica = rank_run(args.width, args.layers, args.batch, 0, bucket)
    print(f"torch {torch.__version__}; {args.layers} x Dense({args.width}), Adam, {args.ranks} ranks, "
          f"buckets of {bucket / 2**20:.2f} MiB; MiB held per rank (largest rank), and as a fraction of "
          "one replica's")
    kinds = ("parameters", "peak parameters", "peak gradients", "gradients", "optimizer states")
    print(f"{'layout':<12}" + "".join(f"{k:>20}" for k in kinds))
    print(f"{'replica':<12}" + "".join(f"{replica[k] / 2**20:>13.2f} (1.00)" for k in kinds))
    for zero in (0, 1, 2, 3):
        ranks = run_workers(rank_run, args.ranks, args.width, args.layers, args.batch, zero, bucket,
                            timeout=600)
        cells = []
        for k in kinds:
            most = max(r[k] for r in ranks)
            cells.append(f"{most / 2**20:>13.2f} ({most / max(replica[k], 1):.2f})")
        print(f"{f'zero={zero}':<12}" + "".join(cells))


if __name__ == "__main__":
    main()
