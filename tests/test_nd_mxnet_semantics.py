"""MXNet rules of mx.nd that MXNet code relies on: parameter-less operators ignore keyword
attributes, and nd.save/nd.load follow MXNet's NumPy-shape file versions."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError

V2, V3 = 0xF993FAC9, 0xF993FACA


def _first_magic(path: Any) -> int:
    with open(path, "rb") as f:
        return int(struct.unpack_from("<I", f.read(28), 24)[0])  # after the 24-byte list header


def test_parameterless_operators_ignore_keyword_attributes() -> None:
    # MXNet's own CosineEmbeddingLoss calls broadcast_maximum(zeros, x, axis=1)
    zero = mx.nd.array([0.0])
    x = mx.nd.array([[0.5, -0.25], [-1.0, 2.0]])
    got = mx.nd.broadcast_maximum(zero, x, axis=1)
    assert torch.equal(got, torch.tensor([[0.5, 0.0], [0.0, 2.0]]))
    want = torch.tensor([[0.0, -0.25], [-1.0, 0.0]])
    assert torch.equal(mx.nd.broadcast_minimum(lhs=zero, rhs=x, axis=0), want)
    assert torch.equal(mx.nd.exp(mx.nd.array([0.0]), foo="bar"), torch.tensor([1.0]))
    # inputs given by keyword still count
    assert torch.equal(mx.nd.elemwise_add(lhs=x, rhs=x, axis=3), 2 * x)


def test_operators_with_parameters_still_refuse_unknown_keywords() -> None:
    with pytest.raises(TypeError, match="axis"):
        mx.nd.clip(mx.nd.array([1.0, 5.0]), 0, 2, axis=1)


def test_save_outside_np_shape_writes_v2_and_round_trips_empty_arrays(tmp_path: Any) -> None:
    path = tmp_path / "a.nd"
    arrays = [torch.zeros(2, 0, 1), torch.zeros(0, dtype=torch.int64), torch.arange(3.0)]
    mx.nd.save(str(path), arrays)
    assert _first_magic(path) == V2
    got = mx.nd.load(str(path))
    assert [tuple(g.shape) for g in got] == [(2, 0, 1), (0,), (3,)]
    assert got[1].dtype == torch.int64 and torch.equal(got[2], arrays[2])


def test_save_outside_np_shape_writes_a_scalar_as_its_legacy_shape(tmp_path: Any) -> None:
    # a 0-d tensor stands for MXNet's shape-(1,) array outside NumPy shape semantics
    path = tmp_path / "s.nd"
    mx.nd.save(str(path), {"s": torch.tensor(4.25)})
    assert _first_magic(path) == V2
    got = mx.nd.load(str(path))
    assert tuple(got["s"].shape) == (1,) and got["s"].item() == 4.25


def test_np_shape_files_round_trip_scalars_and_need_np_shape_to_load(tmp_path: Any) -> None:
    path = tmp_path / "np.nd"
    arrays = [torch.tensor(3, dtype=torch.int32), torch.zeros(0, 4), torch.ones(2, 1)]
    with mx.util.np_shape(True):
        mx.nd.save(str(path), arrays)
        got = mx.nd.load(str(path))
    assert _first_magic(path) == V3
    assert [tuple(g.shape) for g in got] == [(), (0, 4), (2, 1)] and got[0].item() == 3
    with pytest.raises(MXNetError, match="np_shape"):
        mx.nd.load(str(path))
    with open(path, "rb") as f:
        buf = f.read()
    with pytest.raises(MXNetError, match="np_shape"):
        mx.nd.load_frombuffer(buf)


def test_legacy_files_do_not_load_under_np_shape(tmp_path: Any) -> None:
    path = tmp_path / "v2.nd"
    mx.nd.save(str(path), [torch.zeros(0, 3), torch.ones(2)])
    with mx.util.np_shape(True), pytest.raises(MXNetError, match="without NumPy shape semantics"):
        mx.nd.load(str(path))
    np.testing.assert_array_equal(mx.nd.load(str(path))[1].numpy(), np.ones(2, np.float32))
