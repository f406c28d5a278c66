"""Pruning and transfer learning in one run: accuracy, parameters and CPU inference time.

1. The default task (``lenet_bn`` on Fashion-MNIST, here the subset shipped with mxtorch unless
   ``--data-root`` says otherwise) trained by ``mxtorch train``'s ``train()``, four ways per seed
   (the same seed gives the same initial weights and batches): dense, ``--prune l1 --sparsity
   0.8`` per layer, the same with ``--prune-scope global`` (one threshold: small layers lose
   fewer weights) and ``--prune structured --sparsity 0.5`` (half the channels of every layer but
   the last).  The first ``--prune-begin-epochs`` (1) train the dense net (Zhu & Gupta start
   from a trained one: starting at step 0 cost ~0.7 point more here), pruning ends with the
   next-to-last epoch, and the last trains the pruned net.
   Accuracies are the mean over ``--seeds`` (on 2,000 test images one seed moves by ~0.5 point).
2. Parameter counts of each; the first seed's structured net is compacted (``pruning.compact``)
   and its held-out accuracy measured again on the compacted net.
3. CPU inference time of a batch of 256 with ``torch.set_num_threads(1)``: the dense net, the 80%
   unstructured net (the same dense kernels: its zeros save no time) and the compacted net, in
   interleaved rounds after warm-up calls, median per net.
4. examples/transfer_learning.py with its defaults (1,000 MNIST digits), then from the same
   pre-trained file with 100 digits: fine-tuned vs from-scratch held-out accuracy
   (``--no-transfer`` skips it).

    python bench/pruning.py [--epochs 3] [--seeds 42,43,44] [--rounds 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def trained(args: argparse.Namespace, name: str, seed: int, **prune: Any) -> tuple[dict[str, Any], Any]:
    """Train one variant with ``mxtorch train`` and load its model.params into a fresh net."""
    import mxtorch as mx
    from mxtorch.cli import train as train_cli

    out = os.path.join(args.work_dir, name)
    cfg = train_cli.TrainConfig(model=args.model, data_root=args.data_root, epochs=args.epochs,
                                batch_size=args.batch_size, lr=args.lr, seed=seed, output=out,
                                progress=False, threads=args.threads, **prune)
    print(f"-- {name}: training", flush=True)
    metrics = train_cli.train(cfg)
    net = mx.gluon.model_zoo.vision.get_model(args.model, classes=10)
    net.load_parameters(os.path.join(out, "model.params"))
    return metrics, net


def learned_parameters(net: Any) -> tuple[int, int]:
    """(all, non-zero) entries of the learned parameters (BatchNorm's running statistics excluded)."""
    ps = [p.data() for p in net.collect_params().values()
          if not p.name.endswith(("running_mean", "running_var"))]
    return sum(p.numel() for p in ps), sum(int((p != 0).sum()) for p in ps)


def held_out(net: Any, args: argparse.Namespace) -> float:
    from mxtorch import autograd
    from mxtorch.cli import train as train_cli

    _, test, _ = train_cli.load_datasets(train_cli.TrainConfig(data_root=args.data_root))
    x = torch.stack([torch.as_tensor(test[i][0]) for i in range(len(test))]).permute(0, 3, 1, 2).float() / 255
    y = torch.as_tensor([int(test[i][1]) for i in range(len(test))])
    with torch.no_grad(), autograd.predict_mode():
        pred = torch.cat([net(x[i:i + 1000]).argmax(1) for i in range(0, len(y), 1000)])
    return int((pred == y).sum()) / len(y)


def time_inference(nets: dict[str, Any], batch: torch.Tensor, rounds: int,
                   warmup: int = 3) -> dict[str, float]:
    """Median seconds of one forward pass of ``batch`` per net, one thread, interleaved rounds."""
    from mxtorch import autograd

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    times: dict[str, list[float]] = {k: [] for k in nets}
    try:
        with torch.no_grad(), autograd.predict_mode():
            for _ in range(warmup):
                for net in nets.values():
                    net(batch)
            for r in range(rounds):
                order = list(nets.items())
                if r % 2:
                    order.reverse()  # neither net always runs right after the other
                for name, net in order:
                    t = time.perf_counter()
                    net(batch)
                    times[name].append(time.perf_counter() - t)
    finally:
        torch.set_num_threads(threads)
    return {k: statistics.median(v) for k, v in times.items()}


def run_transfer(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The example with its defaults (1,000 MNIST digits), then from the same pre-trained file
    with 100 digits (30 epochs: about as many steps), where pre-training matters more."""
    spec = importlib.util.spec_from_file_location("transfer_learning",
                                                  os.path.join(ROOT, "examples", "transfer_learning.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    extra = args.transfer_args.split() if args.transfer_args else []
    work = os.path.join(args.work_dir, "transfer")
    first: dict[str, Any] = mod.main(["--work-dir", work, *extra])
    pretrained = os.path.join(work, f"{first['model']}_fashion.params")
    few: dict[str, Any] = mod.main(["--work-dir", work, *extra, "--pretrained", pretrained,
                                    "--finetune-images", "100", "--epochs", "30"])
    few["pretrain_images"], few["pretrain_epochs"] = first["pretrain_images"], first["pretrain_epochs"]
    return [first, few]


VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "dense": ("dense", {}),
    "l1_80": ("l1 80%, per layer", {"prune": "l1", "sparsity": 0.8, "prune_scope": "layer"}),
    "l1_80_global": ("l1 80%, global", {"prune": "l1", "sparsity": 0.8, "prune_scope": "global"}),
    "structured_50": ("structured 50% (masked)", {"prune": "structured", "sparsity": 0.5}),
}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import mxtorch as mx
    from mxtorch.contrib import pruning

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="lenet_bn")
    p.add_argument("--data-root", default=mx.gluon.data.vision.EMBEDDED_FASHION_MNIST_ROOT,
                   help="Fashion-MNIST folder (default: the subset shipped with mxtorch)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seeds", default="42,43,44", help="one training of every variant per seed")
    p.add_argument("--prune-begin-epochs", type=float, default=1.0,
                   help="dense epochs before pruning starts (--prune-begin-step = this x steps an epoch)")
    p.add_argument("--threads", type=int, default=0, help="training threads (0: torch's default)")
    p.add_argument("--rounds", type=int, default=20, help="timed rounds of the inference comparison")
    p.add_argument("--no-transfer", dest="transfer", action="store_false")
    p.add_argument("--transfer-args", default="", help="arguments for examples/transfer_learning.py")
    p.add_argument("--work-dir", default="runs/bench_pruning")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    seeds = [int(v) for v in args.seeds.split(",")]
    t0 = time.perf_counter()
    from mxtorch.cli import train as train_cli

    train_set, _, _ = train_cli.load_datasets(train_cli.TrainConfig(data_root=args.data_root))
    begin = int(round(args.prune_begin_epochs * (len(train_set) // args.batch_size)))

    per_seed: dict[str, list[float]] = {k: [] for k in VARIANTS}
    nets: dict[str, Any] = {}  # the first seed's, for parameters and timing
    metrics: dict[str, Any] = {}
    for seed in seeds:
        for key, (_, prune) in VARIANTS.items():
            options = {**prune, "prune_begin_step": begin} if prune else {}
            m, net = trained(args, f"{key}_seed{seed}", seed, **options)
            per_seed[key].append(m["final_test_acc"])
            if seed == seeds[0]:
                nets[key], metrics[key] = net, m
    sample = torch.rand(256, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    small = pruning.compact(nets["structured_50"], sample)
    with torch.no_grad(), mx.autograd.predict_mode():
        compact_diff = float((small(sample) - nets["structured_50"](sample)).abs().max())
    compact_acc = held_out(small, args)  # the first seed's compacted net
    acc = {k: statistics.mean(v) for k, v in per_seed.items()}
    params = {k: learned_parameters(net) for k, net in nets.items()}
    params["structured_50_compact"] = learned_parameters(small)
    print("-- timing inference (batch 256, 1 thread)", flush=True)
    timed = {"dense": nets["dense"], "l1_80": nets["l1_80"], "structured_50_compact": small}
    seconds = time_inference(timed, sample, args.rounds)

    def row(label: str, key: str, a: float, seeds_acc: list[float], sec: float | None,
            base: float | None = None) -> str:
        n, nz = params[key]
        return (f"| {label} | {a:.4f} | {100 * (a - (acc['dense'] if base is None else base)):+.2f} pt | "
                f"{' / '.join(f'{v:.4f}' for v in seeds_acc)} | {n:,} ({nz:,}) | "
                + (f"{1000 * sec:.1f} ms | {seconds['dense'] / sec:.2f}x |" if sec else "same as dense | |"))

    lines = [f"| net | held-out acc (mean of {len(seeds)}) | vs dense | per seed | parameters (non-zero) | "
             "inference, batch 256, 1 thread | speed-up |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, (label, _) in VARIANTS.items():
        lines.append(row(label, key, acc[key], per_seed[key], seconds.get(key)))
    lines.append(row("structured 50%, compacted (first seed; vs its dense)", "structured_50_compact",
                     compact_acc, [compact_acc], seconds["structured_50_compact"], per_seed["dense"][0]))
    transfer = run_transfer(args) if args.transfer else []
    if transfer:
        t = transfer[0]
        lines += ["", f"| transfer learning: {t['model']} pre-trained on {t['pretrain_images']} "
                      f"Fashion-MNIST images ({t['pretrain_epochs']} epoch) | MNIST digits trained on / "
                      "held out | fine-tuned | from scratch | difference |",
                  "| --- | --- | --- | --- | --- |"]
        for t in transfer:
            lines.append(f"| {t['epochs']} epochs, features {t['features']} | {t['finetune_images']} / "
                         f"{t['test_images']} | {t['finetuned_acc']:.4f} | {t['scratch_acc']:.4f} | "
                         f"{100 * (t['finetuned_acc'] - t['scratch_acc']):+.2f} pt |")
    print()
    print(f"{args.model}, {args.epochs} epoch(s) on {metrics['dense']['data']}, seeds {seeds}, pruning from "
          f"step {begin} to the end of epoch {max(args.epochs - 1, 1)}; torch "
          f"{torch.__version__}, {platform.machine()} {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}")
    print("\n".join(lines))
    print(f"\ncompacted vs masked structured outputs: max difference {compact_diff:.1e}; "
          f"total {time.perf_counter() - t0:.0f}s")
    goals = {"l1_80_within_1pt": acc["dense"] - acc["l1_80"] <= 0.01,
             "l1_80_global_within_1pt": acc["dense"] - acc["l1_80_global"] <= 0.01,
             "compact_1.5x_faster": seconds["dense"] / seconds["structured_50_compact"] >= 1.5}
    print("goals: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in goals.items()))
    result = {"accuracy": acc, "per_seed": per_seed, "compact_accuracy": compact_acc, "parameters": params,
              "seconds": seconds, "transfer": transfer,
              "sparsity": {k: metrics[k]["sparsity"]["total"] for k in VARIANTS if k != "dense"},
              "compact_max_diff": compact_diff, "goals": goals, "table": "\n".join(lines)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
