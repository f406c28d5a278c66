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
    # a repeated broadcast/init of the same array (MXNet accepts it): the servers keep their value
    again = [torch.zeros(3)]
    kv.broadcast(9, torch.full((3,), -5.0), out=again)
    res["rebroadcast"] = again[0]
    # errors, raised on this worker before anything is sent
    res["unknown_key"] = _error(lambda: kv.pull(12345, out=torch.zeros(1)))
    res["bad_shape"] = _error(lambda: kv.push(7, torch.zeros(4)))
    res["bad_dtype"] = _error(lambda: kv.push(7, torch.zeros(3, dtype=torch.float64)))
    res["dup_init"] = _error(lambda: kv.init(7, torch.zeros(4)))
    # workers disagreeing on an init: every worker raises, the offending one says so
    res["init_mismatch"] = _error(lambda: kv.init(50, torch.zeros(2 + r)))
    res["init_dtype_mismatch"] = _error(lambda: kv.init(51, torch.zeros(2, dtype=torch.float16 if r else
                                                                            torch.float32)))
    kv.init(50, torch.ones(2))  # the job goes on
    got = torch.zeros(2)
    kv.pushpull(50, torch.ones(2), out=got)
    res["after_mismatch"] = got
    # a pulled buffer becomes the storage of an out nothing else shares; an out with a view is
    # written in place (the view sees the value)
    kv.init(70, torch.zeros(6))
    own = torch.zeros(6)
    ptr = own.data_ptr()
    kv.pushpull(70, torch.full((6,), 1.0 + r), out=own)
    shared = torch.zeros(6)
    view = shared.view(2, 3)
    kv.pull(70, out=shared)
    res["adopt"] = (own.clone(), own.data_ptr() != ptr, view.clone(), shared.data_ptr() == view.data_ptr())
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
    # key 70's value is a received push buffer the server has sent back (shared, untracked): the
    # optimizer must update a copy of it, never the buffer itself
    got6 = torch.zeros(6)
    kv.pushpull(70, torch.full((6,), 1.0 + r), out=got6)  # 3 - 0.25 * 2 * 3
    res["opt_after_resend"] = got6
    # per-key multipliers changed after set_optimizer reach the servers too
    opt.set_lr_mult({60: 0.5})
    kv.pushpull(60, torch.full((3,), 1.0 + r), out=got)  # 1 - 0.25 * 0.5 * 2 * 3
    res["opt_lr_mult"] = got.clone()
    opt.set_lr_mult({})
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
           seed: int = 0, optimizer: str = "sgd",
           optimizer_params: dict[str, Any] | None = None) -> tuple[Any, Any, Any]:
    """(net, trainer, step) for SGD with momentum (or ``optimizer``); ``step(i)`` trains on (a
    part of) batch ``i``.

    ``part=None``: the whole batch in one process (the reference).  Otherwise this worker
    takes rows ``part::parts`` of every batch.
    """
    from mxtorch import autograd, gluon

    net = _net(seed + (0 if part is None else 100 * part))  # different inits: broadcast must fix them
    params = optimizer_params if optimizer_params is not None else \
        {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01}
    trainer = gluon.Trainer(net.collect_params(), optimizer, params, kvstore=kvstore,
                            update_on_kvstore=update_on_kvstore)
    loss_fn = gluon.loss.L2Loss()

    def step(i: int) -> None:
        x, y = _regression_data(16, seed=i)
        if part is not None:
            x, y = x[part::parts], y[part::parts]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(16)  # the global batch: stores sum over workers (MXNet)

    return net, trainer, step


def train_steps(kvstore: Any, update_on_kvstore: bool | None, steps: int, part: int | None,
                parts: int, seed: int = 0, **optimizer: Any) -> list[torch.Tensor]:
    """The parameters after ``steps`` steps of :func:`_train` (``optimizer``: its keywords)."""
    net, _, step = _train(kvstore, update_on_kvstore, part, parts, seed, **optimizer)
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


def unequal_steps(ahead: bool) -> dict[str, Any]:
    """dist_sync, rank 0 runs 3 steps, rank 1 fewer and closes its store: with ``ahead``, rank 1
    pushes all 3 rounds before it closes (rank 0 must finish); else it pushpulls 2 rounds and
    closes, and rank 0's third pushpull must fail naming it (not wait for the timeout)."""
    from mxtorch.kvstore import KVStoreError

    kv = _kv("dist_sync")
    kv.init("w", torch.zeros(6))  # above the (test's) bound: a slice on each server
    kv.barrier()
    if kv.rank == 1:
        for step in range(3 if ahead else 2):
            if ahead:
                kv.push("w", torch.full((6,), 10.0 * (step + 1)))
            else:
                kv.pushpull("w", torch.full((6,), 10.0 * (step + 1)), out=torch.zeros(6))
        kv.close()
        return {}
    values, start = [], time.monotonic()
    try:
        for step in range(3):
            out = torch.zeros(6)
            start = time.monotonic()
            kv.pushpull("w", torch.full((6,), float(step + 1)), out=out)
            values.append(out.tolist())
    except KVStoreError as e:
        return {"error": str(e), "values": values, "seconds": time.monotonic() - start}
    return {"error": None, "values": values}


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


def _wait_for_restart(folder: str, limit: float = 60.0) -> None:
    """Wait until the test has restarted the server (it writes ``folder/restarted``)."""
    deadline = time.monotonic() + limit
    while not os.path.exists(os.path.join(folder, "restarted")):
        if time.monotonic() > deadline:
            raise TimeoutError("the test did not restart the server")
        time.sleep(0.05)


def _snapshot_then_wait_for_restart(kv: Any, folder: str) -> None:
    """Every worker: worker 0 has the servers write a snapshot and names its files in
    ``folder/snapshot-done``; then all wait until the test has restarted the server."""
    kv.barrier()
    paths = kv._snapshot() if kv.rank == 0 else []
    kv.barrier()
    if kv.rank == 0:
        with open(os.path.join(folder, "snapshot-done"), "w") as f:
            f.write("\n".join(paths))
    _wait_for_restart(folder)


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
    _snapshot_then_wait_for_restart(kv, folder)
    after = [torch.zeros(3), torch.zeros(4), torch.zeros(30)]
    kv.pull(keys, out=after)
    # training goes on against the restored server (momentum restored too)
    kv.push(keys, [torch.full((3,), 1.0 + r), torch.full((4,), 2.0), torch.ones(30)])
    more = [torch.zeros(3), torch.zeros(4), torch.zeros(30)]
    kv.pull(keys, out=more)
    return {"before": before, "after": after, "more": more}


def group_snapshot_then_wait(folder: str) -> dict[str, Any]:
    """Workers 0 and 1 are groups 'a/' and 'b/' of one: each runs its own SGD (lr 0.1 / 1.0, momentum
    0.5) on its key 0 on the servers; a snapshot, the test restarts server 0, one more step."""
    from mxtorch import optimizer

    kv = _kv("dist_sync")
    r = kv.rank
    g = kv.group_view([r], "ab"[r] + "/")
    g.set_optimizer(optimizer.SGD(learning_rate=0.1 if r == 0 else 1.0, momentum=0.5))
    g.init(0, torch.zeros(3))
    v = torch.zeros(3)
    for _ in range(2):
        g.pushpull(0, torch.ones(3), out=v)
    before = v.clone()
    _snapshot_then_wait_for_restart(kv, folder)
    after = torch.zeros(3)
    g.pull(0, out=after)
    g.pushpull(0, torch.ones(3), out=v)
    return {"before": before, "after": after, "more": v.clone()}


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


# ---- row-sparse values -------------------------------------------------------------------------
def _rsp(rows: dict[int, float], shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A row_sparse tensor whose row ``i`` is filled with ``rows[i]`` (ids given unsorted)."""
    from mxtorch.nd import sparse

    ids = sorted(rows, reverse=True)
    data = torch.stack([torch.full(shape[1:], rows[i], dtype=dtype) + torch.arange(shape[1], dtype=dtype) / 8
                        for i in ids]) if ids else torch.zeros((0, *shape[1:]), dtype=dtype)
    return sparse.row_sparse_array((data, ids), shape=shape, dtype=dtype)


def _parts(t: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    from mxtorch.nd import sparse

    return sparse.indices(t).tolist(), sparse.data(t).clone()


SPARSE_GRADS = {  # step -> rank -> rows it pushes (row 3 of the 7x3 key straddles the two servers)
    0: {0: {3: 1.0, 0: 2.0}, 1: {3: 10.0, 6: -1.0}},
    1: {0: {}, 1: {5: 4.0, 1: 0.5}},
    2: {0: {2: -3.0, 3: 1.0, 4: 2.0}, 1: {4: 1.0}},
}


def sparse_semantics(folder: str) -> dict[str, Any]:
    """Row-sparse push/pull/pushpull/row_sparse_pull on dense and row_sparse keys (the bound is 10:
    the 7x3 keys are split over both servers), then the servers' optimizer on rows."""
    import mxtorch as mx
    from mxtorch.nd import sparse

    kv = _kv("dist_sync")
    r = kv.rank
    res: dict[str, Any] = {}
    shape = (7, 3)
    # no optimizer: the summed rows become the value
    kv.init("e", torch.full(shape, 9.0))
    kv.push("e", _rsp(SPARSE_GRADS[0][r], shape))
    dense = torch.full(shape, -1.0)
    kv.pull("e", out=dense)
    res["assigned"] = dense.clone()
    untouched = _rsp({1: 5.0}, shape)
    kv.pull("e", out=untouched)  # ignore_sparse=True: a row_sparse out is left alone
    res["ignored"] = _parts(untouched)
    stored = sparse.zeros("row_sparse", shape)
    kv.pull("e", out=stored, ignore_sparse=False)
    res["stored"] = _parts(stored)
    grads = [_rsp(SPARSE_GRADS[1][r], shape), _rsp({0: 1.0}, shape)]  # two local contexts
    kv.pushpull("e", grads)
    res["pushpull"] = [_parts(g) for g in grads]
    # row_sparse_pull: unsorted, repeated, empty ids; row_sparse outs (a dense out is refused, as
    # in MXNet); lists
    kv.init("t", torch.arange(21.0).reshape(shape))
    d = sparse.zeros("row_sparse", shape)
    o = sparse.zeros("row_sparse", shape)
    kv.row_sparse_pull("t", out=[d, o], row_ids=[torch.tensor([5, 3, 5, 0]), torch.tensor([6.0, 2.0])])
    res["rsp_lists"] = (d.to_dense(), _parts(o))
    kv.row_sparse_pull("t", out=o, row_ids=torch.tensor([], dtype=torch.int64))
    kv.row_sparse_pull("t", out=d, row_ids=[])
    res["rsp_empty"] = (o._nnz(), tuple(o.shape), d.to_dense())
    res["dense_out"] = _error(lambda: kv.row_sparse_pull("t", out=torch.zeros(shape), row_ids=[0]))
    two = [sparse.zeros("row_sparse", shape), sparse.zeros("row_sparse", shape)]
    kv.row_sparse_pull("t", out=two, row_ids=torch.tensor([3]))  # one ids tensor for every out
    kv.init("u", torch.ones(4, 2))
    d4 = sparse.zeros("row_sparse", (4, 2))
    kv.row_sparse_pull(["t", "u"], out=[two[0], d4], row_ids=[torch.tensor([4]), torch.tensor([1, 2])])
    res["rsp_keys"] = ([_parts(t) for t in two], d4.to_dense())
    # a key initialized row_sparse: split by rows, its value the dense form
    kv.init("r", _rsp({1: 1.0, 5: 2.0}, shape))
    res["r_placement"] = (kv.placement("r"), kv.placement("t"))
    d = torch.zeros(shape)
    kv.pull("r", out=d)
    res["r_init"] = d.clone()
    kv.push("r", _rsp({4: float(r + 1)}, shape))
    kv.row_sparse_pull("r", out=o, row_ids=torch.tensor([4, 5, 3]))
    res["r_rows"] = _parts(o)
    # fp16 rows: summed in fp32 on the servers
    kv.init("h", torch.zeros(shape, dtype=torch.float16))
    dh = torch.zeros(shape, dtype=torch.float16)
    kv.pushpull("h", _rsp({3: 1000.0 + r}, shape, torch.float16), out=dh)
    res["fp16"] = dh.clone()
    # a round mixing a dense push and a row-sparse one is dense
    kv.init("mix", torch.zeros(shape))
    mixed = torch.ones(shape) if r == 0 else _rsp({3: 2.0}, shape)
    kv.pushpull("mix", mixed, out=(dm := torch.zeros(shape)))
    res["mixed_round"] = dm
    # errors, raised before anything is sent
    res["mixed"] = _error(lambda: kv.push("e", [_rsp({1: 1.0}, shape), torch.zeros(shape)]))
    res["out_of_range"] = _error(lambda: kv.row_sparse_pull("t", out=o, row_ids=torch.tensor([7])))
    res["no_ids"] = _error(lambda: kv.row_sparse_pull("t", out=o))
    kv.init("s", torch.zeros(()))
    res["scalar"] = _error(lambda: kv.row_sparse_pull("s", out=sparse.zeros("row_sparse", (1,)),
                                                      row_ids=torch.tensor([0])))
    kv.barrier()
    # the servers' optimizer updates only the touched rows (lazy), as a local store does
    opt = mx.optimizer.SGD(learning_rate=0.5, momentum=0.9, wd=0.1)
    kv.set_optimizer(opt)
    local = mx.kv.create("local")
    local.set_optimizer(mx.optimizer.SGD(learning_rate=0.5, momentum=0.9, wd=0.1))
    start = torch.arange(21.0).reshape(shape) / 10
    kv.init(["w", "w_small"], [start, start[:3]])
    local.init(["w", "w_small"], [start, start[:3]])
    got = {k: [] for k in ("w", "w_small")}
    want = {k: [] for k in ("w", "w_small")}
    for step in sorted(SPARSE_GRADS):
        for k, s in (("w", shape), ("w_small", (3, 3))):
            mine = {i: v for i, v in SPARSE_GRADS[step][r].items() if i < s[0]}
            both = [{i: v for i, v in SPARSE_GRADS[step][q].items() if i < s[0]} for q in range(2)]
            kv.push(k, _rsp(mine, s))
            local.push(k, [_rsp(b, s) for b in both])
            out = torch.zeros(s)
            kv.pull(k, out=out)
            got[k].append(out)
            ref = torch.zeros(s)
            local.pull(k, out=ref)
            want[k].append(ref)
    res["optimizer"] = (got, want)
    states = os.path.join(folder, f"sparse{r}.states")
    kv.save_optimizer_states(states)
    local.save_optimizer_states(states + ".local")
    res["states"] = states
    return res


def sparse_async() -> dict[str, Any]:
    """dist_async: each row-sparse push is applied to its rows on arrival."""
    from mxtorch import optimizer
    from mxtorch.nd import sparse

    kv = _kv("dist_async")
    kv.set_optimizer(optimizer.SGD(learning_rate=1.0))
    kv.init("a", torch.zeros(30, 2))  # split over both servers (the bound is 10)
    for _ in range(3):
        kv.push("a", sparse.row_sparse_array((torch.ones(2, 2), [kv.rank, 29 - kv.rank]), shape=(30, 2)))
    kv.barrier()
    out = sparse.zeros("row_sparse", (30, 2))
    kv.row_sparse_pull("a", out=out, row_ids=torch.tensor([29, 0, 1, 2]))
    return {"rows": _parts(out)}


def _embedding_net(seed: int, row_sparse_weight: bool) -> Any:
    from mxtorch import gluon
    from mxtorch.gluon import nn

    class Net(gluon.HybridBlock):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(40, 4, sparse_grad=True)
            self.out = nn.Dense(1, in_units=4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(self.emb(x).mean(1))

    torch.manual_seed(seed)
    net = Net()
    if row_sparse_weight:
        net.emb.weight.stype = "row_sparse"
    net.initialize()
    return net


def _embedding_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randint(0, 40, (8, 3), generator=g)
    return x, torch.randn(8, 1, generator=g)


def embedding_training(mode: str, steps: int) -> list[torch.Tensor]:
    """nn.Embedding(sparse_grad=True) + Dense trained with SGD; ``mode``: 'local' (one process, the
    whole batch), 'server' / 'worker' (dist_sync, this worker's half, updating on the servers /
    the workers), 'server_rows' (servers, with the embedding declared stype='row_sparse': weights
    come back by rows through row_sparse_pull only)."""
    import mxtorch as mx
    from mxtorch import autograd, gluon

    dist = mode != "local"
    kv = mx.kv.create("dist_sync") if dist else None
    rank, parts = (kv.rank, kv.num_workers) if kv is not None else (0, 1)
    net = _embedding_net(7 + rank, mode == "server_rows")  # other inits: broadcast replaces them
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5, "momentum": 0.9, "wd": 0.01},
                            kvstore=kv if kv is not None else "device",
                            update_on_kvstore=None if mode == "local" else mode != "worker")
    loss_fn = gluon.loss.L2Loss()
    for step in range(steps):
        x, y = _embedding_batch(step)
        x, y = x[rank::parts], y[rank::parts]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0] * parts)  # the global batch
    params = list(net.collect_params().values())
    if kv is not None and mode == "server_rows":  # the local copy holds only the rows read
        kv.pull(0, out=params[0]._data[0])  # (a row_sparse weight has no data(): read its copy)
    return [p._data[0].detach().clone() for p in params]


# ---- gradient compression -----------------------------------------------------------------------
COMPRESSORS = [{"type": "2bit", "threshold": 0.5}, {"type": "1bit", "threshold": 0.0}, {"type": "fp16"},
               {"type": "bf16"}, {"type": "topk", "ratio": 0.1}, {"type": "powersgd", "rank": 2}]


def _grad(rank: int, step: int, shape: tuple[int, ...]) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(shape, generator=g)


def compression_aggregates() -> dict[str, Any]:
    """For every compressor: two pushes of a 16x12 matrix and of a 6000-element key split over both
    servers (the bound is 5000); what the servers aggregate, and each worker's own decompressed
    payloads (rebuilt by a second compressor of the same parameters), plus the wire bytes of a
    64x64 push."""
    from mxtorch import compression
    from mxtorch.compression.base import payload_tensors

    kv = _kv("dist_sync")
    r = kv.rank
    res: dict[str, Any] = {"capable": kv.is_capable("gradient_compression")}
    kv.init("dense", torch.zeros(64, 64))
    before = kv.wire_bytes_sent
    kv.push("dense", torch.ones(64, 64))
    res["bytes"] = {"none": kv.wire_bytes_sent - before}
    for i, params in enumerate(COMPRESSORS):
        name = params["type"]
        kv.set_gradient_compression(params)
        mirror = compression.create(params)
        keys = (f"m{i}", f"b{i}")
        shapes = ((16, 12), (6000,))
        kv.init(list(keys), [torch.zeros(s) for s in shapes])
        mine = {k: [] for k in keys}
        pulled = {k: [] for k in keys}
        for step in range(2):
            for k, s in zip(keys, shapes):
                g = _grad(r, step, s)
                out = torch.zeros(s)
                kv.pushpull(k, g, out=out)
                pulled[k].append(out)
                if k.startswith("m"):
                    payload, ctx = mirror.compress(g, k)
                    mine[k].append(mirror.decompress(payload, ctx))
                else:  # compressed per slice, with the store's per-slice residual keys
                    parts = []
                    for j, (_, off, size) in enumerate(kv.placement(k)):
                        payload, ctx = mirror.compress(g[off:off + size], f"{k!r}#{j}/2")
                        parts.append(mirror.decompress(payload, ctx))
                    mine[k].append(torch.cat(parts))
        residual = kv.compressor.residual(keys[0])
        res[name] = {"pulled": pulled, "mine": mine, "mirror_residual": mirror.residual(keys[0]),
                     "residual": None if residual is None else residual.clone()}
        kv.init(f"d{i}", torch.zeros(64, 64))
        before = kv.wire_bytes_sent
        kv.push(f"d{i}", torch.ones(64, 64))
        res["bytes"][name] = kv.wire_bytes_sent - before
        payload, _ = compression.create(params).compress(torch.ones(64, 64), "x")
        res.setdefault("payload_bytes", {})[name] = sum(t.numel() * t.element_size()
                                                        for t in payload_tensors(payload))
    # narrower pulls, opted in; integer keys are never compressed
    kv.set_gradient_compression({"type": "fp16", "pull": "bf16"})
    kv.init(["p", "int"], [torch.zeros(5), torch.zeros(3, dtype=torch.int64)])
    v = torch.full((5,), 1.0 + 1 / 1024)
    kv.pushpull("p", v)
    iv = torch.full((3,), 3, dtype=torch.int64)
    kv.pushpull("int", iv)
    res["narrow_pull"] = (v, iv)
    res["bad_params"] = _error(lambda: kv.set_gradient_compression({"type": "3bit"}))
    res["bad_pull"] = _error(lambda: kv.set_gradient_compression({"type": "fp16", "pull": "int8"}))
    return res


TWO_BIT = {"type": "2bit", "threshold": 0.05}


def compressed_trainer(update_on_kvstore: bool | None, steps: int, kvstore: str = "dist_sync",
                       folder: str | None = None,
                       compression: dict[str, Any] | None = None) -> dict[str, Any]:
    """The regression net trained with compression (default 2bit) on this worker's half of every batch."""
    import mxtorch as mx
    from mxtorch import autograd, gluon

    kv = mx.kv.create(kvstore)
    torch.manual_seed(5 + kv.rank)
    net = _net(5 + kv.rank)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9}, kvstore=kv,
                            compression_params=dict(compression or TWO_BIT),
                            update_on_kvstore=update_on_kvstore)
    loss_fn = gluon.loss.L2Loss()
    x_all, y_all = _regression_data(64, seed=3)

    def full_loss() -> float:
        return float(loss_fn(net(x_all), y_all).mean())

    first = full_loss()
    for step in range(steps):
        x, y = _regression_data(16, seed=step)
        x, y = x[kv.rank::kv.num_workers], y[kv.rank::kv.num_workers]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0] * kv.num_workers)  # the global batch (MXNet), dist_async too
    if kvstore == "dist_async":
        kv.barrier()
        kv.pull(list(range(4)), out=[p.data() for p in net.collect_params().values()])
    residuals = kv.compressor.state_dict()["residuals"]
    out: dict[str, Any] = {"params": [p.data().detach().clone() for p in net.collect_params().values()],
                           "loss": (first, full_loss()), "update_on_kvstore": trainer._update_on_kvstore,
                           "residuals": {k: v.clone() for k, v in residuals.items()}}
    if folder is not None:
        path = os.path.join(folder, f"trainer.states.{kv.rank}")
        trainer.save_states(path)
        kv.compressor.reset()
        trainer.load_states(path)
        out["restored"] = {k: v.clone() for k, v in kv.compressor.state_dict()["residuals"].items()}
        out["states_file"] = path
    return out


def compressed_reference(update_on_kvstore: bool | None, steps: int, workers: int = 2,
                         compression_params: dict[str, Any] | None = None) -> list[torch.Tensor]:
    """One process simulating ``workers`` workers that compress (default 2bit; own residuals each), a
    server summing their decompressed gradients, and SGD applied to the sum: what compressed_trainer
    must give."""
    import mxtorch as mx
    from mxtorch import autograd, compression, gluon

    net = _net(5)  # rank 0's initial weights (broadcast)
    params = list(net.collect_params().values())
    comps = [compression.create(dict(compression_params or TWO_BIT)) for _ in range(workers)]
    updater = mx.optimizer.get_updater(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9))
    loss_fn = gluon.loss.L2Loss()
    for step in range(steps):
        x_all, y_all = _regression_data(16, seed=step)
        grads: list[list[torch.Tensor]] = []
        for w in range(workers):
            x, y = x_all[w::workers], y_all[w::workers]
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            grads.append([p.data().grad.clone() for p in params])
            for p in params:
                p.data().grad = None
        updater.optimizer.rescale_grad = 1.0 / 16
        for i, p in enumerate(params):
            total = torch.zeros_like(p.data())
            for w in range(workers):
                payload, ctx = comps[w].compress(grads[w][i], i)
                total += comps[w].decompress(payload, ctx)
            with torch.no_grad():
                updater(i, total, p.data())
    return [p.data().detach().clone() for p in params]


# ---- dist_async staleness -----------------------------------------------------------------------
SLOW = 1000.0  # the slow worker's pushes move the value by this much, the fast one's by 1


def staleness_race(steps: int, folder: str, wait_for_fast: bool) -> dict[str, Any]:
    """Rank 0 pushes and pulls as fast as it can; rank 1 (slowed down) pushes once, then, with
    ``wait_for_fast``, sleeps until rank 0 is done (which started after that first push), else
    for a moment, then pushes slowly.  Rank 0
    reads from each pulled value how many of rank 1's pushes are in: its lead (gap) per pull."""
    from mxtorch import optimizer

    kv = _kv("dist_async")
    kv.set_optimizer(optimizer.SGD(learning_rate=1.0))
    kv.init(0, torch.zeros(1))
    kv.barrier()
    done = os.path.join(folder, "fast-done")
    first = os.path.join(folder, "slow-pushed-once")
    got = torch.zeros(1)
    if kv.rank == 0:
        if wait_for_fast:  # the race starts once rank 1's first push is in (else 12 ahead, not 11)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not os.path.exists(first):
                time.sleep(0.01)
        gaps = []
        for i in range(steps):
            kv.pushpull(0, torch.full((1,), -1.0), out=got)
            slow = int(got.item() // SLOW)
            gaps.append(i + 1 - slow)
        with open(done, "w") as f:
            f.write("done")
        return {"gaps": gaps, "staleness": kv.staleness}
    kv.pushpull(0, torch.full((1,), -SLOW), out=got)
    with open(first, "w") as f:
        f.write("pushed")
    deadline = time.monotonic() + (60 if wait_for_fast else 1.0)
    while time.monotonic() < deadline and not os.path.exists(done):
        time.sleep(0.05)
    for _ in range(steps - 1):
        time.sleep(0.02)  # the deliberately slow worker
        kv.pushpull(0, torch.full((1,), -SLOW), out=got)
    return {"staleness": kv.staleness}


def staleness_leaver(steps: int, how: str) -> dict[str, Any]:
    """Staleness 1: rank 1 pushes twice, then finishes (closes its store) or dies (SIGKILL); rank 0
    pushes ``steps`` times and must not wait for it forever."""
    import signal

    import mxtorch as mx
    from mxtorch import optimizer

    kv = mx.kv.create("dist_async", staleness=1)
    kv.set_optimizer(optimizer.SGD(learning_rate=1.0))
    kv.init(0, torch.zeros(1))
    kv.barrier()
    got = torch.zeros(1)
    if kv.rank == 1:
        for _ in range(2):
            kv.pushpull(0, torch.full((1,), -SLOW), out=got)
        if how == "dies":
            os.kill(os.getpid(), signal.SIGKILL)
        kv.close()
        return {"value": got.item()}
    for _ in range(steps):
        kv.pushpull(0, torch.full((1,), -1.0), out=got)
    return {"value": got.item()}


def plain_sgd_steps(kvstore: str, steps: int) -> list[torch.Tensor]:
    """The regression net with plain SGD (no momentum, no weight decay), this worker's half of
    each batch, updating on the servers."""
    import mxtorch as mx
    from mxtorch import autograd, gluon

    kv = mx.kv.create(kvstore)
    net = _net(kv.rank)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.2}, kvstore=kv)
    loss_fn = gluon.loss.L2Loss()
    for step in range(steps):
        x, y = _regression_data(16, seed=step)
        x, y = x[kv.rank::kv.num_workers], y[kv.rank::kv.num_workers]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0] * kv.num_workers)  # the global batch (MXNet), dist_async too
    return [p.data().detach().clone() for p in net.collect_params().values()]


def round_across_restart(folder: str) -> dict[str, Any]:
    """A dist_sync round whose server is killed and restarted from its snapshot while worker 0
    waits in it: worker 0's pushpull is lost with the old process; worker 1 pushes only after
    the restart.  Both must get the round's result on the restored state."""
    from mxtorch import optimizer

    kv = _kv("dist_sync")
    r = kv.rank
    kv.set_optimizer(optimizer.SGD(learning_rate=0.1))
    kv.init("w", torch.zeros(4))
    first = torch.zeros(4)
    kv.pushpull("w", torch.full((4,), 1.0 + r), out=first)  # w = -0.1 * (1 + 2)
    kv.barrier()
    if r == 0:
        paths = kv._snapshot()
        with open(os.path.join(folder, "snapshot-done"), "w") as f:
            f.write("\n".join(paths))
    kv.barrier()
    if r == 1:
        _wait_for_restart(folder)
    else:
        with open(os.path.join(folder, "pending"), "w") as f:
            f.write("round 2")
    start = time.monotonic()
    second = torch.zeros(4)
    kv.pushpull("w", torch.full((4,), 10.0 * (1 + r)), out=second)  # w = -0.3 - 0.1 * (10 + 20)
    return {"first": first, "second": second, "waited": time.monotonic() - start}


def reply_read_after_restart(folder: str, snapshot_round_1: bool) -> dict[str, Any]:
    """dist_sync, SGD (lr 0.1) on the servers.  Round 2 completes, but worker 1 reads
    its reply only after its server was killed and restarted (a worker busy or starved of CPU):
    the restart notice is read first, so worker 1 sends its round-2 push again to the restored
    server, which holds round 2 already (a snapshot after every round) or, with
    ``snapshot_round_1`` (the servers snapshot when asked, worker 0 asks after round 1), not: then
    worker 0's next push is of round 3, and round 2 must complete without it."""
    from mxtorch import optimizer

    kv = _kv("dist_sync")
    r = kv.rank
    kv.set_optimizer(optimizer.SGD(learning_rate=0.1))
    kv.init("w", torch.zeros(4))
    values = []
    first = torch.zeros(4)
    kv.pushpull("w", torch.full((4,), 1.0), out=first)  # round 1: -0.1 * (1 + 1)
    values.append(first)
    if snapshot_round_1 and r == 0:
        kv._snapshot()
    second = torch.zeros(4)
    if r == 1:
        client = kv._client
        kv._send_pull(client, kv._plans["w"], [second], push=torch.full((4,), 2.0))  # no wait
        _wait_for_restart(folder)
        deadline = time.monotonic() + 60
        while not client.sched.poll(100):  # the scheduler's restart notice (NODE_BACK) is in too
            if time.monotonic() > deadline:
                raise TimeoutError("no restart notice from the scheduler")
        client.wait()
    else:
        kv.pushpull("w", torch.full((4,), 2.0), out=second)  # round 2: -0.2 - 0.1 * (2 + 2)
        with open(os.path.join(folder, "round-2"), "w") as f:
            f.write("done")
    values.append(second)
    third = torch.zeros(4)
    kv.pushpull("w", torch.full((4,), 3.0), out=third)  # round 3: 0.1 * (3 + 3) less
    values.append(third)
    return {"values": values}
