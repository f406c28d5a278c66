"""MXNet's symbolic surface that MXNet code reads: top-level names, Symbol methods, composition
and inference rules (values from MXNet's API reference or worked out by hand)."""

from __future__ import annotations

import numpy as np

import mxtorch as mx


def test_top_level_np_shape_names_and_base_names() -> None:
    # MXNet's top level re-exports mxnet.util's NumPy-semantics switches
    assert mx.np_shape is mx.util.np_shape and mx.is_np_shape is mx.util.is_np_shape
    assert {"np_shape", "use_np", "set_np_shape", "is_np_array"} <= set(dir(mx))
    with mx.np_shape(True):
        assert mx.is_np_shape()
    assert not mx.is_np_shape()
    assert mx.base.mx_real_t is np.float32
