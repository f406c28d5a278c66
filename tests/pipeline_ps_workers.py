"""Rank functions of tests/test_pipeline_ps.py: pipelines whose data-parallel store is the
parameter servers (``parallelize(..., kvstore='dist_sync')``) or compresses its gradients."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(__file__))
import pipeline_workers as w  # noqa: E402


def train_over_servers(gloo_port: int, path: str, steps: int = 5, compression: dict[str, Any] | None = None,
                       dp: int = 2, pp: int = 2) -> dict[str, Any]:
    """A parameter-server worker that is also a pipeline rank (gloo for the stages, the servers
    for each stage's data-parallel gradients): dp x pp, 1F1B, 5 SGD-momentum steps."""
    import torch.distributed as dist

    import mxtorch as mx
    from mxtorch import gluon, parallel

    kv = mx.kv.create("dist_sync")  # joins the PS job: its worker rank is the pipeline rank
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gloo_port}", rank=kv.rank,
                            world_size=kv.num_workers)
    net = w.build_mlp()
    x, y = w.data()
    pnet = parallel.parallelize(net, parallel.ParallelConfig(dp=dp, pp=pp), micro_batches=2,
                                schedule="1f1b", kvstore="dist_sync")
    share = w.GLOBAL_BATCH // dp
    mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                       kvstore=pnet.kvstore, compression_params=compression)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for _ in range(steps):
        losses.append(pnet.train_step(x[mine], y[mine], loss_fn))
        tr.step(w.GLOBAL_BATCH)
    pnet.save_parameters(path)
    store = pnet.kvstore
    own = {k: p.data().detach().clone() for k, p in pnet.collect_params().items()}
    out = pnet(x)
    dist.destroy_process_group()
    return {"losses": losses, "out": out, "dp_rank": pnet.dp_rank, "pp_rank": pnet.pp_rank,
            "members": store.members, "prefix": store.prefix, "update_on_kvstore": tr._update_on_kvstore,
            "own": own, "wire_bytes": store.wire_bytes_sent}


def train_compressed(path: str, compression: dict[str, Any] | None, steps: int = 5) -> dict[str, Any]:
    """dp=2 x pp=2 over gloo, the dp store ('horovod') compressing gradients
    (``Trainer(compression_params=)``)."""
    from mxtorch import gluon, parallel

    net = w.build_mlp()
    x, y = w.data()
    pnet = parallel.parallelize(net, parallel.ParallelConfig(dp=2, pp=2), micro_batches=2, schedule="1f1b",
                                kvstore="horovod")
    share = w.GLOBAL_BATCH // 2
    mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                       kvstore=pnet.kvstore, compression_params=compression)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        pnet.train_step(x[mine], y[mine], loss_fn)
        tr.step(w.GLOBAL_BATCH)
    pnet.save_parameters(path)
    return {"dp_rank": pnet.dp_rank, "pp_rank": pnet.pp_rank,
            "own": {k: p.data().detach().clone() for k, p in pnet.collect_params().items()}}


def group_rounds() -> dict[str, Any]:
    """3 workers: {0, 1} and {2} each own a key of their group; key 'all' is every worker's."""
    import mxtorch as mx
    from mxtorch.kvstore.base import KVStoreError

    kv = mx.kv.create("dist_sync")
    rank = kv.rank
    members = [0, 1] if rank < 2 else [2]
    g = kv.group_view(members, f"g{members[0]}/")
    out: dict[str, Any] = {"rank": g.rank, "num_workers": g.num_workers}
    g.init(0, torch.full((3,), 10.0 + rank))  # the group's first rank's value is stored
    v = torch.zeros(3)
    g.pull(0, out=v)
    out["init"] = v.clone()
    kv.init("all", torch.zeros(2))  # an ordinary key alongside: every worker, MXNet's rule
    for step in range(3):
        g.pushpull(0, torch.full((3,), float(rank + 1)), out=v)
        out[f"sum{step}"] = v.clone()
    a = torch.zeros(2)
    kv.pushpull("all", torch.full((2,), float(rank + 1)), out=a)
    out["all"] = a.clone()
    g.barrier()
    try:  # a key of another group: pushing it is refused by the server
        other = "g2/0" if rank < 2 else "g0/0"
        kv._plans[other] = dataclasses.replace(kv._plans[f"g{members[0]}/0"], key=other)
        kv.push(other, torch.ones(3))
        out["foreign"] = ""
    except KVStoreError as e:
        out["foreign"] = str(e)
    finally:
        kv._plans.pop(other, None)
    kv.barrier()
    return out
