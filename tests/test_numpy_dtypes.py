"""mxtorch.numpy_dtypes: the opt-in switch under which torch dtypes equal numpy's types and numpy
reads them (MXNet code's ``x.dtype == np.float32``, ``np.ones(shape, dtype=x.dtype)``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from mxtorch import numpy_dtypes


@pytest.fixture
def numpy_dtypes_on() -> Iterator[None]:
    assert not numpy_dtypes.numpy_dtypes_installed()
    numpy_dtypes.set_numpy_dtypes(True)
    try:
        yield
    finally:
        numpy_dtypes.set_numpy_dtypes(False)


def test_off_by_default_torch_dtypes_are_torch_s() -> None:
    before = set(torch.dtype.__dict__)
    assert torch.float32 != np.float32 and not hasattr(torch.float32, "dtype")
    with pytest.raises(TypeError):
        np.dtype(torch.float32)
    numpy_dtypes.set_numpy_dtypes(True)
    numpy_dtypes.set_numpy_dtypes(False)
    assert set(torch.dtype.__dict__) == before and torch.float32 != np.float32


@pytest.mark.usefixtures("numpy_dtypes_on")
def test_torch_dtypes_equal_numpy_types_and_numpy_reads_them() -> None:
    x = torch.zeros(2, 3, dtype=torch.float64)
    assert x.dtype == np.float64 and np.float64 == x.dtype and x.dtype != np.float32
    assert np.dtype("int32") == torch.int32 and torch.int32 == np.dtype("int32") and torch.uint8 == np.uint8
    assert np.ones((2, 3), dtype=x.dtype).dtype == np.float64  # numpy takes the torch dtype
    assert np.zeros(1, dtype=torch.bool).dtype == np.bool_
    # torch dtypes still compare by identity with each other; strings and Python types stay unequal
    assert torch.float32 == torch.float32 and torch.float32 != torch.float64
    assert torch.float32 != "float32" and torch.float64 != float  # noqa: E721 (the comparison is the test)
    assert torch.bfloat16 != np.float32
    with pytest.raises(TypeError):
        np.dtype(torch.bfloat16)  # no numpy equivalent
    # torch code keeps working: dtype= arguments, dtype-keyed dicts, promotion
    assert torch.zeros(2, dtype=x.dtype).dtype is torch.float64
    assert {torch.float64: "d"}[x.dtype] == "d" and x.dtype in (torch.float16, torch.float64)
    assert torch.promote_types(torch.float32, x.dtype) is torch.float64


def test_the_environment_variable_turns_it_on_at_import() -> None:
    code = "import numpy as np, torch, mxtorch; print(torch.float32 == np.float32)"
    env = dict(os.environ, MXTORCH_NUMPY_DTYPES="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


def test_a_bad_environment_value_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXTORCH_NUMPY_DTYPES", "maybe")
    with pytest.raises(ValueError, match="MXTORCH_NUMPY_DTYPES='maybe' is not understood"):
        numpy_dtypes.set_from_environment()
    assert not numpy_dtypes.numpy_dtypes_installed()
