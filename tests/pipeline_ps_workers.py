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
                       dp: int = 2, pp: int = 2, update_on_kvstore: bool | None = None,
                       store_type: str = "dist_sync") -> dict[str, Any]:
    """A parameter-server worker that is also a pipeline rank (gloo for the stages, the servers
    for each stage's data-parallel gradients): dp x pp, 1F1B, 5 SGD-momentum steps."""
    import torch.distributed as dist

    import mxtorch as mx
    from mxtorch import gluon, parallel

    kv = mx.kv.create(store_type)  # joins the PS job: its worker rank is the pipeline rank
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gloo_port}", rank=kv.rank,
                            world_size=kv.num_workers)
    net = w.build_mlp()
    x, y = w.data()
    pnet = parallel.parallelize(net, parallel.ParallelConfig(dp=dp, pp=pp), micro_batches=2,
                                schedule="1f1b", kvstore=store_type)
    share = w.GLOBAL_BATCH // dp
    mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                       kvstore=pnet.kvstore, compression_params=compression,
                       update_on_kvstore=update_on_kvstore)
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


# ---- the optimizer on the servers, one per pipeline stage ------------------------------------------
SERVER_OPT = {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01}
LR_MULTS = {"0.weight": 0.5, "6.bias": 2.0}  # stage 0's index 0 and a stage 1 key: multipliers per stage
LR_AT_STEP_3 = 0.05


def _with_lr_mults(net: Any) -> Any:
    params = net._collect_params_with_prefix()
    for name, mult in LR_MULTS.items():
        params[name].lr_mult = mult
    return net


def _snapshot(net: Any) -> dict[str, torch.Tensor]:
    return {k: p.data().detach().clone() for k, p in net._collect_params_with_prefix().items()}


def _scheduled_step(tr: Any, step: int, states: str, forward_backward: Any, load: bool = True) -> None:
    """Step ``step`` (from 1) of the server-optimizer scenario: states loaded before step 6 (if
    ``load``), the learning rate changed after step 2, states saved after step 3."""
    if step == 6 and load:
        tr.load_states(states)
    forward_backward()
    tr.step(w.GLOBAL_BATCH)
    if step == 2:
        tr.set_learning_rate(LR_AT_STEP_3)
    if step == 3:
        tr.save_states(states)


def server_optimizer_reference(folder: str, load: bool = True) -> dict[str, Any]:
    """One process: 5 steps (the learning rate changed after step 2), Trainer.save_states after
    step 3, then Trainer.load_states of that file (if ``load``) and a 6th step."""
    from mxtorch import autograd, gluon

    net = _with_lr_mults(w.build_mlp())
    x, y = w.data()
    tr = gluon.Trainer(net.collect_params(), "sgd", dict(SERVER_OPT))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    out: dict[str, Any] = {}
    states = os.path.join(folder, "reference.states")
    for step in range(1, 7):
        def one_step() -> None:
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
        _scheduled_step(tr, step, states, one_step, load)
        if step in (5, 6):
            out[f"step{step}"] = _snapshot(net)
    return out


def train_with_server_optimizer(gloo_port: int, folder: str) -> dict[str, Any]:
    """dp=2 x pp=2 over the servers with the Trainer's defaults (so the optimizer runs on the
    servers, one per stage): the steps of :func:`server_optimizer_reference`, states saved and
    loaded through the servers."""
    import torch.distributed as dist

    from mxtorch import gluon, parallel

    kv = _join(gloo_port)
    net = _with_lr_mults(w.build_mlp())
    x, y = w.data()
    pnet = parallel.parallelize(net, parallel.ParallelConfig(dp=2, pp=2), micro_batches=2, schedule="1f1b",
                                kvstore="dist_sync")
    share = w.GLOBAL_BATCH // 2
    mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
    tr = gluon.Trainer(pnet.collect_params(), "sgd", dict(SERVER_OPT), kvstore=pnet.kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    states = os.path.join(folder, f"rank{kv.rank}.states")  # each rank its own (not collective)
    res: dict[str, Any] = {}
    for step in range(1, 7):
        _scheduled_step(tr, step, states, lambda: pnet.train_step(x[mine], y[mine], loss_fn))
        if step in (5, 6):
            path = os.path.join(folder, f"step{step}.params")
            pnet.save_parameters(path)
            res[f"step{step}"] = path
    res.update(update_on_kvstore=tr._update_on_kvstore, updaters=len(tr._updaters), pp_rank=pnet.pp_rank)
    dist.destroy_process_group()
    return res


def _join(gloo_port: int) -> Any:
    import torch.distributed as dist

    import mxtorch as mx

    kv = mx.kv.create("dist_sync")  # joins the PS job: its worker rank is the pipeline rank
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gloo_port}", rank=kv.rank,
                            world_size=kv.num_workers)
    return kv


def group_optimizers() -> dict[str, Any]:
    """3 workers: groups {0, 1} ('a/') and {2} ('b/') name their keys 0 and 1 alike.  'a/' declares
    SGD lr 0.1 with lr_mult 0.5 on its keys 0 and 2 (row_sparse: a lazy update of the pushed row),
    'b/' SGD lr 1.0; then 'c/' ({2}) has a key but no optimizer, and its push is refused."""
    import mxtorch as mx
    from mxtorch import optimizer
    from mxtorch.kvstore.base import KVStoreError
    from mxtorch.nd import sparse

    kv = mx.kv.create("dist_sync")
    rank = kv.rank
    first = rank < 2
    g = kv.group_view([0, 1] if first else [2], "a/" if first else "b/")
    opt = optimizer.SGD(learning_rate=0.1 if first else 1.0)
    if first:
        opt.set_lr_mult({0: 0.5, 2: 0.5})
    g.set_optimizer(opt)
    g.init([0, 1], [torch.zeros(2), torch.zeros(3)])
    outs = [torch.zeros(2), torch.zeros(3)]
    for _ in range(2):  # gradient 1 per worker: the group's sum is 2 ('a/') or 1 ('b/')
        g.pushpull([0, 1], [torch.ones(2), torch.ones(3)], out=outs)
    res: dict[str, Any] = {"key0": outs[0].clone(), "key1": outs[1].clone(), "refused": ""}
    if first:  # row 1 pushed by both (sum 2): row 1 -= 0.1 * 0.5 * 2, the other rows untouched
        g.init(2, sparse.zeros("row_sparse", (4, 2)))
        g.push(2, sparse.row_sparse_array((torch.ones(1, 2), [1]), shape=(4, 2)))
        dense = torch.full((4, 2), 7.0)
        g.pull(2, out=dense)
        res["rows"] = dense
    if not first:
        c = kv.group_view([2], "c/")
        c.init(0, torch.zeros(2))
        try:
            c.push(0, torch.ones(2))
        except KVStoreError as e:
            res["refused"] = str(e)
    kv.barrier()
    return res


def amp_over_servers(gloo_port: int) -> dict[str, Any]:
    """dp=2 x pp=2 over the servers, the optimizer on them, AMP (bf16, loss scaling): 2 steps, then an
    overflow in backward on one rank only (stage 1, dp rank 0): every rank skips that step (nothing is
    pushed, so no sync round waits) and halves the scale; a last step trains again."""
    import torch.distributed as dist

    from mxtorch import amp, gluon, parallel
    from mxtorch.amp import LossScaler

    _join(gloo_port)
    amp.init("bfloat16")
    try:
        pnet = parallel.parallelize(w.build_mlp(), parallel.ParallelConfig(dp=2, pp=2), micro_batches=2,
                                    kvstore="dist_sync")
        tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                           kvstore=pnet.kvstore)
        scaler = amp.init_trainer(tr, LossScaler(init_scale=2.0 ** 8))
        x, y = w.data()
        share = w.GLOBAL_BATCH // 2
        mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        losses = []
        for _ in range(2):
            losses.append(pnet.train_step(x[mine], y[mine], loss_fn, trainer=tr))
            tr.step(w.GLOBAL_BATCH)
        before = [p.data().detach().clone() for p in pnet.collect_params().values()]
        handle = None
        if (pnet.pp_rank, pnet.dp_rank) == (1, 0):
            first = next(iter(pnet.collect_params().values())).data()
            handle = first.register_hook(lambda g: g * float("inf"))
        pnet.train_step(x[mine], y[mine], loss_fn, trainer=tr)
        if handle is not None:
            handle.remove()
        tr.step(w.GLOBAL_BATCH)
        unchanged = all(torch.equal(b, p.data()) for b, p in zip(before, pnet.collect_params().values()))
        losses.append(pnet.train_step(x[mine], y[mine], loss_fn, trainer=tr))
        tr.step(w.GLOBAL_BATCH)
        moved = not all(torch.equal(b, p.data()) for b, p in zip(before, pnet.collect_params().values()))
        res = {"unchanged": unchanged, "moved": moved, "scale": scaler.loss_scale, "losses": losses,
               "update_on_kvstore": tr._update_on_kvstore}
    finally:
        amp.reset()
    dist.destroy_process_group()
    return res
