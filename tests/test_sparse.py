"""Sparse storage: mx.nd.sparse, lazy optimizer updates, the local KVStore, sparse Parameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.testing import assert_close

import mxtorch as mx
from mxtorch import gluon, ndarray_methods
from mxtorch.gluon import nn
from mxtorch.kvstore import KVStoreError
from mxtorch.nd import sparse
from mxtorch.optimizer import update_rows

RNG = np.random.default_rng(0)


def dense(x: torch.Tensor) -> torch.Tensor:
    return sparse.tostype(x, "default")


# ---- creation -------------------------------------------------------------------------------


def test_row_sparse_array_from_parts_is_canonical():
    x = sparse.row_sparse_array(([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [4, 0, 4]), shape=(6, 2))
    assert sparse.stype(x) == "row_sparse" and x.shape == (6, 2) and x.dtype == torch.float32
    assert x.is_coalesced() and x.sparse_dim() == 1
    assert sparse.indices(x).tolist() == [0, 4]  # sorted, the repeated row summed
    assert sparse.data(x).tolist() == [[3.0, 4.0], [6.0, 8.0]]
    expected = torch.zeros(6, 2)
    expected[0], expected[4] = torch.tensor([3.0, 4.0]), torch.tensor([6.0, 8.0])
    assert_close(dense(x), expected)
    inferred = sparse.row_sparse_array((torch.ones(1, 3, dtype=torch.float64), [2]))
    assert inferred.shape == (3, 3) and inferred.dtype == torch.float64


def test_row_sparse_array_from_dense_shape_and_sparse():
    d = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    x = sparse.row_sparse_array(d)
    assert sparse.indices(x).tolist() == [1, 3]  # compact: all-zero rows are not stored
    assert_close(dense(x), d)
    empty = sparse.row_sparse_array((4, 5))
    assert empty.shape == (4, 5) and empty._nnz() == 0
    copy = sparse.row_sparse_array(x)
    assert copy is not x and torch.equal(dense(copy), d)
    copy.values().add_(1)
    assert torch.equal(dense(x), d)  # a copy, not a view
    three_d = sparse.row_sparse_array((torch.ones(2, 2, 3), [0, 5]), shape=(7, 2, 3))
    assert sparse.data(three_d).shape == (2, 2, 3)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((([[1.0, 2.0]], [7]),), {"shape": (5, 2)}, r"row id 7 is out of range for shape \(5, 2\)"),
        ((([[1.0, 2.0]], [-1]),), {"shape": (5, 2)}, "row id -1 is out of range"),
        ((([[1.0, 2.0], [3.0, 4.0]], [1]),), {"shape": (5, 2)}, "data has 2 rows but indices has 1"),
        ((([[1.0, 2.0]], [1]),), {"shape": (5, 3)}, r"shape \(5, 3\) does not fit data rows"),
        ((([[1.0]], [0.5]),), {}, "whole numbers"),
        ((([[1.0]], [[0]]),), {}, "must be 1-D"),
        (((1.0, 2.0, 3.0),), {}, "tuple argument must be"),
    ],
)
def test_row_sparse_array_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        sparse.row_sparse_array(*args, **kwargs)


def test_csr_matrix_forms():
    ref = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    c = sparse.csr_matrix(([1.0, 2.0, 3.0], [0, 2, 1], [0, 2, 2, 3]), shape=(3, 3))
    assert sparse.stype(c) == "csr" and torch.equal(dense(c), ref)
    assert sparse.indptr(c).tolist() == [0, 2, 2, 3] and sparse.indices(c).tolist() == [0, 2, 1]
    assert sparse.data(c).tolist() == [1.0, 2.0, 3.0]
    # columns unsorted within a row are sorted; the default shape comes from indptr and indices
    u = sparse.csr_matrix(([2.0, 1.0, 3.0], [2, 0, 1], [0, 2, 2, 3]))
    assert u.shape == (3, 3) and torch.equal(dense(u), ref) and sparse.indices(u).tolist() == [0, 2, 1]
    coo = sparse.csr_matrix(([1.0, 1.0, 2.0, 3.0], ([0, 0, 0, 2], [0, 0, 2, 1])), shape=(3, 3))
    ref2 = ref.clone()
    ref2[0, 0] = 2.0  # repeated (row, col) entries are summed
    assert torch.equal(dense(coo), ref2)
    assert torch.equal(dense(sparse.csr_matrix(ref)), ref)
    assert torch.equal(dense(sparse.csr_matrix(ref.numpy())), ref)
    z = sparse.csr_matrix((2, 4))
    assert z.shape == (2, 4) and z.values().numel() == 0


@pytest.mark.parametrize(
    "arg, shape, match",
    [
        (([1.0], [0], [1, 1]), None, "indptr must start at 0"),
        (([1.0, 2.0], [0, 1], [0, 2, 1, 2]), None, "indptr must not decrease"),
        (([1.0], [5], [0, 1]), (1, 3), r"column index 5 is out of range for shape \(1, 3\)"),
        (([1.0], [0], [0, 1]), (2, 3), "indptr has 2 entries but shape"),
        (([1.0, 2.0], [0], [0, 1]), None, "data and indices must be 1-D of one length"),
        (np.ones((2, 2, 2)), None, "must be 2-D"),
    ],
)
def test_csr_matrix_errors(arg, shape, match):
    with pytest.raises(ValueError, match=match):
        sparse.csr_matrix(arg, shape=shape)


def test_zeros_empty_array_and_stype():
    for st in sparse.STYPES:
        z = sparse.zeros(st, (3, 4), dtype="float64")
        assert sparse.stype(z) == st and z.shape == (3, 4) and z.dtype == torch.float64
        assert torch.equal(dense(z), torch.zeros(3, 4, dtype=torch.float64))
        assert sparse.stype(sparse.empty(st, (2, 2))) == st
    with pytest.raises(ValueError, match="storage type must be one of"):
        sparse.zeros("coo", (2, 2))
    x = sparse.row_sparse_array((torch.ones(1, 2), [1]), shape=(3, 2))
    y = sparse.array(x)
    assert y is not x and sparse.stype(y) == "row_sparse" and torch.equal(dense(y), dense(x))
    with pytest.raises(TypeError, match="needs a sparse tensor"):
        sparse.array(torch.ones(2, 2))
    with pytest.raises(ValueError, match="sparse_dim"):
        sparse.stype(torch.eye(2).to_sparse())
    with pytest.raises(TypeError):
        sparse.stype([1, 2])


def test_tostype_round_trips():
    d = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, 3.0]])
    rsp = sparse.tostype(d, "row_sparse")
    csr = sparse.tostype(d, "csr")
    assert sparse.indices(rsp).tolist() == [0, 2] and sparse.data(csr).tolist() == [1.0, 2.0, 3.0]
    for a in (rsp, csr):
        for b in sparse.STYPES:
            out = sparse.tostype(a, b)
            assert sparse.stype(out) == b and torch.equal(dense(out), d)
    assert sparse.tostype(d, "default") is d and sparse.tostype(csr, "csr") is csr
    assert torch.equal(dense(sparse.tostype(torch.eye(3).to_sparse(), "row_sparse")), torch.eye(3))
    assert sparse.cast_storage(data=csr, stype="default").tolist() == d.tolist()  # MXNet's argument names
    with pytest.raises(ValueError, match="csr array is 2-D"):
        sparse.tostype(torch.ones(2, 2, 2), "csr")
    with pytest.raises(ValueError, match="only a csr matrix has indptr"):
        sparse.indptr(rsp)
    with pytest.raises(ValueError, match="dense array"):
        sparse.data(d)


def test_uncoalesced_gradient_is_row_sparse():
    w = torch.nn.Parameter(torch.randn(6, 3))
    torch.nn.functional.embedding(torch.tensor([1, 4, 1]), w, sparse=True).sum().backward()
    assert not w.grad.is_coalesced()
    assert sparse.stype(w.grad) == "row_sparse"
    ids, rows = sparse.row_sparse_parts(w.grad)
    assert ids.tolist() == [1, 4] and rows.tolist() == [[2.0] * 3, [1.0] * 3]


# ---- operators ------------------------------------------------------------------------------


def test_retain():
    x = sparse.row_sparse_array((torch.arange(6.0).reshape(3, 2), [0, 2, 5]), shape=(6, 2))
    r = sparse.retain(x, torch.tensor([5, 1, 0]))
    assert sparse.indices(r).tolist() == [0, 5] and sparse.data(r).tolist() == [[0.0, 1.0], [4.0, 5.0]]
    assert sparse.retain(x, torch.tensor([], dtype=torch.int64))._nnz() == 0
    with pytest.raises(ValueError, match="row id 9 is out of range"):
        sparse.retain(x, [9])
    with pytest.raises(ValueError, match="needs a row_sparse array"):
        sparse.retain(torch.ones(2, 2), [0])


def test_dot_storage_types_and_values():
    a = torch.from_numpy(RNG.normal(size=(5, 4)) * (RNG.random((5, 4)) < 0.4)).float()
    b = torch.randn(4, 3)
    csr = sparse.tostype(a, "csr")
    assert_close(sparse.dot(csr, b), a @ b)
    bt = torch.randn(5, 3)
    t = sparse.dot(csr, bt, transpose_a=True)
    assert sparse.stype(t) == "row_sparse"  # MXNet: dot(csr.T, dense) = row_sparse
    assert_close(dense(t), a.t() @ bt)
    assert set(sparse.indices(t).tolist()) == set(torch.nonzero(a.abs().sum(0)).reshape(-1).tolist())
    c3 = torch.randn(3, 4)
    assert_close(sparse.dot(csr, c3, transpose_b=True), a @ c3.t())
    rsp = sparse.row_sparse_array((torch.randn(2, 3), [0, 3]), shape=(4, 3))
    assert_close(sparse.dot(csr, rsp), a @ dense(rsp))
    assert_close(sparse.dot(csr, sparse.zeros("row_sparse", (4, 3))), torch.zeros(5, 3))
    m = torch.randn(3, 2)
    assert_close(sparse.dot(rsp, m), dense(rsp) @ m)
    left = torch.randn(2, 5)
    assert_close(sparse.dot(left, csr), left @ a)
    assert_close(sparse.dot(b.t().contiguous(), b), b.t() @ b)
    assert sparse.stype(sparse.dot(csr, b, forward_stype="row_sparse")) == "row_sparse"
    with pytest.raises(ValueError, match="do not fit a matrix product"):
        sparse.dot(csr, torch.randn(5, 3))
    assert_close(sparse.dot(torch.ones(2, 4), csr, transpose_b=True), a.sum(1).expand(2, 5))
    with pytest.raises(ValueError, match="rhs transposed"):
        sparse.dot(b, csr, transpose_b=True)  # (4, 3) @ (5, 4).T
    with pytest.raises(ValueError, match="transpose_b is not available"):
        sparse.dot(b, rsp, transpose_b=True)


def test_dot_gradient_flows_to_the_dense_operand():
    csr = sparse.csr_matrix(([1.0, 2.0], [0, 2], [0, 1, 2]), shape=(2, 3))
    w = torch.randn(3, 2, requires_grad=True)
    sparse.dot(csr, w).sum().backward()
    assert_close(w.grad, dense(csr).t() @ torch.ones(2, 2))


def test_elementwise_storage_types():
    x = sparse.row_sparse_array((torch.ones(2, 2), [0, 3]), shape=(4, 2))
    y = sparse.row_sparse_array((2 * torch.ones(2, 2), [3, 1]), shape=(4, 2))
    d = torch.arange(8.0).reshape(4, 2)
    s = sparse.add(x, y)
    assert sparse.stype(s) == "row_sparse" and sparse.indices(s).tolist() == [0, 1, 3]
    assert_close(dense(s), dense(x) + dense(y))
    assert sparse.elemwise_add is sparse.add
    sd = sparse.add(d, x)
    assert sparse.stype(sd) == "default" and torch.equal(sd, d + dense(x))
    assert torch.equal(sparse.add(x, d), d + dense(x))
    diff = sparse.subtract(x, y)
    assert sparse.stype(diff) == "row_sparse" and torch.equal(dense(diff), dense(x) - dense(y))
    c = sparse.tostype(torch.eye(4), "csr")
    cc = sparse.add(c, c)
    assert sparse.stype(cc) == "csr" and torch.equal(dense(cc), 2 * torch.eye(4))
    assert torch.equal(sparse.add(torch.ones(4, 4), c), torch.ones(4, 4) + torch.eye(4))
    m = sparse.multiply(x, 3.0)
    assert sparse.stype(m) == "row_sparse" and torch.equal(dense(m), 3 * dense(x))
    assert torch.equal(dense(sparse.multiply(2.0, x)), 2 * dense(x))
    md = sparse.multiply(x, d)
    assert sparse.stype(md) == "row_sparse" and torch.equal(dense(md), dense(x) * d)
    mm = sparse.multiply(x, y)
    assert sparse.indices(mm).tolist() == [3] and torch.equal(dense(mm), dense(x) * dense(y))
    total = sparse.add_n(x, y, x)
    assert sparse.stype(total) == "row_sparse" and torch.equal(dense(total), 2 * dense(x) + dense(y))
    assert torch.equal(sparse.ElementWiseSum([x, d]), dense(x) + d)
    with pytest.raises(ValueError, match="shapes"):
        sparse.add(x, torch.ones(3, 2))


def test_ndarray_methods_for_sparse():
    was = ndarray_methods.is_enabled()
    ndarray_methods.enable()
    try:
        d = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
        assert d.stype == "default"  # type: ignore[attr-defined]
        r = d.tostype("row_sparse")  # type: ignore[attr-defined]
        c = d.tostype("csr")  # type: ignore[attr-defined]
        assert r.stype == "row_sparse" and c.stype == "csr"  # type: ignore[attr-defined]
        assert c.indptr.tolist() == [0, 1, 1]  # type: ignore[attr-defined]
        assert np.array_equal(r.asnumpy(), d.numpy()) and np.array_equal(c.asnumpy(), d.numpy())  # type: ignore
        assert d.tostype("default") is d  # type: ignore[attr-defined]
    finally:
        if not was:
            ndarray_methods.disable()


# ---- lazy optimizer updates -----------------------------------------------------------------


def _grad(rows: list[int], n: int = 6, width: int = 3, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return sparse.row_sparse_array((torch.randn(len(rows), width, generator=g), rows), shape=(n, width))


def test_lazy_sgd_momentum_follows_mxnet_formula():
    opt = mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5)
    upd = mx.optimizer.get_updater(opt)
    w0 = torch.randn(6, 3)
    w = w0.clone()
    g1, g2 = _grad([1, 4], seed=1), _grad([4, 5], seed=2)
    upd(0, g1, w)
    upd(0, g2, w)
    mom = torch.zeros(6, 3)
    ref = w0.clone()
    for g in (g1, g2):
        ids, rows = sparse.row_sparse_parts(g)
        for r, gr in zip(ids.tolist(), rows):
            mom[r] = 0.9 * mom[r] - 0.1 * (0.5 * gr + 0.01 * ref[r])
            ref[r] += mom[r]
    assert_close(w, ref)
    assert torch.equal(w[[0, 2, 3]], w0[[0, 2, 3]])  # never touched: no weight decay, no momentum
    assert_close(upd.states[0], mom)


def test_lazy_update_false_is_the_dense_update():
    for name in ("sgd", "adam"):
        kw = {"momentum": 0.9} if name == "sgd" else {}
        w_sparse, w_dense = torch.ones(6, 3), torch.ones(6, 3)
        u1 = mx.optimizer.get_updater(mx.optimizer.create(name, lazy_update=False, wd=0.1, **kw))
        u2 = mx.optimizer.get_updater(mx.optimizer.create(name, wd=0.1, **kw))
        for seed, rows in ((1, [1, 4]), (2, [2])):
            g = _grad(rows, seed=seed)
            u1(0, g, w_sparse)
            u2(0, dense(g), w_dense)
        assert_close(w_sparse, w_dense)
        assert not torch.equal(w_sparse[0], torch.ones(3))  # weight decay reached untouched rows


def test_lazy_adam_and_adagrad_touch_only_their_rows():
    for name in ("adam", "adagrad"):
        w0 = torch.randn(6, 3)
        w = w0.clone()
        upd = mx.optimizer.get_updater(mx.optimizer.create(name, learning_rate=0.1))
        ref_rows = w0[[1, 4]].clone()
        ref_upd = mx.optimizer.get_updater(mx.optimizer.create(name, learning_rate=0.1))
        for seed in (1, 2, 3):
            g = _grad([4, 1], seed=seed)
            upd(0, g, w)
            ref_upd(0, dense(g)[[1, 4]], ref_rows)
        assert_close(w[[1, 4]], ref_rows)
        assert torch.equal(w[[0, 2, 3, 5]], w0[[0, 2, 3, 5]])
        state = upd.states[0]
        first = state[0] if isinstance(state, tuple) else state
        assert torch.equal(first[[0, 2, 3, 5]], torch.zeros(4, 3))  # untouched rows keep their state
        assert upd.optimizer._index_update_count[0] == 3


@pytest.mark.parametrize("name", sorted(mx.optimizer.Optimizer.opt_registry))
def test_every_optimizer_updates_rows_like_a_dense_step_on_them(name):
    opt = mx.optimizer.create(name)
    if not getattr(opt, "lazy_update", True):
        opt.lazy_update = True
    ref_opt = mx.optimizer.create(name)
    w0 = torch.randn(6, 3)
    w, rows = w0.clone(), w0[[1, 4]].clone()
    upd, ref = mx.optimizer.get_updater(opt), mx.optimizer.get_updater(ref_opt)
    for seed in (1, 2):
        g = _grad([1, 4], seed=seed)
        torch.manual_seed(seed)  # the same noise for SGLD's two updates
        upd(0, g, w)
        torch.manual_seed(seed)
        ref(0, dense(g)[[1, 4]], rows)
    assert_close(w[[1, 4]], rows)
    assert torch.equal(w[[0, 2, 3, 5]], w0[[0, 2, 3, 5]])


def test_update_rows_with_an_optimizer_and_explicit_state():
    opt = mx.optimizer.create("sgd", learning_rate=1.0, momentum=0.5)
    w = torch.zeros(5, 2)
    state = opt.create_state_multi_precision(0, w)
    # unsorted, repeated ids: the repeated rows are summed
    update_rows(opt, 0, w, torch.tensor([3, 1, 3]), torch.tensor([[1.0, 1.0], [2.0, 2.0], [1.0, 1.0]]), state)
    assert w[3].tolist() == [-2.0, -2.0] and w[1].tolist() == [-2.0, -2.0] and w[0].tolist() == [0.0, 0.0]
    before = w.clone()
    update_rows(opt, 0, w, torch.tensor([], dtype=torch.int64), torch.empty(0, 2), state)
    assert torch.equal(w, before) and opt._index_update_count[0] == 2
    with pytest.raises(ValueError, match=r"grad rows of index 0 have shape \(1, 3\), expected \(1, 2\)"):
        update_rows(opt, 0, w, torch.tensor([0]), torch.ones(1, 3), state)
    with pytest.raises(ValueError, match="row id 5 of index 0 is out of range"):
        update_rows(opt, 0, w, torch.tensor([5]), torch.ones(1, 2), state)
    with pytest.raises(TypeError, match="needs the index's state"):
        update_rows(opt, 0, w, torch.tensor([0]), torch.ones(1, 2))
    with pytest.raises(TypeError, match="Updater or Optimizer"):
        update_rows(object(), 0, w, torch.tensor([0]), torch.ones(1, 2))  # type: ignore[arg-type]


def test_update_rows_with_an_updater_creates_its_state():
    upd = mx.optimizer.get_updater(mx.optimizer.create("adam", learning_rate=0.1))
    w = torch.zeros(4, 2)
    update_rows(upd, "emb", w, torch.tensor([2]), torch.ones(1, 2))
    assert "emb" in upd.states and w[2].lt(0).all() and w[[0, 1, 3]].eq(0).all()


def test_sparse_gradient_with_multi_precision_fp16():
    opt = mx.optimizer.create("sgd", learning_rate=0.5, momentum=0.9, multi_precision=True)
    upd = mx.optimizer.get_updater(opt)
    w = torch.ones(4, 2, dtype=torch.float16)
    g = sparse.row_sparse_array((torch.ones(1, 2, dtype=torch.float16), [2]), shape=(4, 2))
    upd(0, g, w)
    mom, master = upd.states[0]  # MXNet's SGD layout: (momentum, master)
    assert master.dtype == torch.float32 and master[2].tolist() == [0.5, 0.5] and master[0].tolist() == [1, 1]
    assert w[2].tolist() == [0.5, 0.5] and w.dtype == torch.float16 and mom[2].tolist() == [-0.5, -0.5]


def test_optimizer_update_accepts_row_sparse_and_csr():
    opt = mx.optimizer.create("sgd", learning_rate=1.0)
    w = torch.zeros(3, 2)
    opt.update(0, w, _grad([1], n=3, width=2), None)
    assert w[1].ne(0).all() and w[0].eq(0).all()
    before = w.clone()
    opt.update(0, w, sparse.tostype(torch.ones(3, 2), "csr"), None)  # MXNet's dense fallback
    assert torch.equal(w, before - 1)
    with pytest.raises(ValueError, match="expected the weight's shape"):
        opt.update(0, w, _grad([1], n=4, width=2), None)


# ---- local KVStore --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["local", "device"])
def test_push_sums_row_sparse_values_sparsely(name):
    store = mx.kv.create(name)
    store.init("w", torch.full((6, 2), 9.0))
    a = sparse.row_sparse_array((torch.ones(2, 2), [1, 3]), shape=(6, 2))
    b = sparse.row_sparse_array((2 * torch.ones(1, 2), [3]), shape=(6, 2))
    store.push("w", [a, b])
    stored = store._store["w"]
    assert sparse.stype(stored) == "row_sparse" and sparse.indices(stored).tolist() == [1, 3]
    out = torch.full((6, 2), -1.0)
    store.pull("w", out=out)  # without an updater the pushed rows are the value; other rows zero
    assert_close(out, dense(a) + dense(b))
    rsp_out = sparse.zeros("row_sparse", (6, 2))
    store.pull("w", out=rsp_out)  # ignore_sparse=True: row_sparse outs are left alone
    assert rsp_out._nnz() == 0
    store.pull("w", out=rsp_out, ignore_sparse=False)
    assert torch.equal(dense(rsp_out), dense(a) + dense(b))
    with pytest.raises(KVStoreError, match="mix row_sparse and dense"):
        store.push("w", [a, torch.ones(6, 2)])
    with pytest.raises(KVStoreError, match="must be row_sparse"):
        store.push("w", sparse.tostype(torch.ones(6, 2), "csr"))


def test_row_sparse_pull_fills_only_the_rows_asked_for():
    store = mx.kv.create("local")
    value = torch.arange(12.0).reshape(6, 2)
    store.init(0, value)
    out = sparse.zeros("row_sparse", (6, 2))
    store.row_sparse_pull(0, out=out, row_ids=torch.tensor([4, 1, 4]))
    assert sparse.indices(out).tolist() == [1, 4] and torch.equal(sparse.data(out), value[[1, 4]])
    d = torch.full((6, 2), -1.0)
    with pytest.raises(KVStoreError, match="needs row_sparse outs, got a dense tensor"):  # as in MXNet
        store.row_sparse_pull(0, out=d, row_ids=torch.tensor([5.0, 0.0]))
    assert d.eq(-1).all()  # nothing written
    store.row_sparse_pull(0, out=out, row_ids=torch.tensor([], dtype=torch.int64))
    assert out._nnz() == 0
    outs = [sparse.zeros("row_sparse", (6, 2)), sparse.zeros("row_sparse", (6, 2))]
    store.row_sparse_pull(0, out=outs, row_ids=[torch.tensor([2]), torch.tensor([3])])
    assert sparse.indices(outs[0]).tolist() == [2] and sparse.data(outs[1]).tolist() == [[6.0, 7.0]]
    # from a row_sparse stored value: rows it does not hold come back as zeros
    store.push(0, sparse.row_sparse_array((torch.ones(1, 2), [2]), shape=(6, 2)))
    store.row_sparse_pull(0, out=out, row_ids=torch.tensor([2, 3]))
    assert sparse.data(out).tolist() == [[1.0, 1.0], [0.0, 0.0]]
    with pytest.raises(KVStoreError, match="needs row_ids"):
        store.row_sparse_pull(0, out=out)
    with pytest.raises(KVStoreError, match="row id 6 is out of range"):
        store.row_sparse_pull(0, out=out, row_ids=torch.tensor([6]))
    with pytest.raises(KVStoreError, match="shape mismatch"):
        store.row_sparse_pull(0, out=sparse.zeros("row_sparse", (5, 2)), row_ids=torch.tensor([0]))
    with pytest.raises(KVStoreError, match="needs out"):
        store.row_sparse_pull(0, row_ids=torch.tensor([0]))


def test_store_optimizer_updates_only_pushed_rows():
    store = mx.kv.create("device")
    store.set_optimizer(mx.optimizer.create("sgd", learning_rate=1.0, momentum=0.5))
    store.init(0, torch.ones(5, 2))
    g = sparse.row_sparse_array((torch.ones(1, 2), [3]), shape=(5, 2))
    store.push(0, [g, g])  # merged gradient 2 on row 3
    store.push(0, g)
    out = torch.empty(5, 2)
    store.pull(0, out=out)
    # row 3: mom = -2 -> w = -1; mom = 0.5 * -2 - 1 = -2 -> w = -3
    assert out[3].tolist() == [-3.0, -3.0] and out[[0, 1, 2, 4]].eq(1).all()
    assert store._updater.states[0][[0, 1, 2, 4]].eq(0).all()


def test_pushpull_of_row_sparse_gradients_without_updater():
    store = mx.kv.create("device")
    store.init(0, torch.zeros(4, 3))
    g0 = _grad([0, 2], n=4, seed=1)
    g1 = _grad([2, 3], n=4, seed=2)
    expected = dense(g0) + dense(g1)
    grads = [g0, g1]
    store.pushpull(0, grads)
    for g in grads:
        assert sparse.stype(g) == "row_sparse" and torch.equal(dense(g), expected)
    d = torch.empty(4, 3)
    store.pushpull(0, [_grad([1], n=4, seed=3)], out=d)
    assert torch.equal(d, dense(_grad([1], n=4, seed=3)))


# ---- Parameter and Embedding ----------------------------------------------------------------


def test_parameter_stypes_and_sparse_grad_buffer():
    p = gluon.Parameter("emb", shape=(5, 2), stype="row_sparse", grad_stype="row_sparse")
    p.initialize(init="ones")
    g = p.grad()
    assert sparse.stype(g) == "row_sparse" and g._nnz() == 0 and g.shape == (5, 2)
    # MXNet's rules: a row_sparse weight is read by rows, and those live in its Trainer's store
    with pytest.raises(mx.MXNetError, match="row_sparse_data"):
        p.data()
    with pytest.raises(mx.MXNetError, match="row_sparse_data"):
        p.list_data()
    with pytest.raises(mx.MXNetError, match="before a Trainer"):
        p.row_sparse_data(torch.tensor([1]))
    trainer = gluon.Trainer([p], "sgd")  # noqa: F841 - held: the parameter keeps only a weak reference
    w = p.row_sparse_data(torch.tensor([3, 1, 3]))  # MXNet's result: a row_sparse array of those rows
    assert sparse.stype(w) == "row_sparse" and sparse.indices(w).tolist() == [1, 3]
    expected = torch.tensor([[0.0, 0], [1, 1], [0, 0], [1, 1], [0, 0]])
    assert torch.equal(sparse.tostype(w.detach(), "default"), expected)
    mx.nd.contrib.SparseEmbedding(torch.tensor([3, 3, 1]), w, input_dim=5, output_dim=2).sum().backward()
    assert sparse.indices(p.grad()).tolist() == [1, 3]  # only the rows read
    assert torch.equal(sparse.data(p.grad()), torch.tensor([[1.0, 1.0], [2.0, 2.0]]))
    p.zero_grad()
    assert sparse.stype(p.grad()) == "row_sparse" and p.grad()._nnz() == 0
    assert len(p.list_row_sparse_data(torch.tensor([1]))) == 1
    with mx.autograd.record():
        w = p.row_sparse_data(torch.tensor([2]))
        y = mx.nd.Embedding(torch.tensor([2.0, 0.0]), w, input_dim=5, output_dim=2)
    assert torch.equal(y.detach(), torch.tensor([[1.0, 1.0], [0.0, 0.0]]))  # row 0 was not read: zeros
    y.sum().backward()
    assert sparse.indices(p.grad()).tolist() == [2]
    with pytest.raises(mx.MXNetError, match="row id 5 is out of range"):
        p.row_sparse_data(torch.tensor([5]))
    with pytest.raises(mx.MXNetError, match="'csr' parameters are not supported"):
        gluon.Parameter("c", shape=(2, 2), stype="csr")
    dense_p = gluon.Parameter("d", shape=(2, 2))
    dense_p.initialize()
    with pytest.raises(mx.MXNetError, match="use data"):
        dense_p.row_sparse_data(torch.tensor([0]))


def test_row_sparse_weight_copy_and_variable_report_mxnet_storage_type():
    p = gluon.Parameter("emb", shape=(3, 2), stype="row_sparse", init="ones")
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    copy = p._data[1].copy()  # MXNet code reads the local copy: a row_sparse array of every row
    assert copy.stype == "row_sparse" and sparse.indices(copy).tolist() == [0, 1, 2]
    assert copy.context == mx.cpu(1) and torch.equal(dense(copy), torch.ones(3, 2))
    assert p.var().attr("__storage_type__") == "1"  # MXNet's id of row_sparse
    trainer = gluon.Trainer([p], "sgd")  # noqa: F841 - held: the parameter keeps only a weak reference
    rows = p.list_row_sparse_data(mx.nd.array([2, 2]))
    assert [r.context for r in rows] == [mx.cpu(0), mx.cpu(1)]
    assert all(sparse.indices(r).tolist() == [2] for r in rows)


def test_row_sparse_data_pulls_rows_from_the_store_holding_the_weights():
    ctx = [mx.cpu(0), mx.cpu(1)]
    p = gluon.Parameter("emb", shape=(6, 2), stype="row_sparse", grad_stype="row_sparse", init="zeros")
    p.initialize(ctx=ctx)
    trainer = gluon.Trainer([p], "sgd", {"learning_rate": 1.0}, kvstore="device")
    trainer._init_kvstore()
    trainer._init_params()  # MXNet's two steps: choose the store, then give it the weights
    assert trainer._update_on_kvstore
    store = trainer._kvstore
    store._store[0].fill_(7.0)  # the store's copy moved on (as on a parameter server)
    rows = p.row_sparse_data(torch.tensor([4, 1]))
    assert sparse.indices(rows).tolist() == [1, 4] and sparse.data(rows).eq(7).all()
    local = p._data[0]  # the local copy on cpu(0) (data() refuses a row_sparse weight)
    assert local[[1, 4]].eq(7).all() and local[[0, 2, 3, 5]].eq(0).all()  # only those rows were pulled
    assert p._data[1].eq(0).all()  # another context's copy is pulled when asked for
    with pytest.raises(mx.MXNetError, match="another Trainer"):
        gluon.Trainer([p], "sgd", {"learning_rate": 1.0})


def test_embedding_sparse_grad():
    emb = nn.Embedding(10, 3, sparse_grad=True)
    emb.initialize()
    assert emb.weight.grad_stype == "row_sparse" and emb.weight.stype == "default"
    ref = nn.Embedding(10, 3)
    ref.initialize()
    ref.weight.set_data(emb.weight.data())
    x = torch.tensor([[1, 2], [2, 7]])
    with mx.autograd.record():
        out, out_ref = emb(x), ref(x)
    assert torch.equal(out, out_ref)
    out.sum().backward()
    out_ref.sum().backward()
    g = emb.weight.grad()
    assert sparse.stype(g) == "row_sparse" and sparse.indices(g).tolist() == [1, 2, 7]
    assert_close(dense(g), ref.weight.grad())


def test_embedding_with_a_row_sparse_weight_reads_fresh_rows():
    ctx = [mx.cpu(0), mx.cpu(1)]
    emb = nn.Embedding(8, 2, sparse_grad=True, weight_initializer="zeros")
    emb.weight.stype = "row_sparse"  # as MXNet's SparseEmbedding declares its weight
    emb.initialize(ctx=ctx)
    trainer = gluon.Trainer(emb.collect_params(), "sgd", {"learning_rate": 1.0}, kvstore="device")
    trainer._init_kvstore()
    trainer._init_params()
    trainer._kvstore._store[0].fill_(3.0)
    x = mx.nd.array([1, 5], ctx=mx.cpu(1), dtype="int64")  # a batch on the second context
    assert emb(x).eq(3).all()
    w = emb.weight._data[1]  # the local copy on cpu(1)
    assert w[[1, 5]].eq(3).all() and w[[0, 2, 3, 4, 6, 7]].eq(0).all()


def test_store_init_with_a_row_sparse_value():
    store = mx.kv.create("local")
    value = sparse.row_sparse_array((torch.ones(1, 2), [2]), shape=(4, 2))
    store.init(0, value)
    out = torch.empty(4, 2)
    store.pull(0, out=out)
    assert torch.equal(out, dense(value))


def test_row_sparse_data_in_the_graph_is_a_row_sparse_array_with_mxnet_arithmetic():
    """MXNet: row_sparse_data(rows) is a RowSparseNDArray even while it carries the gradient;
    w + 1 falls back to dense storage and its backward fills the parameter's row-sparse gradient."""
    x = gluon.Parameter("x", shape=(4, 1), stype="row_sparse", grad_stype="row_sparse")
    x.initialize(ctx=[mx.cpu(0)], init="zeros")
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 0.1})  # noqa: F841 (the rows live in its store)
    w = x.row_sparse_data(mx.nd.array([1, 3]))
    assert isinstance(w, mx.nd.sparse.RowSparseNDArray) and w.stype == "row_sparse"
    with mx.autograd.record():
        y = w + 1
    assert y.stype == "default"
    y.backward()
    np.testing.assert_array_equal(x.grad().asnumpy(), [[0], [1], [0], [1]])
