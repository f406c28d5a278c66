"""Worker functions for tests/test_horovod.py, run in real processes by ``run_workers``.

Every rank builds every rank's inputs from seeds, so each can compute the expected result of a
collective locally from its definition and check the distributed result itself.  Workers return
short lists of the checks they ran (plain strings: nothing rich needs to travel back).
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64]


def _init() -> Any:
    torch.set_num_threads(1)
    import mxtorch.horovod as hvd

    hvd.init()
    return hvd


def _input(rank: int, shape: tuple[int, ...], dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(dtype)
    return torch.randint(-5, 6, shape, generator=g, dtype=torch.int64).to(dtype)


def _exact(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    assert torch.equal(got, want), f"{what}: got {got}, expected {want}"


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    tol = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1e-2, 1e-2)}.get(got.dtype, (1e-6, 1e-6))
    torch.testing.assert_close(got, want, rtol=tol[0], atol=tol[1], msg=what)


def _reference(inputs: list[torch.Tensor], op: str, pre: float = 1.0, post: float = 1.0) -> torch.Tensor:
    """The reduction by its definition, computed in float64 and rounded once to the input dtype."""
    dtype = inputs[0].dtype
    wide = [t.to(torch.float64) * pre for t in inputs]
    if not dtype.is_floating_point:
        wide = [w.trunc() for w in wide]
    stacked = torch.stack(wide)
    if op == "Sum":
        r = stacked.sum(0)
    elif op == "Average":
        r = stacked.sum(0)
        r = r / len(inputs) if dtype.is_floating_point else torch.trunc(r / len(inputs))
    elif op == "Min":
        r = stacked.min(0).values
    elif op == "Max":
        r = stacked.max(0).values
    else:
        r = stacked.prod(0)
    return (r * post).to(dtype)


# ---- collectives ---------------------------------------------------------------------------------
def collectives() -> list[str]:
    """allreduce (ops, dtypes, scaling, grouped, in place), broadcast, allgather, alltoall, reducescatter."""
    hvd = _init()
    n, me = hvd.size(), hvd.rank()
    done = []

    # allreduce: every op and dtype against its definition
    for dtype in DTYPES:
        for op_name in ("Average", "Sum", "Min", "Max", "Product"):
            inputs = [_input(r, (3, 4), dtype) for r in range(n)]
            if op_name == "Product" and dtype.is_floating_point:
                inputs = [t.to(torch.float64).clamp(-2, 2).to(dtype) for t in inputs]
            mine = inputs[me].clone()
            got = hvd.allreduce(mine, op=getattr(hvd, op_name), name=f"ar.{dtype}.{op_name}")
            want = _reference(inputs, op_name)
            # exact where the result is rounded once: integers, Min/Max, sums of two ranks, and
            # fp16 sums (accumulated in fp32 beyond two ranks)
            exact = (not dtype.is_floating_point or op_name in ("Min", "Max")
                     or (op_name == "Sum" and (n <= 2 or dtype == torch.float16)))
            (_exact if exact else _close)(got, want, f"allreduce {op_name} {dtype}")
            _exact(mine, inputs[me], "allreduce leaves its input alone")
    done.append("allreduce ops x dtypes")

    # fp16 sums are rounded once (exactly the float64 sum rounded to fp16)
    # (2048 + 1 + 1 summed in fp16 step by step gives 2048: 2049 rounds to even; the sum is 2050)
    big = [torch.tensor([2048.0 if r == 0 else 1.0, 1000.0 + r, 0.25 * r], dtype=torch.float16)
           for r in range(n)]
    _exact(hvd.allreduce(big[me], op=hvd.Sum), _reference(big, "Sum"), "fp16 sum rounded once")
    done.append("fp16 sum")

    # average= flag, prescale/postscale, default op
    x = [_input(r, (6,), torch.float64, salt=1) for r in range(n)]
    _close(hvd.allreduce(x[me]), _reference(x, "Average"), "default op is Average")
    _close(hvd.allreduce(x[me], average=False), _reference(x, "Sum"), "average=False sums")
    _close(hvd.allreduce(x[me], op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0),
           _reference(x, "Sum", 0.5, 3.0), "pre/postscale")
    _close(hvd.allreduce(x[me], op=hvd.Average, prescale_factor=2.0, postscale_factor=0.25),
           _reference(x, "Average", 2.0, 0.25), "average with scaling")
    done.append("scaling")

    # in place
    t = x[me].clone()
    out = hvd.allreduce_(t, op=hvd.Sum)
    assert out is t
    _close(t, _reference(x, "Sum"), "allreduce_")
    strided = torch.zeros(6, 2, dtype=torch.float64)[:, 0]
    strided.copy_(x[me])
    hvd.allreduce_(strided, op=hvd.Max)
    _close(strided, _reference(x, "Max"), "allreduce_ of a non-contiguous view")
    done.append("allreduce_")

    # grouped: mixed shapes and dtypes, one collective per dtype
    shapes = [((2, 3), torch.float32), ((4,), torch.float64), ((1, 2, 2), torch.float32), ((3,), torch.int64)]
    group = [[_input(r, s, d, salt=i + 10) for i, (s, d) in enumerate(shapes)] for r in range(n)]
    got_g = hvd.grouped_allreduce([g.clone() for g in group[me]], op=hvd.Sum, name="grouped")
    for i in range(len(shapes)):
        _close(got_g[i], _reference([group[r][i] for r in range(n)], "Sum"), f"grouped_allreduce[{i}]")
    mine_g = [g.clone() for g in group[me]]
    back = hvd.grouped_allreduce_(mine_g, postscale_factor=2.0)
    assert all(a is b for a, b in zip(back, mine_g))
    for i in range(len(shapes)):
        _close(mine_g[i], _reference([group[r][i] for r in range(n)], "Average", post=2.0),
               f"grouped_allreduce_[{i}]")
    assert hvd.grouped_allreduce([]) == []
    done.append("grouped")

    # broadcast from the last rank (rank 1 with two ranks), out of place and in place
    root = n - 1
    b = [_input(r, (2, 5), torch.float32, salt=3) for r in range(n)]
    _exact(hvd.broadcast(b[me], root_rank=root), b[root], "broadcast")
    _exact(b[me], _input(me, (2, 5), torch.float32, salt=3), "broadcast leaves its input alone")
    ib = _input(me, (4,), torch.int64, salt=4)
    assert hvd.broadcast_(ib, root) is ib
    _exact(ib, _input(root, (4,), torch.int64, salt=4), "broadcast_")
    done.append("broadcast")

    # allgather with a different first dimension on every rank
    parts = [_input(r, (r + 1, 3), torch.float16, salt=5) for r in range(n)]
    _exact(hvd.allgather(parts[me]), torch.cat(parts), "allgather uneven")
    same = [_input(r, (2, 2), torch.int32, salt=6) for r in range(n)]
    _exact(hvd.allgather(same[me]), torch.cat(same), "allgather even")
    empty_first = [torch.arange(3 * r, dtype=torch.float32).reshape(r, 3) for r in range(n)]
    _exact(hvd.allgather(empty_first[me]), torch.cat(empty_first), "allgather with an empty part")
    done.append("allgather")

    # alltoall: rank r sends (r + j) % 3 rows to rank j; rows hold (sender, position)
    def a2a_input(r: int) -> tuple[torch.Tensor, list[int]]:
        splits = [(r + j) % 3 for j in range(n)]
        rows = torch.tensor([[r, k] for k in range(sum(splits) + 1)], dtype=torch.int64)  # one extra row
        return rows, splits
    rows, splits = a2a_input(me)
    received, rsplits = hvd.alltoall(rows, splits=splits)
    want_parts, want_splits = [], []
    for r in range(n):
        r_rows, r_splits = a2a_input(r)
        start = sum(r_splits[:me])
        want_parts.append(r_rows[start : start + r_splits[me]])
        want_splits.append(r_splits[me])
    _exact(received, torch.cat(want_parts), "alltoall with splits")
    _exact(rsplits, torch.tensor(want_splits, dtype=torch.int32), "alltoall received splits")
    even = torch.arange(2 * n, dtype=torch.float32) + 100 * me
    got_even = hvd.alltoall(even)
    assert isinstance(got_even, torch.Tensor), "alltoall without splits returns only the tensor"
    _exact(got_even, torch.cat([torch.arange(2 * me, 2 * me + 2, dtype=torch.float32) + 100 * r
                                for r in range(n)]), "alltoall even")
    done.append("alltoall")

    # reducescatter: rank r gets d0 // n rows, plus one for the first d0 % n ranks
    d0 = 2 * n + 1
    rs = [_input(r, (d0, 2), torch.float32, salt=7) for r in range(n)]
    counts = [d0 // n + (1 if r < d0 % n else 0) for r in range(n)]
    start = sum(counts[:me])
    _close(hvd.reducescatter(rs[me], op=hvd.Sum), _reference(rs, "Sum")[start : start + counts[me]],
           "reducescatter Sum")
    _close(hvd.reducescatter(rs[me]), _reference(rs, "Average")[start : start + counts[me]],
           "reducescatter Average")
    done.append("reducescatter")
    done += _mxnet_arrays_in_mxnet_arrays_out(hvd, n, me)
    hvd.shutdown()
    return done


def _mxnet_arrays_in_mxnet_arrays_out(hvd: Any, n: int, me: int) -> list[str]:
    """horovod.mxnet returns mx.nd.NDArrays: ``x.size`` of a result is MXNet's element count on every
    rank (a broadcast's receivers too), while torch tensors in keep giving torch tensors."""
    import mxtorch as mx
    from mxtorch.nd import NDArray

    def mxnet(t: Any, what: str) -> None:
        assert type(t) is NDArray, f"{what}: {type(t).__name__}, expected mx.nd.NDArray"

    x = mx.nd.ones((2 * n, 3)) * (me + 1)
    total = hvd.allreduce(x, op=hvd.Sum)
    mxnet(total, "allreduce")
    assert total.size == 6 * n and float(total.sum().asscalar()) == 6 * n * n * (n + 1) / 2
    mxnet(hvd.broadcast(x, root_rank=n - 1), "broadcast")
    for got in hvd.grouped_allreduce([x, x * 2]):
        mxnet(got, "grouped_allreduce")
    gathered = hvd.allgather(x)
    mxnet(gathered, "allgather")
    assert gathered.size == 6 * n * n
    received, rsplits = hvd.alltoall(x, splits=[2] * n)
    mxnet(received, "alltoall")
    mxnet(rsplits, "alltoall received splits")
    assert received.size == 6 * n and rsplits.size == n  # Horovod's test_horovod_alltoall reads .size
    mxnet(hvd.alltoall(x), "alltoall without splits")
    mxnet(hvd.reducescatter(x), "reducescatter")
    for got in hvd.grouped_allgather([x]) + hvd.grouped_reducescatter([x]):
        mxnet(got, "grouped gathers/scatters")
    assert type(hvd.allreduce(torch.ones(2))) is torch.Tensor  # torch code keeps torch's tensors
    assert type(hvd.alltoall(torch.ones(2 * n))) is torch.Tensor
    return ["mxnet arrays"]


# ---- objects -------------------------------------------------------------------------------------
class _Exploit:
    """Unpickling this would create a file: the receiving rank must refuse it instead."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def objects(marker: str) -> list[str]:
    """broadcast_object/allgather_object round trips; pickled or unencodable payloads are refused."""
    hvd = _init()
    from mxtorch.horovod import _control, _process_sets

    n, me = hvd.size(), hvd.rank()
    done = []

    payload = {"lr": 0.1, "nested": {"ids": [1, 2, (3, "x")], 7: None, "blob": b"\x00\xff"},
               "t": torch.arange(6, dtype=torch.float16).reshape(2, 3), "a": np.arange(4, dtype=np.int32),
               "flags": [True, False], "nan": float("inf")}
    got = hvd.broadcast_object(payload if me == 1 else None, root_rank=1)
    assert got["lr"] == 0.1 and got["nested"]["ids"] == [1, 2, (3, "x")] and got["nested"][7] is None
    assert got["nested"]["blob"] == b"\x00\xff" and got["flags"] == [True, False]
    assert got["nan"] == float("inf")
    _exact(got["t"], torch.arange(6, dtype=torch.float16).reshape(2, 3), "tensor in broadcast_object")
    assert got["a"].dtype == np.int32 and got["a"].tolist() == [0, 1, 2, 3]
    done.append("broadcast_object")

    gathered = hvd.allgather_object({"rank": me, "data": torch.full((me + 1,), float(me))})
    assert [g["rank"] for g in gathered] == list(range(n))
    for r, g in enumerate(gathered):
        _exact(g["data"], torch.full((r + 1,), float(r)), f"allgather_object[{r}]")
    done.append("allgather_object")

    # an object that would run code when unpickled cannot even be sent; every rank hears of it
    try:
        hvd.broadcast_object(_Exploit(marker) if me == 0 else None, root_rank=0)
    except hvd.ObjectEncodingError as err:
        assert me == 0 and "_Exploit" in str(err), str(err)
    except hvd.HorovodError as err:
        assert me != 0 and "rank(s) [0]" in str(err), str(err)
    else:
        raise AssertionError("an object with __reduce__ was broadcast")
    # raw pickle bytes pushed under the object collective are refused, never unpickled
    raw = pickle.dumps(_Exploit(marker))
    try:
        where = _process_sets.scope(None)
        _control.agree("broadcast_object", "evil", "root=0", scope=where)
        blob = _control.broadcast_bytes(raw if me == 0 else None, 0, where)
        if me != 0:
            from mxtorch.horovod._codec import decode
            decode(blob, "rank 0")
            raise AssertionError("a pickle payload was decoded")
    except hvd.ObjectDecodingError as err:
        assert "never unpickles" in str(err) and "pickle" in str(err), str(err)
    assert not os.path.exists(marker), "the pickle payload was executed"
    done.append("pickle refused")
    hvd.shutdown()
    return done


# ---- errors and topology -------------------------------------------------------------------------
def errors_and_topology() -> list[str]:
    """Mismatched calls and one-rank argument errors fail on every rank; rank queries; capabilities."""
    hvd = _init()
    n, me = hvd.size(), hvd.rank()
    assert (hvd.local_size(), hvd.local_rank()) == (n, me)
    assert (hvd.cross_size(), hvd.cross_rank()) == (1, 0)
    assert hvd.is_initialized() and hvd.gloo_enabled() and hvd.gloo_built()
    assert not hvd.mpi_enabled() and not hvd.mpi_threads_supported()
    assert isinstance(hvd.nccl_built(), bool)
    done = ["topology"]

    try:
        hvd.allreduce(torch.ones(2 + me), name="mismatch")
    except hvd.CollectiveMismatchError as err:
        assert "rank 0" in str(err) and "rank 1" in str(err), str(err)
    else:
        raise AssertionError("different shapes were reduced")
    try:
        hvd.allreduce(torch.ones(2), name=f"name{me}")
    except hvd.CollectiveMismatchError as err:
        assert "name0" in str(err) and "name1" in str(err), str(err)
    else:
        raise AssertionError("different names were reduced")
    done.append("mismatch")

    # a bad argument on one rank only: that rank raises it, the others learn which rank failed
    try:
        hvd.alltoall(torch.zeros(4, 2), splits=[1, 1] if me else [5, 0])
    except ValueError as err:
        assert me == 0 and "splits sum to 5" in str(err), str(err)
    except hvd.HorovodError as err:
        assert me != 0 and "rank(s) [0]" in str(err), str(err)
    else:
        raise AssertionError("bad splits were accepted")
    try:
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    except NotImplementedError as err:
        assert "Adasum" in str(err)
    done.append("argument errors")

    # the process group still works after all that
    _exact(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), float(n)), "still usable")
    hvd.shutdown()
    assert not hvd.is_initialized()
    return done


# ---- training ------------------------------------------------------------------------------------
def _mlp(seed: int) -> Any:
    from mxtorch.gluon import nn

    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="tanh", in_units=5), nn.Dense(3, in_units=8))
    return net


def _batch(rank: int, size: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(77 + rank)
    return torch.randn(size, 5, generator=g), torch.randint(0, 3, (size,), generator=g).float()


def _weights(net: Any) -> list[torch.Tensor]:
    return [p.data().detach().clone() for p in net.collect_params().values()]


def _train_distributed(hvd: Any, steps: int, optimizer: str, opt_params: dict[str, Any],
                       use_optimizer: bool = False, contexts: int = 1,
                       **trainer_kwargs: Any) -> list[torch.Tensor]:
    import mxtorch as mx
    from mxtorch import autograd, gluon
    from mxtorch.gluon.utils import split_and_load

    ctx = [mx.cpu(i) for i in range(contexts)]
    net = _mlp(100 + hvd.rank())  # different initial weights on every rank ...
    net.initialize(mx.init.Xavier(), ctx=ctx)
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)  # ... until rank 0's are broadcast
    if use_optimizer:
        dopt = hvd.DistributedOptimizer(mx.optimizer.create(optimizer, **opt_params))
        trainer = gluon.Trainer(net.collect_params(), dopt, kvstore=None)
    else:
        trainer = hvd.DistributedTrainer(net.collect_params(), optimizer, dict(opt_params), **trainer_kwargs)
        # Horovod's defaults run on the 'horovod' KVStore; compression etc. on the Trainer's own path
        store = trainer._kvstore
        assert (store is not None and store.type == "horovod") == (not trainer_kwargs), store
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = _batch(hvd.rank())
    for _ in range(steps):
        xs, ys = split_and_load(x, ctx), split_and_load(y, ctx)
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
        for loss in losses:
            loss.backward()
        trainer.step(x.shape[0])  # the local batch size
    for p in net.collect_params().values():  # every context holds the same weights
        for copy in p.list_data()[1:]:
            _exact(copy.detach(), p.data(ctx[0]).detach(), "contexts agree")
    return [p.data(ctx[0]).detach().clone() for p in net.collect_params().values()]


def training() -> list[str]:
    """DistributedTrainer / DistributedOptimizer for 3 steps equal one process on the whole batch."""
    hvd = _init()
    import mxtorch as mx

    n, me = hvd.size(), hvd.rank()
    done = []

    # broadcast_parameters: rank 0's initial weights everywhere (rank 0's seed is 100)
    net = _mlp(100 + me)
    net.initialize(mx.init.Xavier())
    before = _weights(net)
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    ref_net = _mlp(100)
    ref_net.initialize(mx.init.Xavier())
    for w_got, w_want in zip(_weights(net), _weights(ref_net)):
        _exact(w_got, w_want, "broadcast_parameters")
    assert me == 0 or any(not torch.equal(a, b) for a, b in zip(before, _weights(net)))
    plain = {"b": torch.full((2,), float(me)), "a": torch.arange(3) * (me + 1)}
    hvd.broadcast_parameters(plain, root_rank=1, prefix="plain.")
    _exact(plain["b"], torch.full((2,), float(n - 1)), "broadcast_parameters of tensors")
    _exact(plain["a"], torch.arange(3) * 2, "broadcast_parameters of tensors")
    done.append("broadcast_parameters")

    # deferred initialization: the broadcast happens right after the first forward pass
    from mxtorch.gluon import nn
    torch.manual_seed(200 + me)
    lazy = nn.Dense(4)
    lazy.initialize(mx.init.Xavier())
    hvd.broadcast_parameters(lazy.collect_params(), root_rank=1, prefix="lazy.")
    lazy(torch.ones(2, 3))
    w = lazy.weight.data().detach()
    _exact(hvd.broadcast(w, root_rank=1), w, "deferred parameters broadcast after init")
    done.append("deferred broadcast_parameters")

    # every rank starts from its own random weights; broadcast_parameters makes them rank 0's,
    # which are the reference's (seed 100)
    cases: list[tuple[str, dict[str, float], dict[str, Any], float]] = [
        ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3}, {}, 1e-5),
        ("adam", {"learning_rate": 0.01}, {"num_groups": 2, "gradient_predivide_factor": 2.0}, 1e-5),
        ("sgd", {"learning_rate": 0.1}, {"compression": hvd.Compression.fp16}, 2e-3),
        ("sgd", {"learning_rate": 0.1, "momentum": 0.9}, {"use_optimizer": True}, 1e-5),
        ("sgd", {"learning_rate": 0.1, "momentum": 0.9}, {"contexts": 2}, 1e-5),
    ]
    for optimizer, params, kwargs, tol in cases:
        want = _train_reference_from_seed(n, 3, optimizer, params)
        got_w = _train_distributed(hvd, 3, optimizer, params, **kwargs)
        for i, (a, b) in enumerate(zip(got_w, want)):
            torch.testing.assert_close(a, b, rtol=tol, atol=tol, msg=f"{optimizer} {kwargs} param {i}")
        done.append(f"{optimizer} {sorted(kwargs)}")
    hvd.shutdown()
    return done


def _train_reference_from_seed(n: int, steps: int, optimizer: str,
                               params: dict[str, Any]) -> list[torch.Tensor]:
    """The reference starts from rank 0's initial weights (seed 100), as the broadcast makes them."""
    import mxtorch as mx
    from mxtorch import autograd, gluon

    net = _mlp(100)
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), optimizer, dict(params), kvstore=None)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    xs, ys = zip(*[_batch(r) for r in range(n)])
    x, y = torch.cat(xs), torch.cat(ys)
    for _ in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])
    return _weights(net)
