"""Functions the workers of parameter-server test jobs run (importable by spawned processes).

Each returns plain values (lists, floats, strings, tensors) that the test process checks.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

LOW = (torch.float16, torch.bfloat16)


def _kv(name: str = "dist_sync") -> Any:
    import mxtorch as mx

    return mx.kv.create(name)


def _error(fn: Any) -> str:
    from mxtorch.kvstore import KVStoreError

    try:
        fn()
    except KVStoreError as e:
        return str(e)
    return "no error"


# ---- core semantics ---------------------------------------------------------------------------
def semantics() -> dict[str, Any]:
    """init/push/pull/pushpull/broadcast, int and str keys, dtypes, lists, a split key, queueing."""
    from mxtorch.kvstore import KVStoreBase

    kv = _kv("dist_sync")
    r = kv.rank
    caps = (kv.is_capable(KVStoreBase.OPTIMIZER), kv.is_capable(KVStoreBase.DISTRIBUTED))
    res: dict[str, Any] = {"meta": (kv.type, r, kv.num_workers, kv.num_servers, *caps)}
    for i, dtype in enumerate((torch.float32, torch.float16, torch.bfloat16)):
        key = 100 + i
        kv.init(key, torch.full((2, 3), 5.0 + r, dtype=dtype))  # rank 0's value wins
        got = torch.zeros(2, 3, dtype=dtype)
        kv.pull(key, out=got)
        res[f"init_{dtype}"] = got.clone()
        kv.push(key, torch.full((2, 3), float(r + 1), dtype=dtype))
        kv.pull(key, out=got)
        res[f"push_{dtype}"] = got.clone()
        val = torch.full((2, 3), 10.0 * (r + 1), dtype=dtype)
        kv.pushpull(key, val)  # out=None: in place
        res[f"pushpull_{dtype}"] = val
    # str keys next to int keys, out-of-place pushpull with two outputs
    kv.init("weight", torch.zeros(4))
    value = torch.full((4,), float(r + 1))
    outs = [torch.zeros(4), torch.zeros(4)]
    kv.pushpull("weight", value, out=outs)
    res["str_key"] = (value, outs)
    # one value per local context: summed on the worker first
    kv.init(7, torch.zeros(3))
    kv.push(7, [torch.full((3,), 1.0 + r), torch.full((3,), 10.0 * (r + 1))])
    got = torch.zeros(3)
    kv.pull(7, out=got)
    res["list_push"] = got
    # keys above MXNET_KVSTORE_BIGARRAY_BOUND (the test sets 10): split over both servers
    big = torch.arange(25, dtype=torch.float32).reshape(5, 5)
    kv.init("big", big * (r + 1))
    kv.init(200, torch.zeros(31, dtype=torch.float16))
    res["placement"] = (kv.placement("big"), kv.placement(200))
    got = torch.zeros(5, 5)
    kv.pull("big", out=got)
    res["big_init"] = got.clone()
    bigv = big + r
    kv.pushpull("big", bigv)
    res["big_pushpull"] = bigv
    half = torch.full((31,), float(r + 1), dtype=torch.float16)
    nc_out = torch.zeros(31, 2, dtype=torch.float16)[:, 0]  # a non-contiguous output
    kv.pushpull(200, half, out=nc_out)
    res["big_fp16"] = nc_out.clone()
    # many keys in one call (pipelined over both servers)
    keys = list(range(300, 340))
    kv.init(keys, [torch.zeros(k - 299) for k in keys])
    vals = [torch.full((k - 299,), float(k + r)) for k in keys]
    kv.pushpull(keys, vals)
    res["batched"] = [v[0].item() for v in vals]
    # a worker pushing twice before pulling: the second push waits for the next round
    kv.init(8, torch.zeros(2))
    kv.push(8, torch.full((2,), 1.0 + r))
    kv.push(8, torch.full((2,), 10.0 + r))
    got = torch.zeros(2)
    kv.pull(8, out=got)
    res["queued"] = got
    # broadcast: rank 0's value everywhere
    outs = [torch.zeros(3), torch.zeros(3)]
    kv.broadcast(9, torch.full((3,), 7.0 + r), out=outs)
    res["broadcast"] = outs
    # errors, raised on this worker before anything is sent
    res["unknown_key"] = _error(lambda: kv.pull(12345, out=torch.zeros(1)))
    res["bad_shape"] = _error(lambda: kv.push(7, torch.zeros(4)))
    res["bad_dtype"] = _error(lambda: kv.push(7, torch.zeros(3, dtype=torch.float64)))
    res["dup_init"] = _error(lambda: kv.init(7, torch.zeros(3)))
    # workers disagreeing on an init: every worker raises, the offending one says so
    res["init_mismatch"] = _error(lambda: kv.init(50, torch.zeros(2 + r)))
    res["init_dtype_mismatch"] = _error(lambda: kv.init(51, torch.zeros(2, dtype=torch.float16 if r else
                                                                            torch.float32)))
    kv.init(50, torch.ones(2))  # the job goes on
    got = torch.zeros(2)
    kv.pushpull(50, torch.ones(2), out=got)
    res["after_mismatch"] = got
    kv.barrier()
    # the optimizer on the servers, its hyper-parameters following the worker's optimizer
    from mxtorch import optimizer

    opt = optimizer.SGD(learning_rate=0.5, multi_precision=True)
    kv.set_optimizer(opt)
    kv.init(60, torch.full((3,), 4.0))
    kv.push(60, torch.full((3,), 1.0 + r))  # grad sum 3: 4 - 0.5 * 3
    got = torch.zeros(3)
    kv.pull(60, out=got)
    res["opt_step1"] = got.clone()
    opt.set_learning_rate(0.25)
    opt.rescale_grad = 2.0
    kv.pushpull(60, torch.full((3,), 1.0 + r), out=got)  # 2.5 - 0.25 * 2 * 3
    res["opt_step2"] = got.clone()
    kv.init("h", torch.ones(4, dtype=torch.float16))  # fp16 weight, fp32 master copy on the server
    opt.set_learning_rate(1.0)
    opt.rescale_grad = 1.0
    h = torch.zeros(4, dtype=torch.float16)
    for _ in range(10):
        kv.pushpull("h", torch.full((4,), 5e-5, dtype=torch.float16), out=h)
    res["fp16_master"] = h
    kv.close()
    kv.close()  # idempotent
    return res


def async_semantics() -> dict[str, Any]:
    """dist_async: pushes apply on arrival; a pull after a push sees it."""
    from mxtorch import optimizer

    kv = _kv("dist_async")
    r = kv.rank
    res: dict[str, Any] = {"type": kv.type}
    kv.init(0, torch.zeros(3))
    kv.push(0, torch.full((3,), float(r + 1)))
    got = torch.zeros(3)
    kv.pull(0, out=got)
    res["own_push"] = got.clone()  # assign: my value, or the other's if it came after mine
    kv.barrier()
    kv.pull(0, out=got)
    res["after_barrier"] = got.clone()
    kv.set_optimizer(optimizer.SGD(learning_rate=1.0))
    kv.init(1, torch.zeros(2))
    for _ in range(5):
        kv.push(1, torch.ones(2))
    kv.barrier()
    kv.pull(1, out=got[:2])
    res["sgd_total"] = got[:2].clone()  # every push applied once: -(2 workers * 5)
    res["dead"] = kv.num_dead_node(6)
    return res


# ---- trainer ----------------------------------------------------------------------------------
def _regression_data(n: int = 32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=g)
    w = torch.tensor([[1.0, -2.0, 0.5, 3.0, -1.0]])
    y = x @ w.t() + 0.3
    return x, y


def _net(seed: int) -> Any:
    from mxtorch.gluon import nn

    torch.manual_seed(seed)
    net = nn.Sequential()
    net.add(nn.Dense(8, in_units=5, activation="tanh"), nn.Dense(1, in_units=8))
    net.initialize()
    return net


def _train(kvstore: Any, update_on_kvstore: bool | None, part: int | None, parts: int,
           seed: int = 0) -> tuple[Any, Any, Any]:
    """(net, trainer, step) for SGD with momentum; ``step(i)`` trains on (a part of) batch ``i``.

    ``part=None``: the whole batch in one process (the reference).  Otherwise this worker
    takes rows ``part::parts`` of every batch.
    """
    from mxtorch import autograd, gluon

    net = _net(seed + (0 if part is None else 100 * part))  # different inits: broadcast must fix them
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01},
                            kvstore=kvstore, update_on_kvstore=update_on_kvstore)
    loss_fn = gluon.loss.L2Loss()

    def step(i: int) -> None:
        x, y = _regression_data(16, seed=i)
        if part is not None:
            x, y = x[part::parts], y[part::parts]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])

    return net, trainer, step


def train_steps(kvstore: Any, update_on_kvstore: bool | None, steps: int, part: int | None,
                parts: int, seed: int = 0) -> list[torch.Tensor]:
    """The parameters after ``steps`` steps of :func:`_train`."""
    net, _, step = _train(kvstore, update_on_kvstore, part, parts, seed)
    for i in range(steps):
        step(i)
    return [p.data().detach().clone() for p in net.collect_params().values()]


def trainer_sync(update_on_kvstore: bool, steps: int, folder: str | None = None) -> dict[str, Any]:
    """``steps`` dist_sync steps on this worker's half of every batch; with ``folder``, then the
    optimizer-state checks of :func:`_states_round_trip`."""
    import mxtorch as mx

    kv = mx.kv.create("dist_sync")
    net, trainer, step = _train(kv, update_on_kvstore, kv.rank, kv.num_workers)
    for i in range(steps):
        step(i)
    out: dict[str, Any] = {"params": [p.data().detach().clone() for p in net.collect_params().values()]}
    if folder is not None:
        out["states"] = _states_round_trip(kv, net, trainer, lambda i: step(steps + i), folder)
    return out


def trainer_async_converges(steps: int) -> tuple[float, float]:
    """Linear regression with dist_async; returns (first, last) full-data loss."""
    from mxtorch import autograd, gluon
    from mxtorch.gluon import nn

    torch.manual_seed(1)
    net = nn.Dense(1, in_units=5)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore="dist_async")
    kv = trainer._kvstore
    loss_fn = gluon.loss.L2Loss()
    x_all, y_all = _regression_data(64, seed=5)

    def full_loss() -> float:
        return float(loss_fn(net(x_all), y_all).mean())

    first = full_loss()
    for step in range(steps):
        idx = torch.arange(kv.rank * 32, kv.rank * 32 + 32)[(step * 8) % 32:(step * 8) % 32 + 8]
        x, y = x_all[idx], y_all[idx]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])
    kv.barrier()
    kv.pull(list(range(2)), out=[p.data() for p in net.collect_params().values()])
    return first, full_loss()


def _states_round_trip(kv: Any, net: Any, trainer: Any, step: Any, folder: str) -> dict[str, Any]:
    """Save states, train on, load them back (the states are those saved); files are local-format."""
    import mxtorch as mx
    from mxtorch.optimizer import Updater

    first = os.path.join(folder, "first.states")
    trainer_file = os.path.join(folder, "trainer.states")
    if kv.rank == 0:
        kv.save_optimizer_states(first, dump_optimizer=True)  # not collective
        trainer.save_states(trainer_file)
    kv.barrier()
    for i in range(2):
        step(i)
    moved = os.path.join(folder, f"moved{kv.rank}.states")
    kv.save_optimizer_states(moved)
    kv.barrier()
    trainer.load_states(trainer_file)
    again = os.path.join(folder, f"again{kv.rank}.states")
    kv.save_optimizer_states(again)
    kv.barrier()
    kv.load_optimizer_states(first)
    again_kv = os.path.join(folder, f"again_kv{kv.rank}.states")
    kv.save_optimizer_states(again_kv)
    kv.barrier()
    # a file written by a local Updater loads into the servers
    local = Updater(mx.optimizer.SGD(momentum=0.9))
    local.states = {i: torch.full(p.shape, float(i + 1)) for i, p in enumerate(net.collect_params().values())}
    local.optimizer._index_update_count = dict.fromkeys(local.states, 7)
    local.optimizer.num_update = 7
    from_local = os.path.join(folder, f"local{kv.rank}.states")
    with open(from_local, "wb") as f:
        f.write(local.get_states())
    kv.load_optimizer_states(from_local)
    roundtrip = os.path.join(folder, f"roundtrip{kv.rank}.states")
    kv.save_optimizer_states(roundtrip)
    kv.barrier()
    return {"first": first, "moved": moved, "again": again, "again_kv": again_kv, "roundtrip": roundtrip,
            "local": from_local, "trainer": trainer_file}


# ---- failures ---------------------------------------------------------------------------------
def wait_for_dead_peer(op: str) -> dict[str, Any]:
    """Rank 1 dies (SIGKILL itself); rank 0's pull or barrier must raise naming it."""
    import signal

    from mxtorch.kvstore import KVStoreError

    kv = _kv("dist_sync")
    kv.init(0, torch.zeros(4))
    kv.barrier()
    if kv.rank == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        if op == "pull":
            kv.push(0, torch.ones(4))
            kv.pull(0, out=torch.zeros(4))
        else:
            kv.barrier()
    except KVStoreError as e:
        return {"error": str(e), "seconds": time.monotonic() - start}
    return {"error": None}


def wait_for_dead_server(server_pids: list[int]) -> dict[str, Any]:
    """Kill the server holding key 0, then pull it: the error names the server."""
    import signal

    from mxtorch.kvstore import KVStoreError

    kv = _kv("dist_sync")
    kv.init([0, 1], [torch.zeros(4), torch.zeros(4)])
    kv.barrier()
    where = kv.placement(0)[0][0]
    if kv.rank == 0:
        os.kill(server_pids[where], signal.SIGKILL)
    try:
        kv.push(0, torch.ones(4))
        kv.pull(0, out=torch.zeros(4))
    except KVStoreError as e:
        return {"error": str(e), "server": where}
    return {"error": None, "server": where}


def async_survives_dead_worker(steps: int) -> dict[str, Any]:
    """dist_async: rank 1 dies; rank 0 trains on and sees it counted dead."""
    import signal

    from mxtorch import optimizer

    kv = _kv("dist_async")
    kv.set_optimizer(optimizer.SGD(learning_rate=1.0))
    kv.init(0, torch.zeros(2))
    kv.barrier()
    if kv.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    got = torch.zeros(2)
    for _ in range(steps):
        kv.pushpull(0, torch.ones(2), out=got)
    deadline = time.monotonic() + 30
    dead = 0
    while time.monotonic() < deadline and dead == 0:
        dead = kv.num_dead_node(4, timeout=60)
        time.sleep(0.2)
    kv.barrier()  # only the living take part
    return {"value": got, "dead_workers": dead, "dead_servers": kv.num_dead_node(2, timeout=60)}


def stalled_pull(timeout: float) -> dict[str, Any]:
    """Rank 1 stays alive but never pushes: rank 0's pull times out naming the key and server."""
    import mxtorch as mx
    from mxtorch.kvstore import KVStoreError

    kv = mx.kv.create("dist_sync", timeout=timeout)
    kv.init("w", torch.zeros(2))
    if kv.rank == 1:
        time.sleep(timeout + 3)
        return {"error": None}
    start = time.monotonic()
    try:
        kv.push("w", torch.ones(2))
        kv.pull("w", out=torch.zeros(2))
    except KVStoreError as e:
        return {"error": str(e), "seconds": time.monotonic() - start}
    return {"error": None}


def snapshot_then_wait(folder: str) -> dict[str, Any]:
    """Values and optimizer states into a snapshot; after the test restarts server 0, pull them back."""
    from mxtorch import optimizer

    kv = _kv("dist_sync")
    r = kv.rank
    kv.set_optimizer(optimizer.SGD(learning_rate=0.1, momentum=0.5))
    keys = [0, 1, "big"]
    kv.init(keys, [torch.zeros(3), torch.ones(4), torch.arange(30, dtype=torch.float32)])
    for step in range(2):
        kv.push(keys, [torch.full((3,), 1.0 + r), torch.full((4,), 2.0), torch.ones(30) * step])
    before = [torch.zeros(3), torch.zeros(4), torch.zeros(30)]
    kv.pull(keys, out=before)
    kv.barrier()
    paths = kv._snapshot() if r == 0 else []
    kv.barrier()
    if r == 0:
        with open(os.path.join(folder, "snapshot-done"), "w") as f:
            f.write("\n".join(paths))
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(folder, "restarted")):
        if time.monotonic() > deadline:
            raise TimeoutError("the test did not restart the server")
        time.sleep(0.1)
    after = [torch.zeros(3), torch.zeros(4), torch.zeros(30)]
    kv.pull(keys, out=after)
    # training goes on against the restored server (momentum restored too)
    kv.push(keys, [torch.full((3,), 1.0 + r), torch.full((4,), 2.0), torch.ones(30)])
    more = [torch.zeros(3), torch.zeros(4), torch.zeros(30)]
    kv.pull(keys, out=more)
    return {"before": before, "after": after, "more": more}


# ---- same-script mode ---------------------------------------------------------------------------
def same_script() -> float:
    """Every role runs this; only workers get past create()."""
    kv = _kv("dist_sync")
    kv.init(0, torch.zeros(2))
    v = torch.full((2,), float(kv.rank + 1))
    kv.pushpull(0, v)
    return v.sum().item()


def fails_on_rank0() -> None:
    kv = _kv("dist_sync")
    kv.init(0, torch.zeros(1))
    if kv.rank == 0:
        print(1 / 0)
