"""mx.rnn, MXNet 1.x's symbolic recurrent cells: graph names and shapes, values equal to Gluon's
cells with the same weights, the wrappers, the fused cell, bucketed text and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

import mxtorch as mx
from mxtorch import gluon


def _steps(n: int) -> list:
    return [mx.sym.Variable(f"t{i}_data") for i in range(n)]


def _shapes(n: int, shape: tuple) -> dict:
    return {f"t{i}_data": shape for i in range(n)}


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_gluons_cells_with_the_same_weights(kind) -> None:
    cell = getattr(mx.rnn, kind)(5, prefix="c_")
    outputs, states = cell.unroll(3, _steps(3))
    group = mx.sym.Group(outputs)
    assert group.list_outputs() == ["c_t0_out_output", "c_t1_out_output", "c_t2_out_output"]
    assert sorted(cell.params._params) == ["c_h2h_bias", "c_h2h_weight", "c_i2h_bias", "c_i2h_weight"]
    assert group.infer_shape(**_shapes(3, (2, 4)))[1] == [(2, 5)] * 3
    ref = getattr(gluon.rnn, kind)(5, prefix="c_")
    ref.initialize(mx.init.Uniform(0.5))
    xs = [mx.nd.random.uniform(shape=(2, 4)) for _ in range(3)]
    want, _ = ref.unroll(3, xs, merge_outputs=False)
    feed = {name: p.data() for name, p in ref.collect_params().items()}
    got = group.eval(**{f"t{i}_data": x for i, x in enumerate(xs)}, **feed)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-5, atol=1e-6)


def test_lstm_forget_bias_initializes_the_forget_gate() -> None:
    cell = mx.rnn.LSTMCell(3, prefix="l_", forget_bias=2.5)
    out, _ = cell.unroll(2, mx.sym.Variable("data"), merge_outputs=True)
    mod = mx.mod.Module(out, label_names=None)
    mod.bind(data_shapes=[("data", (4, 2, 6))])
    mod.init_params()
    bias = mod.get_params()[0]["l_i2h_bias"].asnumpy()
    np.testing.assert_array_equal(bias, [0, 0, 0, 2.5, 2.5, 2.5, 0, 0, 0, 0, 0, 0])


def test_residual_of_a_zero_weight_gru_is_its_input() -> None:
    # zero weights: r = z = 0.5, n = tanh(0) = 0, h' = 0.5 * h = 0 from zero states; out + x = x
    cell = mx.rnn.ResidualCell(mx.rnn.GRUCell(4, prefix="g_"))
    outputs, _ = cell.unroll(2, _steps(2))
    zeros = {n: mx.nd.zeros(s) for n, s in (("g_i2h_weight", (12, 4)), ("g_i2h_bias", (12,)),
                                            ("g_h2h_weight", (12, 4)), ("g_h2h_bias", (12,)))}
    got = mx.sym.Group(outputs).eval(t0_data=mx.nd.ones((3, 4)) * 2, t1_data=mx.nd.ones((3, 4)) * 3, **zeros)
    assert got[0].asnumpy().tolist() == [[2.0] * 4] * 3 and got[1].asnumpy().tolist() == [[3.0] * 4] * 3


def test_stack_bidirectional_zoneout_dropout_and_unfuse_shapes() -> None:
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.BidirectionalCell(mx.rnn.LSTMCell(3, prefix="l_"), mx.rnn.LSTMCell(3, prefix="r_"),
                                       output_prefix="bi_"))
    stack.add(mx.rnn.DropoutCell(0.5))
    stack.add(mx.rnn.ZoneoutCell(mx.rnn.RNNCell(4, prefix="z_"), zoneout_outputs=0.3, zoneout_states=0.3))
    outputs, states = stack.unroll(3, _steps(3))
    assert len(states) == 5 and {"l_i2h_weight", "r_h2h_bias", "z_i2h_weight"} <= set(stack.params._params)
    assert mx.sym.Group(outputs).infer_shape(**_shapes(3, (2, 5)))[1] == [(2, 4)] * 3
    bi_out, _ = stack._cells[0].unroll(3, _steps(3))
    assert mx.sym.Group(bi_out).list_outputs() == ["bi_t0_output", "bi_t1_output", "bi_t2_output"]

    fused = mx.rnn.FusedRNNCell(6, num_layers=2, mode="gru", bidirectional=True, prefix="f_")
    out, _ = fused.unroll(4, mx.sym.Variable("data"), merge_outputs=True)
    assert out.infer_shape(data=(2, 4, 3))[1] == [(2, 4, 12)]
    cells = fused.unfuse()
    outs, _ = cells.unroll(4, _steps(4))
    assert mx.sym.Group(outs).list_outputs()[0] == "f_bi_l1_t0_output"


@pytest.mark.parametrize("kind,states", [("ConvRNNCell", 1), ("ConvLSTMCell", 2), ("ConvGRUCell", 1)])
def test_conv_cells_keep_the_feature_map_shape(kind, states) -> None:
    cell = getattr(mx.rnn, kind)(input_shape=(2, 3, 8, 6), num_hidden=5, prefix="cv_")
    outputs, st = cell.unroll(2, _steps(2))
    assert len(st) == states
    assert mx.sym.Group(outputs).infer_shape(**_shapes(2, (2, 3, 8, 6)))[1] == [(2, 5, 8, 6)] * 2
    with pytest.raises(mx.base.MXNetError, match="odd"):
        getattr(mx.rnn, kind)(input_shape=(2, 3, 8, 6), num_hidden=5, h2h_kernel=(2, 2))


def test_encode_sentences_builds_or_extends_a_vocabulary() -> None:
    coded, vocab = mx.rnn.encode_sentences([["x", "y"], ["y", "z", "x"]], invalid_label=0, start_label=0)
    assert coded == [[1, 2], [2, 3, 1]] and vocab == {"\n": 0, "x": 1, "y": 2, "z": 3}
    coded, vocab = mx.rnn.encode_sentences([["x", "q", "w"]], vocab={"x": 5}, unknown_token="<unk>")
    assert coded == [[5, 0, 0]] and vocab == {"x": 5, "<unk>": 0}
    with pytest.raises(ValueError, match="unknown token"):
        mx.rnn.encode_sentences([["q"]], vocab={"x": 1})


def test_bucket_sentence_iter_pads_to_buckets_and_shifts_labels() -> None:
    sents = [[1, 2], [3, 4], [5, 6, 7], [8, 9, 1], [2, 3, 4, 5, 6, 7]]
    it = mx.rnn.BucketSentenceIter(sents, batch_size=2, buckets=[2, 4], invalid_label=0)
    assert it.default_bucket_key == 4 and it.provide_data[0].shape == (2, 4)
    batches = list(it)
    assert sorted(b.bucket_key for b in batches) == [2, 4]
    for b in batches:
        data, label = b.data[0].asnumpy(), b.label[0].asnumpy()
        assert data.shape == (2, b.bucket_key)
        np.testing.assert_array_equal(label[:, :-1], data[:, 1:])
        assert (label[:, -1] == 0).all()
        if b.bucket_key == 4:
            assert sorted(map(tuple, data.tolist())) == [(5, 6, 7, 0), (8, 9, 1, 0)]
    tn = mx.rnn.BucketSentenceIter(sents, batch_size=2, buckets=[2, 4], layout="TN")
    assert tn.provide_data[0].shape == (4, 2) and tuple(next(iter(tn)).data[0].shape)[1] == 2


def test_rnn_checkpoint_saves_gates_apart_and_loads_them_packed(tmp_path) -> None:
    cell = mx.rnn.LSTMCell(2, prefix="l_")
    out, _ = cell.unroll(1, mx.sym.Variable("data"), merge_outputs=True)
    args = {"l_i2h_weight": mx.nd.arange(24).reshape((8, 3)), "l_i2h_bias": mx.nd.arange(8),
            "l_h2h_weight": mx.nd.arange(16).reshape((8, 2)), "l_h2h_bias": mx.nd.arange(8) + 1}
    prefix = str(tmp_path / "lstm")
    mx.rnn.do_rnn_checkpoint(cell, prefix, period=2)(1, out, args, {})
    _, saved, _ = mx.model.load_checkpoint(prefix, 2)
    assert saved["l_i2h_f_weight"].asnumpy().tolist() == [[6, 7, 8], [9, 10, 11]]
    _, loaded, _ = mx.rnn.load_rnn_checkpoint(cell, prefix, 2)
    for k, v in args.items():
        np.testing.assert_array_equal(loaded[k].asnumpy(), v.asnumpy())
