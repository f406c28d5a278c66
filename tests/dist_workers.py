"""Functions that distributed tests run in each rank (through mxtorch.distributed.testing).

They live in an importable module because ranks are spawned processes: the test files pass
these functions by reference.  Each returns plain, picklable values for the parent to check.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.gluon import nn
from mxtorch.gluon.utils import split_and_load

# ---- process group ---------------------------------------------------------------------


def group_roundtrip() -> dict[str, Any]:
    """init twice (idempotent), barrier, all_reduce; report the WorldInfo."""
    import torch.distributed as dist

    import mxtorch.distributed as mxdist

    info = mxdist.init()
    again = mxdist.init()
    mxdist.barrier(timeout=30)
    t = torch.tensor([float(info.rank + 1)])
    dist.all_reduce(t)
    return {"info": info, "same": info == again, "sum": t.item(), "backend": mxdist.backend(),
            "initialized": mxdist.is_initialized()}


def rank_environment(names: list[str]) -> dict[str, Any]:
    """The values of ``names`` in this rank's environment, its pid and working directory."""
    return {"env": {n: os.environ.get(n) for n in names}, "pid": os.getpid(), "cwd": os.getcwd()}


def return_rank_or_raise(bad_rank: int) -> int:
    rank = int(os.environ["RANK"])
    if rank == bad_rank:
        raise ValueError(f"boom from rank {rank}")
    return rank


def sleep_on(rank_to_sleep: int, seconds: float) -> int:
    rank = int(os.environ["RANK"])
    if rank == rank_to_sleep:
        time.sleep(seconds)
    return rank


def exit_without_result(code: int) -> None:
    if int(os.environ["RANK"]) == 1:
        os._exit(code)


# ---- KVStore semantics -----------------------------------------------------------------


def kv_semantics() -> dict[str, Any]:
    """pushpull/broadcast/init on every dtype and key kind; returns what each rank saw."""
    from mxtorch.kvstore import KVStoreError

    kv = mx.kv.create("horovod")
    r = kv.rank
    out: dict[str, Any] = {}
    out["meta"] = (kv.type, kv.rank, kv.num_workers, kv.local_rank, kv.is_capable("distributed"),
                   kv.is_capable("optimizer"), kv.is_capable("overlap"))
    for dtype in (torch.float32, torch.float16, torch.int64):
        t = (torch.arange(6).reshape(2, 3) + 10 * r).to(dtype)
        kv.pushpull(f"x_{dtype}", t)  # in place
        out[f"inplace_{dtype}"] = t
    v = torch.full((4,), float(r + 1))
    o = torch.zeros(4)
    kv.pushpull(3, v, out=o)  # int key, out-of-place: value untouched
    out["out_of_place"] = (v.clone(), o)
    vals = [torch.full((2,), float(r + 1)), torch.full((2,), 10.0 * (r + 1))]
    outs = [torch.zeros(2), torch.zeros(2)]
    kv.pushpull("list", vals, out=outs)  # sums over the local list, then over workers
    out["list"] = outs
    big = torch.full((1 << 21,), float(r + 1))  # 8 MiB: reduced alone, in place
    smalls = [torch.full((k + 1,), float(r + 1)) for k in range(5)]
    kv.pushpull(["big", "s0", "s1", "s2", "s3", "s4"], [big, *smalls])
    out["batched"] = (big[:3].clone(), float(big.sum()), smalls)
    w = torch.full((3,), float(r + 7))
    recv = [torch.zeros(3), torch.zeros(3)]
    kv.broadcast("w", w, out=recv)
    out["broadcast"] = (w.clone(), recv)
    ws = [torch.full((2, 2), float(r + 1)), torch.full((5,), float(r + 3)).half()]
    kv.broadcast(["b0", "b1"], ws, out=ws)  # in place, two keys in one call
    out["broadcast_list"] = ws
    i = torch.full((2,), float(r + 5))
    kv.init(9, i)
    out["init"] = i
    for name, call in (("push", lambda: kv.push(3, v)), ("pull", lambda: kv.pull(3, out=o))):
        try:
            call()
        except KVStoreError as e:
            out[f"{name}_error"] = str(e)
    c = torch.full((5,), float(r))
    kv.pushpull(3, c)  # a key may change shape when every worker changes it
    out["reshaped"] = c
    return out


def kv_mismatch() -> dict[str, str]:
    """Shape, dtype and key-order differences: every rank must raise, naming them."""
    from mxtorch.kvstore import KVStoreError

    kv = mx.kv.create("allreduce")
    r = kv.rank
    msgs: dict[str, str] = {}
    cases = {
        "shape": lambda: kv.pushpull("w", torch.zeros(3, 4 + r)),
        "dtype": lambda: kv.broadcast(7, torch.zeros(2, dtype=torch.float16 if r else torch.float32),
                                      out=torch.zeros(2, dtype=torch.float16 if r else torch.float32)),
        "keys": lambda: kv.pushpull(["a", "b"] if r == 0 else ["b", "a"], [torch.zeros(2), torch.zeros(2)]),
    }
    for name, call in cases.items():
        try:
            call()
            msgs[name] = "no error"
        except KVStoreError as e:
            msgs[name] = str(e)
    ok = torch.ones(2)
    kv.pushpull("after", ok)  # the store is still usable after the errors
    msgs["after"] = str(ok.tolist())
    return msgs


def kv_stuck_peer(sleep_s: float) -> dict[str, Any]:
    """Rank 1 never joins the collective: rank 0 must fail within the timeout, not hang."""
    from mxtorch.kvstore import KVStoreError

    kv = mx.kv.create("allreduce")
    kv.pushpull("warm", torch.ones(2))
    if kv.rank == 1:
        time.sleep(sleep_s)
        return {"rank": 1}
    t0 = time.monotonic()
    try:
        kv.pushpull("warm", torch.ones(2))
        return {"rank": 0, "error": None}
    except KVStoreError as e:
        return {"rank": 0, "error": str(e), "elapsed": time.monotonic() - t0}


# ---- Trainer equivalence -----------------------------------------------------------------


class TwoHeads(gluon.HybridBlock):
    """A trunk and two heads; ``forward(x, head)`` uses one head, so the other gets no gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Dense(8, activation="tanh", in_units=5)
        self.a = nn.Dense(3, in_units=8)
        self.b = nn.Dense(3, in_units=8)

    def forward(self, x: torch.Tensor, head: str = "a") -> torch.Tensor:
        h = self.trunk(x)
        return self.a(h) if head == "a" else self.b(h)


def build(model: str, seed: int, ctx: list[mx.Context] | None = None) -> gluon.Block:
    torch.manual_seed(seed)
    net: gluon.Block
    if model == "mlp":
        net = nn.HybridSequential()
        net.add(nn.Dense(16, activation="relu", in_units=5), nn.Dense(16, activation="tanh", in_units=16),
                nn.Dense(3, in_units=16))
    elif model == "conv":  # shapes inferred at the first forward: broadcast at the first step
        net = nn.HybridSequential()
        net.add(nn.Conv2D(4, 3, activation="relu"), nn.MaxPool2D(2), nn.Conv2D(6, 2), nn.Flatten(),
                nn.Dense(3))
    elif model == "heads":
        net = TwoHeads()
    else:
        raise ValueError(model)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    return net


def batch(model: str, step: int, rank: int, micro: int = 0, n: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + 10 * rank + micro)
    shape = (n, 1, 8, 8) if model == "conv" else (n, 5)
    return torch.randn(*shape, generator=g), torch.randint(0, 3, (n,), generator=g).float()


def heads_for(step: int, rank: int) -> str:
    # step 0: ranks use different heads (b gets a gradient on rank 1 only); step 1: only 'a'
    # everywhere (b is stale on every rank); step 2: 'b' everywhere.
    return ("a" if rank == 0 else "b") if step == 0 else ("a" if step == 1 else "b")


def train(model: str, kvstore: str | None, ranks: list[int], seed: int, steps: int = 3,
          grad_req: str = "write", micro_batches: int = 1, contexts: int = 1) -> list[torch.Tensor]:
    """Train on the batches of ``ranks`` (all of them in one process = the reference).

    The Trainer is created before the first forward, as scripts do: for 'conv', whose shapes
    are inferred at that forward, the store is set up at the first step instead.  With
    ``contexts`` > 1 each batch is split over that many CPU replicas (split_and_load).
    """
    ctx = [mx.cpu(i) for i in range(contexts)]
    net = build(model, seed, ctx)
    params = net.collect_params()
    if grad_req != "write":
        params.setattr("grad_req", grad_req)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3},
                            kvstore=kvstore)
    for step in range(steps):
        for micro in range(micro_batches):
            data = [batch(model, step, r, micro) for r in ranks]
            with autograd.record():
                if model == "heads":
                    losses = [loss_fn(net(x, heads_for(step, r)), y) for r, (x, y) in zip(ranks, data)]
                else:
                    losses = [loss_fn(net(xp), yp) for x, y in data
                              for xp, yp in zip(split_and_load(x, ctx), split_and_load(y, ctx))]
            for part in losses:
                part.backward()
        # the global batch (every worker's share): the store sums over workers (MXNet)
        world = len(ranks) if kvstore is None else int(os.environ["WORLD_SIZE"])
        trainer.step(4 * world * micro_batches, ignore_stale_grad=(model == "heads"))
        if grad_req == "add":
            params.zero_grad()
    return [p.data().detach().clone() for p in params.values()]


def trainer_scenarios(scenarios: list[tuple[str, str, int, str, int]]) -> dict[str, list[torch.Tensor]]:
    """Run each (name, model, micro_batches, grad_req, contexts) with kvstore='horovod' on this
    rank's data.

    Ranks start from different seeds: the Trainer's broadcast must give all of them rank 0's
    weights ('conv' infers shapes at the first forward, so all ranks use one seed there).
    """
    rank = int(os.environ["RANK"])
    out = {}
    for name, model, micro, grad_req, contexts in scenarios:
        seed = 0 if model == "conv" else 100 + rank
        out[name] = train(model, "horovod", [rank], seed, micro_batches=micro, grad_req=grad_req,
                          contexts=contexts)
    return out


# ---- clean exit ----------------------------------------------------------------------------

CLEAN_EXIT_SCRIPT = """
import torch
import mxtorch as mx
torch.set_num_threads(1)
kv = mx.kv.create("allreduce")
t = torch.full((1000,), float(kv.rank + 1))
kv.pushpull(0, t)
assert t[0].item() == 3.0
net = mx.gluon.nn.Dense(4, in_units=3)
net.initialize()
trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
with mx.autograd.record():
    loss = net(torch.ones(2, 3)).sum()
loss.backward()
trainer.step(2)
print("done", kv.rank)
"""

DEAD_PEER_SCRIPT = """
import os, time, torch
import mxtorch as mx
from mxtorch.kvstore import KVStoreError
kv = mx.kv.create("allreduce")
kv.pushpull(0, torch.ones(4))
if kv.rank == 1:
    os._exit(0)  # dies without a word
t0 = time.monotonic()
try:
    for _ in range(3):
        kv.pushpull(0, torch.ones(4))
    print("NO ERROR")
except KVStoreError as e:
    print(f"ERROR after {time.monotonic() - t0:.1f}s: {e}")
"""


def _count_hook_launches(sync: Any, counts: list[int]) -> None:
    """Record how many buckets the hooks had started when backward ended."""
    end_of_backward = sync._end_of_backward

    def probe() -> None:
        counts.append(sync.next_launch)
        end_of_backward()

    sync._end_of_backward = probe


def overlap_probe() -> dict[str, Any]:
    """Hooks on a plain torch model: buckets start during backward; grads become the sums."""
    kv: Any = mx.kv.create("allreduce")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                                torch.nn.Tanh(), torch.nn.Linear(64, 3))
    params = list(model.parameters())

    def grads_for(rank: int) -> list[torch.Tensor]:
        model.zero_grad(set_to_none=True)
        x, y = batch("mlp", 0, rank)
        torch.nn.functional.cross_entropy(model(x), y.long()).backward()
        return [p.grad.clone() for p in params if p.grad is not None]

    expected = [a + b for a, b in zip(grads_for(0), grads_for(1))]  # no hooks yet
    hooked = kv.attach_gradient_hooks(params, bucket_bytes=1024)  # about one bucket per parameter
    launched_by_hooks: list[int] = []
    _count_hook_launches(kv._grad_sync, launched_by_hooks)
    model.zero_grad(set_to_none=True)
    grads_for(kv.rank)
    launched_at_end = kv._grad_sync.next_launch
    kv.synchronize_gradients(params)
    got = [p.grad.clone() for p in params if p.grad is not None]
    return {"hooked": hooked, "buckets": len(kv._grad_sync.buckets), "launched_by_hooks": launched_by_hooks,
            "launched_at_end": launched_at_end, "expected": expected, "got": got}



def accumulation_probe() -> dict[str, Any]:
    """Hooks with ``backward_passes_per_step = 3``: three backward passes accumulate, the buckets
    start during the third only (once per step), and the gradients become the sums over ranks of
    the accumulated gradients; the next step counts again from zero."""
    kv: Any = mx.kv.create("allreduce")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 64), torch.nn.Tanh(), torch.nn.Linear(64, 3))
    params = list(model.parameters())

    started: list[int] = []  # bucket all-reduces started after each hooked backward pass

    def accumulated(rank: int, step: int, store: Any = None) -> list[torch.Tensor]:
        for mb in range(3):
            x, y = batch("mlp", 3 * step + mb, rank)
            torch.nn.functional.cross_entropy(model(x), y.long()).backward()
            if store is not None:
                started.append(store.gradient_allreduces)
        return [p.grad.clone() for p in params if p.grad is not None]

    expected = []
    for step in range(2):
        per_rank = []
        for rank in range(2):
            model.zero_grad(set_to_none=True)
            per_rank.append(accumulated(rank, step))
        expected.append([a + b for a, b in zip(*per_rank)])
    kv.backward_passes_per_step = 3
    kv.attach_gradient_hooks(params, bucket_bytes=1024)
    launched: list[int] = []
    _count_hook_launches(kv._grad_sync, launched)
    got = []
    for step in range(2):
        model.zero_grad(set_to_none=True)
        accumulated(kv.rank, step, kv)
        kv.synchronize_gradients(params)
        got.append([p.grad.clone() for p in params if p.grad is not None])
    return {"buckets": len(kv._grad_sync.buckets), "launched": launched, "started": started,
            "allreduces": kv.gradient_allreduces, "expected": expected, "got": got}


def backward_then_leave() -> int:
    """A Trainer over the allreduce store with gradient hooks: one backward starts the buckets'
    all-reduces, then the worker returns without ``trainer.step`` (a script that only wanted the
    loss, or one that stopped between backward and step).  The process must still exit cleanly."""
    net = gluon.nn.Dense(3, in_units=5)
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore="horovod")
    for step in range(2):  # the first step attaches the hooks; the second backward has no step
        x, y = batch("mlp", step, 0)
        with mx.autograd.record():
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
        loss.backward()
        if step == 0:
            trainer.step(8)
    return 1
