"""``mx.io`` as MXNet code reads it: the C++-style iterators (CSVIter, MNISTIter) hand one array
from ``getdata()`` / ``getlabel()``; NDArrayIter takes scipy's CSR matrices as CSR inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import mxtorch as mx


def test_csviter_getdata_and_getlabel_are_arrays(tmp_path: Any) -> None:
    data = tmp_path / "d.csv"
    label = tmp_path / "l.csv"
    data.write_text("".join(f"{i},{i + 1},{i + 2},{i + 3}\n" for i in range(4)))
    label.write_text("".join(f"{i}\n" for i in range(4)))
    it = mx.io.CSVIter(data_csv=str(data), data_shape=(2, 2), label_csv=str(label), batch_size=2,
                       dtype="int32")
    batch = it.next()
    assert isinstance(batch.data, list) and len(batch.data) == 1  # the DataBatch keeps lists
    got = it.getdata()
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int32
    assert got.tolist() == [[[0, 1], [2, 3]], [[1, 2], [3, 4]]]
    assert it.getlabel().reshape(-1).tolist() == [0.0, 1.0]


def test_ndarrayiter_takes_scipy_csr_as_csr() -> None:
    sp = pytest.importorskip("scipy.sparse")
    dense = np.array([[0, 1.5, 0], [2.0, 0, 0], [0, 0, 3.0], [4.0, 0, 5.0]], dtype=np.float32)
    m = sp.csr_matrix(dense)
    with pytest.raises(NotImplementedError, match="discard"):  # MXNet: CSR needs 'discard'
        mx.io.NDArrayIter({"data": m}, dense, batch_size=3)
    it = mx.io.NDArrayIter({"data": m}, None, batch_size=2, last_batch_handle="discard")
    batches = list(it)
    assert len(batches) == 2
    first = batches[0].data[0]
    assert first.layout == torch.sparse_csr and first.to_dense().numpy().tolist() == dense[:2].tolist()
