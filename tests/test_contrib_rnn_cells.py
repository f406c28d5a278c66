"""gluon.contrib.rnn: the convolutional cells, LSTMPCell on symbols, dynamic_unroll."""

import math

import pytest
import torch

import mxtorch as mx
from mxtorch import autograd, gluon
from mxtorch.gluon.contrib import rnn as crnn


def _set(cell: gluon.Block, values: dict[str, torch.Tensor]) -> None:
    for name, p in cell.collect_params().items():
        p.set_data(values[name.split("_", 1)[1]].reshape(p.shape))


def test_conv_rnn_step_by_hand() -> None:
    # 1 channel, 1x1 kernels: h' = tanh(2 x + 0.5 h + 0.1) at every position
    cell = crnn.Conv1DRNNCell((1, 3), 1, 1, 1, prefix="c_")
    cell.initialize()
    _set(cell, {"i2h_weight": torch.tensor(2.0), "h2h_weight": torch.tensor(0.5),
                "i2h_bias": torch.tensor(0.1), "h2h_bias": torch.tensor(0.0)})
    x = torch.tensor([[[0.1, 0.2, 0.3]]])
    out, states = cell.unroll(2, torch.stack([x, x], dim=1), merge_outputs=False)
    h1 = [math.tanh(2 * v + 0.1) for v in (0.1, 0.2, 0.3)]
    h2 = [math.tanh(2 * v + 0.1 + 0.5 * h) for v, h in zip((0.1, 0.2, 0.3), h1)]
    torch.testing.assert_close(out[0].detach().reshape(3), torch.tensor(h1))
    torch.testing.assert_close(states[0].detach().reshape(3), torch.tensor(h2))


@pytest.mark.parametrize("conv_cls, plain_cls", [(crnn.Conv1DLSTMCell, gluon.rnn.LSTMCell),
                                                 (crnn.Conv1DGRUCell, gluon.rnn.GRUCell)])
def test_one_by_one_convolutions_on_one_position_are_the_plain_cell(conv_cls, plain_cls) -> None:
    conv, plain = conv_cls((3, 1), 4, 1, 1), plain_cls(4, input_size=3)
    conv.initialize(mx.init.Uniform(0.5))
    plain.initialize()
    for name, p in plain.collect_params().items():  # the same numbers: conv weights have a kernel axis
        p.set_data(conv.collect_params()[conv.prefix + name[len(plain.prefix):]].data().reshape(p.shape))
    x = torch.randn(2, 5, 3)
    out_plain, st_plain = plain.unroll(5, x, merge_outputs=True)
    out_conv, st_conv = conv.unroll(5, x.unsqueeze(-1), merge_outputs=True)
    torch.testing.assert_close(out_conv.squeeze(-1), out_plain)
    for a, b in zip(st_conv, st_plain):
        torch.testing.assert_close(a.squeeze(-1), b)


def test_conv_cells_on_symbols_and_deferred_channels() -> None:
    cell = crnn.Conv2DLSTMCell((2, 5, 6), 3, 3, 3, prefix="cl_")
    steps = [mx.sym.var(f"x{t}") for t in range(2)]
    outs, _ = cell.unroll(2, steps)
    group = mx.sym.Group(outs)
    assert group.list_outputs() == ["cl_t0_out_output", "cl_t1_out_output"]
    _, out_shapes, _ = group.infer_shape(x0=(4, 2, 5, 6), x1=(4, 2, 5, 6))
    assert out_shapes == [(4, 3, 3, 4)] * 2  # 3x3 kernel, no padding: 5x6 -> 3x4

    gru = crnn.Conv1DGRUCell((0, 7), 2, 3, 3)  # channels known at the first call
    gru.initialize()
    out, _ = gru.unroll(2, torch.ones(1, 2, 5, 7), merge_outputs=True)
    assert gru.i2h_weight.shape == (6, 5, 3) and out.shape == (1, 2, 2, 5)
    with pytest.raises(ValueError, match="odd"):
        crnn.Conv1DRNNCell((1, 4), 2, 1, 2)


def test_lstmp_cell_graph() -> None:
    cell = crnn.LSTMPCell(8, 3, prefix="p_")
    outs, _ = cell.unroll(2, [mx.sym.var("a"), mx.sym.var("b")])
    group = mx.sym.Group(outs)
    assert group.list_outputs() == ["p_t0_out_output", "p_t1_out_output"]
    assert group.infer_shape(a=(5, 4), b=(5, 4))[1] == [(5, 3), (5, 3)]


@pytest.mark.parametrize("layout", ["TNC", "NTC"])
def test_dynamic_unroll_matches_unroll_with_valid_length(layout) -> None:
    cell = gluon.rnn.LSTMCell(4, input_size=3)
    cell.initialize()
    x = torch.randn((5, 2, 3) if layout == "TNC" else (2, 5, 3))
    begin = [torch.randn(2, 4), torch.randn(2, 4)]
    lengths = torch.tensor([2.0, 5.0])
    with autograd.record():
        ref_out, ref_states = cell.unroll(5, x, begin, layout=layout, merge_outputs=True,
                                          valid_length=lengths)
        out, states = crnn.rnn_cell.dynamic_unroll(cell, x, begin, layout=layout, valid_length=lengths)
    torch.testing.assert_close(out, ref_out)
    for a, b in zip(states, ref_states):
        torch.testing.assert_close(a, b)
    t_axis = layout.find("T")
    assert out.narrow(t_axis, 2, 3).select(1 - t_axis, 0).abs().sum() == 0  # sample 0 ended after 2 steps
