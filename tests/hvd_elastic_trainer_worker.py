"""A worker of an in-process elastic job training with ``hvd.DistributedTrainer``
(tests/test_elastic_inprocess.py): ``python THIS OUT_DIR``.

A model to compute by hand: one weight ``w`` (``Dense(1, in_units=1)``, no bias, initialized to 0)
and the loss ``w * (hvd.rank() + 1)``, so rank r's gradient is r + 1.  SGD (learning rate 0.25,
local batch 1) averaged over n ranks moves ``w`` by ``-0.25 * (n + 1) / 2`` a step, exactly in
float32: -0.5 on 3 ranks, -0.375 on 2.  Two such weights train side by side: one through Horovod's
defaults (the 'horovod' KVStore), one through the trainer's own reduction (``num_groups=1``).
20 steps under ``hvd.elastic.run``, committed every 5.  ``H25_VICTIM=WHO:STEP``: in the first
generation the worker WHO (a rank, or the name of its host under ``mxtorch launch --elastic``)
writes ``victim.<pid>`` before step STEP and waits to be killed.  ``H25_HOLD=STEP``: in the first
generation every worker writes ``held.<pid>`` before step STEP and waits until a worker waits to
join (the test starts one without the variable; its trainer is made in a group of one).

Writes ``result.<pid>.json``: hvd's rank and size, both weights, and each step's moves with the
size it ran at (``[size, move_default, move_groups]``) since the function was last called.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

import mxtorch as mx
import mxtorch.horovod as hvd
from mxtorch import autograd, elastic
from mxtorch.elastic.env import MXTORCH_ELASTIC_HOST
from mxtorch.gluon import nn

STEPS = 20
COMMIT_EVERY = 5


def main(out: str) -> int:
    torch.set_num_threads(1)
    hvd.init()
    nets = [nn.Dense(1, in_units=1, use_bias=False) for _ in range(2)]
    for net in nets:
        net.initialize(mx.init.Zero())
    default = hvd.DistributedTrainer(nets[0].collect_params(), "sgd", {"learning_rate": 0.25})
    grouped = hvd.DistributedTrainer(nets[1].collect_params(), "sgd", {"learning_rate": 0.25}, num_groups=1)
    state = hvd.elastic.State(net0=nets[0], net1=nets[1], trainer0=default, trainer1=grouped, step=0)
    victim = os.environ.get("H25_VICTIM", "")
    hold = int(os.environ.get("H25_HOLD", "-1"))
    host = os.environ.get(MXTORCH_ELASTIC_HOST, "")  # the agent's name, set by mxtorch launch --elastic
    moves: list[list[float]] = []

    def w(net: nn.Dense) -> float:
        return float(net.weight.data().detach().reshape(-1)[0])

    @hvd.elastic.run
    def train(state: elastic.State) -> None:
        moves.clear()
        context = elastic.current()
        first = context is not None and context.membership is not None and context.membership.generation == 0
        while state.step < STEPS:
            if first and victim in (f"{hvd.rank()}:{state.step}", f"{host}:{state.step}"):
                open(os.path.join(out, f"victim.{os.getpid()}"), "w").close()
                time.sleep(600)
            if first and hold == state.step:
                open(os.path.join(out, f"held.{os.getpid()}"), "w").close()
                while not context.rendezvous.joiners_waiting(context.membership):
                    time.sleep(0.1)
            before = [w(net) for net in nets]
            x = mx.nd.array([[hvd.rank() + 1.0]])
            for net, trainer in zip(nets, (default, grouped)):
                with autograd.record():
                    loss = net(x).sum()
                loss.backward()
                trainer.step(1)
            moves.append([hvd.size(), *(w(net) - b for net, b in zip(nets, before))])
            state.step += 1
            if state.step % COMMIT_EVERY == 0:
                state.commit()

    train(state)
    with open(os.path.join(out, f"result.{os.getpid()}.json"), "w") as f:
        json.dump({"rank": hvd.rank(), "size": hvd.size(), "w": [w(net) for net in nets], "moves": moves}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
