"""Rank functions for tests/test_kvstore_subgroup.py: the allreduce store over a process subgroup.

Four ranks laid out as dp=2 x pp=2: ranks {0, 2} form one data-parallel group and {1, 3} the
other.  Values differ per rank (powers of ten), so a sum over the whole job instead of the
group shows.  Each function returns plain, picklable values for the parent to check.
"""

from __future__ import annotations

import datetime
from typing import Any

import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.gluon import nn

GROUPS = ([0, 2], [1, 3])


def groups() -> tuple[Any, list[int], Any]:
    """Join the job and create both groups (every rank, in the same order): this rank's group, its
    ranks, and the other group (torch's NON_GROUP_MEMBER here)."""
    import torch.distributed as dist

    import mxtorch.distributed as mxdist

    info = mxdist.init()
    timeout = datetime.timedelta(seconds=mxdist.timeout())
    made = [dist.new_group(ranks, timeout=timeout) for ranks in GROUPS]
    mine = next(i for i, ranks in enumerate(GROUPS) if info.rank in ranks)
    return made[mine], GROUPS[mine], made[1 - mine]


# ---- training: the same code for the distributed run and the single-process reference --------


def build(seed: int) -> gluon.Block:
    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="tanh", in_units=5), nn.Dense(3, in_units=8))
    net.initialize(mx.init.Xavier())
    return net


def batch(step: int, rank: int, n: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(n, 5, generator=g), torch.randint(0, 3, (n,), generator=g).float()


def train(ranks: list[int], seed: int, kvstore: Any = None, steps: int = 3) -> list[torch.Tensor]:
    """Train on the batches of ``ranks`` (all of them in one process, without a store: the
    reference), dividing by the group's whole batch (MXNet: the store sums, step divides)."""
    net = build(seed)
    params = net.collect_params()
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.1, "momentum": 0.9}, kvstore=kvstore)
    group_batch = 4 * (len(ranks) if kvstore is None else kvstore.num_workers)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for step in range(steps):
        data = [batch(step, r) for r in ranks]
        with autograd.record():
            losses = [loss_fn(net(x), y) for x, y in data]
        for loss in losses:
            loss.backward()
        trainer.step(group_batch)
    return [p.data().detach().clone() for p in params.values()]


# ---- everything on one job -------------------------------------------------------------------


def subgroup_store() -> dict[str, Any]:
    """pushpull / broadcast / init / row_sparse / compressed / mismatch / barrier / Trainer on
    this rank's group; what each rank saw."""
    import torch.distributed as dist

    from mxtorch.kvstore import AllreduceKVStore, KVStoreError

    pg, ranks, other = groups()
    g = dist.get_rank()
    out: dict[str, Any] = {"global": g, "ranks": ranks}
    errors: dict[str, str] = {}
    for name, make in (("outside", lambda: AllreduceKVStore("allreduce", process_group=other)),
                       ("type", lambda: AllreduceKVStore("allreduce", process_group="dp"))):
        try:
            make()
            errors[name] = "no error"
        except (KVStoreError, TypeError) as e:
            errors[name] = f"{type(e).__name__}: {e}"
    out["errors"] = errors

    kv = mx.kv.create("horovod", process_group=pg)  # through the registry
    out["meta"] = (kv.type, kv.rank, kv.num_workers, kv.process_group is pg, kv.is_capable("overlap"))
    v = 10.0 ** g
    t = torch.full((3,), v)
    kv.pushpull("one", t)  # one tensor: the plain collective
    out["one"] = t
    ints = torch.full((2,), 10 ** g, dtype=torch.int64)
    dense_out = torch.zeros(2, dtype=torch.int64)
    kv.pushpull(5, ints, out=dense_out)
    out["int_out"] = (ints, dense_out)
    smalls = [torch.full((k + 1,), v) for k in range(4)]
    kv.pushpull([f"s{k}" for k in range(4)], smalls)  # the bucketed (fused) path
    out["bucketed"] = smalls
    if g in GROUPS[1]:  # only this group: the other never joins these collectives
        extra = torch.full((2,), v)
        kv.pushpull("only_b", extra)
        out["only_b"] = extra
    w = torch.full((3,), float(g + 7))
    recv = torch.zeros(3)
    kv.broadcast("w", w, out=recv)
    out["broadcast"] = recv
    i = torch.full((2,), float(g + 5))
    kv.init(9, i)
    out["init"] = i
    rsp = torch.sparse_coo_tensor(torch.tensor([[g, 5]]), torch.full((2, 2), v), (6, 2))
    rows = torch.zeros(6, 2)
    kv.pushpull("rsp", rsp, out=rows)
    out["row_sparse"] = rows
    try:  # a shape mismatch inside group {0, 2} only: both of its ranks raise, {1, 3} go on
        kv.pushpull("bad", torch.zeros(3, 4 + (g == 2)))
        out["mismatch"] = "no error"
    except KVStoreError as e:
        out["mismatch"] = str(e)
    after = torch.ones(2)
    kv.pushpull("after", after)
    out["after"] = after
    kv.barrier()

    compressed: dict[str, torch.Tensor] = {}
    for name, params in (("2bit", {"type": "2bit", "threshold": 0.5}), ("fp16", {"type": "fp16"}),
                         ("powersgd", {"type": "powersgd", "rank": 1})):
        ckv = AllreduceKVStore("allreduce", process_group=pg)
        ckv.set_gradient_compression(params)
        if name == "2bit":
            x = torch.tensor([1.0 if j in (g, 4) else 0.0 for j in range(5)])
        elif name == "fp16":
            x = torch.full((4,), v)
        else:  # rank-1 matrices: PowerSGD's rank-1 approximation of their sum is exact
            x = (g + 1) * torch.outer(torch.arange(1.0, 9.0), torch.linspace(-1.0, 1.0, 6))
        ckv.pushpull(name, x)
        compressed[name] = x
    out["compressed"] = compressed

    # a Trainer (hooks reduce the gradients during backward): ranks start from different weights
    out["weights"] = train([g], seed=100 + g, kvstore=AllreduceKVStore("allreduce", process_group=pg))
    return out
