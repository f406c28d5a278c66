"""Rank function for the ZeroTrainer gradient-compression tests (run through mxtorch.distributed.testing)."""

from __future__ import annotations

import os
from typing import Any

import torch
from zero_workers import ADAM, GLOBAL_BATCH, global_batch, tiny_net, train

from mxtorch import amp, autograd, gluon, parallel
from mxtorch.base import MXNetError

FP16 = {"type": "fp16"}
TWO_BIT = {"type": "2bit", "threshold": 0.5}
COMPRESSIONS = {"fp16": FP16, "2bit": TWO_BIT}
CASES = ((1, "fp16"), (1, "2bit"), (2, "fp16"), (3, "fp16"))
"""(zero stage, compression) trained against a plain Trainer on the 'allreduce' store."""
AMP_CASES = ((1, "2bit", True), (2, "fp16", True), (3, "fp16", True))
"""(zero stage, compression, AMP) trained with AMP (an overflow on rank 0) against the store's."""


def compressed_stages(states_dir: str) -> dict[Any, Any]:
    """In one job: ``zero_workers.train`` (5 Adam steps of this rank's slice of each global batch)
    with a plain Trainer on the 'allreduce' store per compression (the reference), with a
    ZeroTrainer per case of :data:`CASES`, and with an uncompressed zero=1 ZeroTrainer; the
    weights of each (also with AMP and an overflow on rank 0, zero=1 with 2-bit against the
    store's), the compression section of the 2-bit zero=1 trainer's states, and what loading them
    (this rank's file, the other rank's) into a new trainer does."""
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    out: dict[Any, Any] = {}
    for name, with_amp in (("fp16", False), ("2bit", False), ("2bit", True), ("fp16", True)):
        out["store", name, with_amp] = train(lambda net, params=COMPRESSIONS[name]: gluon.Trainer(
            net.collect_params(), "adam", ADAM, kvstore="allreduce", compression_params=dict(params)),
            rank, world, with_amp)[0]
    holder: dict[Any, Any] = {}
    for zero, name, with_amp in (*((z, n, False) for z, n in CASES), *AMP_CASES, (1, None, False)):
        mesh = parallel.Mesh(parallel.ParallelConfig(dp=world, zero=zero))

        def make(net: Any, mesh: Any = mesh, zero: int = zero, name: str | None = name) -> Any:
            params = dict(COMPRESSIONS[name]) if name is not None else None
            holder[zero, name] = trainer = mesh.trainer(net.collect_params(), "adam", ADAM,
                                                        compression_params=params)
            return trainer

        out[zero, name, with_amp] = train(make, rank, world, with_amp)[0]
    section = holder[1, "2bit"].state_dict()["compression"]  # the AMP run's: the same residual keys
    out["2bit states"] = {"type": section["type"], "rank": section["rank"],
                          "num_workers": section["num_workers"],
                          "residuals": len(section["state"]["residuals"])}
    out["reload"] = _reload_residuals(holder[1, "2bit"], rank, world, states_dir)
    out["compressors"] = {f"{z} {n}": getattr(holder[z, n].compression, "name", None) for z, n in CASES}
    out["spans"] = {(z, n): _step_spans(z, n, rank, world) for z, n in CASES if (z, n) != (1, "fp16")}
    return out


def _reload_residuals(trainer: Any, rank: int, world: int, states_dir: str) -> dict[str, Any]:
    """Save this rank's states (``trainer``: the AMP run's); load them into a new 2-bit zero=1
    trainer (the same residuals?), and try the next rank's file (refused: residuals belong to the
    rank that compressed)."""
    fname = os.path.join(states_dir, f"zero1-2bit.states.{rank}")
    trainer.save_states(fname)
    mesh = parallel.Mesh(parallel.ParallelConfig(dp=world, zero=1))
    again = mesh.trainer(tiny_net().collect_params(), "adam", ADAM, compression_params=dict(TWO_BIT))
    amp.init_trainer(again)  # the trainer saved was trained with AMP
    again.load_states(fname)
    before, after = (t.compression.state_dict()["residuals"] for t in (trainer, again))
    same = bool(before) and sorted(before) == sorted(after) and all(
        torch.equal(before[k], after[k]) for k in before)
    again.kvstore.barrier()  # every rank's file is written
    try:
        again.load_states(os.path.join(states_dir, f"zero1-2bit.states.{(rank + 1) % world}"))
        refused = ""
    except MXNetError as e:
        refused = str(e)
    return {"same": same, "refused": refused}


def _step_spans(zero: int, name: str, rank: int, world: int) -> set[str]:
    """The ``mxtorch/`` spans of one compressed step (backward included) under the profiler."""
    net = tiny_net(2)
    mesh = parallel.Mesh(parallel.ParallelConfig(dp=world, zero=zero))
    trainer = mesh.trainer(net.collect_params(), "adam", ADAM, compression_params=dict(COMPRESSIONS[name]))
    x, y = global_batch(0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with autograd.record():
            loss = gluon.loss.L2Loss()(net(x[rank::world]), y[rank::world])
        loss.backward()
        trainer.step(GLOBAL_BATCH)
    return {e.name for e in prof.events() if e.name.startswith("mxtorch/")}
