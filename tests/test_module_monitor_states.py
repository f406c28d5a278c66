"""Module's monitor (mx.mon.Monitor and the executor's node callbacks), state inputs
(set_states/get_states), row_sparse parameters and input checks, against hand computations.

The monitored net: pred = x . w + b with x = [1, 2], w = [0.5, 1], b = 0.25, so pred = 2.75;
LinearRegressionOutput against 1 sends pred - label = 1.75 back, so the weight's gradient is
1.75 * x = [1.75, 3.5] (sum 5.25) and the bias's 1.75.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mxtorch as mx


def _monitored_module(mon: mx.mon.Monitor) -> mx.mod.Module:
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=1, name="fc")
    sym = mx.sym.LinearRegressionOutput(fc, name="lro")
    mod = mx.mod.Module(sym, label_names=["lro_label"])
    mod.bind(data_shapes=[("data", (1, 2))], label_shapes=[("lro_label", (1, 1))])
    mod.install_monitor(mon)
    mod.init_params(arg_params={"fc_weight": mx.nd.array([[0.5, 1.0]]), "fc_bias": mx.nd.array([0.25])})
    return mod


def _batch() -> mx.io.DataBatch:
    return mx.io.DataBatch(data=[mx.nd.array([[1.0, 2.0]])], label=[mx.nd.array([[1.0]])])


def test_monitor_sees_every_node_output_gradient_and_argument() -> None:
    mon = mx.mon.Monitor(1, stat_func=lambda x: x.sum())
    mod = _monitored_module(mon)
    mon.tic()
    mod.forward_backward(_batch())
    res = mon.toc()
    assert [step for step, _, _ in res] == [1] * 11
    got = {name: text for _, name, text in res}
    assert [name for _, name, _ in res] == [
        "fc_output", "lro_output",  # forward, graph order
        "lro_backward_output0", "lro_backward_output1",  # backward, last node first
        "fc_backward_output0", "fc_backward_output1", "fc_backward_output2",
        "data", "fc_weight", "fc_bias", "lro_label",  # the arguments, at toc
    ]
    want = {"fc_output": 2.75, "lro_backward_output0": 1.75, "lro_backward_output1": 0.0,
            "fc_backward_output0": 0.0, "fc_backward_output1": 5.25, "fc_backward_output2": 1.75,
            "data": 3.0, "fc_weight": 1.5}
    for name, value in want.items():
        assert got[name] == f"{np.float32(value)}\t", name


def test_monitor_interval_pattern_sort_and_default_stat() -> None:
    mon = mx.mon.Monitor(2, pattern="fc_b.*", sort=True)
    mod = _monitored_module(mon)
    mon.tic()
    mod.forward(_batch(), is_train=False)
    first = mon.toc()
    assert [name for _, name, _ in first] == ["fc_bias"]
    assert first[0][2] == f"{np.float32(0.25)}\t"  # norm / sqrt(size) of [0.25]
    mon.tic()  # step 1 of interval 2: nothing collected
    mod.forward(_batch(), is_train=False)
    assert mon.toc() == []
    with pytest.raises(ValueError, match="interval"):
        mx.mon.Monitor(0)
    first, second = mx.mon.Monitor(1, pattern="fc_output"), mx.mon.Monitor(1, pattern="fc_output")
    mod.install_monitor(first)
    mod.install_monitor(second)  # replaces the first's callback
    first.tic()
    second.tic()
    mod.forward(_batch(), is_train=False)
    assert [name for _, name, _ in second.toc()] == ["fc_output"]
    assert first.toc() == []


def _state_module() -> mx.mod.Module:
    out = mx.sym.elemwise_add(mx.sym.Variable("data"), mx.sym.Variable("s"), name="plus")
    mod = mx.mod.Module(out, label_names=None, state_names=["s"], context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[("data", (4, 3))], label_shapes=None, for_training=False)
    mod.init_params()
    return mod


def test_set_states_by_value_by_merged_array_and_per_context() -> None:
    mod = _state_module()
    batch = mx.io.DataBatch(data=[mx.nd.zeros((4, 3))], label=[])
    mod.set_states(value=2)
    mod.forward(batch)
    assert (mod.get_outputs()[0].asnumpy() == 2).all()
    ramp = mx.nd.array(np.arange(12, dtype=np.float32).reshape(4, 3))
    mod.set_states(states=[ramp])  # split across the two contexts like a batch
    mod.forward(batch)
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), ramp.asnumpy())
    np.testing.assert_array_equal(mod.get_states()[0].asnumpy(), ramp.asnumpy())
    per_ctx = mod.get_outputs(merge_multi_context=False)  # one array per context
    mod.set_states(states=[[p + 1 for p in per_ctx[0]]])
    np.testing.assert_array_equal(mod.get_states()[0].asnumpy(), ramp.asnumpy() + 1)
    assert len(mod.get_states(merge_multi_context=False)[0]) == 2
    with pytest.raises(ValueError, match="exactly one"):
        mod.set_states(states=[ramp], value=1)


def test_row_sparse_variable_gives_a_row_sparse_parameter() -> None:
    v = mx.sym.var("v", shape=(3, 1), init=mx.init.Uniform(0.1), stype="row_sparse")
    sym = mx.sym.LinearRegressionOutput(mx.sym.dot(mx.sym.Variable("data"), v), name="out")
    mod = mx.mod.Module(sym, label_names=["out_label"])
    mod.bind(data_shapes=[("data", (2, 3))], label_shapes=[("out_label", (2, 1))])
    mod.init_params()
    assert mod._arg_params["v"].stype == "row_sparse"
    before = mod.get_params()[0]["v"].asnumpy().copy()
    assert np.abs(before).sum() > 0
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    mod.forward_backward(mx.io.DataBatch(data=[mx.nd.ones((2, 3))], label=[mx.nd.zeros((2, 1))]))
    mod.update()
    after = mod.get_params()[0]["v"]
    assert after.stype == "row_sparse"
    # d/dv of sum((x.v)^2 / 2) over two rows of ones: 2 * sum(v) per element; lr 0.1, rescale 1/2
    np.testing.assert_allclose(after.asnumpy(), before - 0.1 * before.sum(), rtol=1e-5)


def test_bad_data_shapes_entry_is_a_type_error_and_int_shape_is_1d() -> None:
    mod = mx.mod.Module(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=1), label_names=None)
    with pytest.raises(TypeError, match="name, shape"):
        mod.bind(data_shapes=["data", torch.zeros(2, 1)])
    assert mx.sym.var("b", shape=1).attr("__shape__") == "(1,)"


def test_executor_group_made_with_shared_group_shares_inputs_and_parameters() -> None:
    from mxtorch.module.executor_group import DataParallelExecutorGroup
    from mxtorch.test_utils import same_array

    def net(layers: int) -> mx.sym.Symbol:
        x = mx.sym.Variable("data")
        for i in range(layers):
            x = mx.sym.FullyConnected(x, num_hidden=3, name=f"fc{i + 1}")
        return mx.sym.SoftmaxOutput(x, name="softmax")

    shapes = ([("data", (4, 5))], [("softmax_label", (4,))])
    params = ["fc1_weight", "fc1_bias"]
    ctxs = [mx.cpu(0), mx.cpu(1)]
    first = DataParallelExecutorGroup(net(1), ctxs, [1, 1], *shapes, params, True, False)
    assert [sorted(d) for d in first.shared_data_arrays] == [["data", "softmax_label"]] * 2
    second = DataParallelExecutorGroup(net(2), ctxs, [1, 1], *shapes, params, True, False, shared_group=first)
    assert second.shared_data_arrays is first.shared_data_arrays
    for i in range(2):  # fc2's arrays are not parameters of these groups: they join the inputs
        assert sorted(first.shared_data_arrays[i]) == ["data", "fc2_bias", "fc2_weight", "softmax_label"]
        a, b = first.execs[i], second.execs[i]
        for name in ("data", "softmax_label", "fc1_weight", "fc1_bias"):
            assert same_array(a.arg_dict[name], b.arg_dict[name]), name
        assert same_array(a.grad_dict["fc1_weight"], b.grad_dict["fc1_weight"])
