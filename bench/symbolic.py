"""Module.fit's training step against the same network in Gluon and in hand-written PyTorch.

One MLP (784-256-128-10, ReLU, softmax cross-entropy, SGD with momentum and weight decay on the
weights — MXNet's Module exempts biases, so the Gluon and torch versions do too), one
batch of 128, trained step by step three ways in this process, interleaved in rounds so
machine noise hits all alike (each round starts with the next of the three, so none always
runs right after the same other one):

- ``module``: ``mx.mod.Module`` on ``mx.sym`` (forward_backward + update, as ``fit`` does);
- ``gluon``: ``nn.HybridSequential`` + ``gluon.Trainer`` (record, loss, backward, step);
- ``torch``: ``torch.nn.Sequential`` + ``torch.optim.SGD`` (the reference).

It prints the median step time of each and the ratios module/gluon (goal <= 1.05) and
module/torch, each the median over the rounds of that round's ratio (a round's steps run
within a second of each other, so slow drift of the machine cancels in the pair).  With an
MXNet 1.9.1 interpreter (``--mxnet-python``, default ``.venv-mxnet/bin/python`` or
``/tmp/conformance-venv-mxnet/bin/python`` when present) it also times MXNet's own Module step
in a subprocess (another process: compare it with care).

    python bench/symbolic.py [--rounds 15] [--steps 100] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

BATCH, SIZES = 128, (784, 256, 128, 10)
LR, MOM, WD = 0.05, 0.9, 1e-4


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    return rng.rand(BATCH, SIZES[0]).astype("float32"), rng.randint(0, SIZES[-1], BATCH).astype("float32")


def _module_step(mx: object) -> Callable[[], None]:
    m = mx  # type: ignore[assignment]
    x, y = _data()
    net = m.sym.Variable("data")  # type: ignore[attr-defined]
    for i, n in enumerate(SIZES[1:]):
        net = m.sym.FullyConnected(net, num_hidden=n, name=f"fc{i}")  # type: ignore[attr-defined]
        if i < len(SIZES) - 2:
            net = m.sym.Activation(net, act_type="relu")  # type: ignore[attr-defined]
    net = m.sym.SoftmaxOutput(net, name="softmax")  # type: ignore[attr-defined]
    mod = m.mod.Module(net, context=m.cpu())  # type: ignore[attr-defined]
    mod.bind(data_shapes=[("data", x.shape)], label_shapes=[("softmax_label", y.shape)])
    mod.init_params(m.init.Xavier())  # type: ignore[attr-defined]
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": LR, "momentum": MOM, "wd": WD})
    batch = m.io.DataBatch(data=[m.nd.array(x)], label=[m.nd.array(y)])  # type: ignore[attr-defined]

    def step() -> None:
        mod.forward_backward(batch)
        mod.update()

    return step


def _gluon_step() -> Callable[[], None]:
    import mxtorch as mx
    from mxtorch import gluon

    x, y = _data()
    net = gluon.nn.HybridSequential()
    for n in SIZES[1:-1]:
        net.add(gluon.nn.Dense(n, activation="relu"))
    net.add(gluon.nn.Dense(SIZES[-1]))
    net.initialize(mx.init.Xavier())
    for p in net.collect_params(".*bias").values():
        p.wd_mult = 0.0  # Module's (MXNet's) rule: no weight decay on biases; the same work here
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOM, "wd": WD})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    xs, ys = mx.nd.array(x), mx.nd.array(y)

    def step() -> None:
        with mx.autograd.record():
            loss = loss_fn(net(xs), ys)
        loss.backward()
        trainer.step(BATCH)

    return step


def _torch_step() -> Callable[[], None]:
    import torch

    x, y = _data()
    layers: list[torch.nn.Module] = []
    for i, n in enumerate(SIZES[1:]):
        layers.append(torch.nn.Linear(SIZES[i], n))
        if i < len(SIZES) - 2:
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers)
    weights = [p for n, p in net.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in net.named_parameters() if n.endswith("bias")]
    opt = torch.optim.SGD([{"params": weights}, {"params": biases, "weight_decay": 0.0}], lr=LR, momentum=MOM,
                          weight_decay=WD)
    xs, ys = torch.as_tensor(x), torch.as_tensor(y).long()
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(net(xs), ys).backward()
        opt.step()

    return step


def _time(step: Callable[[], None], steps: int) -> float:
    step()  # warm up
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def _mxnet_child(rounds: int, steps: int) -> None:
    import mxnet

    step = _module_step(mxnet)
    print(json.dumps([_time(step, steps) for _ in range(rounds)]))


def _mxnet_python(given: str | None) -> str | None:
    for cand in (given, ".venv-mxnet/bin/python", "/tmp/conformance-venv-mxnet/bin/python"):
        if cand and os.path.exists(cand):
            return cand
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mxnet-python", default=None)
    ap.add_argument("--mxnet-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mxnet_child:
        _mxnet_child(args.rounds, args.steps)
        return
    import torch

    import mxtorch

    torch.set_num_threads(args.threads)

    steps = {"module": _module_step(mxtorch), "gluon": _gluon_step(), "torch": _torch_step()}
    times: dict[str, list[float]] = {k: [] for k in steps}
    names = list(steps)
    for r in range(args.rounds):
        for k in names[r % len(names):] + names[: r % len(names)]:
            times[k].append(_time(steps[k], args.steps))
    med = {k: statistics.median(v) for k, v in times.items()}

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    print(
        f"MLP {SIZES}, batch {BATCH}, {args.threads} thread(s), median of {args.rounds} rounds x "
        f"{args.steps} steps"
    )
    for k, v in med.items():
        print(f"  {k:8s} {v * 1e3:8.3f} ms/step")
    print(f"  module/gluon = {ratio('module', 'gluon'):.3f}  (goal <= 1.05; median of the rounds' ratios)")
    print(f"  module/torch = {ratio('module', 'torch'):.3f}")
    py = _mxnet_python(args.mxnet_python)
    if py is None:
        print("  MXNet 1.9.1: no interpreter found (--mxnet-python), skipped")
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MXNET_ENGINE_TYPE="NaiveEngine")
    out = subprocess.run(
        [
            py,
            __file__,
            "--mxnet-child",
            "--rounds",
            str(args.rounds),
            "--steps",
            str(args.steps),
            "--threads",
            str(args.threads),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if out.returncode != 0:
        print(f"  MXNet 1.9.1: failed ({out.stderr.strip().splitlines()[-1:]})")
        return
    mxt = statistics.median(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"  mxnet    {mxt * 1e3:8.3f} ms/step (MXNet 1.9.1 Module, separate process)")
    print(f"  module/mxnet = {med['module'] / mxt:.3f}")


if __name__ == "__main__":
    sys.exit(main())
