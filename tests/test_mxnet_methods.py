"""MXNet method mode (opt-in): MXNet's meaning for the NDArray methods torch.Tensor also has.

Expected values are computed by hand from MXNet's NDArray reference (reshape codes, exclude=,
squeeze/flatten inplace=, bool, integer division); off by default, torch's own methods stay."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import _mxnet_methods, ndarray_methods
from mxtorch.base import MXNetError


@pytest.fixture
def mxnet_mode() -> Iterator[None]:
    was = ndarray_methods.mxnet_methods_enabled()
    ndarray_methods.set_mxnet_methods(True)
    try:
        yield
    finally:
        ndarray_methods.set_mxnet_methods(was)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MXTORCH_MXNET_METHODS", "MXTORCH_NUMPY_SETITEM")}
    env.update(extra)
    return env


def test_off_by_default_torch_methods_untouched() -> None:
    code = (
        "import torch; before = dict(vars(torch.Tensor)); import mxtorch\n"
        "from mxtorch import _mxnet_methods\n"
        "changed = [n for n in _mxnet_methods.RULES\n"
        "           if vars(torch.Tensor).get(n, None) is not before.get(n, None)]\n"
        "assert not changed, changed\n"
        "x = torch.zeros(2, 3)\n"
        "assert x.size() == (2, 3) and callable(x.size) and not isinstance(x.size, int)\n"
        "try:\n    x.reshape(0, -1)\nexcept RuntimeError: print('torch reshape')\n"
        "try:\n    bool(torch.zeros(0))\nexcept RuntimeError: print('torch bool')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["torch", "reshape", "torch", "bool"]


def test_env_switch_turns_the_mode_on_and_a_bad_value_is_refused() -> None:
    code = ("import torch, mxtorch, numpy as np; from mxtorch import ndarray_methods as m\n"
            "x = torch.zeros(2, 3); x[0] = np.ones(3)\n"
            "print(m.mxnet_methods_enabled(), x.size, x.reshape(0, -1).shape == (2, 3), x.sum().item())")
    on = subprocess.run([sys.executable, "-c", code], env=_env(MXTORCH_MXNET_METHODS="1"),
                        capture_output=True, text=True, timeout=120)
    assert on.returncode == 0, on.stderr
    assert on.stdout.split() == ["True", "6", "True", "3.0"]
    bad = subprocess.run([sys.executable, "-c", "import mxtorch"], env=_env(MXTORCH_MXNET_METHODS="maybe"),
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "MXTORCH_MXNET_METHODS='maybe' is not understood" in bad.stderr


def test_switching_off_restores_torch_exactly(mxnet_mode: None) -> None:
    assert type(torch.Tensor.__dict__["size"]).__name__ == "_SizeAttribute"
    ndarray_methods.set_mxnet_methods(False)
    assert not ndarray_methods.mxnet_methods_enabled()
    assert torch.Tensor.reshape is torch._C.TensorBase.reshape
    assert torch.Tensor.size is torch._C.TensorBase.size
    assert torch.Tensor.__dict__["split"].__module__ == "torch._tensor"  # torch's own Python method back
    assert not ndarray_methods.numpy_assignment_enabled()
    ndarray_methods.set_numpy_assignment(True)  # asked for on its own: the mode's end keeps it
    try:
        ndarray_methods.set_mxnet_methods(True)
        ndarray_methods.set_mxnet_methods(False)
        assert ndarray_methods.numpy_assignment_enabled()
    finally:
        ndarray_methods.set_numpy_assignment(False)


def test_size_is_the_element_count_and_still_torch_callable(mxnet_mode: None) -> None:
    x = torch.zeros(2, 3, 4)
    assert x.size == 24 and isinstance(x.size, int)
    assert x.size() == torch.Size([2, 3, 4]) and x.size(1) == 3 and x.size(-1) == 4
    assert list(range(torch.zeros(3).size)) == [0, 1, 2]
    assert x.size / x.shape[0] == 12.0
    assert pickle.loads(pickle.dumps(x.size)) == 24 and type(pickle.loads(pickle.dumps(x.size))) is int


def test_size_of_a_sparse_array_dispatches_to_torch(mxnet_mode: None) -> None:
    # torch's __torch_function__ passes torch.Tensor.size on as the function: it must stay callable
    assert torch.Tensor.size is torch._C.TensorBase.size
    rsp = mx.nd.sparse.row_sparse_array((torch.ones(1, 3), torch.tensor([1])), shape=(4, 3))
    assert rsp.size == 12 and rsp.size() == (4, 3)
    w = torch.ones(2, 3, requires_grad=True)
    (w * 2).backward(torch.ones(2, 3))  # autograd calls grad.size() on the head gradient
    assert w.grad.tolist() == [[2.0] * 3] * 2


def test_reshape_codes(mxnet_mode: None) -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    assert x.reshape(4, 0, 2).shape == (4, 3, 2)
    assert x.reshape((-3, -2)).shape == (6, 4)
    assert x.reshape(shape=(-4, 1, 2, -2)).shape == (1, 2, 3, 4)
    assert x.reshape(2, -4, -1, 3, -2).shape == (2, 1, 3, 4)
    y = torch.zeros(10, 5, 4)
    assert y.reshape(-1, 0).shape == (40, 5)
    assert y.reshape(-1, 0, reverse=True).shape == (50, 4)
    v = x.reshape(0, -1)
    v[0, 0] = 100.0  # a view, as MXNet's reshape
    assert x[0, 0, 0] == 100.0
    with pytest.raises(ValueError, match="size"):
        x.reshape(2, 3)
    with pytest.raises(MXNetError):
        x.reshape(5, 5)
    assert x.reshape(4, 6).shape == (4, 6) and x.reshape(-1).shape == (24,)  # torch's own spellings


def test_reductions_with_exclude(mxnet_mode: None) -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    # element (i, j, k) is 12 i + 4 j + k: the mean over i and k is 6 + 4 j + 1.5
    m = x.mean(axis=1, exclude=True, keepdims=True)
    assert m.shape == (1, 3, 1) and m.flatten(0).tolist() == [7.5, 11.5, 15.5]
    # exclude=(0, 2) sums over j only: 36 i + 12 + 3 k
    assert x.sum(axis=(0, 2), exclude=True).tolist() == [[12.0, 15.0, 18.0, 21.0], [48.0, 51.0, 54.0, 57.0]]
    assert x.max(axis=(1, 2)).tolist() == [11.0, 23.0]  # MXNet's array, not torch's (values, indices)
    vals, idx = x.max(dim=1)  # torch's spelling keeps torch's meaning
    assert vals.shape == (2, 4) and idx.dtype == torch.int64
    assert x.argmax(axis=2).dtype == torch.float32 and x.argmax(dim=2).dtype == torch.int64
    assert x.sum().item() == 276.0 and x.prod(1).shape == (2, 4)


def test_squeeze_and_flatten_with_inplace(mxnet_mode: None) -> None:
    x = torch.zeros(2, 1, 3)
    copy, view = x.squeeze(axis=1), x.squeeze(axis=1, inplace=True)
    x[0, 0, 0] = 5.0
    assert copy.shape == view.shape == (2, 3) and copy[0, 0] == 0.0 and view[0, 0] == 5.0
    assert torch.zeros(1, 1).squeeze(axis=None).shape == (1,)  # MXNet keeps one axis
    assert torch.zeros(1, 1).squeeze().shape == ()  # torch's spelling: torch's 0-d
    y = torch.arange(24.0).reshape(2, 3, 4)
    flat, flat_view = y.flatten(), y.flatten(inplace=True)
    y[1, 2, 3] = -1.0
    assert flat.shape == flat_view.shape == (2, 12) and flat[1, 11] == 23.0 and flat_view[1, 11] == -1.0
    assert y.flatten(0).shape == (24,) and y.flatten(1).shape == (2, 12)  # torch's with start_dim


def test_refused_calls_follow_mxnet(mxnet_mode: None) -> None:
    x = torch.tensor([[1.0, 2.0, 3.0]])
    assert x.broadcast_to(shape=(2, 3)).tolist() == [[1.0, 2.0, 3.0]] * 2
    assert x.clip(a_min=1.5, a_max=2.5).tolist() == [[1.5, 2.0, 2.5]]
    assert x.transpose().shape == (3, 1) and x.transpose(axes=(1, 0)).shape == (3, 1)
    assert x.tile(reps=(2, 1)).shape == (2, 3)
    assert x.repeat(repeats=2, axis=1).tolist() == [[1.0, 1.0, 2.0, 2.0, 3.0, 3.0]]
    assert x.flip(axis=1).tolist() == [[3.0, 2.0, 1.0]]
    assert [p.tolist() for p in x.split(num_outputs=3, axis=1)] == [[[1.0]], [[2.0]], [[3.0]]]
    assert abs(x.softmax().sum().item() - 1.0) < 1e-6
    assert x.topk(axis=1, k=2).tolist() == [[2.0, 1.0]]  # MXNet's: float indices of the 2 largest
    s = torch.tensor([3.0, 1.0, 2.0])
    assert s.sort().tolist() == [1.0, 2.0, 3.0] and s.sort(is_ascend=False).tolist() == [3.0, 2.0, 1.0]
    assert s.sort(dim=0).indices.tolist() == [1, 2, 0]  # torch's spelling
    assert torch.tensor([-2.5, 0.5, 1.5]).round().tolist() == [-3.0, 1.0, 2.0]  # halves away from zero
    assert torch.tensor([0.25], dtype=torch.float64).round(decimals=1).tolist() == [0.2]  # torch's: to even


def test_bool_of_empty_and_ambiguous_arrays(mxnet_mode: None) -> None:
    assert not bool(torch.zeros(0)) and not bool(torch.zeros(1)) and bool(torch.ones(1))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(torch.ones(2, 3))
    with pytest.raises(RuntimeError):  # torch code catching torch's error keeps working
        bool(torch.ones(2))
    assert isinstance(_mxnet_methods.AmbiguousTruthValueError("x"), MXNetError)


def test_integer_division_stays_integer(mxnet_mode: None) -> None:
    a = torch.tensor([7, -7, 6], dtype=torch.int32)
    q = a / torch.tensor([2, 2, 4], dtype=torch.int32)
    assert q.dtype == torch.int32 and q.tolist() == [3, -3, 1]  # truncated toward zero
    assert (a / 2).tolist() == [3, -3, 3] and (7 / torch.tensor([2], dtype=torch.int64)).tolist() == [3]
    assert (a / 2.0).dtype == torch.float32  # a float operand: true division, as before
    assert (torch.tensor([7.0]) / torch.tensor([2])).tolist() == [3.5]
    a /= 2
    assert a.tolist() == [3, -3, 3]


def test_float_indices_take_and_numpy_reductions(mxnet_mode: None) -> None:
    x = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    assert x[torch.tensor([1.0, 1.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])].tolist() == [2.0, 3.0, 0.0]
    assert x.take(torch.tensor([1.0, 0.0])).tolist() == [[2.0, 3.0], [0.0, 1.0]]  # rows, MXNet's take
    assert x.take(index=torch.tensor([3])).tolist() == [3.0]  # torch's flat take by its keyword
    assert bool(np.all(x >= 0)) and not bool(np.any(x > 5)) and np.all(x == x) is np.True_
    x[0] = np.array([5.0, 6.0])  # the mode includes MXNet's assignment rule
    assert x[0].tolist() == [5.0, 6.0]


def test_torch_code_gives_the_same_results_in_the_mode() -> None:
    def train() -> list[float]:
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Flatten(),
                                  torch.nn.Linear(8, 2))
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    was = ndarray_methods.mxnet_methods_enabled()
    ndarray_methods.set_mxnet_methods(False)
    reference = train()
    ndarray_methods.set_mxnet_methods(True)
    try:
        assert train() == reference
        # mxtorch's own gluon layers too
        net = mx.gluon.nn.Dense(3, in_units=4)
        net.initialize()
        assert net(mx.nd.ones((2, 4))).shape == (2, 3)
    finally:
        ndarray_methods.set_mxnet_methods(was)


def test_broadcast_like_refuses_empty_axes() -> None:
    lhs, rhs = torch.ones(2, 1), torch.ones(2, 5)
    assert mx.nd.broadcast_like(lhs, rhs, lhs_axes=(1,), rhs_axes=(1,)).shape == (2, 5)
    with pytest.raises(MXNetError, match="empty"):
        mx.nd.broadcast_like(lhs, rhs, lhs_axes=(), rhs_axes=())


def test_migration_page_lists_every_rule() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "migrating.md").read_text()
    section = page.split("## MXNet method mode (opt-in)", 1)[1].split("\n## ", 1)[0]
    for name in _mxnet_methods.RULES:
        assert f"| `x.{name}` | {_mxnet_methods.RULES[name]} |" in section, f"docs/migrating.md: x.{name}"
    for name in _mxnet_methods._rules():  # every method the mode replaces is named in some row
        assert name in section, f"docs/migrating.md's MXNet method mode section never names {name}"
