"""Gluon's recurrent cells called with symbols build MXNet's graph (node names, shapes, values equal
to the eager cells'); fused layers unfuse into cells and infer their shapes; contrib.rnn's
VariationalDropoutCell keeps one mask per sequence."""

from __future__ import annotations

import numpy as np
import pytest

import mxtorch as mx
from mxtorch import autograd, gluon


def _steps(n: int) -> list:
    return [mx.sym.Variable(f"rnn_t{i}_data") for i in range(n)]


def _eval_like_eager(cell, outputs, inputs: list) -> None:
    """The graph evaluated with the cell's own weights equals the eager unroll of the same cell."""
    want, _ = cell.unroll(len(inputs), inputs, merge_outputs=False)  # also ends deferred init
    feed = {f"rnn_t{i}_data": x for i, x in enumerate(inputs)}
    feed.update({name: p.data() for name, p in cell.collect_params().items()})
    got = outputs.eval(**feed)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda: gluon.rnn.RNNCell(6, prefix="rnn_"),
    lambda: gluon.rnn.LSTMCell(6, prefix="rnn_"),
    lambda: gluon.rnn.GRUCell(6, prefix="rnn_"),
    lambda: gluon.rnn.LSTMCell(6, prefix="rnn_", activation="softsign", recurrent_activation="relu"),
])
def test_cells_unrolled_on_symbols_build_mxnets_graph(make) -> None:
    cell = make()
    outputs, states = cell.unroll(3, _steps(3))
    group = mx.sym.Group(outputs)
    assert group.list_outputs() == ["rnn_t0_out_output", "rnn_t1_out_output", "rnn_t2_out_output"]
    assert sorted(cell.collect_params().keys()) == [
        "rnn_h2h_bias", "rnn_h2h_weight", "rnn_i2h_bias", "rnn_i2h_weight"]
    _, outs, _ = group.infer_shape(rnn_t0_data=(4, 5), rnn_t1_data=(4, 5), rnn_t2_data=(4, 5))
    assert outs == [(4, 6)] * 3
    cell.initialize(mx.init.Uniform(0.5))
    _eval_like_eager(cell, group, [mx.nd.random.uniform(shape=(4, 5)) for _ in range(3)])


def test_stacked_residual_and_bidirectional_graphs() -> None:
    stack = gluon.rnn.SequentialRNNCell()
    stack.add(gluon.rnn.LSTMCell(5, prefix="rnn_l0_"))
    stack.add(gluon.rnn.ResidualCell(gluon.rnn.GRUCell(5, prefix="rnn_l1_")))
    outputs, states = stack.unroll(2, _steps(2))
    group = mx.sym.Group(outputs)
    _, outs, _ = group.infer_shape(rnn_t0_data=(3, 4), rnn_t1_data=(3, 4))
    assert outs == [(3, 5), (3, 5)] and len(states) == 3
    stack.initialize(mx.init.Uniform(0.5))
    _eval_like_eager(stack, group, [mx.nd.random.uniform(shape=(3, 4)) for _ in range(2)])

    bi = gluon.rnn.BidirectionalCell(gluon.rnn.LSTMCell(5, prefix="rnn_l_"),
                                     gluon.rnn.LSTMCell(5, prefix="rnn_r_"), output_prefix="rnn_bi_")
    outputs, _ = bi.unroll(3, _steps(3))
    group = mx.sym.Group(outputs)
    assert group.list_outputs() == ["rnn_bi_t0_output", "rnn_bi_t1_output", "rnn_bi_t2_output"]
    assert group.infer_shape(rnn_t0_data=(2, 4), rnn_t1_data=(2, 4), rnn_t2_data=(2, 4))[1] == [(2, 10)] * 3
    bi.initialize(mx.init.Uniform(0.5))
    _eval_like_eager(bi, group, [mx.nd.random.uniform(shape=(2, 4)) for _ in range(3)])


def test_merged_symbol_input_and_valid_length_graph() -> None:
    cell = gluon.rnn.RNNCell(4, prefix="rnn_")
    data, vl = mx.sym.var("data"), mx.sym.var("valid_length")
    outs, states = cell.unroll(3, data, valid_length=vl, layout="NTC")
    cell.initialize(mx.init.Uniform(0.5))
    x = mx.nd.random.uniform(shape=(2, 3, 5))
    lengths = mx.nd.array([1, 3])
    want_out, want_states = cell.unroll(3, x, valid_length=lengths, layout="NTC")
    feed = {name: p.data() for name, p in cell.collect_params().items()}
    got = mx.sym.Group([outs, states[0]]).eval(data=x, valid_length=lengths, **feed)
    assert tuple(got[0].shape) == (2, 3, 4)  # merged: MXNet merges masked outputs
    assert float(got[0][0, 1:].abs().sum().asscalar()) == 0.0
    np.testing.assert_allclose(got[0].asnumpy(), want_out.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1].asnumpy(), want_states[0].asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layer", [
    lambda: gluon.rnn.LSTM(3, num_layers=2, bidirectional=True),
    lambda: gluon.rnn.GRU(3, num_layers=2),
    lambda: gluon.rnn.RNN(3, activation="relu"),
])
def test_unfused_layer_shares_parameters_and_computes_the_same(layer) -> None:
    fused = layer()
    cells = fused._unfuse()
    assert set(cells.collect_params().keys()) == set(fused.collect_params().keys())
    fused.initialize(mx.init.Uniform(0.5))
    x = mx.nd.random.uniform(shape=(4, 2, 5))  # TNC
    want = fused(x)
    got, _ = cells.unroll(4, x, layout="TNC", merge_outputs=True)
    np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)


def test_layer_infer_shape_fills_the_input_size_before_set_data() -> None:
    layer = gluon.rnn.LSTM(4, num_layers=2, bidirectional=True, layout="NTC")
    layer.initialize()
    assert layer.l0_i2h_weight.shape == (16, 0)
    layer.infer_shape(mx.nd.zeros((2, 5, 7)), layer.begin_state(2))
    assert layer.l0_i2h_weight.shape == (16, 7) and layer.r0_i2h_weight.shape == (16, 7)
    layer.l0_i2h_weight.set_data(mx.nd.ones((16, 7)))
    with pytest.raises(ValueError, match="3-d"):
        layer.infer_shape(mx.nd.zeros((2, 5)))


def test_variational_dropout_keeps_one_mask_per_sequence() -> None:
    cell = gluon.contrib.rnn.VariationalDropoutCell(gluon.rnn.RNNCell(200), drop_outputs=0.5)
    cell.initialize(mx.init.Uniform(0.5))
    x = mx.nd.random.uniform(0.5, 1.0, shape=(2, 4, 3))
    with autograd.record():
        outs, _ = cell.unroll(4, x, layout="NTC", merge_outputs=True)
    kept = outs.asnumpy() != 0
    assert 0.3 < kept.mean() < 0.7
    assert (kept == kept[:, :1]).all()  # the same units dropped at every step
    outs2, _ = cell.unroll(4, x, layout="NTC", merge_outputs=True)  # not training: no dropout
    assert (outs2.asnumpy() != 0).all()
    with pytest.raises(ValueError, match="drop_states"):
        gluon.contrib.rnn.VariationalDropoutCell(gluon.rnn.RNNCell(2), drop_states=1.0)


def test_context_default_ctx_is_the_current_context() -> None:
    with pytest.warns(DeprecationWarning):
        assert mx.Context.default_ctx == mx.cpu(0)
    with mx.cpu(3), pytest.warns(DeprecationWarning):
        assert mx.Context.default_ctx == mx.cpu(3)
