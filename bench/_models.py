"""The networks the benchmarks compare, written once: Gluon and plain-torch versions."""

from __future__ import annotations

from typing import Any

import torch


def mx_net(name: str) -> Any:
    """The Gluon network ``name`` ('mlp', 'lenet', 'resnet18' = resnet18_v1 thumbnail)."""
    import mxtorch as mx
    from mxtorch.gluon import nn

    if name == "resnet18":
        return mx.gluon.model_zoo.vision.get_model("resnet18_v1", classes=10, thumbnail=True)
    net = nn.HybridSequential()
    if name == "mlp":
        net.add(nn.Dense(512, activation="relu"), nn.Dense(512, activation="relu"), nn.Dense(10))
    elif name == "lenet":
        net.add(nn.Conv2D(20, kernel_size=5, activation="relu"), nn.MaxPool2D(2, 2),
                nn.Conv2D(50, kernel_size=5, activation="relu"), nn.MaxPool2D(2, 2),
                nn.Flatten(), nn.Dense(500, activation="relu"), nn.Dense(10))
    else:
        raise ValueError(f"unknown benchmark model {name!r}: use mlp, lenet or resnet18")
    return net


def torch_net(name: str) -> torch.nn.Module:
    """The same layers written with torch.nn ('mlp', 'lenet')."""
    if name == "mlp":
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                   torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    if name == "lenet":
        return torch.nn.Sequential(
            torch.nn.Conv2d(1, 20, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
            torch.nn.Conv2d(20, 50, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
            torch.nn.Flatten(), torch.nn.Linear(800, 500), torch.nn.ReLU(), torch.nn.Linear(500, 10))
    raise ValueError(f"no torch.nn version of {name!r}: use mlp or lenet")


def mx_train_step(name: str, x: torch.Tensor, y: torch.Tensor, kvstore: Any = "device",
                  hybridize: bool = True, amp_dtype: str | None = None) -> Any:
    """One mxtorch training step (record, backward, Trainer SGD momentum 0.9, wd 1e-4) as a closure.

    The network lives on ``x``'s device.  ``amp_dtype='float16'`` trains under ``mx.amp`` with
    dynamic loss scaling (``amp.init`` + ``amp.init_trainer`` + ``amp.scale_loss``).
    """
    import mxtorch as mx
    from mxtorch import amp, autograd, gluon

    net = mx_net(name)
    net.initialize(mx.init.Xavier(), ctx=mx.context.as_context(x.device))
    if hybridize:
        net.hybridize()
    if amp_dtype:
        amp.init(amp_dtype)
    net(x)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4}, kvstore=kvstore)
    if amp_dtype:
        amp.init_trainer(trainer)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    # the global batch: stores sum over workers (MXNet's rule)
    batch = x.shape[0] * (trainer._kvstore.num_workers if trainer._kvstore is not None else 1)

    def step() -> None:
        with autograd.record():
            loss = loss_fn(net(x), y)
        if amp_dtype:
            with amp.scale_loss(loss, trainer) as scaled:
                autograd.backward(scaled)
        else:
            loss.backward()
        trainer.step(batch)

    return step
