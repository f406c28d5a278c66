"""MXNet operator-surface rules that MXNet's operator tests lean on (hand computations and the
examples of MXNet's API reference): executor arrays are NDArrays with outputs allocated at bind, a
symbol operator called without an array input makes a variable for it, and mx.sym.linalg."""

import numpy as np
import pytest
import torch

import mxtorch as mx


def test_simple_bind_arrays_take_numpy_values_and_outputs_exist_before_forward():
    data = mx.sym.Variable("data")
    exe = mx.sym.SliceChannel(data, num_outputs=2, axis=1).simple_bind(mx.cpu(), data=(2, 4))
    # MXNet allocates the outputs at bind: zeros of the inferred shapes
    assert [tuple(o.shape) for o in exe.outputs] == [(2, 2), (2, 2)]
    assert all(float(o.abs().sum()) == 0.0 for o in exe.outputs)
    exe.arg_dict["data"][:] = np.arange(8, dtype=np.float32).reshape(2, 4)  # an NDArray takes numpy
    exe.grad_dict["data"][:] = np.ones((2, 4), dtype=np.float32)
    outs = exe.forward(is_train=False)
    assert outs[1].asnumpy().tolist() == [[2.0, 3.0], [6.0, 7.0]]
    assert isinstance(outs[0], mx.nd.NDArray) and type(outs[0]) is type(exe.arg_dict["data"])


def test_symbol_operator_without_its_array_inputs_makes_variables():
    assert mx.sym.softmin(axis=1).list_arguments() == ["softmin0_data"]
    assert mx.sym.broadcast_add().list_arguments() == ["broadcast_add0_lhs", "broadcast_add0_rhs"]
    # a parameter given as a keyword is an attribute, not a new variable
    assert mx.sym.slice_axis(axis=0, begin=0, end=1).list_arguments() == ["slice_axis0_data"]
    sym = mx.sym.softmin(axis=-1)
    out = sym.bind(mx.cpu(), {"softmin1_data": mx.nd.array([[0.0, np.log(3.0)]])}).forward()[0]
    # softmin(x) = softmax(-x): exp(0) / (1 + 1/3) = 0.75
    np.testing.assert_allclose(out.asnumpy(), [[0.75, 0.25]], rtol=1e-6)


def test_sym_linalg_gemm2_and_two_output_gelqf():
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    prod = mx.sym.linalg.gemm2(a, b, transpose_b=True, alpha=2.0)
    assert prod.list_arguments() == ["a", "b"]
    A = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    B = np.array([[1.0, 0.0], [1.0, 1.0]], dtype=np.float32)
    out = prod.bind(mx.cpu(), {"a": mx.nd.array(A), "b": mx.nd.array(B)}).forward()[0]
    assert out.asnumpy().tolist() == [[2.0, 6.0], [6.0, 14.0]]  # 2 * A @ B.T
    q_l = mx.sym.linalg.gelqf(a)
    assert q_l.list_outputs() == ["gelqf0_output0", "gelqf0_output1"]
    q, lower = q_l.bind(mx.cpu(), {"a": mx.nd.array(A)}).forward()
    np.testing.assert_allclose((lower.asnumpy() @ q.asnumpy()), A, rtol=1e-5, atol=1e-5)
    assert mx.sym.linalg_gemm2(a, b).tojson().count('"_linalg_gemm2"') == 1  # MXNet's graph name


def test_extracttrian_and_maketrian_follow_mxnets_examples():
    A = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    assert mx.nd.linalg.extracttrian(A).asnumpy().tolist() == [1.0, 3.0, 4.0]
    assert mx.nd.linalg.extracttrian(A, lower=False).asnumpy().tolist() == [1.0, 2.0, 4.0]
    assert mx.nd.linalg.extracttrian(A, 1).asnumpy().tolist() == [2.0]
    assert mx.nd.linalg.extracttrian(A, -1).asnumpy().tolist() == [3.0]
    v = mx.nd.array([1.0, 2.0, 3.0])
    assert mx.nd.linalg.maketrian(v).asnumpy().tolist() == [[1.0, 0.0], [2.0, 3.0]]
    assert mx.nd.linalg.maketrian(v, offset=1).asnumpy().tolist() == [
        [0.0, 1.0, 2.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]]
    assert mx.nd.linalg_maketrian(v, offset=-1).asnumpy().tolist() == [
        [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 3.0, 0.0]]
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    with pytest.raises(mx.base.MXNetError, match="triangular number"):
        mx.nd.linalg.maketrian(x)


def test_mod_by_zero_is_zero_and_takes_the_divisors_sign():
    a = mx.nd.array([5, -5, 7, 3], dtype="int32")
    b = mx.nd.array([0, 3, -2, 0], dtype="int32")
    assert (a % b).asnumpy().tolist() == [0, 1, -1, 0]
    assert mx.nd.broadcast_mod(a.astype("float32"), b.astype("float32")).asnumpy().tolist() == [0, 1, -1, 0]
    x = mx.sym.Variable("x")
    exe = (7 % x).bind(mx.cpu(), {"x": mx.nd.array([0.0, 4.0, -3.0])})
    assert exe.forward()[0].asnumpy().tolist() == [0.0, 3.0, -2.0]


def test_symbol_power_maximum_minimum_hypot_take_a_number_on_either_side():
    x = mx.sym.Variable("x")
    assert "_rpower_scalar" in mx.sym.pow(2, x).tojson()
    assert mx.sym.power(2, 3) == 8 and mx.sym.maximum(2, 5) == 5 and mx.sym.hypot(3, 4) == 5.0
    y = mx.sym.maximum(x, 3) + mx.sym.minimum(1, x) + mx.sym.hypot(x, 4) + mx.sym.power(x, x)
    assert y.list_arguments() == ["x"]
    out = y.bind(mx.cpu(), {"x": mx.nd.array([3.0, 0.5])}).forward()[0].asnumpy()
    # x=3: 3 + 1 + 5 + 27; x=0.5: 3 + 0.5 + sqrt(16.25) + sqrt(0.5)
    np.testing.assert_allclose(out, [36.0, 3.5 + np.sqrt(16.25) + np.sqrt(0.5)], rtol=1e-6)


def test_fused_rnn_cell_unpacks_its_vector_into_named_gate_weights_and_back():
    cell = mx.rnn.FusedRNNCell(2, num_layers=2, mode="gru", bidirectional=True, prefix="g_")
    # per direction: layer 0 has 3 gates * 2 * (3 inputs + 2 + 2 biases); layer 1 takes 2 * 2 inputs
    total = 2 * 3 * 2 * (3 + 2 + 2) + 2 * 3 * 2 * (4 + 2 + 2)
    flat = mx.nd.arange(total)
    parts = cell.unpack_weights({"g_parameters": flat, "other": 1})
    assert parts["other"] == 1 and "g_parameters" not in parts
    assert tuple(parts["g_l0_i2h_r_weight"].shape) == (2, 3)
    assert tuple(parts["g_r1_i2h_o_weight"].shape) == (2, 4)
    assert parts["g_l0_i2h_r_weight"].asnumpy().ravel().tolist() == [0, 1, 2, 3, 4, 5]  # first piece
    assert parts["g_l0_i2h_z_weight"].asnumpy().ravel()[0] == 6
    biases_start = 2 * 3 * 2 * (3 + 2) + 2 * 3 * 2 * (4 + 2)  # every weight comes before every bias
    assert parts["g_l0_i2h_r_bias"].asnumpy().tolist() == [biases_start, biases_start + 1]
    packed = cell.pack_weights(parts)
    assert packed["g_parameters"].asnumpy().tolist() == flat.asnumpy().tolist()
    with pytest.raises(mx.base.MXNetError, match="fits no input size"):
        cell.unpack_weights({"g_parameters": mx.nd.arange(total + 1)})


def test_module_input_gradients_follow_grad_req():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    for req, has_grad in (("null", False), ("write", True)):
        mod = mx.mod.Module(net, label_names=None, context=mx.cpu())
        mod.bind(data_shapes=[("data", (1, 3))], inputs_need_grad=True, grad_req=req)
        mod.init_params()
        mod.forward(mx.io.DataBatch(data=[mx.nd.ones((1, 3))]), is_train=True)
        mod.backward(out_grads=[mx.nd.ones((1, 2))])
        assert (mod.get_input_grads()[0] is not None) == has_grad


def test_operator_argument_errors_are_mxnet_errors_and_value_errors():
    a = mx.nd.ones((2, 3))
    for bad in (lambda: mx.nd.diag(a, k=4), lambda: mx.nd.diag(a, k=-3),
                lambda: mx.nd.depth_to_space(mx.nd.ones((1, 4, 0, 3)), 2),
                lambda: mx.nd.space_to_depth(mx.nd.ones((1, 1, 3, 4)), 2)):
        with pytest.raises(mx.base.MXNetError) as info:
            bad()
        assert isinstance(info.value, ValueError)
    # the ends of MXNet's k range give an empty diagonal
    assert mx.nd.diag(a, k=3).shape == (0,) and mx.nd.diag(a, k=-2).shape == (0,)
    assert mx.nd.diag(a, k=2).asnumpy().tolist() == [1.0]
    assert mx.nd.one_hot(mx.nd.array([1, 2]), 0).shape == (2, 0)


def test_executor_backward_without_a_forward_differentiates_at_the_bound_arrays():
    data = mx.sym.Variable("data")
    exe = mx.sym.repeat(data, repeats=2, axis=0).bind(
        mx.cpu(), args=[mx.nd.array([[1.0, 2.0]])], args_grad=[mx.nd.full((1, 2), 7.0)])
    exe.backward(mx.nd.array([[1.0, 2.0], [3.0, 4.0]]))  # no forward first, as MXNet allows
    assert exe.grad_arrays[0].asnumpy().tolist() == [[4.0, 6.0]]  # each row's two copies summed
    exe.backward(mx.nd.array([[1.0, 1.0], [1.0, 1.0]]))  # a second backward recomputes too
    assert exe.grad_arrays[0].asnumpy().tolist() == [[2.0, 2.0]]


def test_symbol_keeps_an_explicit_none_that_is_not_the_default():
    a = mx.sym.Variable("a")
    flat = mx.sym.sort(a, axis=None, is_ascend=False)
    out = flat.bind(mx.cpu(), {"a": mx.nd.array([[3, 1], [2, 4]])}).forward()[0]
    assert out.asnumpy().tolist() == [4, 3, 2, 1]  # MXNet's axis=None: the flattened array
    with pytest.raises(mx.base.MXNetError):
        mx.nd.tile(mx.nd.ones((2, 2)), (1, 0))  # MXNet refuses a zero (or negative) repetition


def test_max_pooling_same_convention_gives_ceil_width_over_stride_windows():
    x = mx.nd.array([[[1, 5, 2, 0, 3, 4]]])
    out = mx.nd.Pooling(x, kernel=2, stride=2, pool_type="max", pooling_convention="same")
    assert out.asnumpy().tolist() == [[[5, 2, 4]]]
    # width 5, kernel 3, stride 1: five windows, the last ones clipped at the end
    out = mx.nd.Pooling(x[:, :, :5], kernel=3, stride=1, pool_type="max", pooling_convention="same")
    assert out.asnumpy().tolist() == [[[5, 5, 3, 3, 3]]]
    with pytest.raises(mx.base.MXNetError, match="takes no pad"):
        mx.nd.Pooling(x, kernel=2, stride=2, pad=1, pool_type="max", pooling_convention="same")


def test_operator_failures_are_mxnet_errors_keeping_their_python_base():
    empty = mx.nd.zeros((5, 0))
    with pytest.raises(mx.base.MXNetError):
        empty.min()  # torch refuses the empty reduction with an IndexError
    with pytest.raises(IndexError):
        empty.max()
    with pytest.raises(mx.base.MXNetError):
        mx.nd.take(mx.nd.ones(2), mx.nd.array([5]), mode="raise")


def test_simple_bind_reads_only_tuple_keywords_as_shapes():
    a = mx.sym.Variable("a")
    exe = mx.sym.take(a, mx.sym.Variable("i"), axis=0).simple_bind(mx.cpu(), a=(3, 2), i=(1,), axis=0,
                                                                   mode="clip")
    assert exe.outputs[0].shape == (1, 2)


def test_legacy_samplers_take_the_registered_operators_parameter_names():
    mu, sigma = mx.nd.array([10.0, 20.0]), mx.nd.array([1e-3, 1e-3])
    s = mx.nd.sample_normal(mu=mu, sigma=sigma, shape=3)
    assert s.shape == (2, 3)  # each parameter's own draws: param.shape + shape
    np.testing.assert_allclose(s.asnumpy().mean(axis=1), [10.0, 20.0], rtol=1e-3)
    assert mx.nd.sample_normal(mu=mx.nd.array([10.0]), sigma=mx.nd.array([0.5]), shape=1).shape == (1, 1)
