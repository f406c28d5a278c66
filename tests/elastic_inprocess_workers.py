"""A worker of an in-process elastic job (tests/test_elastic_inprocess.py): ``python THIS OUT_DIR``.

An MLP (784-64-10) on the embedded Fashion-MNIST subset, global batch 100 split over the workers
by an ElasticBatchSampler, SGD with momentum through kvstore 'allreduce', committed every 10
steps, under ``@elastic.run``.  The test steers it through the environment:

- ``H16_VICTIM=RANK:STEP``: in the first generation, rank RANK stops before global step STEP,
  writes ``victim.<pid>`` and waits to be killed (SIGKILL by the test);
- ``H16_HOLD=STEP``: in the first generation every rank writes ``held.<pid>`` and waits before
  step STEP until a worker waits to join the job (the test then starts one): a join mid-epoch.

- ``H16_FILL=STEP``: after the first generation, a group of fewer than 3 workers waits before
  step STEP until a worker waits to join (a replacement started by its agent).

Each process writes ``start.<pid>`` when it starts and ``result.<pid>.json`` at the end: its rank
and world size, the held-out accuracy, a checksum of the parameters, the sizes its reset
callbacks saw, and where its first call of the training function started (a joiner: the job's
commit it received).  ``H16_HVD=1`` uses Horovod's names (``hvd.init()``,
``hvd.elastic.State``/``run``, kvstore 'horovod').
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import torch

import mxtorch as mx
from mxtorch import autograd, elastic, gluon
from mxtorch.gluon import nn
from mxtorch.gluon.data.vision import EMBEDDED_FASHION_MNIST_ROOT, FashionMNIST

GLOBAL_BATCH = 100
EPOCHS = 2
COMMIT_EVERY = 10


def _data(train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    ds = FashionMNIST(root=EMBEDDED_FASHION_MNIST_ROOT, train=train)
    x = torch.stack([ds[i][0] for i in range(len(ds))]).reshape(len(ds), -1).float() / 255.0
    y = torch.tensor([int(ds[i][1]) for i in range(len(ds))])
    return x, y


def _wait_for_joiner() -> None:
    context = elastic.current()
    assert context is not None and context.membership is not None
    while not context.rendezvous.joiners_waiting(context.membership):
        time.sleep(0.1)


def main(out: str) -> int:
    torch.set_num_threads(1)
    open(os.path.join(out, f"start.{os.getpid()}"), "w").close()
    import torch.distributed as dist

    if os.environ.get("H16_HVD"):  # Horovod's spelling: hvd.init() joins the elastic job
        import mxtorch.horovod as hvd

        hvd.init()
        api: Any = hvd.elastic
    else:
        elastic.init()  # before the Trainer joins the process group
        api = elastic

    x, y = _data(True)
    xt, yt = _data(False)
    mx.random.seed(1 + dist.get_rank())  # the workers start from other weights: sync must fix that
    net = nn.Sequential()
    net.add(nn.Dense(64, activation="relu"), nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net(x[:2])
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore="horovod" if api is not elastic else "allreduce")
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    size, rank = dist.get_world_size(), dist.get_rank()
    sampler = elastic.ElasticBatchSampler(len(x), GLOBAL_BATCH, size, rank, seed=3)
    state = api.State(net=net, trainer=trainer, sampler=sampler, epoch=0, batch=0)
    seen_sizes: list[int] = []
    state.register_reset_callbacks([lambda: seen_sizes.append(dist.get_world_size())])
    first_call: list[list[int]] = []
    victim = os.environ.get("H16_VICTIM", "")
    hold = int(os.environ.get("H16_HOLD", "-1"))
    fill = int(os.environ.get("H16_FILL", "-1"))

    def first_generation() -> bool:
        context = elastic.current()
        return context is not None and context.membership is not None and context.membership.generation == 0

    @api.run
    def train(state: elastic.State) -> None:
        first_call.append([state.epoch, state.batch])
        for state.epoch in range(state.epoch, EPOCHS):  # noqa: B020 - the API's idiom (Horovod's too)
            sampler.set_epoch(state.epoch)
            sampler.set_start(state.batch)
            for k, idx in enumerate(sampler, start=state.batch):
                step = state.epoch * len(sampler) + k
                if victim and first_generation() and f"{dist.get_rank()}:{step}" == victim:
                    open(os.path.join(out, f"victim.{os.getpid()}"), "w").close()
                    time.sleep(600)
                if step == fill and dist.get_world_size() < 3 and not first_generation():
                    _wait_for_joiner()
                if step == hold and first_generation():
                    open(os.path.join(out, f"held.{os.getpid()}"), "w").close()
                    _wait_for_joiner()
                with autograd.record():
                    loss = loss_fn(net(x[idx]), y[idx])
                loss.backward()
                trainer.step(GLOBAL_BATCH)
                state.batch = k + 1
                if state.batch % COMMIT_EVERY == 0:
                    state.commit()
            state.batch = 0
        state.commit()

    train(state)
    with torch.no_grad():
        accuracy = float((net(xt).argmax(1) == yt).float().mean())
    checksum = float(sum(p.data().detach().double().sum() for p in net.collect_params().values()))
    with open(os.path.join(out, f"result.{os.getpid()}.json"), "w") as f:
        json.dump({"pid": os.getpid(), "rank": dist.get_rank(), "size": dist.get_world_size(),
                   "accuracy": accuracy, "checksum": checksum, "reset_sizes": seen_sizes,
                   "first_call": first_call[0],
                   "hvd_size": hvd.size() if api is not elastic else None}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
