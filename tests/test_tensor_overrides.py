"""MXNet's rules on the two torch.Tensor methods mxtorch extends: x[key] = numpy array / numpy scalar /
list / tuple (opt-in: MXTORCH_NUMPY_SETITEM=1 or set_numpy_assignment), and x.__setstate__ of MXNet's
pickled NDArray state (always on: torch never calls it on its own tensors)."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import ndarray_methods


@pytest.fixture
def numpy_assignment():
    was = ndarray_methods.numpy_assignment_enabled()
    ndarray_methods.set_numpy_assignment(True)
    yield
    ndarray_methods.set_numpy_assignment(was)


def test_assignment_is_torch_own_by_default() -> None:
    # a torch user pays nothing: no Python wrapper around torch's __setitem__ after import mxtorch
    import subprocess
    import sys

    code = ("import mxtorch, torch, numpy as np; assert '__setitem__' not in torch.Tensor.__dict__; "
            "x = torch.zeros(2)\ntry:\n    x[:] = np.ones(2)\nexcept TypeError: print('refused')")
    env = {k: v for k, v in __import__("os").environ.items() if k != "MXTORCH_NUMPY_SETITEM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "refused"
    on = subprocess.run([sys.executable, "-c", "import mxtorch, torch, numpy as np; x = torch.zeros(2); "
                         "x[:] = np.ones(2); print(x.tolist())"], capture_output=True, text=True,
                        env={**env, "MXTORCH_NUMPY_SETITEM": "1"}, timeout=120)
    assert on.returncode == 0, on.stderr
    assert on.stdout.strip() == "[1.0, 1.0]"
    bad = subprocess.run([sys.executable, "-c", "import mxtorch"], capture_output=True, text=True,
                         env={**env, "MXTORCH_NUMPY_SETITEM": "maybe"}, timeout=120)
    assert bad.returncode != 0 and "MXTORCH_NUMPY_SETITEM='maybe' is not understood" in bad.stderr


def test_numpy_values_lists_and_scalars_are_assigned(numpy_assignment: None) -> None:
    a = mx.nd.zeros((3, 4))
    src = np.arange(12, dtype=np.float64).reshape(3, 4) / 4
    a[:] = src  # float64 values into a float32 array: converted to its dtype
    assert a.dtype == torch.float32 and a.tolist() == src.astype(np.float32).tolist()
    a[0] = [1, 2, 3, 4]
    a[1, 2] = np.float32(47.844944)
    a[2] = (0.5, 0.5, 0.5, 0.5)
    a[2, :2] = np.array(9.0)  # a 0-d value broadcasts
    assert a[0].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert a[1, 2].item() == np.float32(47.844944)
    assert a[2].tolist() == [9.0, 9.0, 0.5, 0.5]


def test_large_ints_keep_their_value_in_int32(numpy_assignment: None) -> None:
    b = mx.nd.zeros((2,), dtype="int32")
    b[1] = np.int64(16800001)
    b[0] = [16800002]
    assert b.tolist() == [16800002, 16800001]


def test_tensors_and_numbers_go_to_torch_unchanged(numpy_assignment: None) -> None:
    w = torch.zeros(2, 3, requires_grad=True)
    y = w * 1.0
    y[0] = torch.ones(3)  # torch's own in-place assignment, recorded by autograd
    y.sum().backward()
    assert w.grad.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]


def test_non_numeric_values_are_refused(numpy_assignment: None) -> None:
    a = mx.nd.zeros((2,))
    with pytest.raises(TypeError, match="non-numeric"):
        a[:] = ["x", None]


def test_disable_gives_torch_its_own_assignment_back(numpy_assignment: None) -> None:
    a = torch.zeros(2)
    ndarray_methods.disable()
    try:
        assert "__setitem__" not in torch.Tensor.__dict__
        with pytest.raises(TypeError, match="can't assign"):
            a[:] = np.ones(2)
    finally:
        ndarray_methods.enable(numpy_assignment=True)
    a[:] = np.ones(2)
    assert a.tolist() == [1.0, 1.0]


def _raw_float32(values: list[float], dev_type: int = 1) -> bytearray:
    # MXNet's single-array record: v2 magic, storage type, ndim, int64 dims, context, dtype flag, data
    head = struct.pack("<IiI", 0xF993FAC9, 0, 1) + struct.pack("<q", len(values))
    return bytearray(head + struct.pack("<iii", dev_type, 0, 0) + struct.pack(f"<{len(values)}f", *values))


def test_setstate_loads_mxnet_pickled_state() -> None:
    a = mx.nd.arange(1)
    a.__setstate__({"handle": _raw_float32([1.5, -2.0], dev_type=2)})  # saved on a GPU, loaded here
    assert a.tolist() == [1.5, -2.0] and a.dtype == torch.float32
    with pytest.raises(mx.MXNetError, match="truncated"):
        a.__setstate__({"handle": _raw_float32([1.0])[:-2]})
    b = torch.tensor([3.0, 4.0])
    assert pickle.loads(pickle.dumps(b)).tolist() == [3.0, 4.0]  # torch's own pickling is untouched
