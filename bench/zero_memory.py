"""Sharded data parallelism: the training state each rank holds with zero 0, 1, 2 and 3.

``--ranks`` processes (gloo, 127.0.0.1, one thread each) run one Adam step of ``--layers`` Dense
layers of ``--width`` units (the whole job's batch is ``--batch``) through ``Mesh(cfg).trainer``
and report, per rank, the bytes of parameters held between steps (after the step), the most
parameter bytes held during the forward pass (zero=3 gathers one layer at a time), the bytes of
gradients still held after the reduction (measured inside the step, right before the optimizer
runs) and of optimizer states after the step; the same run in one process is the replica's.

    python bench/zero_memory.py [--ranks 2] [--width 512] [--layers 4] [--batch 16]
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
    """Bytes of gradients this process holds for ``trainer`` now (a zero=3 trainer's slices too)."""
    whole = [p._data[0].grad for p in trainer._params if p._data[0].grad is not None]
    slices = list(getattr(trainer, "_grad_shards", {}).values())
    return sum(g.numel() * g.element_size() for g in whole + slices)


def rank_run(width: int, layers: int, batch: int, zero: int) -> dict[str, int]:
    """One Adam step on this rank's share of the batch; the bytes held (see the module docstring)."""
    from mxtorch import autograd, gluon, parallel
    from mxtorch.parallel.zero import optimizer_state_bytes, parameter_bytes

    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    net = _net(width, layers)
    if world > 1:
        trainer = parallel.Mesh(parallel.ParallelConfig(dp=world, zero=zero)).trainer(
            net.collect_params(), "adam", {"learning_rate": 1e-3})
    else:
        trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3}, kvstore=None)
    seen: dict[str, int] = {"peak parameters": 0}
    run_update = trainer._update

    def update(ignore_stale_grad: bool = False) -> None:  # measure between reduction and update
        seen["gradients"] = _gradient_bytes(trainer)
        run_update(ignore_stale_grad)

    def during_forward(_block: Any, _inputs: Any) -> None:  # after zero=3's gather (an earlier hook)
        seen["peak parameters"] = max(seen["peak parameters"], parameter_bytes(trainer))

    trainer._update = update
    for layer in net:
        layer.register_forward_pre_hook(during_forward)
    x = torch.randn(batch // world, width)
    with autograd.record():
        loss = net(x).square().mean()
    loss.backward()
    trainer.step(batch)
    seen["parameters"] = parameter_bytes(trainer)
    seen["optimizer states"] = optimizer_state_bytes(trainer)
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    from mxtorch.distributed.testing import run_workers

    replica = rank_run(args.width, args.layers, args.batch, 0)
    print(f"torch {torch.__version__}; {args.layers} x Dense({args.width}), Adam, {args.ranks} ranks; "
          "MiB held per rank (largest rank), and as a fraction of one replica's")
    kinds = ("parameters", "peak parameters", "gradients", "optimizer states")
    print(f"{'layout':<12}" + "".join(f"{k:>20}" for k in kinds))
    print(f"{'replica':<12}" + "".join(f"{replica[k] / 2**20:>13.2f} (1.00)" for k in kinds))
    for zero in (0, 1, 2, 3):
        ranks = run_workers(rank_run, args.ranks, args.width, args.layers, args.batch, zero, timeout=600)
        cells = []
        for k in kinds:
            most = max(r[k] for r in ranks)
            cells.append(f"{most / 2**20:>13.2f} ({most / max(replica[k], 1):.2f})")
        print(f"{f'zero={zero}':<12}" + "".join(cells))


if __name__ == "__main__":
    main()
