"""mx.io.ImageRecordIter against MXNet 1.9.1's batches on tests/data/recordio (label order,
parts, round_batch padding, pixels) and its augmentation options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.recordio import RecordIOError

DATA = Path(__file__).parent / "data" / "recordio"
EXPECTED = json.loads((DATA / "expected.json").read_text())
ARRAYS = np.load(DATA / "expected.npz")
REC = str(DATA / "images.rec")
SHAPE = (3, 4, 4)


def _batches(it: mx.io.ImageRecordIter) -> list[tuple[list[float], int, np.ndarray]]:
    return [(b.label[0].tolist(), b.pad, b.data[0].numpy()) for b in it]


@pytest.mark.parametrize("name,kw", [("center", {}), ("resize", {"resize": 6}),
                                     ("parts0", {"num_parts": 2, "part_index": 0}),
                                     ("parts1", {"num_parts": 2, "part_index": 1})])
def test_labels_padding_and_pixels_as_mxnet(name: str, kw: dict) -> None:
    it = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=SHAPE, batch_size=4, preprocess_threads=2, **kw)
    got = _batches(it)
    want = EXPECTED["iter"][name]
    assert [(labels, pad) for labels, pad, _ in got] == [(b["label"], b["pad"]) for b in want]
    for i, (_, _, data) in enumerate(got):
        ref = ARRAYS[f"iter_{name}_{i}"]
        assert data.dtype == np.float32 and data.shape == ref.shape == (4, *SHAPE)
        # PNG pixels equal; a bilinear resize may differ by OpenCV's fixed-point rounding
        np.testing.assert_allclose(data, ref, atol=0 if name != "resize" else 1)


def test_parts_split_without_overlap_or_loss() -> None:
    seen = []
    for part in range(3):
        it = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=SHAPE, batch_size=1, num_parts=3,
                                   part_index=part)
        seen += [label for labels, _, _ in _batches(it) for label in labels]
    assert sorted(seen) == [float(i) for i in range(10)]


def test_round_batch_resumes_after_the_wrapped_records_next_epoch() -> None:
    it = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=SHAPE, batch_size=4)
    epochs = []
    for _ in range(3):
        epochs.append([(labels, pad) for labels, pad, _ in _batches(it)])
        it.reset()
    # measured on MXNet 1.9.1: epoch 2 starts after records 0 and 1, which filled epoch 1's last batch
    assert epochs[1] == [([2.0, 3.0, 4.0, 5.0], 0), ([6.0, 7.0, 8.0, 9.0], 0)]
    assert epochs[0] == epochs[2] == [(b["label"], b["pad"]) for b in EXPECTED["iter"]["center"]]


def test_no_round_batch_pads_the_last_batch() -> None:
    it = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=SHAPE, batch_size=4, round_batch=False)
    got = _batches(it)
    assert [labels[:2] for labels, _, _ in got][-1] == [8.0, 9.0]
    assert got[-1][1] == 2 and [pad for _, pad, _ in got[:-1]] == [0, 0]


def test_shuffle_is_a_seeded_permutation_and_augmenters_keep_shape_and_range() -> None:
    def labels(**kw: object) -> list[float]:
        it = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=SHAPE, batch_size=5, shuffle=True, **kw)
        return [x for b in _batches(it) for x in b[0]]
    assert labels(seed=1) == labels(seed=1) != labels(seed=2)
    assert sorted(labels(seed=1)) == [float(i) for i in range(10)]
    it = mx.io.ImageRecordIter(path_imgrec=REC, path_imgidx=str(DATA / "images.idx"), data_shape=(3, 5, 5),
                               batch_size=5, rand_crop=True, rand_mirror=True, mean_r=10, mean_g=20,
                               mean_b=30, std_r=2, std_g=2, std_b=2, scale=0.5)
    assert it.provide_data[0].shape == (5, 3, 5, 5) and it.provide_label[0].shape == (5,)
    for _, _, data in _batches(it):
        assert data.shape == (5, 3, 5, 5)
        lows = (0 - np.array([10, 20, 30])) * 0.25
        highs = (255 - np.array([10, 20, 30])) * 0.25
        assert (data.min(axis=(0, 2, 3)) >= lows).all() and (data.max(axis=(0, 2, 3)) <= highs).all()


def test_normalisation_is_mean_scale_std_per_rgb_channel() -> None:
    plain = _batches(mx.io.ImageRecordIter(path_imgrec=REC, data_shape=SHAPE, batch_size=4))[0][2]
    norm = _batches(mx.io.ImageRecordIter(path_imgrec=REC, data_shape=SHAPE, batch_size=4, mean_r=10,
                                          std_r=2, scale=0.5))[0][2]
    np.testing.assert_allclose(norm[:, 0], (plain[:, 0] - 10) * 0.5 / 2)
    np.testing.assert_allclose(norm[:, 1:], plain[:, 1:] * 0.5)
    # MXNet 1.9.1 on the same file: the first image's (r, g, b) at (0, 0) with these options
    np.testing.assert_allclose(norm[0, :, 0, 0], [3.5, 69.0, 125.0])


def test_bad_arguments_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="data_shape"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(4, 4), batch_size=2)
    with pytest.raises(ValueError, match="part_index"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=SHAPE, batch_size=2, part_index=2, num_parts=2)
    with pytest.raises(MXNetError, match="not a file"):
        mx.io.ImageRecordIter(path_imgrec=str(tmp_path / "none.rec"), data_shape=SHAPE, batch_size=2)
    bad = tmp_path / "bad.rec"
    bad.write_bytes((DATA / "images.rec").read_bytes()[:-7])
    with pytest.raises(RecordIOError, match=r"bad\.rec: record at offset 3420 is .*truncated"):
        mx.io.ImageRecordIter(path_imgrec=str(bad), data_shape=SHAPE, batch_size=2)
    junk = tmp_path / "junk.rec"
    w = mx.recordio.MXRecordIO(junk, "w")
    w.write(mx.recordio.pack(mx.recordio.IRHeader(0, 1.0, 0, 0), b"not an image"))
    w.close()
    it = mx.io.ImageRecordIter(path_imgrec=str(junk), data_shape=SHAPE, batch_size=1)
    with pytest.raises(MXNetError, match=r"junk\.rec: record at offset 0: cannot decode"):
        it.next()


def test_module_fit_and_a_gluon_loop_train_from_it() -> None:
    it = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=SHAPE, batch_size=4, scale=1 / 255)
    data = mx.sym.Variable("data")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Flatten(data), num_hidden=10), name="softmax")
    mod = mx.mod.Module(net, data_names=["data"], label_names=["softmax_label"])
    mod.fit(it, num_epoch=5, optimizer="sgd", optimizer_params={"learning_rate": 0.5}, eval_metric="acc")
    assert mod.score(it, "acc")[0][1] > 0.3  # ten images, ten labels: memorised well above chance
    dense = mx.gluon.nn.Dense(10)
    dense.initialize()
    trainer = mx.gluon.Trainer(dense.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    it.reset()
    for batch in it:
        with mx.autograd.record():
            loss = loss_fn(dense(batch.data[0].reshape(4, -1)), batch.label[0])
        loss.backward()
        trainer.step(4)
    assert dense.weight.grad() is not None


def test_prefetching_changes_nothing_but_timing() -> None:
    import random

    runs = []
    for prefetch in (1, 4):
        random.seed(11)
        it = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 5, 5), batch_size=3, rand_crop=True,
                                   rand_mirror=True, preprocess_threads=3, prefetch_buffer=prefetch)
        epochs = []
        for _ in range(2):
            epochs.append(_batches(it))
            it.reset()
        it.reset()  # mid-epoch resets with batches in flight must not leak them
        it.next()
        it.reset()
        epochs.append(_batches(it))
        runs.append(epochs)
        it.close()
    for a, b in zip(*runs, strict=True):
        assert [(x[0], x[1]) for x in a] == [(x[0], x[1]) for x in b]
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x[2], y[2])
