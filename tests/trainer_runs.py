"""A small Gluon network trained by a gluon.Trainer on two contexts over a given store: the
reference run that store tests compare against (importable on its own: ``from trainer_runs import
train_on_two_contexts`` with tests/ on the path, as pytest puts it)."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["train_on_two_contexts"]


def train_on_two_contexts(store: Any, steps: int = 3,
                          **trainer_kwargs: Any) -> tuple[Any, list[list[torch.Tensor]]]:
    """A small net trained with a gluon.Trainer on ``store`` over cpu(0) and cpu(1), from fixed seeds;
    returns the Trainer and every parameter's copies (one per context)."""
    import mxtorch as mx
    from mxtorch import autograd, gluon

    ctxs = [mx.cpu(0), mx.cpu(1)]
    torch.manual_seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, activation="tanh", in_units=4), gluon.nn.Dense(2, in_units=5))
    net.initialize(mx.init.Xavier(), ctx=ctxs)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore=store, **trainer_kwargs)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 4, generator=g), torch.randint(0, 2, (8,), generator=g)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        with autograd.record():
            losses = [loss_fn(net(xs), ys) for xs, ys in zip(gluon.utils.split_and_load(x, ctxs),
                                                            gluon.utils.split_and_load(y, ctxs))]
        autograd.backward(losses)
        trainer.step(8)
    return trainer, [[d.detach().clone() for d in p.list_data()] for p in net.collect_params().values()]
