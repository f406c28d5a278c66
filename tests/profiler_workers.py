"""Worker functions for tests/test_profiler_distributed.py, run in real processes.

Each trains a small Gluon network for a few steps under ``mx.profiler`` and dumps its trace into
``folder``; the test reads the files back.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import torch


def _net_and_data(seed: int) -> tuple[Any, torch.Tensor, torch.Tensor]:
    import mxtorch as mx
    from mxtorch import gluon

    torch.manual_seed(0)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier())
    g = torch.Generator().manual_seed(seed)
    return net, torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g)


def _train(net: Any, trainer: Any, x: torch.Tensor, y: torch.Tensor, steps: int) -> None:
    from mxtorch import autograd, gluon

    softmax_ce = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        with autograd.record():
            scores = net(x)  # the network's forward span, then the loss block's
            loss = softmax_ce(scores, y)
        autograd.backward(loss)
        trainer.step(len(x))


def horovod_job(folder: str, steps: int) -> dict[str, Any]:
    """Two ranks, kvstore 'horovod', profiled; each rank dumps profile.rank<r>.json into ``folder``."""
    torch.set_num_threads(1)
    import mxtorch as mx
    import mxtorch.horovod as hvd
    from mxtorch import gluon

    hvd.init()
    net, x, y = _net_and_data(hvd.rank())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore="horovod")
    _train(net, trainer, x, y, 1)  # the store is set up (and the clocks measured) before profiling
    mx.profiler.set_config(profile_all=True, filename=os.path.join(folder, "profile.json"),
                           aggregate_stats=True)
    mx.profiler.set_state("run")
    _train(net, trainer, x, y, steps)
    mx.profiler.set_state("stop")
    mx.profiler.dump()
    return {"rank": hvd.rank(), "table": mx.profiler.dumps()}


def ps_job(folder: str, steps: int) -> dict[str, Any]:
    """dist_sync, profiled on the workers and (from rank 0, profile_process='server') on the servers."""
    torch.set_num_threads(1)
    import mxtorch as mx
    from mxtorch import gluon

    kv = mx.kv.create("dist_sync")
    net, x, y = _net_and_data(kv.rank)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    _train(net, trainer, x, y, 1)
    mx.profiler.set_config(profile_all=True, filename="profile.json", aggregate_stats=True,
                           profile_process="server")
    mx.profiler.set_state("run", profile_process="server")
    mx.profiler.set_config(filename=os.path.join(folder, "profile.json"), aggregate_stats=True)
    kv.barrier()  # the servers record before any worker pushes
    mx.profiler.set_state("run")
    _train(net, trainer, x, y, steps)
    mx.profiler.set_state("stop")
    mx.profiler.dump()
    kv.barrier()  # every push is in before the servers write
    mx.profiler.set_state("stop", profile_process="server")
    mx.profiler.dump(profile_process="server")
    kv.barrier()
    return {"rank": kv.rank, "table": mx.profiler.dumps()}


def horovod_timeline_job(folder: str, steps: int) -> dict[str, Any]:
    """HOROVOD_TIMELINE (set by the test) records from hvd.init(); then a second file through
    hvd.start_timeline(mark_cycles=True) / hvd.stop_timeline()."""
    torch.set_num_threads(1)
    import mxtorch.horovod as hvd

    hvd.init()
    net, x, y = _net_and_data(hvd.rank())
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    _train(net, trainer, x, y, steps)
    hvd.allreduce(torch.ones(3), name="loss_sum")
    hvd.start_timeline(os.path.join(folder, "cycles.json"), mark_cycles=True)  # finishes the first file
    hvd.grouped_allreduce([torch.ones(2), torch.zeros(4, dtype=torch.float64)], name="pair")
    hvd.stop_timeline()
    return {"rank": hvd.rank(), "params": sorted(net.collect_params().keys())}


def pipeline_job(folder: str) -> dict[str, Any]:
    """pp=2 on two ranks: one profiled training step per schedule (GPipe, 1F1B, and the looped
    interleaved 1F1B and zero-bubble with two stages per rank), each rank's trace dumped into
    ``folder``; then one step without a profiler under a SpanClock (what ``mxtorch train`` counts as
    communication wait)."""
    import torch.distributed as dist

    import mxtorch as mx
    from mxtorch import gluon, parallel
    from mxtorch.profiler.clock import COMM_SPANS, SpanClock

    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    out: dict[str, Any] = {}
    for schedule, per_rank in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zero_bubble", 2)):
        torch.manual_seed(0)
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Dense(5, activation="relu", in_units=6),
                gluon.nn.Dense(5, activation="tanh", in_units=5),
                gluon.nn.Dense(4, activation="relu", in_units=5), gluon.nn.Dense(3, in_units=4))
        net.initialize(mx.init.Xavier())
        pnet = parallel.parallelize(net, parallel.ParallelConfig(pp=2), micro_batches=2, schedule=schedule,
                                    stages_per_rank=per_rank, kvstore=None)
        first = pnet.train_step(x, y, loss_fn)  # shapes relayed and the schedule built before profiling
        mx.profiler.set_config(profile_all=True,
                               filename=os.path.join(folder, f"{schedule}.r{dist.get_rank()}.json"))
        mx.profiler.set_state("run")
        second = pnet.train_step(x, y, loss_fn)
        mx.profiler.set_state("stop")
        mx.profiler.dump()
        [path] = glob.glob(os.path.join(folder, f"{schedule}.r{dist.get_rank()}*.json"))
        with SpanClock({"comm": COMM_SPANS}) as clock:
            third = pnet.train_step(x, y, loss_fn)
        out[schedule] = {"trace": path, "stages": pnet.stages, "comm_s": clock.seconds["comm"],
                         "losses": [first, second, third]}
    return out
