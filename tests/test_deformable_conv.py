"""Deformable convolutions: nd.contrib operators and gluon.contrib.cnn layers (hand-computed)."""

import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon import nn
from mxtorch.gluon.contrib.cnn import DeformableConvolution, ModulatedDeformableConvolution

# a 3x3 input on the linear field f(h, w) = 1 + 3h + w, so a bilinear sample at (h, w) is f(h, w)
_X = torch.arange(1.0, 10.0).reshape(1, 1, 3, 3)
_ONE = torch.ones(1, 1, 1, 1)


def _shifted(dy: float, dx: float) -> torch.Tensor:
    off = torch.zeros(1, 2, 3, 3)
    off[0, 0], off[0, 1] = dy, dx
    return off


def test_taps_sample_the_input_at_their_offsets() -> None:
    off = _shifted(0.5, 0.25)  # every output (i, j) reads (i + 0.5, j + 0.25)
    out = mx.nd.contrib.DeformableConvolution(_X, off, _ONE, kernel=(1, 1), num_filter=1, no_bias=True)
    # inside: f = 1 + 3(i + .5) + (j + .25); past the last row/column MXNet's v1 reads that row/column
    expected = torch.tensor([[2.75, 3.75, 4.5], [5.75, 6.75, 7.5], [7.25, 8.25, 9.0]])
    torch.testing.assert_close(out.reshape(3, 3), expected)
    # the modulated (v2) operator interpolates with zeros outside, and scales by the mask (here 2)
    mask = torch.full((1, 1, 3, 3), 2.0)
    out2 = mx.nd.contrib.ModulatedDeformableConvolution(_X, off, mask, _ONE, kernel=(1, 1), num_filter=1,
                                                        no_bias=True)
    # (2, 2): only the corner (2, 2) is inside, weight (1 - .5) * (1 - .25) = .375 -> 9 * .375
    assert out2.reshape(3, 3)[2, 2].item() == pytest.approx(2 * 9 * 0.375)
    assert out2.reshape(3, 3)[0, 0].item() == pytest.approx(2 * 2.75)


def test_a_position_before_the_input_reads_zero_in_v1() -> None:
    out = mx.nd.contrib.DeformableConvolution(_X, _shifted(-0.5, 0.0), _ONE, kernel=(1, 1), num_filter=1,
                                              no_bias=True)
    torch.testing.assert_close(out.reshape(3, 3)[0], torch.zeros(3))
    torch.testing.assert_close(out.reshape(3, 3)[1], torch.tensor([2.5, 3.5, 4.5]))


@pytest.mark.parametrize("layer_cls", [DeformableConvolution, ModulatedDeformableConvolution])
def test_layer_starts_as_a_plain_convolution_and_learns_offsets(layer_cls) -> None:
    layer = layer_cls(6, kernel_size=(3, 2), strides=2, padding=1, groups=2, num_deformable_group=2)
    layer.initialize()
    x = torch.randn(2, 4, 7, 6)
    conv = nn.Conv2D(6, (3, 2), strides=2, padding=1, groups=2, in_channels=4)
    conv.initialize()
    with mx.autograd.record():
        out = layer(x)  # zero offsets (and masks of 2 * sigmoid(0) = 1) at first
    conv.weight.set_data(layer.deformable_conv_weight.data())
    conv.bias.set_data(layer.deformable_conv_bias.data())
    torch.testing.assert_close(out.detach(), conv(x), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert layer.offset_weight.grad().abs().sum() > 0  # offsets are trained through the sampling


def test_bad_offsets_are_refused() -> None:
    with pytest.raises(MXNetError, match="offset has shape"):
        mx.nd.contrib.DeformableConvolution(_X, torch.zeros(1, 2, 2, 2), _ONE, kernel=(1, 1), num_filter=1)


def test_symbol_graphs_compute_the_operators() -> None:
    x, w = torch.randn(1, 2, 4, 4), torch.randn(3, 2, 3, 3)
    off, mask = torch.rand(1, 18, 2, 2), torch.rand(1, 9, 2, 2)
    s = mx.sym.contrib.DeformableConvolution(data=mx.sym.var("x"), offset=mx.sym.var("o"), num_filter=3,
                                             kernel=(3, 3), name="dc")
    assert s.list_arguments() == ["x", "o", "dc_weight", "dc_bias"]
    assert s.infer_shape(x=(1, 2, 4, 4), o=(1, 18, 2, 2))[0][2] == (3, 2, 3, 3)
    (out,) = s.eval(x=x, o=off, dc_weight=w, dc_bias=torch.zeros(3))
    plain = mx.nd.contrib.DeformableConvolution(x, off, w, kernel=(3, 3), num_filter=3, no_bias=True)
    torch.testing.assert_close(out, plain)
    m = mx.sym.contrib.ModulatedDeformableConvolution(data=mx.sym.var("x"), offset=mx.sym.var("o"),
                                                      mask=mx.sym.var("m"), num_filter=3, kernel=(3, 3),
                                                      no_bias=True, name="mdc")
    (out2,) = m.eval(x=x, o=off, m=mask, mdc_weight=w)
    expected = mx.nd.contrib.ModulatedDeformableConvolution(x, off, mask, w, kernel=(3, 3), num_filter=3,
                                                            no_bias=True)
    torch.testing.assert_close(out2, expected)
