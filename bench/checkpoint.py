"""Checkpoints: save and restore time and bytes of CheckpointManager against torch.save/torch.load
and torch.distributed.checkpoint, and the training step time with async saving against none.

The state is a model-zoo resnet18_v1 (thumbnail stem, 10 classes) with SGD-momentum states after
one step.  Save and restore are timed in interleaved rounds (median):

* ``CheckpointManager(async_save=False).save``: safetensors parameters, the Trainer's states
  container, RNGs, manifest with sha256 of every file, fsync + rename; ``restore`` reads, checks
  every checksum and loads into a fresh network and Trainer.  Also the time ``save`` blocks the
  caller with ``async_save=True`` (the in-memory snapshot; the write runs in a thread).
* ``torch.save`` of ``{"params": ..., "momentum": ...}`` (plain tensors; no fsync, no checksum)
  and ``torch.load(weights_only=True)`` + copying into the network and the optimizer's states.
* ``torch.distributed.checkpoint.save``/``load`` of the same dict (one process, no process
  group, FileSystemWriter/Reader; ``load`` fills the given tensors in place).

Then the training step time (batch ``--batch`` of 32x32 images) with ``async_save=True`` every
``--every`` steps against no saving, in interleaved rounds of ``--steps`` steps; the median
per-step time of each, and the slowdown (goal: < 5 %).

    python bench/checkpoint.py [--rounds 5] [--batch 32] [--steps 20] [--every 10] [--threads 0]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(batch: int) -> tuple[Any, Any, Any, Any]:
    """A resnet18_v1 (thumbnail, 10 classes), its SGD-momentum Trainer after one step, a batch."""
    import mxtorch as mx
    from mxtorch.gluon import Trainer, loss, model_zoo

    net = model_zoo.vision.get_model("resnet18_v1", classes=10, thumbnail=True)
    net.initialize(mx.init.Xavier())
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 1e-4})
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,)).float()
    loss_fn = loss.SoftmaxCrossEntropyLoss()

    def step() -> None:
        with mx.autograd.record():
            out = loss_fn(net(x), y)
        out.backward()
        trainer.step(batch)

    step()
    return net, trainer, step, loss_fn


def plain_state(net: Any, trainer: Any) -> dict[str, dict[str, torch.Tensor]]:
    """The same state as plain tensors: parameters by name and each parameter's momentum."""
    params = {k: p.data() for k, p in net._collect_params_with_prefix().items()}
    updater = trainer._updaters[0]  # by parameter index (names differ between two networks)
    momentum = {str(i): s for i, s in updater.states.items() if isinstance(s, torch.Tensor)}
    return {"params": params, "momentum": momentum}


def copy_into(dst: dict[str, dict[str, torch.Tensor]], src: dict[str, dict[str, torch.Tensor]]) -> None:
    with torch.no_grad():
        for group, tensors in src.items():
            for k, t in tensors.items():
                dst[group][k].copy_(t)


def folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20, help="training steps per round and mode")
    ap.add_argument("--every", type=int, default=10, help="async save every this many steps")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: default)")
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import warnings

    import torch.distributed.checkpoint as dcp

    from mxtorch.checkpoint import CheckpointManager

    warnings.filterwarnings("ignore", message=".*torch.distributed.*")  # dcp without a process group
    root = tempfile.mkdtemp(prefix="mxtorch-bench-ckpt-", dir=args.dir)
    net, trainer, step, _ = build(args.batch)
    net2, trainer2, _, _ = build(args.batch)  # the restore target
    state, state2 = plain_state(net, trainer), plain_state(net2, trainer2)
    n_params = sum(t.numel() for t in state["params"].values())
    n_mom = sum(t.numel() for t in state["momentum"].values())
    times: dict[str, list[float]] = {}
    sizes: dict[str, int] = {}

    def timed(name: str, fn: Any) -> Any:
        t0 = time.perf_counter()
        out = fn()
        times.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    try:
        for r in range(args.rounds):
            # CheckpointManager, synchronous (everything written, fsynced and committed)
            d = os.path.join(root, f"mgr{r}")
            mgr = CheckpointManager(d, keep_last=None, async_save=False)
            timed("mxtorch save", lambda mgr=mgr: mgr.save(1, net=net, trainer=trainer))
            sizes["mxtorch"] = folder_bytes(d)
            mgr2 = CheckpointManager(d, async_save=False)
            timed("mxtorch restore", lambda mgr2=mgr2: mgr2.restore(net=net2, trainer=trainer2))
            amgr = CheckpointManager(os.path.join(root, f"amgr{r}"), keep_last=None, async_save=True)
            timed("mxtorch save (async, blocking part)",
                  lambda amgr=amgr: amgr.save(1, net=net, trainer=trainer))
            amgr.wait()
            # torch.save / torch.load
            f = os.path.join(root, f"torch{r}.pt")
            timed("torch.save", lambda f=f: torch.save(state, f))
            sizes["torch.save"] = os.path.getsize(f)
            timed("torch.load", lambda f=f: copy_into(state2, torch.load(f, weights_only=True)))
            # torch.distributed.checkpoint, one process, file system
            dd = os.path.join(root, f"dcp{r}")
            timed("dcp.save", lambda dd=dd: dcp.save(state, checkpoint_id=dd))
            sizes["dcp"] = folder_bytes(dd)
            timed("dcp.load", lambda dd=dd: dcp.load(state2, checkpoint_id=dd))
            for p in (d, os.path.join(root, f"amgr{r}"), f, dd):
                shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.remove(p)
        # the restore is exact
        for k, t in plain_state(net, trainer)["params"].items():
            assert torch.equal(t, plain_state(net2, trainer2)["params"][k]), k

        # training step time: async saving every N steps against none, interleaved rounds
        step_times: dict[str, list[float]] = {"no saving": [], f"async save every {args.every} steps": []}
        save_stats: list[dict[str, Any]] = []
        for _ in range(3):
            step()  # warm-up
        for r in range(args.rounds):
            for mode in step_times:
                mgr = None
                if mode != "no saving":
                    mgr = CheckpointManager(os.path.join(root, f"train{r}"), keep_last=2, async_save=True)
                t0 = time.perf_counter()
                for s in range(1, args.steps + 1):
                    step()
                    if mgr is not None and s % args.every == 0:
                        mgr.save(s, net=net, trainer=trainer)
                if mgr is not None:
                    mgr.wait()  # the last write counts against the saving run
                    save_stats.append(dict(mgr.last_save))
                step_times[mode].append((time.perf_counter() - t0) / args.steps)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    mb = 1 / 2**20
    print(f"resnet18_v1 (thumbnail, 10 classes): {n_params:,} parameter values, {n_mom:,} momentum values "
          f"({(n_params + n_mom) * 4 * mb:.1f} MiB of float32); torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; median of {args.rounds} interleaved rounds")
    print()
    print("| format | save s | restore s | bytes on disk |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| mxtorch CheckpointManager (sync; sha256, fsync, manifest) | {med['mxtorch save']:.3f} | "
          f"{med['mxtorch restore']:.3f} | {sizes['mxtorch']:,} |")
    print(f"| mxtorch CheckpointManager (async: time save() blocks) | "
          f"{med['mxtorch save (async, blocking part)']:.3f} | | |")
    print(f"| torch.save / torch.load(weights_only) + copy | {med['torch.save']:.3f} | "
          f"{med['torch.load']:.3f} | {sizes['torch.save']:,} |")
    print(f"| torch.distributed.checkpoint save / load | {med['dcp.save']:.3f} | {med['dcp.load']:.3f} | "
          f"{sizes['dcp']:,} |")
    print()
    base = statistics.median(step_times["no saving"])
    print(f"| training step (batch {args.batch}, {args.steps} steps a round) | median s/step | "
          "vs no saving |")
    print("| --- | ---: | ---: |")
    for mode, v in step_times.items():
        m = statistics.median(v)
        print(f"| {mode} | {m:.4f} | {100 * (m / base - 1):+.1f} % |")
    if save_stats:
        blocking = statistics.median(s["blocking_s"] for s in save_stats)
        print(f"\nasync saves in training: blocking {blocking:.3f} s, "
              f"write {statistics.median(s['write_s'] for s in save_stats):.3f} s (in the background), "
              f"{save_stats[-1]['bytes']:,} bytes each")


if __name__ == "__main__":
    main()
