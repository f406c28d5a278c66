"""MXNet 1.9.1 reference step times, run under MXNet's own virtual environment.

bench/overhead.py starts this script with the MXNet venv's python (``--mxnet-python``, default
``.venv-mxnet/bin/python`` when it exists) so MXNet's Gluon step on the same model, batch and
optimizer is measured in the same run. Prints one JSON object: model -> list of ms/step (one
per round). Make the venv with:

    python3 -m venv .venv-mxnet && .venv-mxnet/bin/pip install mxnet==1.9.1 "numpy<1.24"
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp,lenet")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import mxnet as mx
    from mxnet import autograd, gluon
    from mxnet.gluon import nn

    def make_step(name: str) -> Any:
        net = nn.HybridSequential()
        if name == "mlp":
            net.add(nn.Dense(512, activation="relu"), nn.Dense(512, activation="relu"), nn.Dense(10))
        else:
            net.add(nn.Conv2D(20, kernel_size=5, activation="relu"), nn.MaxPool2D(2, 2),
                    nn.Conv2D(50, kernel_size=5, activation="relu"), nn.MaxPool2D(2, 2),
                    nn.Flatten(), nn.Dense(500, activation="relu"), nn.Dense(10))
        net.initialize(mx.init.Xavier())
        net.hybridize(static_alloc=True, static_shape=True)
        trainer = gluon.Trainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4})
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        x = mx.nd.random.uniform(shape=(args.batch, 1, 28, 28))
        y = mx.nd.random.randint(0, 10, shape=(args.batch,)).astype("float32")

        def step() -> None:
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(args.batch)

        return step

    out = {}
    for name in args.models.split(","):
        step = make_step(name)
        for _ in range(5):
            step()
        mx.nd.waitall()
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step()
            mx.nd.waitall()
            times.append((time.perf_counter() - t0) / args.steps * 1e3)
        out[name] = times
    print(json.dumps(out))


if __name__ == "__main__":
    main()
