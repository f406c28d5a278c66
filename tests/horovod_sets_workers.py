"""Worker functions for tests/test_horovod_sets.py (process sets, join, grouped gathers, Adasum).

Each rank knows every rank's inputs (they are functions of the rank), so it checks each
collective against a value computed by hand from the definition.  Workers return the names of
the checks they ran.
"""

from __future__ import annotations

import torch


def _init(process_sets=None):
    torch.set_num_threads(1)
    import mxtorch.horovod as hvd

    hvd.init(process_sets=process_sets)
    return hvd


def _eq(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), \
        f"{what}: got {got!r}, expected {want!r}"


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=what)


def process_sets() -> list[str]:
    """3 ranks: a static set {0, 2} from init, a dynamic set {1, 2}; every collective on them."""
    import mxtorch.horovod as hvd

    evens = hvd.ProcessSet([2, 0])
    assert evens.process_set_id is None and evens.size() is None
    hvd = _init(process_sets=[evens])
    me = hvd.rank()
    done = []
    assert evens.ranks == [0, 2] and evens.size() == 2 and evens.included() == (me in (0, 2))
    assert evens.rank() == {0: 0, 2: 1}.get(me, -1)
    assert hvd.global_process_set.ranks == [0, 1, 2] and hvd.global_process_set.size() == 3
    tail = hvd.add_process_set([1, 2])
    assert tail.process_set_id not in (None, 0, evens.process_set_id) and tail.size() == 2
    try:
        hvd.add_process_set(hvd.ProcessSet([0, 2]))
        raise AssertionError("a duplicate process set was added")
    except ValueError as err:
        assert "duplicate" in str(err), str(err)
    done.append("sets")

    x = torch.tensor([1.0, 2.0, 4.0]) * (me + 1)
    if evens.included():
        # ranks 0 and 2 hold x*1 and x*3
        _eq(hvd.allreduce(x, process_set=evens), torch.tensor([2.0, 4.0, 8.0]), "set average")
        _eq(hvd.allreduce(x, op=hvd.Sum, process_set=evens, prescale_factor=0.5, postscale_factor=3.0),
            torch.tensor([6.0, 12.0, 24.0]), "set sum with scaling")
        _eq(hvd.allreduce(x, op=hvd.Max, process_set=evens), torch.tensor([3.0, 6.0, 12.0]), "set max")
        _eq(hvd.allgather(torch.full((me + 1, 2), me), process_set=evens),
            torch.tensor([[0, 0], [2, 2], [2, 2], [2, 2]]), "set allgather of unequal rows")
        _eq(hvd.broadcast(x, root_rank=2, process_set=evens), torch.tensor([3.0, 6.0, 12.0]), "set broadcast")
        got = hvd.alltoall(torch.arange(4) + 10 * me, process_set=evens)
        _eq(got, torch.tensor([0, 1, 20, 21]) if me == 0 else torch.tensor([2, 3, 22, 23]), "set alltoall")
        part = hvd.reducescatter(torch.arange(3.0) * (me + 1), op=hvd.Sum, process_set=evens)
        _eq(part, torch.tensor([0.0, 4.0]) if me == 0 else torch.tensor([8.0]), "set reducescatter")
        assert hvd.allgather_object({"r": me}, process_set=evens) == [{"r": 0}, {"r": 2}]
        assert hvd.broadcast_object(me * 10, root_rank=2, process_set=evens) == 20
        try:
            hvd.broadcast(x, root_rank=1, process_set=evens)
            raise AssertionError("a root outside the set was accepted")
        except ValueError as err:
            assert "not in the process set" in str(err), str(err)
        hvd.barrier(process_set=evens)
        # the in-place and grouped variants on the set
        y = x.clone()
        assert hvd.allreduce_(y, op=hvd.Sum, process_set=evens) is y
        _eq(y, torch.tensor([4.0, 8.0, 16.0]), "set allreduce_")
        z = x.clone()
        assert hvd.broadcast_(z, root_rank=0, process_set=evens) is z
        _eq(z, torch.tensor([1.0, 2.0, 4.0]), "set broadcast_")
        pair = [x.clone(), torch.tensor([me], dtype=torch.int32)]
        out = hvd.grouped_allreduce_(pair, op=hvd.Min, process_set=evens)
        assert out[0] is pair[0] and out[1] is pair[1]
        _eq(pair[0], torch.tensor([1.0, 2.0, 4.0]), "set grouped_allreduce_[0]")
        _eq(pair[1], torch.tensor([0], dtype=torch.int32), "set grouped_allreduce_[1]")
        (g,) = hvd.grouped_allgather([torch.full((1 + me // 2,), me)], process_set=evens)
        _eq(g, torch.tensor([0, 2, 2]), "set grouped_allgather")
        (rs,) = hvd.grouped_reducescatter([torch.ones(4) * (me + 1)], op=hvd.Sum, process_set=evens,
                                          prescale_factor=2.0, postscale_factor=0.25)
        _eq(rs, torch.full((2,), 2.0), "set grouped_reducescatter with scaling")  # (2 + 6) * 0.25
    else:
        try:
            hvd.allreduce(x, process_set=evens)
            raise AssertionError("rank 1 ran a collective on a set it is not in")
        except ValueError as err:
            assert "is not in" in str(err), str(err)
    if tail.included():
        # unnamed collectives: names count per set, so rank 2's earlier calls on `evens` do not matter
        a, b = hvd.grouped_allreduce([x, x.double()], op=hvd.Sum, process_set=tail)
        _eq(a, torch.tensor([5.0, 10.0, 20.0]), "grouped set sum")
        _eq(b, torch.tensor([5.0, 10.0, 20.0], dtype=torch.float64), "grouped set sum (fp64)")
    done.append("collectives on sets")
    # a global collective after set-only ones: every rank still agrees on the auto-generated names
    _eq(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), 3.0), "global after sets")
    assert hvd.remove_process_set(tail) is True and tail.process_set_id is None
    assert hvd.remove_process_set(tail) is False
    assert hvd.remove_process_set(hvd.global_process_set) is False
    done.append("remove")
    done += _grouped_and_adasum(hvd) + _join(hvd) + _join_with_trainer(hvd)
    return done + _trainer_on_set(hvd, evens)


def _grouped_and_adasum(hvd) -> list[str]:
    me, done = hvd.rank(), []
    # grouped_allgather: two tensors, each with its own first dimension per rank
    a, b = hvd.grouped_allgather([torch.full((me + 1,), me), torch.full((1, 2), float(me))])
    _eq(a, torch.tensor([0, 1, 1, 2, 2, 2]), "grouped_allgather[0]")
    _eq(b, torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]), "grouped_allgather[1]")
    assert hvd.grouped_allgather([]) == []
    # grouped_reducescatter: 4 rows over 3 ranks -> 2, 1, 1 rows; Average of (r + 1) * rows
    rows = torch.arange(8.0).reshape(4, 2)
    one, two = hvd.grouped_reducescatter([rows * (me + 1), torch.arange(3) * (me + 1)], op=hvd.Average)
    full = rows * 2  # (1 + 2 + 3) / 3
    want = {0: full[:2], 1: full[2:3], 2: full[3:]}[me]
    _eq(one, want, "grouped_reducescatter[0]")
    _eq(two, torch.tensor([2 * me]), "grouped_reducescatter[1] (int64 mean)")
    done.append("grouped gathers")
    # Adasum by hand: rank vectors v0 = (3, 4), v1 = (3, 0), v2 = (0, 5)
    v = {0: [3.0, 4.0], 1: [3.0, 0.0], 2: [0.0, 5.0]}
    mine = torch.tensor(v[me], dtype=torch.float64)
    # (v0, v1): dot 9, |v0|^2 25, |v1|^2 9 -> 0.82 * v0 + 0.5 * v1 = (3.96, 3.28)
    # then with v2: dot 16.4, |p|^2 26.44, |v2|^2 25 -> (1 - 16.4/52.88) p + (1 - 16.4/50) v2
    p = torch.tensor([3.96, 3.28], dtype=torch.float64)
    want_ada = (1 - 16.4 / 52.88) * p + (1 - 16.4 / 50) * torch.tensor([0.0, 5.0], dtype=torch.float64)
    _close(hvd.allreduce(mine, op=hvd.Adasum), want_ada, "adasum of three ranks")
    same = torch.tensor([2.0, -1.0], dtype=torch.float64)
    _close(hvd.allreduce(same, op=hvd.Adasum, postscale_factor=2.0), same * 2, "adasum of equal gradients")
    try:
        hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum)
        raise AssertionError("Adasum of integers was accepted")
    except TypeError as err:
        assert "Adasum" in str(err) or "ADASUM" in str(err), str(err)
    done.append("adasum")
    return done


def _join(hvd) -> list[str]:
    me, done = hvd.rank(), []
    # rank 0 runs out of data first, then rank 1; rank 2 does two more allreduces
    x = torch.tensor([6.0, -3.0]) * (me + 1)
    if me == 0:
        last = hvd.join()
    else:
        got = hvd.allreduce(x, name="j.avg")  # rank 0 contributes zeros, divided by all 3 ranks
        _eq(got, (torch.tensor([6.0, -3.0]) * 5) / 3, "average with a joined rank")
        lo = hvd.allreduce(x, op=hvd.Min, name="j.min")  # the joined rank does not drag the min to 0
        _eq(lo, torch.tensor([12.0, -9.0]), "min with a joined rank")
        a, b = hvd.grouped_allreduce([x, torch.tensor([me], dtype=torch.int64)], op=hvd.Sum)
        _eq(a, torch.tensor([30.0, -15.0]), "grouped sum with a joined rank")
        _eq(b, torch.tensor([3]), "int sum with a joined rank")
        if me == 1:
            last = hvd.join()
        else:
            _eq(hvd.allreduce(x, op=hvd.Product, name="j.prod"), x, "product with two joined ranks")
            try:
                hvd.broadcast(x, root_rank=2)
                raise AssertionError("broadcast ran while ranks were joined")
            except hvd.HorovodError as err:
                assert "join" in str(err), str(err)
            last = hvd.join()
    assert last == 2, f"join returned {last}, expected the last rank to join (2)"
    _eq(hvd.allreduce(torch.ones(1), op=hvd.Sum), torch.full((1,), 3.0), "allreduce after join")
    done.append("join")
    return done


def _join_with_trainer(hvd) -> list[str]:
    """Uneven data: rank 2 takes one more step than the others, who wait in hvd.join()."""
    import mxtorch as mx
    from mxtorch import autograd
    from mxtorch.gluon import nn

    me = hvd.rank()
    net = nn.Dense(1, use_bias=False, in_units=1)
    net.initialize(mx.init.Constant(0.0))
    # num_groups=1: the trainer reduces through hvd collectives, which joined ranks serve
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 1.0}, num_groups=1)
    steps = 2 if me == 2 else 1
    for _ in range(steps):
        with autograd.record():
            loss = (net(torch.full((1, 1), float(me + 1)))).sum()
        loss.backward()  # gradient = me + 1
        trainer.step(1)
    last = hvd.join()
    assert last == 2, last
    w = float(net.weight.data().reshape(-1)[0])
    # step 1: mean(1, 2, 3) = 2; step 2 on rank 2 only: (0 + 0 + 3) / 3 = 1 (joined ranks send zeros)
    want = -2.0 if me != 2 else -3.0
    assert w == want, (me, w)
    return ["join with trainer"]


def _trainer_on_set(hvd, evens) -> list[str]:
    """DistributedTrainer(process_set=evens): ranks 0 and 2 average their gradients, rank 1 alone."""
    import mxtorch as mx
    from mxtorch import autograd
    from mxtorch.gluon import nn

    me = hvd.rank()
    net = nn.Dense(1, use_bias=False, in_units=2)
    net.initialize(mx.init.Constant(0.0))
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 1.0}, process_set=evens)
    data = torch.tensor([[1.0, float(me + 1)]])
    with autograd.record():
        loss = net(data).sum()
    loss.backward()  # gradient = data
    trainer.step(1)
    w = net.weight.data()
    if me == 1:  # outside the set: its own gradient, divided by the set's size (Horovod's rule)
        _eq(w, torch.tensor([[-0.5, -1.0]]), "trainer outside the set")
    else:  # mean of (1, 1) and (1, 3)
        _eq(w, torch.tensor([[-1.0, -2.0]]), "trainer on the set")
    opt = hvd.DistributedOptimizer(mx.optimizer.SGD(learning_rate=1.0), process_set=evens)
    weight, grad = torch.zeros(2), torch.tensor([1.0, float(me * me + 1)])  # (1, 1), (1, 2), (1, 5)
    opt.update(0, weight, grad, opt.create_state(0, weight))
    want = torch.tensor([-1.0, -2.0]) if me == 1 else torch.tensor([-1.0, -3.0])  # rank 1: its own
    _eq(weight, want, "DistributedOptimizer on the set")
    return ["trainer on a set"]
