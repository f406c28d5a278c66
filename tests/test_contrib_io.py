"""mx.contrib.io.DataLoaderIter: a Gluon DataLoader's batches as DataBatches (shapes from the
first batch, cast to dtype, a short last batch padded)."""

from __future__ import annotations

import numpy as np
import pytest

import mxtorch as mx
from mxtorch.contrib.io import DataLoaderIter


def _loader(n: int, batch: int, last_batch: str) -> mx.gluon.data.DataLoader:
    data = np.arange(n * 3, dtype=np.float64).reshape(n, 3)
    label = np.arange(n, dtype=np.int64)
    return mx.gluon.data.DataLoader(mx.gluon.data.ArrayDataset(data, label), batch, last_batch=last_batch)


def test_batches_shapes_and_padding() -> None:
    it = DataLoaderIter(_loader(7, 3, "keep"), dtype="float16")
    assert it.provide_data == [("data", (3, 3))] and it.provide_label == [("softmax_label", (3,))]
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 2]
    last = batches[-1]
    assert last.data[0].dtype == mx.nd.array([1], dtype="float16").dtype
    assert last.data[0].shape == (3, 3) and last.label[0].tolist() == [6.0, 0.0, 0.0]
    it.reset()
    assert len(list(it)) == 3
    assert len(list(DataLoaderIter(_loader(7, 3, "discard")))) == 2


def test_an_empty_loader_is_refused() -> None:
    with pytest.raises(ValueError, match="yields no batch"):
        DataLoaderIter(_loader(2, 3, "discard"))
