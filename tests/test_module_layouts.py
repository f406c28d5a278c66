"""Module inputs keep their DataDesc layout and dtype: batches split across contexts along the
layout's N axis, outputs merged along their __layout__'s; a batch of another shape rebinds; bad
shapes and unknown parameters raise MXNet's error classes."""

from __future__ import annotations

import numpy as np
import pytest

import mxtorch as mx
from mxtorch.base import MXNetError


def _relu(layout: str | None = None):
    kw = {} if layout is None else {"__layout__": layout}
    return mx.sym.Activation(data=mx.sym.Variable("data"), act_type="relu", **kw)


def test_time_major_batches_split_and_merge_along_the_n_axis() -> None:
    mod = mx.mod.Module(_relu("TNC"), ("data",), None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[mx.io.DataDesc("data", (3, 5, 2), layout="TNC")])
    mod.init_params()
    x = mx.nd.arange(30).reshape((3, 5, 2)) - 10
    mod.forward(mx.io.DataBatch(data=[x], label=None), is_train=False)
    parts = mod.get_outputs(merge_multi_context=False)[0]
    assert sorted(tuple(p.shape) for p in parts) == [(3, 2, 2), (3, 3, 2)]  # 5 samples: 2 + 3
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.maximum(x.asnumpy(), 0))


def test_dtype_of_a_data_desc_is_the_bound_arrays_dtype() -> None:
    mod = mx.mod.Module(_relu(), ("data",), None)
    mod.bind(data_shapes=[mx.io.DataDesc("data", (2, 3), np.float16)], for_training=False)
    mod.init_params()
    mod.forward(mx.io.DataBatch(data=[mx.nd.ones((2, 3), dtype="float16")], label=None))
    assert str(mod.get_outputs()[0].dtype) == "torch.float16"


def test_shape_that_is_not_a_tuple_is_a_type_error_and_nothing_is_bound() -> None:
    mod = mx.mod.Module(_relu(), ("data",), None)
    with pytest.raises(TypeError, match="tuple of ints"):
        mod.bind(data_shapes=[("data", mx.nd.array([10, 10]))])
    assert not mod.binded
    mod.bind(data_shapes=[("data", (10, 10))], grad_req="add")
    assert mod.binded and mod._grad_req == "add"


def test_a_batch_of_another_image_size_rebinds() -> None:
    sym = mx.sym.Pooling(mx.sym.Variable("data"), kernel=(1, 1), global_pool=True, pool_type="avg")
    mod = mx.mod.Module(sym, ("data",), None)
    mod.bind(data_shapes=[("data", (2, 3, 8, 8))], for_training=False)
    mod.init_params()
    mod.forward(mx.io.DataBatch(data=[mx.nd.ones((2, 3, 5, 7)) * 2], label=None))
    assert mod.get_outputs()[0].shape == (2, 3, 1, 1) and float(mod.get_outputs()[0].sum().asscalar()) == 12.0


def test_unknown_parameters_are_a_value_error_unless_allowed() -> None:
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc")
    mod = mx.mod.Module(sym, ("data",), None)
    mod.bind(data_shapes=[("data", (1, 3))])
    mod.init_params()
    extra = {"fc_weight": mx.nd.ones((2, 3)), "other_weight": mx.nd.ones((1,))}
    with pytest.raises(ValueError) as err:
        mod.set_params(extra, {}, allow_missing=True, allow_extra=False)
    assert isinstance(err.value, MXNetError)
    mod.set_params(extra, {}, allow_missing=True, allow_extra=True)
    assert mod.get_params()[0]["fc_weight"].asnumpy().tolist() == [[1, 1, 1], [1, 1, 1]]


def test_a_rebind_that_would_change_a_parameter_is_refused_and_the_module_keeps_working() -> None:
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc")
    mod = mx.mod.Module(sym, ("data",), None)
    mod.bind(data_shapes=[("data", (1, 3))], for_training=False)
    mod.init_params(mx.init.One())
    with pytest.raises(MXNetError, match="'fc_weight' of shape \\(2, 4\\)"):
        mod.forward(mx.io.DataBatch(data=[mx.nd.ones((1, 4))], label=None))
    mod.forward(mx.io.DataBatch(data=[mx.nd.ones((1, 3))], label=None))
    assert mod.get_outputs()[0].asnumpy().tolist() == [[3.0, 3.0]]


def test_arguments_of_a_ctx_group_live_on_the_groups_context() -> None:
    with mx.AttrScope(ctx_group="dev1"):
        a = mx.sym.Variable("a") * 2
    b = mx.sym.Variable("b")
    mod = mx.mod.Module(a + b, data_names=["a", "b"], label_names=None, group2ctxs={"dev1": mx.cpu(1)})
    mod.bind(data_shapes=[("a", (2, 3)), ("b", (2, 3))], inputs_need_grad=True)
    mod.init_params()
    mod.forward(mx.io.DataBatch(data=[mx.nd.ones((2, 3)), mx.nd.ones((2, 3))]), is_train=True)
    mod.backward([mx.nd.ones((2, 3))])
    grad_a, grad_b = mod.get_input_grads()
    assert grad_a.context == mx.cpu(1) and grad_b.context == mx.cpu(0)
    assert grad_a.asnumpy().tolist() == [[2.0] * 3] * 2 and grad_b.asnumpy().tolist() == [[1.0] * 3] * 2
