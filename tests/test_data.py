"""mxtorch.gluon.data: datasets, samplers, batchify and the DataLoader."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch
import torch.utils.data

from mxtorch.gluon import data as gdata
from mxtorch.gluon.data import (
    ArrayDataset,
    BatchSampler,
    DataLoader,
    Dataset,
    FilterSampler,
    IntervalSampler,
    RandomSampler,
    SequentialSampler,
    SimpleDataset,
    SplitSampler,
    default_batchify_fn,
)
from mxtorch.gluon.data.vision import transforms

# ---------------------------------------------------------------------------- samplers


def test_sequential_and_random_sampler() -> None:
    assert list(SequentialSampler(4)) == [0, 1, 2, 3]
    assert list(SequentialSampler(3, start=5)) == [5, 6, 7]
    assert len(SequentialSampler(3, start=5)) == 3
    torch.manual_seed(1)
    a = list(RandomSampler(20))
    torch.manual_seed(1)
    b = list(RandomSampler(20))
    assert a == b and sorted(a) == list(range(20)) and len(RandomSampler(20)) == 20
    with pytest.raises(ValueError, match="-1"):
        SequentialSampler(-1)
    with pytest.raises(TypeError, match="2.5"):
        RandomSampler(2.5)  # type: ignore[arg-type]


def test_batch_sampler_modes() -> None:
    s = SequentialSampler(10)
    assert list(BatchSampler(s, 3, "keep")) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert len(BatchSampler(s, 3, "keep")) == 4
    assert list(BatchSampler(s, 3, "discard")) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(BatchSampler(s, 3, "discard")) == 3
    roll = BatchSampler(s, 3, "rollover")
    assert len(roll) == 3
    assert list(roll) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(roll) == 3  # 1 left over + 10 = 11 -> 3 full batches
    assert list(roll) == [[9, 0, 1], [2, 3, 4], [5, 6, 7]]
    assert len(roll) == 4  # 2 left over + 10 = 12
    assert list(roll) == [[8, 9, 0], [1, 2, 3], [4, 5, 6], [7, 8, 9]]
    with pytest.raises(ValueError, match="'sometimes'"):
        BatchSampler(s, 3, "sometimes")
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(s, 0)


def test_interval_and_filter_sampler() -> None:
    assert list(IntervalSampler(10, 3)) == [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]
    assert len(IntervalSampler(10, 3)) == 10
    assert list(IntervalSampler(10, 3, rollover=False)) == [0, 3, 6, 9]
    assert len(IntervalSampler(10, 3, rollover=False)) == 4
    with pytest.raises(ValueError, match="interval"):
        IntervalSampler(3, 5)
    ds = SimpleDataset(list(range(10)))
    fs = FilterSampler(lambda x: x % 3 == 0, ds)
    assert list(fs) == [0, 3, 6, 9] and len(fs) == 4


@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize("length,parts", [(10, 3), (12, 4), (7, 7), (5, 8)])
def test_split_sampler_parts_disjoint_and_covering(length: int, parts: int, interleave: bool) -> None:
    got = [list(SplitSampler(length, parts, p, shuffle=False, interleave=interleave)) for p in range(parts)]
    flat = [i for g in got for i in g]
    assert sorted(flat) == list(range(length))  # disjoint and covering
    sizes = [len(g) for g in got]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == [len(SplitSampler(length, parts, p, interleave=interleave)) for p in range(parts)]
    if not interleave:
        for g in got:  # contiguous
            assert g == list(range(g[0], g[0] + len(g))) if g else True


def test_split_sampler_contiguous_layout() -> None:
    parts = [list(SplitSampler(10, 3, p, shuffle=False)) for p in range(3)]
    assert parts == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    inter = [list(SplitSampler(10, 3, p, shuffle=False, interleave=True)) for p in range(3)]
    assert inter == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


def test_split_sampler_even_size_pads_by_wrapping() -> None:
    parts = [list(SplitSampler(10, 3, p, even_size=True, shuffle=False)) for p in range(3)]
    assert parts == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    assert all(len(SplitSampler(10, 3, p, even_size=True)) == 4 for p in range(3))
    inter = [list(SplitSampler(10, 4, p, even_size=True, shuffle=False, interleave=True)) for p in range(4)]
    assert all(len(x) == 3 for x in inter)
    assert set(i for x in inter for i in x) == set(range(10))
    # every worker gets the same number of batches: none waits at the end of an epoch
    loaders = [
        DataLoader(SimpleDataset(list(range(10))), 2, sampler=SplitSampler(10, 3, p, even_size=True))
        for p in range(3)
    ]
    assert [len(dl) for dl in loaders] == [2, 2, 2]
    assert [sum(1 for _ in dl) for dl in loaders] == [2, 2, 2]


def test_split_sampler_shuffle_is_seeded_per_epoch() -> None:
    length, parts = 103, 4
    workers = [SplitSampler(length, parts, p, seed=7) for p in range(parts)]
    for epoch in range(3):
        for w in workers:
            w.set_epoch(epoch)
        got = [list(w) for w in workers]
        flat = [i for g in got for i in g]
        assert sorted(flat) == list(range(length)), f"epoch {epoch}: parts overlap"
        if epoch == 0:
            first = got
        else:
            assert got != first  # a different permutation each epoch
    # the same (seed, epoch) gives the same order, whatever the global torch seed
    a, b = SplitSampler(50, 2, 1, seed=3), SplitSampler(50, 2, 1, seed=3)
    a.set_epoch(5)
    b.set_epoch(5)
    torch.manual_seed(0)
    la = list(a)
    torch.manual_seed(99)
    assert la == list(b) and la == list(a)  # set_epoch pins the epoch
    assert list(SplitSampler(50, 2, 1, seed=4)) != list(SplitSampler(50, 2, 1, seed=3))


def test_split_sampler_counts_epochs_without_set_epoch() -> None:
    workers = [SplitSampler(20, 2, p, seed=1) for p in range(2)]
    e0 = [list(w) for w in workers]
    e1 = [list(w) for w in workers]
    assert e0 != e1
    for e in (e0, e1):
        assert sorted(e[0] + e[1]) == list(range(20))
    assert workers[0].epoch == 2


def test_split_sampler_repeat_and_errors() -> None:
    r = list(SplitSampler(10, 2, 1, repeat=3, shuffle=False))
    assert r == [5, 6, 7, 8, 9] * 3 and len(SplitSampler(10, 2, 1, repeat=3)) == 15
    rs = list(SplitSampler(10, 2, 1, repeat=3, seed=0))
    assert sorted(rs) == sorted(list(SplitSampler(10, 2, 1, seed=0)) * 3)
    with pytest.raises(ValueError, match=r"part_index must be in \[0, num_parts\) = \[0, 2\), got 2"):
        SplitSampler(10, 2, 2)
    with pytest.raises(ValueError, match="part_index.*-1"):
        SplitSampler(10, 2, -1)
    with pytest.raises(ValueError, match="num_parts.*0"):
        SplitSampler(10, 0, 0)
    with pytest.raises(TypeError, match="num_parts.*'2'"):
        SplitSampler(10, "2", 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="repeat"):
        SplitSampler(10, 1, 0, repeat=0)


# ---------------------------------------------------------------------------- datasets


def test_array_dataset() -> None:
    x = torch.arange(12).reshape(6, 2)
    y = np.arange(6, dtype=np.int32)
    z = [f"s{i}" for i in range(6)]
    ds = ArrayDataset(x, y, z)
    assert len(ds) == 6
    a, b, c = ds[2]
    assert torch.equal(a, torch.tensor([4, 5])) and b == 2 and c == "s2"
    single = ArrayDataset(x)
    assert torch.equal(single[1], torch.tensor([2, 3]))  # one array: the element itself
    with pytest.raises(ValueError, match="array 0: 6, array 1: 5"):
        ArrayDataset(x, np.zeros(5))
    with pytest.raises(ValueError, match="at least one"):
        ArrayDataset()


def test_dataset_is_a_torch_dataset() -> None:
    ds = ArrayDataset(torch.arange(10, dtype=torch.float32), torch.arange(10))
    assert isinstance(ds, torch.utils.data.Dataset)
    batches = list(torch.utils.data.DataLoader(ds, batch_size=4))
    assert len(batches) == 3 and torch.equal(batches[0][1], torch.arange(4))


def test_transform_and_transform_first() -> None:
    ds = ArrayDataset(list(range(5)), list(range(10, 15)))
    t = ds.transform(lambda a, b: (a * 2, b + 1))
    assert t[1] == (2, 12) and len(t) == 5
    tf = ds.transform_first(lambda a: a - 1)
    assert tf[0] == (-1, 10)
    eager = ds.transform_first(lambda a: a * 10, lazy=False)
    assert isinstance(eager, SimpleDataset) and eager[4] == (40, 14)
    single = SimpleDataset([1, 2, 3]).transform(lambda a: a + 100)
    assert single[2] == 103
    assert SimpleDataset([1, 2]).transform_first(lambda a: -a)[1] == -2
    with pytest.raises(TypeError, match="callable"):
        ds.transform(3)  # type: ignore[arg-type]


def test_filter_shard_take_sample() -> None:
    ds = SimpleDataset(list(range(10)))
    assert list(ds.filter(lambda x: x > 6)) == [7, 8, 9]
    shards = [ds.shard(3, i) for i in range(3)]
    assert [list(s) for s in shards] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [len(s) for s in shards] == [4, 3, 3]
    with pytest.raises(ValueError, match=r"\[0, 3\), got 3"):
        ds.shard(3, 3)
    with pytest.raises(ValueError, match="num_shards.*0"):
        ds.shard(0, 0)
    assert list(ds.take(3)) == [0, 1, 2]
    assert len(ds.take(None)) == 10 and len(ds.take(100)) == 10
    assert list(ds.sample(IntervalSampler(10, 4, rollover=False))) == [0, 4, 8]
    with pytest.raises(TypeError, match="Sampler"):
        ds.sample([1, 2])  # type: ignore[arg-type]
    # combinators compose
    assert list(ds.shard(2, 1).filter(lambda x: x % 2 == 0).take(2)) == [6, 8]


def test_base_dataset_is_abstract() -> None:
    with pytest.raises(NotImplementedError):
        len(Dataset())


# ---------------------------------------------------------------------------- batchify


def test_default_batchify() -> None:
    t = default_batchify_fn([torch.ones(2, dtype=torch.float16), torch.zeros(2, dtype=torch.float16)])
    assert t.shape == (2, 2) and t.dtype == torch.float16
    n = default_batchify_fn([np.ones((2, 3), np.uint8), np.zeros((2, 3), np.uint8)])
    assert isinstance(n, torch.Tensor) and n.dtype == torch.uint8 and n.shape == (2, 2, 3)
    assert default_batchify_fn([1, 2, 3]).dtype == torch.int64
    assert default_batchify_fn([1.5, 2.0]).dtype == torch.float32
    assert default_batchify_fn([True, False]).dtype == torch.bool
    assert default_batchify_fn([np.int32(1), np.int32(2)]).dtype == torch.int32
    assert default_batchify_fn([np.float64(1), np.float64(2)]).dtype == torch.float64
    b = default_batchify_fn([(torch.zeros(3), 1, (2.0, np.int8(1))), (torch.ones(3), 2, (3.0, np.int8(4)))])
    assert isinstance(b, list) and len(b) == 3
    assert b[0].shape == (2, 3) and torch.equal(b[1], torch.tensor([1, 2]))
    assert b[2][0].dtype == torch.float32 and b[2][1].dtype == torch.int8
    d = default_batchify_fn([{"x": 1, "s": "a"}, {"x": 2, "s": "b"}])
    assert torch.equal(d["x"], torch.tensor([1, 2])) and d["s"] == ["a", "b"]
    with pytest.raises(ValueError, match=r"\(2,\), \(3,\)"):
        default_batchify_fn([torch.zeros(2), torch.zeros(3)])
    with pytest.raises(TypeError, match="object"):
        default_batchify_fn([object(), object()])


# ---------------------------------------------------------------------------- DataLoader


def test_dataloader_argument_errors() -> None:
    ds = SimpleDataset(list(range(10)))
    bs = BatchSampler(SequentialSampler(10), 2)
    with pytest.raises(ValueError, match="batch_size must be specified"):
        DataLoader(ds)
    with pytest.raises(ValueError, match="shuffle must not be specified if sampler"):
        DataLoader(ds, batch_size=2, shuffle=True, sampler=SequentialSampler(10))
    conflicts = ({"batch_size": 2}, {"shuffle": True}, {"sampler": SequentialSampler(10)},
                 {"last_batch": "keep"})
    for kw in conflicts:
        with pytest.raises(ValueError, match="must not be specified if batch_sampler"):
            DataLoader(ds, batch_sampler=bs, **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="last_batch.*'drop'"):
        DataLoader(ds, batch_size=2, last_batch="drop")
    with pytest.raises(ValueError, match="num_workers.*-1"):
        DataLoader(ds, batch_size=2, num_workers=-1)


def test_dataloader_last_batch_modes() -> None:
    ds = ArrayDataset(torch.arange(10))
    keep = DataLoader(ds, batch_size=4)
    assert len(keep) == 3 and [b.tolist() for b in keep] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    disc = DataLoader(ds, batch_size=4, last_batch="discard")
    assert len(disc) == 2 and [len(b) for b in disc] == [4, 4]
    roll = DataLoader(ds, batch_size=4, last_batch="rollover")
    assert len(roll) == 2
    assert [b.tolist() for b in roll] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(roll) == 3
    assert [b.tolist() for b in roll] == [[8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]
    assert [b.tolist() for b in roll] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_dataloader_shuffle_seeded_and_batch_sampler() -> None:
    ds = ArrayDataset(torch.arange(50), np.arange(50) * 2)
    torch.manual_seed(3)
    a = [x.tolist() for x, _ in DataLoader(ds, batch_size=8, shuffle=True)]
    torch.manual_seed(3)
    b = [x.tolist() for x, _ in DataLoader(ds, batch_size=8, shuffle=True)]
    assert a == b and sorted(sum(a, [])) == list(range(50))
    assert a != [x.tolist() for x, _ in DataLoader(ds, 8)]
    for x, y in DataLoader(ds, batch_size=8, shuffle=True):
        assert torch.equal(y, x * 2) and y.dtype == torch.int64
    bl = DataLoader(ds, batch_sampler=[[3, 1], [0]])
    assert [x.tolist() for x, _ in bl] == [[3, 1], [0]]
    # a tensor or numpy array can be used as a dataset directly
    assert [b.tolist() for b in DataLoader(torch.arange(5), batch_size=2)] == [[0, 1], [2, 3], [4]]
    assert [b.tolist() for b in DataLoader(np.arange(3), batch_size=2)] == [[0, 1], [2]]


def test_dataloader_tuple_samples_and_custom_batchify() -> None:
    ds = SimpleDataset([(np.full((2, 2), i, np.float32), i, float(i)) for i in range(5)])
    data, ints, floats = next(iter(DataLoader(ds, batch_size=3)))
    assert data.shape == (3, 2, 2) and data.dtype == torch.float32
    assert ints.dtype == torch.int64 and floats.dtype == torch.float32
    dl = DataLoader(ds, batch_size=2, batchify_fn=lambda samples: len(samples))
    assert list(dl) == [2, 2, 1] and not dl.fast_path


def _close(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


def _slow(samples: list) -> object:
    return default_batchify_fn(samples)


@pytest.mark.parametrize("last_batch", ["keep", "discard", "rollover"])
def test_fast_path_equals_per_sample_path(last_batch: str) -> None:
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (37, 6, 5, 3), dtype=torch.uint8, generator=g)
    labels = np.arange(37, dtype=np.int32) % 4
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))])
    variants = [
        ArrayDataset(images, labels),
        ArrayDataset(images, labels).transform_first(tf),
        ArrayDataset(images, torch.from_numpy(labels)).transform_first(transforms.ToTensor()).shard(2, 1),
        ArrayDataset(images).transform(transforms.ToTensor()),
        SimpleDataset(images.numpy()).take(20),
        ArrayDataset(images, labels).filter(lambda s: int(s[1]) != 2).transform_first(tf),
    ]
    for ds in variants:
        fast = DataLoader(ds, batch_size=8, shuffle=True, last_batch=last_batch)
        slow = DataLoader(ds, batch_size=8, shuffle=True, last_batch=last_batch, batchify_fn=_slow)
        assert fast.fast_path and not slow.fast_path, ds
        for _ in range(2):  # two epochs: rollover carries state between them
            torch.manual_seed(11)
            fb = list(fast)
            torch.manual_seed(11)
            sb = list(slow)
            assert len(fb) == len(sb) > 0
            for x, y in zip(fb, sb):
                assert _close(x, y), ds


def test_no_fast_path_for_plain_functions_or_lists() -> None:
    ds = ArrayDataset(torch.zeros(4, 2, 2, 1, dtype=torch.uint8), torch.arange(4))
    assert not DataLoader(ds.transform_first(lambda x: x), batch_size=2).fast_path
    assert not DataLoader(SimpleDataset([1, 2, 3]), batch_size=2).fast_path
    assert DataLoader(ds.transform_first(transforms.ToTensor()), batch_size=2).fast_path


def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@pytest.mark.parametrize("thread_pool", [True, False])
def test_dataloader_workers_match_single_process(thread_pool: bool) -> None:
    x = torch.arange(40, dtype=torch.float32).reshape(20, 2)
    ds = ArrayDataset(x, np.arange(20)).transform_first(_double)
    ref_dl = DataLoader(ds, batch_size=3, last_batch="rollover")
    dl = DataLoader(ds, 3, last_batch="rollover", num_workers=2, thread_pool=thread_pool, prefetch=3)
    for _ in range(2):  # rollover state lives in the main process, across epochs
        assert len(dl) == len(ref_dl)
        got, ref = list(dl), list(ref_dl)
        assert len(got) == len(ref) > 0
        for x, y in zip(got, ref):
            assert _close(x, y)
    # fast path in workers too
    images = torch.arange(30, dtype=torch.uint8).reshape(5, 3, 2, 1)
    fast = ArrayDataset(images).transform(transforms.ToTensor())
    got = list(DataLoader(fast, batch_size=2, num_workers=2, thread_pool=thread_pool))
    assert [b.shape[0] for b in got] == [2, 2, 1] and got[0].shape[1:] == (1, 3, 2)


def test_public_names() -> None:
    for name in ("Dataset", "SimpleDataset", "ArrayDataset", "Sampler", "SequentialSampler", "RandomSampler",
                 "FilterSampler", "BatchSampler", "IntervalSampler", "SplitSampler", "DataLoader", "vision"):
        assert hasattr(gdata, name), name


class _CountingDataset(gdata.Dataset):
    """Counts its reads (in this process: used with threads or no workers)."""

    def __init__(self, n: int) -> None:
        self.n, self.reads = n, 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, idx: int) -> torch.Tensor:
        self.reads += 1
        return torch.tensor([float(idx)])


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_auto_reload_refresh_clean(num_workers: int) -> None:
    # MXNet 1.9's auto_reload keyword: same batches every epoch, whether prefetched or not
    for auto_reload in (False, True):
        dl = DataLoader(SimpleDataset(np.arange(7, dtype=np.float32)), batch_size=3, auto_reload=auto_reload,
                        num_workers=num_workers)
        assert dl.auto_reload is auto_reload and (dl._iter is not None) == auto_reload
        for _ in range(2):
            assert [b.tolist() for b in dl] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0]]
            assert (dl._iter is not None) == auto_reload  # next epoch made as this one ended
        dl.clean()
        assert dl._iter is None
        dl.refresh()
        assert dl._iter is not None
        assert len(list(dl)) == 3
    # a refreshed epoch serves one iterator; a second iter() gets a fresh epoch of its own
    ds = _CountingDataset(4)
    dl = DataLoader(ds, batch_size=2, thread_pool=True, num_workers=1)
    dl.refresh()
    first, second = iter(dl), iter(dl)
    assert [b.tolist() for b in first] == [b.tolist() for b in second] == [[[0.0], [1.0]], [[2.0], [3.0]]]


@pytest.mark.parametrize("finish_the_pass", [True, False])
def test_a_dropped_loader_is_freed_at_once_and_its_workers_exit(finish_the_pass: bool) -> None:
    # A loader in a reference cycle is freed by the garbage collector, which closes its worker
    # queues before torch's iterator can send the workers their stop: each worker then cost a 5 s
    # join timeout. So a dropped loader must be freed at once, by reference counting — also when
    # torch's persistent iterator still holds an unfinished pass.
    dl = DataLoader(SimpleDataset(np.arange(7, dtype=np.float32)), batch_size=3, num_workers=2)
    it = iter(dl)
    if finish_the_pass:
        assert [b.tolist() for b in it] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0]]
    else:
        assert next(it).tolist() == [0.0, 1.0, 2.0]
    workers = list(dl._torch_loader._iterator._workers)  # type: ignore[union-attr]
    assert len(workers) == 2 and all(w.is_alive() for w in workers)
    ref = weakref.ref(dl)
    gc.disable()
    try:
        del dl, it
        assert ref() is None, "the DataLoader is kept alive by a reference cycle"
    finally:
        gc.enable()
    for w in workers:
        w.join(timeout=30)
    assert [w.exitcode for w in workers] == [0, 0]


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "threads"])
def test_pin_memory_batches_report_cpu_pinned(workers: int) -> None:
    import mxtorch as mx

    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    plain = gdata.DataLoader(gdata.ArrayDataset(x), 4)
    assert all(b.context == mx.cpu(0) for b in plain)
    pinned = gdata.DataLoader(gdata.ArrayDataset(x), 4, pin_memory=True, pin_device_id=1,
                              num_workers=workers, thread_pool=True)
    batches = list(pinned)
    assert [b.context for b in batches] == [mx.cpu_pinned(1)] * 3
    np.testing.assert_array_equal(np.concatenate([b.numpy() for b in batches]), x)
    with pytest.raises(ValueError, match="pin_device_id"):
        gdata.DataLoader(gdata.ArrayDataset(x), 4, pin_memory=True, pin_device_id=-1)
