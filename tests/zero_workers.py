"""Rank functions for the sharded data-parallel (ZeRO) tests (run through mxtorch.distributed.testing)."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

import mxtorch as mx
from mxtorch import amp, autograd, gluon, parallel
from mxtorch.gluon import nn
from mxtorch.parallel.zero import optimizer_state_bytes, parameter_bytes

STEPS = 5
GLOBAL_BATCH = 8
ADAM = {"learning_rate": 0.05, "wd": 0.01}


def tiny_net(layers: int = 4) -> nn.HybridSequential:
    """``layers`` equal Dense layers (8 -> 8): whole-parameter shards split evenly over 2 and 4 ranks."""
    torch.manual_seed(0)
    net = nn.HybridSequential()
    for _ in range(layers):
        net.add(nn.Dense(8, in_units=8, activation="tanh"))
    net.initialize(mx.init.Xavier())
    return net


def global_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(GLOBAL_BATCH, 8, generator=g), torch.randn(GLOBAL_BATCH, 8, generator=g)


OVERFLOW_STEP = 2
"""With AMP: the step whose last gradient (the last bias) rank 0 makes inf, a step every rank skips."""


def train(trainer_of: Any, rank: int, world: int, with_amp: bool = False,
          passes: int = 1, layers: int = 4) -> tuple[list[torch.Tensor], int, int]:
    """``STEPS`` Adam steps of this rank's slice of each global batch; the weights, the
    optimizer-state bytes and the most parameter bytes held (measured between steps, the states
    after the last).  ``with_amp``: dynamic loss scaling, and an overflow in one gradient of rank
    0 at ``OVERFLOW_STEP`` (made by a hook on that gradient, before any reduction sees it).
    ``passes`` > 1: ``grad_req='add'``, the slice in that many backward passes per step."""
    net = tiny_net(layers)
    if passes > 1:
        net.collect_params().setattr("grad_req", "add")
    trainer = trainer_of(net)
    if with_amp:
        amp.init_trainer(trainer)
    loss_fn = gluon.loss.L2Loss()
    per = GLOBAL_BATCH // world
    param_bytes = parameter_bytes(trainer)
    last = list(net.collect_params().values())[-1].list_data()[0]
    for step in range(STEPS):
        x, y = global_batch(step)
        x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
        hook = None
        if with_amp and step == OVERFLOW_STEP and rank == 0:
            hook = last.register_hook(lambda g: g.index_fill(0, torch.tensor([0]), float("inf")))
        for xs, ys in zip(x.chunk(passes), y.chunk(passes)):
            with autograd.record():
                loss = loss_fn(net(xs), ys)
            if with_amp:
                with amp.scale_loss(loss, trainer) as scaled:
                    autograd.backward(scaled)
            else:
                loss.backward()
        if hook is not None:
            hook.remove()
        trainer.step(GLOBAL_BATCH)  # the global batch: gradients are summed (MXNet's rule)
        if passes > 1:
            net.collect_params().zero_grad()
        param_bytes = max(param_bytes, parameter_bytes(trainer))
    with getattr(trainer, "full_parameters", contextlib.nullcontext)():  # zero=3: gathered
        weights = [p.data().detach().clone() for p in net.collect_params().values()]
    return weights, optimizer_state_bytes(trainer), param_bytes


def reference(with_amp: bool = False, layers: int = 4) -> tuple[list[torch.Tensor], int, int]:
    """One process on the whole global batch with a plain Trainer."""
    return train(lambda net: gluon.Trainer(net.collect_params(), "adam", ADAM, kvstore=None), 0, 1, with_amp,
                 layers=layers)


def zero_stages(save_to: str) -> dict[str, Any]:
    """Train with zero=1 and zero=2, without and with AMP, over the whole job; rank 0 saves the
    zero=2 model's file."""
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out: dict[str, Any] = {}
    for zero, with_amp in ((1, False), (2, False), (1, True), (2, True)):
        mesh = parallel.Mesh(parallel.ParallelConfig(dp=world, zero=zero))
        holder: dict[str, Any] = {}

        def make(net: Any, mesh: Any = mesh, holder: dict[str, Any] = holder) -> Any:
            holder["net"] = net
            holder["trainer"] = mesh.trainer(net.collect_params(), "adam", ADAM)
            return holder["trainer"]

        weights, state_bytes, _ = train(make, rank, world, with_amp)
        out[zero, with_amp] = {"weights": weights, "state_bytes": state_bytes}
        if zero == 2 and not with_amp:
            if rank == 0:
                holder["net"].save_parameters(save_to)
            out["states_reloaded"] = _reload_states(holder["trainer"], mesh, f"{save_to}.states.{rank}")
    return out


def _reload_states(trainer: Any, mesh: Any, fname: str) -> bool:
    """Save this rank's shard of the optimizer states, load it into a new trainer of a new network:
    the same moments for the same parameters."""
    trainer.save_states(fname)
    again = mesh.trainer(tiny_net().collect_params(), "adam", ADAM)
    again.load_states(fname)
    before, after = trainer._updaters[0].states, again._updaters[0].states
    return bool(before) and sorted(before) == sorted(after) and all(
        torch.equal(a, b) for i in before for a, b in zip(before[i], after[i]))


BUCKET_BYTES = 288
"""One Dense(8, 8) layer's weight and bias (float32): tiny_net(BUCKET_LAYERS) makes that many buckets."""
BUCKET_LAYERS = 8


def zero_two_buckets() -> dict[str, Any]:
    """zero=2 with small buckets reduced during backward: the weights after ``STEPS`` Adam steps and
    the most gradient bytes held during backward (measured inside the hooks), with one backward pass
    per step and with two (``grad_req='add'``)."""
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out: dict[str, Any] = {}
    for passes in (1, 2):
        trainers: list[Any] = []

        def make(net: Any, trainers: list[Any] = trainers) -> Any:
            trainers.append(parallel.ZeroTrainer(net.collect_params(), "adam", ADAM, zero=2,
                                                 bucket_bytes=BUCKET_BYTES, measure_gradient_bytes=True))
            return trainers[-1]

        weights, _, _ = train(make, rank, world, passes=passes, layers=BUCKET_LAYERS)
        out[passes] = {"weights": weights, "peak": trainers[0].peak_gradient_bytes,
                       "after": trainers[0].gradient_bytes(), "stats": trainers[0].reduce_stats()}
    return out


def zero_three(save_to: str) -> dict[str, Any]:
    """Train with zero=3, without and with AMP; save the model's file (gathered, rank 0 writes)
    and load it into a new zero=3 network: its gathered weights are the trained ones."""
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out: dict[str, Any] = {}
    mesh = parallel.Mesh(parallel.ParallelConfig(dp=world, zero=3))
    out["refused"] = []
    for optimizer, grad_req in (("lamb", "write"), ("adam", "add")):
        net = tiny_net()
        net.collect_params().setattr("grad_req", grad_req)
        try:
            mesh.trainer(net.collect_params(), optimizer, {})
        except mx.base.MXNetError as e:
            out["refused"].append(str(e))
    for with_amp in (False, True):
        holder: dict[str, Any] = {}

        def make(net: Any, holder: dict[str, Any] = holder) -> Any:
            holder["net"] = net
            holder["trainer"] = mesh.trainer(net.collect_params(), "adam", ADAM)
            return holder["trainer"]

        weights, state_bytes, param_bytes = train(make, rank, world, with_amp)
        out[with_amp] = {"weights": weights, "state_bytes": state_bytes, "param_bytes": param_bytes,
                         "gathers": holder["trainer"].gather_stats()}
    net, trainer = holder["net"], holder["trainer"]
    try:  # between steps this rank holds slices: the file would be empty arrays
        net.save_parameters(save_to + ".unsharded")
    except mx.base.MXNetError as e:
        out["refused"].append(str(e))
    with trainer.full_parameters(writeback=False):
        if rank == 0:
            net.save_parameters(save_to)
    torch.distributed.barrier()
    again = tiny_net()
    fresh = mesh.trainer(again.collect_params(), "adam", ADAM)
    with fresh.full_parameters():
        again.load_parameters(save_to)
    with fresh.full_parameters(writeback=False):
        out["reloaded"] = [p.data().detach().clone() for p in again.collect_params().values()]
    # a second trainer of the same network takes over the first one's slices (they are gathered)
    second = mesh.trainer(net.collect_params(), "sgd", {"learning_rate": 0.0})
    with second.full_parameters(writeback=False):
        out["second"] = [p.data().detach().clone() for p in net.collect_params().values()]
    out["reloaded_bytes"] = parameter_bytes(fresh)
    return out


def pipeline_reference(with_amp: bool) -> dict[str, torch.Tensor]:
    """pipeline_workers.build_mlp trained in one process with Adam on the global batch."""
    import pipeline_workers as pw

    net = pw.build_mlp()
    x, y = pw.data()
    trainer = gluon.Trainer(net.collect_params(), "adam", ADAM, kvstore=None)
    if with_amp:
        amp.init_trainer(trainer)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(STEPS):
        with autograd.record():
            loss = loss_fn(net(x), y)
        if with_amp:
            with amp.scale_loss(loss, trainer) as scaled:
                autograd.backward(scaled)
        else:
            loss.backward()
        trainer.step(pw.GLOBAL_BATCH)
    return {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()}


def zero_pipeline(zero: int, with_amp: bool, path: str, dp: int = 2, pp: int = 2,
                  tp: int = 1, schedule: str = "1f1b") -> dict[str, Any]:
    """dp x pp ranks through parallelize with ParallelConfig(zero=...): Adam (with AMP's loss
    scaling: ``with_amp``) on this dp rank's share; the model's file (whole, rank 0 writes), the
    most parameter bytes held between steps and the bytes of the stage's whole parameters."""
    import pipeline_workers as pw

    torch.set_num_threads(1)
    net = pw.build_mlp()
    x, y = pw.data()
    looped = 2 if schedule in ("interleaved", "zero_bubble") else 1  # stages per rank
    pnet = parallel.parallelize(net, parallel.ParallelConfig(dp=dp, pp=pp, tp=tp, zero=zero),
                                micro_batches=2, schedule=schedule, stages_per_rank=looped)
    share = pw.GLOBAL_BATCH // dp
    mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
    trainer = pnet.trainer("adam", ADAM)
    if with_amp:
        amp.init_trainer(trainer)
    whole = sum(4 * int(torch.Size(p.shape).numel()) for p in pnet.collect_params().values())
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    held = 0
    for _ in range(STEPS):
        pnet.train_step(x[mine], y[mine], loss_fn, trainer=trainer)
        trainer.step(pw.GLOBAL_BATCH)
        held = max(held, pnet.param_bytes())
    pnet.save_parameters(path)
    # the file loads into another network's stages (other initial weights), which saves it again
    cfg = parallel.ParallelConfig(dp=dp, pp=pp, tp=tp, zero=zero)
    again = parallel.parallelize(pw.build_mlp(seed=1), cfg, micro_batches=2)
    again.trainer("adam", ADAM)
    again.load_parameters(path)
    again.save_parameters(path + ".again")
    return {"held": held, "whole": whole, "pp_rank": pnet.pp_rank,
            "state_bytes": optimizer_state_bytes(trainer), "stats": trainer.reduce_stats()}


class _Uneven(gluon.HybridBlock):
    """Dense 8 -> 16 -> 3, then a float64 scale: parameters of 128, 16, 48, 3 float32 elements and
    3 float64 ones, which whole-parameter shards split unevenly over 3 ranks, in two dtypes."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Dense(16, in_units=8, activation="tanh")
        self.out = nn.Dense(3, in_units=16)
        self.scale = gluon.Parameter("scale", shape=(3,), dtype="float64", init=mx.init.One())

    def forward(self, x: Any) -> Any:
        return (self.out(self.hidden(x)).double() * self.scale.data()).float()


def uneven_net() -> _Uneven:
    torch.manual_seed(1)
    net = _Uneven()
    net.initialize(mx.init.Xavier())
    return net


def train_uneven(trainer_of: Any, rank: int, world: int) -> list[torch.Tensor]:
    """``STEPS`` SGD-with-momentum steps of this rank's slice of a global batch of 6 (3 outputs)."""
    net = uneven_net()
    trainer = trainer_of(net)
    per = 6 // world
    for step in range(STEPS):
        g = torch.Generator().manual_seed(200 + step)
        x, y = torch.randn(6, 8, generator=g), torch.randn(6, 3, generator=g)
        with autograd.record():
            loss = gluon.loss.L2Loss()(net(x[rank * per:(rank + 1) * per]), y[rank * per:(rank + 1) * per])
        loss.backward()
        trainer.step(6)
    return [p.data().detach().clone() for p in net.collect_params().values()]


SGD = {"learning_rate": 0.1, "momentum": 0.9}


def uneven_reference() -> list[torch.Tensor]:
    return train_uneven(lambda net: gluon.Trainer(net.collect_params(), "sgd", SGD, kvstore=None), 0, 1)


def zero_uneven() -> dict[int, Any]:
    """zero=1 and zero=2 on uneven shares of two dtypes: the weights after ``STEPS`` steps and
    which rank owns each parameter."""
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out: dict[int, Any] = {}
    for zero in (1, 2):
        trainers: list[Any] = []

        def make(net: Any, zero: int = zero, trainers: list[Any] = trainers) -> Any:
            trainers.append(parallel.ZeroTrainer(net.collect_params(), "sgd", SGD, zero=zero))
            return trainers[-1]

        weights = train_uneven(make, rank, world)
        owners = [trainers[0].owner(p) for p in trainers[0]._params]
        out[zero] = {"weights": weights, "owners": owners, "stats": trainers[0].reduce_stats()}
    return out
