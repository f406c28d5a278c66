"""mx.io: DataDesc / DataBatch / DataIter, NDArrayIter, CSVIter, MNISTIter, ResizeIter,
PrefetchingIter and DataLoaderIter.

Expected batches are worked out by hand from MXNet 1.x's rules (python/mxnet/io/io.py,
src/io/iter_csv.cc, iter_batchloader.h, iter_mnist.cc); the NDArrayIter (pad / discard /
roll_over, seeded shuffle over epochs) and CSVIter (round_batch on and off) cases were also run
once through MXNet 1.9.1 by hand and gave the same batches.  The MNISTIter shuffle order is a
fixture recorded from MXNet 1.9.1 (tests/data/mxnet_mnistiter_t10k_order.json).
"""

from __future__ import annotations

import gc
import gzip
import json
import logging
import pickle
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon.data import ArrayDataset, DataLoader
from mxtorch.io import (
    CSVIter,
    DataBatch,
    DataDesc,
    DataIter,
    DataLoaderIter,
    MNISTIter,
    NDArrayIter,
    PrefetchingIter,
    ResizeIter,
)
from mxtorch.io.mnist_iter import mxnet_shuffle_order

ROOT = Path(mx.io.EMBEDDED_FASHION_MNIST_ROOT)
T10K_IMAGES = ROOT / "t10k-images-idx3-ubyte.gz"
T10K_LABELS = ROOT / "t10k-labels-idx1-ubyte.gz"
FIXTURE = Path(__file__).parent / "data" / "mxnet_mnistiter_t10k_order.json"


def _rows(batch: DataBatch, k: int = 0) -> list[Any]:
    assert batch.data is not None
    return batch.data[k].numpy().tolist()


def _epoch(it: DataIter) -> list[DataBatch]:
    out = list(it)
    it.reset()
    return out


# DataDesc / DataBatch ----------

def test_datadesc_is_a_name_shape_tuple_with_dtype_and_layout() -> None:
    d = DataDesc("data", [2, 3])
    assert d == ("data", (2, 3)) and d.name == "data" and d.shape == (2, 3)
    assert d.dtype is np.float32 and d.layout == "NCHW"
    assert repr(d) == "DataDesc[data,(2, 3),<class 'numpy.float32'>,NCHW]"
    e = pickle.loads(pickle.dumps(DataDesc("x", (1,), np.int32, "NT")))
    assert (e, e.dtype, e.layout) == (("x", (1,)), np.int32, "NT")


def test_datadesc_batch_axis_and_get_list() -> None:
    assert DataDesc.get_batch_axis("NCHW") == 0
    assert DataDesc.get_batch_axis("TNC") == 1
    assert DataDesc.get_batch_axis(None) == 0
    assert DataDesc.get_batch_axis("TC") == -1
    plain = DataDesc.get_list([("a", (1,)), ("b", (2, 2))], None)
    assert [(d.name, d.shape, d.dtype) for d in plain] == [("a", (1,), np.float32), ("b", (2, 2), np.float32)]
    typed = DataDesc.get_list([("a", (1,)), ("b", (2,))], [("b", np.float16), ("a", np.int32)])
    assert [d.dtype for d in typed] == [np.int32, np.float16]
    with pytest.raises(ValueError, match=r"no dtype given for \['b'\]"):
        DataDesc.get_list([("a", (1,)), ("b", (2,))], [("a", np.int32)])


def test_databatch_fields_and_checks() -> None:
    x = torch.ones(2, 3)
    b = DataBatch([x], [torch.zeros(2)], pad=1, index=np.array([4, 5]), bucket_key=7,
                  provide_data=[DataDesc("data", (2, 3))])
    assert b.data == [x] and b.pad == 1 and b.bucket_key == 7 and b.index.tolist() == [4, 5]
    assert str(b) == "DataBatch: data shapes: [(2, 3)] label shapes: [(2,)]"
    assert DataBatch([x]).label is None and DataBatch([x]).provide_label is None
    with pytest.raises(TypeError, match="data must be a list"):
        DataBatch(x)
    with pytest.raises(TypeError, match="label must be a list"):
        DataBatch([x], label=x)


def test_dataiter_base_builds_batches_from_the_getters() -> None:
    class Count(DataIter):
        def __init__(self) -> None:
            super().__init__(batch_size=2)
            self.i = 0

        def reset(self) -> None:
            self.i = 0

        def iter_next(self) -> bool:
            self.i += 1
            return self.i <= 3

        def getdata(self) -> list[Any]:
            return [torch.full((2,), float(self.i))]

        def getlabel(self) -> list[Any]:
            return [torch.zeros(2)]

    it = Count()
    assert [b.data[0].tolist() for b in it] == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]
    with pytest.raises(StopIteration):
        it.next()
    it.reset()
    b = next(it)
    assert b.pad == 0 and b.index is None and it.batch_size == 2
    with pytest.raises(NotImplementedError, match="iter_next"):
        DataIter().next()


# NDArrayIter ----------
X10 = np.arange(20).reshape(10, 2)  # example i is [2i, 2i+1]


def _ex(idx: list[int]) -> list[list[float]]:
    return [[2.0 * i, 2.0 * i + 1] for i in idx]


def test_ndarrayiter_pad_fills_from_the_start() -> None:
    it = NDArrayIter(X10, np.arange(10), batch_size=4)
    batches = _epoch(it)
    assert [_rows(b) for b in batches] == [_ex([0, 1, 2, 3]), _ex([4, 5, 6, 7]), _ex([8, 9, 0, 1])]
    assert [b.label[0].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    assert [b.pad for b in batches] == [0, 0, 2]
    assert all(b.index is None for b in batches)
    assert batches[0].data[0].dtype == torch.float32  # numpy input: float32, as mx.nd.array
    assert it.provide_data == [("data", (4, 2))] and it.provide_label == [("softmax_label", (4,))]
    assert it.provide_data[0].dtype is np.float32
    assert [_rows(b) for b in _epoch(it)] == [_rows(b) for b in batches]  # same again after reset


def test_ndarrayiter_pad_with_batch_larger_than_data_repeats_the_data() -> None:
    batches = _epoch(NDArrayIter(X10[:3], batch_size=8))
    assert len(batches) == 1 and batches[0].pad == 5
    assert _rows(batches[0]) == _ex([0, 1, 2, 0, 1, 2, 0, 1])
    assert batches[0].label == []


def test_ndarrayiter_discard_drops_the_incomplete_batch() -> None:
    it = NDArrayIter(X10, batch_size=3, last_batch_handle="discard")
    for _ in range(2):
        batches = _epoch(it)
        assert [_rows(b) for b in batches] == [_ex([0, 1, 2]), _ex([3, 4, 5]), _ex([6, 7, 8])]
        assert [b.pad for b in batches] == [0, 0, 0]


def test_ndarrayiter_roll_over_carries_the_rest_into_the_next_epoch() -> None:
    it = NDArrayIter(X10, np.arange(10), batch_size=3, last_batch_handle="roll_over")
    epochs = [_epoch(it) for _ in range(3)]
    # 10 examples, 3 per batch: the stream 0..9,0..9,... cut into 3s; an epoch ends when fewer
    # than 3 examples of it are left, and those open the next epoch (pad = their number).
    assert [[b.label[0].tolist() for b in e] for e in epochs] == [
        [[0, 1, 2], [3, 4, 5], [6, 7, 8]],
        [[9, 0, 1], [2, 3, 4], [5, 6, 7]],
        [[8, 9, 0], [1, 2, 3], [4, 5, 6], [7, 8, 9]],
    ]
    assert [[b.pad for b in e] for e in epochs] == [[0, 0, 0], [1, 0, 0], [2, 0, 0, 0]]
    assert _rows(epochs[1][0]) == _ex([9, 0, 1])
    # hard_reset forgets the carried-over examples
    list(it)
    assert it.cursor > 0
    it.hard_reset()
    assert next(it).label[0].tolist() == [0, 1, 2]


def test_ndarrayiter_shuffle_follows_numpys_global_rng() -> None:
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    np.random.seed(42)
    idx = np.arange(6)
    np.random.shuffle(idx)
    idx1 = idx.copy()
    np.random.shuffle(idx)  # MXNet shuffles its index again in place at reset()...
    idx2 = idx.copy()
    np.random.seed(42)
    it = NDArrayIter(x, x[:, 0] * 10, batch_size=6, shuffle=True)
    first = next(it)
    it.reset()
    second = next(it)
    np.testing.assert_array_equal(first.data[0].numpy(), x[idx1])
    np.testing.assert_array_equal(first.label[0].numpy(), x[idx1, 0] * 10)
    # ... and applies it to the already shuffled arrays
    np.testing.assert_array_equal(second.data[0].numpy(), x[idx1][idx2])
    np.testing.assert_array_equal(second.label[0].numpy(), x[idx1][idx2][:, 0] * 10)


def test_ndarrayiter_shuffle_with_pad_pads_from_the_shuffled_order() -> None:
    np.random.seed(3)
    it = NDArrayIter(X10, np.arange(10), batch_size=4, shuffle=True)
    np.random.seed(3)
    idx = np.arange(10)
    np.random.shuffle(idx)
    labels = [b.label[0].tolist() for b in it]
    assert labels == [idx[0:4].tolist(), idx[4:8].tolist(), idx[8:10].tolist() + idx[0:2].tolist()]


def test_ndarrayiter_names_of_lists_and_dicts() -> None:
    a, b = np.zeros((4, 2)), np.ones((4, 3))
    it = NDArrayIter([a, b], {"zeta": np.zeros(4), "alpha": np.ones((4, 1))}, batch_size=2)
    assert it.provide_data == [("_0_data", (2, 2)), ("_1_data", (2, 3))]
    assert it.provide_label == [("alpha", (2, 1)), ("zeta", (2,))]
    batch = next(it)
    assert [tuple(d.shape) for d in batch.data] == [(2, 2), (2, 3)]
    assert batch.label[0].tolist() == [[1.0], [1.0]]
    named = NDArrayIter({"b": b, "a": a}, batch_size=2, data_name="ignored")
    assert [d.name for d in named.provide_data] == ["a", "b"]
    single = NDArrayIter([a], [np.zeros(4)], batch_size=2, data_name="x", label_name="y")
    assert single.provide_data == [("x", (2, 2))] and single.provide_label == [("y", (2,))]


def test_ndarrayiter_dtypes() -> None:
    t = torch.arange(8, dtype=torch.int32).reshape(4, 2)
    it = NDArrayIter(t, batch_size=2)
    assert next(it).data[0].dtype == torch.int32 and it.provide_data[0].dtype is np.int32
    shuffled = NDArrayIter(mx.nd.array(np.arange(4), dtype="int64"), batch_size=4, shuffle=True)
    assert next(shuffled).data[0].dtype == torch.int64  # kept (MXNet would give float32 here)
    assert next(NDArrayIter(np.arange(4, dtype=np.float64), batch_size=2)).data[0].dtype == torch.float32
    assert next(NDArrayIter([[1, 2], [3, 4]], batch_size=1)).data[0].tolist() == [1.0]


def test_ndarrayiter_layout_puts_the_batch_on_the_n_axis() -> None:
    x = np.arange(2 * 5 * 3).reshape(2, 5, 3)  # (T, N, C)
    it = NDArrayIter(x, batch_size=2, layout="TNC")
    assert it.provide_data == [("data", (2, 2, 3))] and it.provide_data[0].layout == "TNC"
    batches = _epoch(it)
    np.testing.assert_array_equal(batches[0].data[0].numpy(), x[:, 0:2])
    np.testing.assert_array_equal(batches[2].data[0].numpy(), x[:, [4, 0]])
    assert batches[2].pad == 1


def test_ndarrayiter_batches_are_copies() -> None:
    src = torch.zeros(4, 2)
    batch = next(NDArrayIter(src, batch_size=2))
    batch.data[0] += 5
    assert src.sum().item() == 0.0


def test_ndarrayiter_needs_reset_after_the_end() -> None:
    it = NDArrayIter(X10, batch_size=5)
    assert len(list(it)) == 2
    with pytest.raises(StopIteration):
        it.next()
    with pytest.raises(RuntimeError, match="call reset"):
        it.getdata()


def test_ndarrayiter_csr_inputs_give_csr_batches_with_discard() -> None:
    x = np.zeros((7, 4), dtype=np.float32)
    x[np.arange(7), np.arange(7) % 4] = np.arange(1, 8)
    x[3] = 0  # an empty row
    csr = mx.nd.array(x).tostype("csr")
    it = NDArrayIter(csr, np.arange(7), batch_size=3, last_batch_handle="discard")
    batches = _epoch(it)
    assert len(batches) == 2 and all(b.data[0].stype == "csr" for b in batches)
    np.testing.assert_array_equal(batches[1].data[0].asnumpy(), x[3:6])
    np.random.seed(5)
    idx = np.arange(7)
    np.random.shuffle(idx)
    np.random.seed(5)
    shuffled = next(NDArrayIter({"data": csr}, np.arange(7), batch_size=3, shuffle=True,
                                last_batch_handle="discard"))
    np.testing.assert_array_equal(shuffled.data[0].asnumpy(), x[idx[:3]])
    assert shuffled.label[0].tolist() == idx[:3].tolist()
    with pytest.raises(NotImplementedError, match="CSR inputs need last_batch_handle='discard'"):
        NDArrayIter(csr, batch_size=3)
    with pytest.raises(TypeError, match="sparse_coo tensor"):
        NDArrayIter(torch.eye(3).to_sparse(), batch_size=1)


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(data=X10, label=np.zeros(9)), ValueError,
         r"same number of examples.*'data': 10.*'softmax_label': 9"),
        (dict(data=X10[:3], batch_size=4, last_batch_handle="discard"), ValueError, "larger than the number"),
        (dict(data=X10[:3], batch_size=4, last_batch_handle="roll_over"), ValueError, "roll_over"),
        (dict(data=X10, last_batch_handle="keep"), ValueError, r"unknown last_batch_handle 'keep'.*'pad'"),
        (dict(data=X10, batch_size=0), ValueError, "batch_size must be a positive int"),
        (dict(data=None), ValueError, "data must be given"),
        (dict(data=[]), ValueError, "empty list"),
        (dict(data="abc"), TypeError, "got str"),
        (dict(data={1: X10}), TypeError, "must be strings"),
        (dict(data=np.array(3.0)), ValueError, "scalar"),
        (dict(data=[X10, ["a", "b"]]), TypeError, "invalid input '_1_data'"),
        (dict(data=np.zeros((0, 2))), ValueError, "no examples"),
        (dict(data=X10, layout="TC"), ValueError, "one 'N'"),
        (dict(data=np.zeros(4), layout="TN"), ValueError, "no batch axis 1"),
    ],
)
def test_ndarrayiter_errors(kwargs: dict[str, Any], err: type[Exception], match: str) -> None:
    with pytest.raises(err, match=match):
        NDArrayIter(**kwargs)


# CSVIter ----------
ROWS4 = [[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [3.0, 4.0, 5.0], [4.0, 5.0, 6.0]]


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.fixture()
def data4(tmp_path: Path) -> str:
    return _write(tmp_path / "data.csv", "1,2,3\n2,3,4\n3,4,5\n4,5,6\n")


def test_csviter_round_batch_wraps_and_next_epoch_continues(data4: str) -> None:
    it = CSVIter(data_csv=data4, data_shape=(3,), batch_size=3)
    assert it.provide_data == [("data", (3, 3))] and it.provide_label == [("softmax_label", (3,))]
    epochs = [_epoch(it) for _ in range(3)]
    rows = [[_rows(b) for b in e] for e in epochs]
    assert rows == [
        [[ROWS4[0], ROWS4[1], ROWS4[2]], [ROWS4[3], ROWS4[0], ROWS4[1]]],
        [[ROWS4[2], ROWS4[3], ROWS4[0]]],
        [[ROWS4[1], ROWS4[2], ROWS4[3]]],
    ]
    assert [[b.pad for b in e] for e in epochs] == [[0, 2], [1], [0]]
    indices = [[b.index.tolist() for b in e] for e in epochs]
    assert indices == [[[0, 1, 2], [3, 0, 1]], [[2, 3, 0]], [[1, 2, 3]]]
    assert epochs[0][0].index.dtype == np.uint64
    assert epochs[0][0].label[0].tolist() == [0.0, 0.0, 0.0]  # no label_csv: labels are 0
    assert epochs[0][0].data[0].dtype == torch.float32


def test_csviter_without_round_batch_pads_with_the_previous_rows(data4: str) -> None:
    it = CSVIter(data_csv=data4, data_shape=(3,), batch_size=3, round_batch=False)
    for _ in range(2):
        first, last = _epoch(it)
        assert _rows(first) == ROWS4[0:3] and first.pad == 0
        assert _rows(last) == [ROWS4[3], ROWS4[1], ROWS4[2]] and last.pad == 2
        assert last.index.tolist() == [3, 1, 2]
    (only,) = _epoch(CSVIter(data_csv=data4, data_shape=(3,), batch_size=6, round_batch=False))
    assert only.pad == 2 and _rows(only) == ROWS4 + [[0.0, 0.0, 0.0]] * 2


def test_csviter_labels_shapes_and_int_dtype(tmp_path: Path, data4: str) -> None:
    labels = _write(tmp_path / "label.csv", "1,2\n3,4\n5,6\n7,8\n")
    it = CSVIter(data_csv=data4, data_shape=(3, 1), label_csv=labels, label_shape=(2,), batch_size=2,
                 dtype="int32", data_name="x", label_name="y")
    assert it.provide_data == [("x", (2, 3, 1))] and it.provide_label == [("y", (2, 2))]
    assert it.provide_data[0].dtype is np.int32
    b1, b2 = _epoch(it)
    assert b1.data[0].dtype == torch.int32 and b1.data[0].tolist() == [[[1], [2], [3]], [[2], [3], [4]]]
    assert b2.label[0].tolist() == [[5, 6], [7, 8]]
    one = CSVIter(data_csv=data4, data_shape=3, label_csv=_write(tmp_path / "l1.csv", "1\n2\n3\n4\n"),
                  batch_size=4, dtype=np.int64)
    labels1 = next(one).label[0]
    assert labels1.tolist() == [1, 2, 3, 4] and labels1.dtype == torch.int64


def test_csviter_reads_a_directory_skips_blank_lines_and_trailing_commas(tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    _write(folder / "b.csv", "3,4,5,\n\n4,5,6\n")
    _write(folder / "a.csv", "1,2,3\n  \n2,3,4\n")
    (b1, b2) = _epoch(CSVIter(data_csv=str(folder), data_shape=(3,), batch_size=2))
    assert _rows(b1) + _rows(b2) == ROWS4


def test_csviter_errors(tmp_path: Path, data4: str) -> None:
    with pytest.raises(MXNetError, match="not found"):
        CSVIter(data_csv=str(tmp_path / "nope.csv"), data_shape=(3,), batch_size=1)
    bad = _write(tmp_path / "bad.csv", "1,2,3\n\n2,x,4\n")
    with pytest.raises(MXNetError, match=r"row 1 \(.*bad.csv, line 3\) is malformed.*'x'"):
        CSVIter(data_csv=bad, data_shape=(3,), batch_size=1)
    short = _write(tmp_path / "short.csv", "1,2,3\n2,3\n")
    with pytest.raises(MXNetError, match=r"row 1 \(.*short.csv, line 2\) has 2 values, but the shape \(3,\)"):
        CSVIter(data_csv=short, data_shape=(3,), batch_size=1)
    parts = tmp_path / "parts"
    parts.mkdir()
    _write(parts / "1.csv", "1,2,3\n4,5,6\n")
    _write(parts / "2.csv", "7,8,9\n7,8,9,\n7,8;9,1\n")
    with pytest.raises(MXNetError, match=r"row 4 \(.*2.csv, line 3\) is malformed.*'8;9'"):
        CSVIter(data_csv=str(parts), data_shape=(3,), batch_size=1)
    with pytest.raises(MXNetError, match="does not fit in int32"):
        CSVIter(data_csv=_write(tmp_path / "big.csv", "1,2,99999999999\n"), data_shape=(3,), batch_size=1,
                dtype="int32")
    floats = _write(tmp_path / "f.csv", "1.5,2,3\n")
    with pytest.raises(MXNetError, match="must be an integer"):
        CSVIter(data_csv=floats, data_shape=(3,), batch_size=1, dtype="int32")
    labels3 = _write(tmp_path / "l3.csv", "1\n2\n3\n")
    with pytest.raises(MXNetError, match="data_csv has 4 rows but label_csv has 3"):
        CSVIter(data_csv=data4, data_shape=(3,), label_csv=labels3, batch_size=1)
    with pytest.raises(MXNetError, match="batch_size 5 is larger than the 4 rows.*round_batch=False"):
        CSVIter(data_csv=data4, data_shape=(3,), batch_size=5)
    with pytest.raises(ValueError, match="batch_size is required"):
        CSVIter(data_csv=data4, data_shape=(3,))
    with pytest.raises(ValueError, match="dtype 'float16' is not supported"):
        CSVIter(data_csv=data4, data_shape=(3,), batch_size=1, dtype="float16")
    with pytest.raises(ValueError, match="data_shape must be"):
        CSVIter(data_csv=data4, data_shape=(0,), batch_size=1)
    with pytest.raises(TypeError, match=r"unexpected argument\(s\) \['shuffle'\]"):
        CSVIter(data_csv=data4, data_shape=(3,), batch_size=1, shuffle=True)
    with pytest.raises(MXNetError, match="has no rows"):
        CSVIter(data_csv=_write(tmp_path / "empty.csv", "\n"), data_shape=(3,), batch_size=1)
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(MXNetError, match="no files"):
        CSVIter(data_csv=str(tmp_path / "emptydir"), data_shape=(3,), batch_size=1)
    it = CSVIter(data_csv=data4, data_shape=(3,), batch_size=2, prefetch_buffer=2, ctx="cpu")
    with pytest.raises(RuntimeError, match="no current batch"):
        it.getdata()


# MNISTIter ----------

def _idx(path: Path, header: int) -> np.ndarray:
    return np.frombuffer(gzip.decompress(path.read_bytes()), dtype=np.uint8, offset=header)


@pytest.fixture(scope="module")
def t10k() -> tuple[np.ndarray, np.ndarray]:
    return _idx(T10K_IMAGES, 16).reshape(-1, 28, 28), _idx(T10K_LABELS, 8)


def test_mnistiter_reads_the_shipped_subset_in_order(t10k: tuple[np.ndarray, np.ndarray]) -> None:
    images, labels = t10k
    it = MNISTIter(image=str(T10K_IMAGES), label=str(T10K_LABELS), batch_size=300, shuffle=False, silent=True)
    assert it.provide_data == [("data", (300, 1, 28, 28))] and it.provide_label == [("softmax_label", (300,))]
    batches = _epoch(it)
    assert len(batches) == 6  # 2000 // 300; the last 200 images are dropped
    b = batches[1]
    np.testing.assert_array_equal(b.data[0].numpy(), images[300:600, None].astype(np.float32) / 256)
    np.testing.assert_array_equal(b.label[0].numpy(), labels[300:600].astype(np.float32))
    assert b.pad == 0 and b.index.tolist() == list(range(300, 600))
    assert b.data[0].dtype == torch.float32 and float(b.data[0].max()) <= 255 / 256
    assert len(_epoch(it)) == 6


def test_mnistiter_flat_parts_and_uncompressed_files(
    tmp_path: Path, t10k: tuple[np.ndarray, np.ndarray]
) -> None:
    images, labels = t10k
    it = MNISTIter(image=str(T10K_IMAGES), label=str(T10K_LABELS), batch_size=300, shuffle=False, flat=True,
                   num_parts=3, part_index=1, silent=True)
    batches = _epoch(it)
    # part 1 of 3 of 2000: [int(2000/3), int(2000/3*2)) = [666, 1333), 667 images, 2 batches
    assert it.num_data == 667 and len(batches) == 2
    np.testing.assert_array_equal(batches[0].data[0].numpy(), images[666:966].reshape(300, 784) / 256)
    assert batches[0].index[0] == 666
    plain_img, plain_lbl = tmp_path / "t10k-images-idx3-ubyte", tmp_path / "t10k-labels-idx1-ubyte"
    plain_img.write_bytes(gzip.decompress(T10K_IMAGES.read_bytes()))
    plain_lbl.write_bytes(gzip.decompress(T10K_LABELS.read_bytes()))
    raw = MNISTIter(image=str(plain_img), label=str(plain_lbl), batch_size=2000, shuffle=False, silent=True)
    np.testing.assert_array_equal(next(raw).label[0].numpy(), labels)
    # a name without .gz finds the compressed file beside it
    found = MNISTIter(image=str(ROOT / "t10k-images-idx3-ubyte"), label=str(ROOT / "t10k-labels-idx1-ubyte"),
                      batch_size=10, shuffle=False, silent=True)
    np.testing.assert_array_equal(next(found).label[0].numpy(), labels[:10])


def test_mnistiter_shuffle_matches_mxnet(t10k: tuple[np.ndarray, np.ndarray]) -> None:
    images, labels = t10k
    recorded = json.loads(FIXTURE.read_text())
    for seed in (0, 5):
        order = recorded[f"seed{seed}"]
        it = MNISTIter(image=str(T10K_IMAGES), label=str(T10K_LABELS), batch_size=500, seed=seed, silent=True)
        batches = _epoch(it)
        got = np.concatenate([b.index for b in batches]).tolist()
        assert got == order
        np.testing.assert_array_equal(batches[0].data[0].numpy()[:, 0], images[order[:500]] / 256)
        np.testing.assert_array_equal(batches[3].label[0].numpy(), labels[order[1500:2000]])
        assert np.concatenate([b.index for b in _epoch(it)]).tolist() == order  # reset keeps the order
    assert sorted(mxnet_shuffle_order(50, 9).tolist()) == list(range(50))
    assert mxnet_shuffle_order(50, 9).tolist() != mxnet_shuffle_order(50, 10).tolist()


def test_mnistiter_logs_unless_silent(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mxtorch.io.mnist_iter"):
        MNISTIter(image=str(T10K_IMAGES), label=str(T10K_LABELS), batch_size=10, shuffle=False)
    assert "MNISTIter: load 2000 images, shuffle=0, shape=(10, 1, 28, 28)" in caplog.text


def test_mnistiter_errors(tmp_path: Path) -> None:
    with pytest.raises(MXNetError, match=r"image file .*nope' not found .*fashion-mnist-subset"):
        MNISTIter(image=str(tmp_path / "nope"), label=str(T10K_LABELS))
    with pytest.raises(MXNetError, match="label file"):
        MNISTIter(image=str(T10K_IMAGES), label=str(tmp_path / "nope"))
    with pytest.raises(MXNetError, match="2000 images but .* 10000 labels"):
        MNISTIter(image=str(T10K_IMAGES), label=str(ROOT / "train-labels-idx1-ubyte.gz"), silent=True)
    with pytest.raises(MXNetError, match="expected magic number"):
        MNISTIter(image=str(T10K_LABELS), label=str(T10K_LABELS), silent=True)
    with pytest.raises(ValueError, match="batch_size"):
        MNISTIter(image=str(T10K_IMAGES), label=str(T10K_LABELS), batch_size=0)
    with pytest.raises(ValueError, match=r"part_index must be in \[0, num_parts=2\)"):
        MNISTIter(image=str(T10K_IMAGES), label=str(T10K_LABELS), num_parts=2, part_index=2)
    with pytest.raises(ValueError, match="num_parts"):
        MNISTIter(image=str(T10K_IMAGES), label=str(T10K_LABELS), num_parts=0)
    with pytest.raises(TypeError, match=r"unexpected argument\(s\) \['round_batch'\]"):
        MNISTIter(image=str(T10K_IMAGES), label=str(T10K_LABELS), round_batch=True)


# ResizeIter ----------

def test_resizeiter_stretches_and_shrinks_epochs() -> None:
    inner = NDArrayIter(X10, np.arange(10), batch_size=4)  # 3 batches per epoch, the last padded by 2
    it = ResizeIter(inner, 5)
    assert it.provide_data == inner.provide_data and it.batch_size == 4
    batches = _epoch(it)
    assert [b.label[0].tolist() for b in batches] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [0, 1, 2, 3], [4, 5, 6, 7]]
    assert [b.pad for b in batches] == [0, 0, 2, 0, 0]
    assert len(_epoch(ResizeIter(inner, 2))) == 2
    assert _epoch(it)[0].label[0].tolist() == [0, 1, 2, 3]  # reset_internal: starts over


def test_resizeiter_without_internal_reset_continues() -> None:
    it = ResizeIter(NDArrayIter(X10, np.arange(10), batch_size=4), 2, reset_internal=False)
    epochs = [[b.label[0].tolist()[0] for b in _epoch(it)] for _ in range(3)]
    assert epochs == [[0, 4], [8, 0], [4, 8]]
    assert _epoch(ResizeIter(it.data_iter, 0)) == []


def test_resizeiter_errors() -> None:
    with pytest.raises(ValueError, match="size must be an int >= 0"):
        ResizeIter(NDArrayIter(X10), -1)

    class Empty(NDArrayIter):
        def next(self) -> DataBatch:
            raise StopIteration

    with pytest.raises(RuntimeError, match="no batch even right after reset"):
        next(ResizeIter(Empty(X10), 1))


# PrefetchingIter ----------

def test_prefetchingiter_equals_its_source() -> None:
    src = NDArrayIter(X10, np.arange(10), batch_size=3, last_batch_handle="roll_over")
    ref = NDArrayIter(X10, np.arange(10), batch_size=3, last_batch_handle="roll_over")
    with PrefetchingIter(src) as it:
        assert it.provide_data == ref.provide_data and it.batch_size == 3
        for _ in range(3):
            got, want = _epoch(it), _epoch(ref)
            assert [_rows(b) for b in got] == [_rows(b) for b in want]
            assert [b.label[0].tolist() for b in got] == [b.label[0].tolist() for b in want]
            assert [b.pad for b in got] == [b.pad for b in want]


def test_prefetchingiter_joins_and_renames_several_iterators() -> None:
    a = NDArrayIter({"data": X10}, np.arange(10), batch_size=5)
    b = NDArrayIter({"data": -X10}, batch_size=5)
    it = PrefetchingIter([a, b], rename_data=[{"data": "data_1"}, {"data": "data_2"}])
    try:
        assert [d.name for d in it.provide_data] == ["data_1", "data_2"]
        assert [d.name for d in it.provide_label] == ["softmax_label"]
        batches = _epoch(it)
        assert len(batches) == 2
        np.testing.assert_array_equal(batches[1].data[0].numpy(), X10[5:])
        np.testing.assert_array_equal(batches[1].data[1].numpy(), -X10[5:])
        assert batches[1].label[0].tolist() == [5, 6, 7, 8, 9]
        assert batches[0].provide_data == it.provide_data
    finally:
        it.close()


class _Flaky(NDArrayIter):
    """Raises once on its second batch."""

    failed = False

    def next(self) -> DataBatch:
        if self.cursor == 0 and not self.failed:
            self.failed = True
            raise OSError("disk went away")
        return super().next()


def test_prefetchingiter_reraises_errors_of_its_thread_and_goes_on() -> None:
    with PrefetchingIter(_Flaky(X10, batch_size=5)) as it:
        first = next(it)
        assert first.data[0][0].tolist() == [0.0, 1.0]
        with pytest.raises(OSError, match="disk went away"):
            next(it)
        assert next(it).data[0][0].tolist() == [10.0, 11.0]  # the failed read is retried
        with pytest.raises(StopIteration):
            next(it)


def test_prefetchingiter_rejects_iterators_that_disagree() -> None:
    with PrefetchingIter([NDArrayIter(X10, batch_size=5), NDArrayIter(X10[:5], batch_size=5)]) as it:
        next(it)
        with pytest.raises(RuntimeError, match=r"iterators \[1\] ended while the others"):
            next(it)
    with PrefetchingIter([NDArrayIter(X10, batch_size=4), NDArrayIter(X10[:9], batch_size=4)]) as it:
        next(it)
        next(it)
        with pytest.raises(RuntimeError, match=r"different pad values \[2, 3\]"):
            next(it)
    with pytest.raises(ValueError, match="iters is empty"):
        PrefetchingIter([])
    with pytest.raises(ValueError, match="rename_data has 1 dicts for 2 iterators"):
        PrefetchingIter([NDArrayIter(X10), NDArrayIter(X10)], rename_data=[{}])


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mxtorch-PrefetchingIter")]


def test_prefetchingiter_shuts_its_threads_down() -> None:
    before = set(_prefetch_threads())
    it = PrefetchingIter([NDArrayIter(X10, batch_size=5), NDArrayIter(X10, batch_size=5)])
    threads = [t for t in _prefetch_threads() if t not in before]
    assert len(threads) == 2 and all(t.is_alive() for t in threads)
    it.close()
    assert not any(t.is_alive() for t in threads)
    it.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        next(it)
    it = PrefetchingIter(NDArrayIter(X10, batch_size=5))
    threads = [t for t in _prefetch_threads() if t not in before]
    del it
    gc.collect()
    for t in threads:
        t.join(timeout=5)
    assert not any(t.is_alive() for t in threads)


# DataLoaderIter ----------

def _loader(shuffle: bool = False) -> DataLoader:
    x = np.arange(20, dtype=np.int64).reshape(10, 2)
    return DataLoader(ArrayDataset(x, np.arange(10, dtype=np.int32)), batch_size=4, shuffle=shuffle)


def test_dataloaderiter_gives_module_batches_and_pads_the_last() -> None:
    it = DataLoaderIter(_loader(), data_name="x", label_name="y")
    assert it.batch_size == 4
    assert it.provide_data == [("x", (4, 2))] and it.provide_label == [("y", (4,))]
    assert it.provide_data[0].dtype is np.float32
    for _ in range(2):
        batches = _epoch(it)
        assert [b.label[0].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
        assert [b.pad for b in batches] == [0, 0, 2]
        assert _rows(batches[2]) == _ex([8, 9, 0, 1])
        assert batches[0].data[0].dtype == torch.float32 and batches[0].index is None


def test_dataloaderiter_pads_from_the_epochs_first_batch_and_keeps_dtype() -> None:
    it = DataLoaderIter(_loader(shuffle=True), dtype=None)
    batches = _epoch(it)
    first, last = batches[0].label[0].tolist(), batches[-1].label[0].tolist()
    assert last[2:] == first[:2] and batches[-1].pad == 2
    assert sorted(first + batches[1].label[0].tolist() + last[:2]) == list(range(10))
    assert batches[0].label[0].dtype == torch.int32 and batches[0].data[0].dtype == torch.int64
    one = DataLoaderIter(DataLoader(ArrayDataset(np.ones((3, 1)), np.arange(3)), batch_size=8))
    assert one.batch_size == 3 and next(one).pad == 0  # the first batch sets batch_size
    tiny = DataLoaderIter([(torch.ones(4, 1), torch.arange(4)), (torch.zeros(1, 1), torch.tensor([9]))])
    padded = _epoch(tiny)[1]
    assert padded.pad == 3 and padded.label[0].tolist() == [9.0, 0.0, 1.0, 2.0]


def test_dataloaderiter_errors() -> None:
    with pytest.raises(ValueError, match="gives no batch"):
        DataLoaderIter([])
    with pytest.raises(TypeError, match=r"\(data, label\) batches, got list of 3"):
        DataLoaderIter([[torch.ones(2), torch.ones(2), torch.ones(2)]])
    with pytest.raises(TypeError, match="label is a str"):
        DataLoaderIter([(torch.ones(2), "x")])
    with pytest.raises(ValueError, match="same .* number of examples"):
        DataLoaderIter([(torch.ones(2, 1), torch.ones(3))])
    it = DataLoaderIter([(torch.ones(2, 1), torch.ones(2)), (torch.ones(3, 1), torch.ones(3))])
    next(it)
    with pytest.raises(ValueError, match="batch of 3 examples, more than its first batch's 2"):
        next(it)
    with pytest.raises(TypeError, match="unknown dtype"):
        DataLoaderIter([(torch.ones(2), torch.ones(2))], dtype="float99")


# with mx.mod.Module ----------

def test_module_trains_on_prefetched_mnistiter_and_scores_an_ndarrayiter() -> None:
    data = mx.sym.Variable("data")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.flatten(data), num_hidden=10, name="fc"),
                               name="softmax")
    train = MNISTIter(image=str(ROOT / "train-images-idx3-ubyte.gz"),
                      label=str(ROOT / "train-labels-idx1-ubyte.gz"), batch_size=100, silent=True)
    labels = _idx(T10K_LABELS, 8)
    test_x = _idx(T10K_IMAGES, 16).reshape(-1, 1, 28, 28).astype(np.float32) / 256
    mod = mx.mod.Module(net, context=mx.cpu())
    with PrefetchingIter(train) as prefetched:
        mod.fit(prefetched, num_epoch=2, optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    test = NDArrayIter(test_x, labels, batch_size=300)  # 2000 = 6 * 300 + 200: the last batch padded
    ((name, acc),) = mod.score(test, "acc")
    assert name == "accuracy" and acc > 0.7  # a linear model on Fashion-MNIST reaches ~0.8


def test_ndarray_iter_reads_longer_labels_up_to_the_data() -> None:
    # MXNet's rule: the first data array sets the number of examples; a longer label is read up to it
    it = mx.io.NDArrayIter(np.arange(4.0).reshape(4, 1), {"label": np.arange(8.0), "w": np.arange(10.0)},
                           batch_size=2)
    batches = list(it)
    assert len(batches) == 2
    assert batches[1].label[0].tolist() == [2.0, 3.0] and batches[1].label[1].tolist() == [2.0, 3.0]
