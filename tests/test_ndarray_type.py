"""mx.nd.NDArray: MXNet's method rules on arrays made through MXNet's API, torch's on torch tensors.

Expected values are hand computations from MXNet's NDArray reference (``size`` is the element
count, reshape's special codes, ``flatten`` keeps the first axis, ``sort()`` returns the array,
``round`` takes halves away from zero, ``take`` picks rows, integer division truncates, an
empty array is False, float indices are truncated, numpy values assign)."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

import mxtorch as mx
from mxtorch import _mxnet_methods
from mxtorch.nd._ndarray_type import NDArray, as_ndarray, is_ndarray, plain


def test_creation_functions_samplers_and_load_return_ndarrays(tmp_path) -> None:
    made = [mx.nd.array([1, 2]), mx.nd.zeros((2, 3)), mx.nd.ones(2), mx.nd.full((2,), 7), mx.nd.arange(3),
            mx.nd.empty((1,)), mx.nd.eye(2), mx.nd.linspace(0, 1, 3), mx.nd.random.uniform(shape=(2,)),
            mx.nd.random.normal(shape=(2,)), mx.nd.random.randint(0, 5, shape=(2,))]
    assert all(type(t) is NDArray for t in made)
    mx.nd.save(str(tmp_path / "a.params"), {"w": made[1]})
    loaded = mx.nd.load(str(tmp_path / "a.params"))
    assert type(loaded["w"]) is NDArray and loaded["w"].size == 6


def test_results_stay_ndarrays_through_ops_indexing_and_nd_operators() -> None:
    x = mx.nd.array([[1, 2, 3], [4, 5, 6]])
    outs = [x + 1, 2 * x, x @ x.T, x[0], x[:, 1], x.reshape(3, 2), mx.nd.relu(x), torch.relu(x),
            torch.nn.functional.linear(x, torch.ones(4, 3)), mx.nd.one_hot(mx.nd.array([1, 0]), 3),
            *x.split(1, 0), x.max(dim=1).values]
    assert all(type(t) is NDArray for t in outs), [type(t) for t in outs]


def test_torch_results_that_existed_before_the_call_keep_their_type() -> None:
    target = torch.zeros(2)
    out = target.copy_(mx.nd.array([1, 2]))
    assert out is target and type(target) is torch.Tensor
    assert type(mx.nd.relu(torch.ones(2))) is torch.Tensor  # plain in, plain out


def test_isinstance_holds_for_every_tensor_and_type_tells_them_apart() -> None:
    t = torch.zeros(2)
    assert isinstance(t, mx.nd.NDArray) and isinstance(t, mx.nd.ndarray.NDArray)
    assert not is_ndarray(t) and is_ndarray(mx.nd.zeros(2))
    assert type(as_ndarray(t)) is NDArray and type(plain(mx.nd.zeros(2))) is torch.Tensor


def test_size_is_the_element_count_and_stays_callable() -> None:
    x = mx.nd.zeros((2, 3, 4))
    assert x.size == 24 and isinstance(x.size, int)
    assert x.size() == (2, 3, 4) and x.size(1) == 3


def test_reshape_special_codes() -> None:
    x = mx.nd.zeros((2, 3, 4))
    assert x.reshape(0, -1).shape == (2, 12)  # 0 copies the axis
    assert x.reshape((-3, 4)).shape == (6, 4)  # -3 merges two axes
    assert x.reshape(-4, 1, 2, -2).shape == (1, 2, 3, 4)  # -4 splits, -2 copies the rest
    assert x.reshape(shape=(4, -1)).shape == (4, 6)


def test_flatten_sort_round_take() -> None:
    x = mx.nd.zeros((2, 3, 4))
    assert x.flatten().shape == (2, 12)  # keeps the first axis
    v = mx.nd.array([3, 1, 2])
    assert v.sort().tolist() == [1, 2, 3]  # the sorted array, not (values, indices)
    assert mx.nd.array([-2.5, 2.5, 0.4]).round().tolist() == [-3, 3, 0]  # halves away from zero
    m = mx.nd.array([[1, 2], [3, 4], [5, 6]])
    assert m.take(mx.nd.array([2, 0])).tolist() == [[5, 6], [1, 2]]  # rows along axis 0


def test_reductions_with_mxnet_keywords() -> None:
    x = mx.nd.array([[1, 5], [7, 3]])
    assert x.max(axis=1).tolist() == [5, 7]  # the array, not torch's (values, indices)
    assert x.sum(axis=0, exclude=True).tolist() == [6, 10]  # every axis but 0
    assert x.argmax(axis=0).dtype == torch.float32


def test_integer_division_truncates_and_bool_rules() -> None:
    a = mx.nd.array([7, -7], dtype="int32")
    q = a / mx.nd.array([2, 2], dtype="int32")
    assert q.dtype == torch.int32 and q.tolist() == [3, -3]  # toward zero
    assert bool(mx.nd.zeros(0)) is False
    with pytest.raises(ValueError, match="ambiguous"):
        bool(mx.nd.ones(2))


def test_float_indices_and_numpy_assignment() -> None:
    x = mx.nd.array([10, 20, 30])
    assert x[mx.nd.array([2.0, 0.7])].tolist() == [30, 10]  # truncated to 2, 0
    m = mx.nd.zeros((2, 3))
    m[0] = np.arange(3)
    m[1, 1] = np.float64(5.5)
    assert m.tolist() == [[0, 1, 2], [0, 5.5, 0]]


def test_gradient_of_an_ndarray_is_an_ndarray_and_leaves_stay_leaves() -> None:
    x = mx.nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with mx.autograd.record():
        y = (x * x).sum()
    y.backward()
    assert x.is_leaf and type(x.grad) is NDArray
    assert x.grad.size == 3 and x.grad.asnumpy().tolist() == [2, 4, 6]


def test_gluon_block_outputs_follow_ndarray_inputs_and_parameters_stay_torch() -> None:
    net = mx.gluon.nn.Dense(2, in_units=3)
    net.initialize()
    out = net(mx.nd.ones((4, 3)))
    assert type(out) is NDArray and out.size == 8
    assert type(net(torch.ones(4, 3))) is torch.Tensor
    assert all(type(p.data()) is torch.nn.Parameter for p in net.collect_params().values())


def test_pickle_round_trip_keeps_the_type() -> None:
    x = mx.nd.array([[1, 2], [3, 4]])
    y = pickle.loads(pickle.dumps(x))
    assert type(y) is NDArray and y.tolist() == [[1, 2], [3, 4]]


def test_plain_torch_tensors_keep_torchs_c_methods_after_import() -> None:
    code = (
        "import torch; before = dict(vars(torch.Tensor)); import mxtorch\n"
        "from mxtorch import _mxnet_methods\n"
        "names = [*_mxnet_methods.RULES, '__torch_function__']\n"
        "changed = [n for n in names if vars(torch.Tensor).get(n) is not before.get(n)]\n"
        "assert not changed, changed\n"
        "x = torch.zeros(2, 3)\n"
        "assert type(x + 1) is torch.Tensor and callable(x.size) and not isinstance(x.size, int)\n"
        "assert torch.Tensor.reshape is torch._C.TensorBase.reshape\n"
        "assert isinstance(x.sort(), tuple) and x.flatten().shape == (6,)\n"
        "print('ok')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["ok"]


def test_rules_table_names_each_rule_the_class_carries() -> None:
    for name in _mxnet_methods.RULES:
        if name != "__setitem__":
            assert name in vars(NDArray), name


def test_torch_save_of_an_ndarray_loads_with_weights_only() -> None:
    import io

    buf = io.BytesIO()
    torch.save({"state": mx.nd.array([1, 2])}, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=True)["state"]
    assert type(back) is NDArray and back.tolist() == [1, 2]


def test_kvstore_pull_and_data_loader_batches_stay_ndarrays() -> None:
    kv = mx.kv.create("local")
    kv.init(3, mx.nd.zeros((2, 3)))
    kv.push(3, mx.nd.ones((2, 3)) * 4)
    out = mx.nd.zeros((2, 3))
    kv.pull(3, out=out)
    assert type(out) is NDArray and out.size == 6 and out.asnumpy().tolist() == [[4] * 3] * 2
    data = mx.gluon.data.ArrayDataset(mx.nd.arange(12).reshape(6, 2), mx.nd.arange(6))
    xb, yb = next(iter(mx.gluon.data.DataLoader(data, batch_size=3)))
    assert type(xb) is NDArray and xb.size == 6 and yb.tolist() == [0, 1, 2]


def test_a_compiled_hybrid_block_takes_ndarrays_and_returns_ndarrays() -> None:
    import warnings

    net = mx.gluon.nn.Dense(3, in_units=4)
    net.initialize()
    net.hybridize(backend="aot_eager")  # torch.compile without code generation
    x = mx.nd.ones((2, 4))
    x.attach_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a compile failure: eager, with this warning
        net(x)  # the first call runs eagerly
        with mx.autograd.record():
            out = net(x)
    out.backward()
    assert net._compiled is not None and not net._compile_failed
    assert type(out) is NDArray and out.size == 6
    assert type(x.grad) is NDArray and x.grad.asnumpy() == pytest.approx(
        np.tile(net.weight.data().detach().sum(0).numpy(), (2, 1)))


def test_deepcopy_gives_an_independent_ndarray_and_keeps_gradients() -> None:
    # copy.deepcopy of an object holding arrays (a metric, a config) is plain Python: it must
    # copy MXNet arrays as it copies torch tensors
    import copy

    x = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    x.attach_grad()
    x.grad[:] = 5.0
    holder = {"a": x, "again": x}
    dup = copy.deepcopy(holder)
    y = dup["a"]
    assert type(y) is type(x) and type(x).__name__ == "NDArray"
    assert dup["again"] is y  # one copy per object, as deepcopy's memo promises
    assert y.requires_grad and y.grad.tolist() == [[5.0, 5.0], [5.0, 5.0]]
    with torch.no_grad():
        y[0, 0] = 9.0
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
