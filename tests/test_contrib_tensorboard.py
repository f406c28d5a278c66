"""mx.contrib.tensorboard (LogMetricsCallback under Module.fit) and mxtorch.contrib.tensorboard's
SummaryWriter taking NDArrays; the event files are read back with tensorboard's EventAccumulator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import mxtorch as mx

pytest.importorskip("tensorboard", reason="the tensorboard extra: pip install 'mxtorch[tensorboard]'")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _events(folder: str) -> EventAccumulator:
    acc = EventAccumulator(folder, size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


def _mlp() -> Any:
    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=6, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(act, num_hidden=2, name="fc2"), name="softmax")


def test_log_metrics_callback_under_module_fit(tmp_path):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 4, generator=g)
    y = (x[:, 0] > 0).float()
    mod = mx.mod.Module(_mlp())
    seen: list[float] = []

    def record(param: Any) -> None:  # the value the callback after it writes
        seen.append(dict(param.eval_metric.get_name_value())["accuracy"])

    train_dir, eval_dir = str(tmp_path / "train"), str(tmp_path / "eval")
    train_cb = mx.contrib.tensorboard.LogMetricsCallback(train_dir, prefix="train")
    eval_cb = mx.contrib.tensorboard.LogMetricsCallback(eval_dir)
    hist = train_cb.node_histogram_visualization(prefix="w", node_names=["fc1_weight"])
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=6), eval_data=mx.io.NDArrayIter(x, y, batch_size=6),
            num_epoch=2, optimizer_params={"learning_rate": 0.5},
            batch_end_callback=[record, train_cb], eval_end_callback=eval_cb, epoch_end_callback=hist)
    train, evals = _events(train_dir), _events(eval_dir)
    scalars = train.Scalars("train-accuracy")
    assert [s.step for s in scalars] == list(range(8))  # 4 batches x 2 epochs
    np.testing.assert_allclose([s.value for s in scalars], seen, rtol=1e-6)
    assert evals.Tags()["scalars"] == ["accuracy"]  # no prefix: the metric's own name
    score = mod.score(mx.io.NDArrayIter(x, y, batch_size=6), "acc")[0][1]
    assert evals.Scalars("accuracy")[-1].value == pytest.approx(score)  # after the last epoch
    assert len(evals.Scalars("accuracy")) == 2
    histograms = train.Histograms("w-fc1_weight")
    assert [h.step for h in histograms] == [0, 1]
    assert histograms[0].histogram_value.num == 6 * 4


def test_summary_writer_takes_ndarrays(tmp_path):
    from mxtorch.contrib.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path))
    w.add_scalar("loss", mx.nd.array([0.25]), global_step=3)
    grad_x = mx.nd.ones((2,))
    grad_x.attach_grad()
    with mx.autograd.record():
        recorded = (grad_x * 1.5).sum()
    w.add_scalar("recorded", recorded, 4)  # an array autograd records
    sparse = mx.nd.sparse.row_sparse_array((torch.full((1, 3), 2.0), torch.tensor([1])), shape=(4, 3))
    w.add_histogram("sparse", sparse, 0)
    w.add_histogram("bf16", mx.nd.array([1.0, 2.0, 3.0], dtype="bfloat16"), 0)
    w.add_scalars("pair", {"a": mx.nd.array([1.0]), "b": mx.nd.array([2.0])}, 0)
    w.close()
    acc = _events(str(tmp_path))
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == [(3, 0.25)]
    assert acc.Scalars("recorded")[0].value == 3.0
    h = acc.Histograms("sparse")[0].histogram_value
    assert (h.num, h.sum, h.min, h.max) == (12, 6.0, 0.0, 2.0)  # the dense array: 9 zeros, three 2s
    assert acc.Histograms("bf16")[0].histogram_value.sum == 6.0


# ---- ScalarEventFile: mxtorch train --tensorboard's own event writer ------------------------------
def _records(path: str) -> list[bytes]:
    """The data of every TFRecord in ``path``, each record's two CRCs checked by tensorboard's own code."""
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    raw, out, at = open(path, "rb").read(), [], 0
    while at < len(raw):
        header = raw[at:at + 8]
        (n,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", raw[at + 8:at + 12])[0] == masked_crc32c(header)
        data = raw[at + 12:at + 12 + n]
        assert struct.unpack("<I", raw[at + 12 + n:at + 16 + n])[0] == masked_crc32c(data), len(out)
        out.append(data)
        at += 16 + n
    return out


def test_crc32c_is_castagnolis():
    import os

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as reference

    from mxtorch.contrib.tensorboard_events import crc32c, masked_crc32c

    assert crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value
    for n in (0, 1, 7, 8, 150, 1000):
        data = os.urandom(n)
        assert masked_crc32c(data) == reference(data)


def test_scalar_event_file_reads_back_with_every_crc_right(tmp_path):
    from tensorboard.compat.proto.event_pb2 import Event

    from mxtorch.contrib import tensorboard_events
    from mxtorch.contrib.tensorboard_events import ScalarEventFile

    g = np.random.default_rng(0)
    w = ScalarEventFile(str(tmp_path / "tb"))
    written: dict[str, list[tuple[int, float]]] = {}
    # steps whose encodings take 1, 2, 3, 5 and 10 bytes; a step's six tags, then one tag, then kinds past
    # the number that get CRC tables (those are CRC'd byte by byte)
    steps = [0, 1, 127, 128, 16383, 16384, 2 ** 21, 2 ** 40, -1]
    kinds = [[f"rank0/{k}" for k in ("step_time", "data_wait", "comm_wait")] + ["train/loss", "train/lr"],
             ["val/accuracy"]] + [[f"extra/{i}"] for i in range(tensorboard_events._MAX_KINDS + 2)]
    for tags in kinds:
        for step in steps:
            scalars = {t: float(g.normal() * 10.0 ** g.integers(-6, 6)) for t in tags}
            w.add_scalars(scalars, step)
            for t, v in scalars.items():
                written.setdefault(t, []).append((step, v))
    w.add_scalars({"big": 1e39, "nan": float("nan")}, 3)  # beyond float32: infinite, as protobuf stores it
    w.close()
    records = _records(w.path)
    first = Event.FromString(records[0])
    assert first.file_version == "brain.Event:2" and len(records) == 1 + len(kinds) * len(steps) + 1
    acc = _events(str(tmp_path / "tb"))
    assert set(acc.Tags()["scalars"]) == set(written) | {"big", "nan"}
    for tag, pairs in written.items():
        got = acc.Scalars(tag)
        assert [e.step for e in got] == [s for s, _ in pairs]
        assert [e.value for e in got] == pytest.approx([float(np.float32(v)) for _, v in pairs], rel=1e-6)
    assert acc.Scalars("big")[0].value == float("inf") and np.isnan(acc.Scalars("nan")[0].value)
