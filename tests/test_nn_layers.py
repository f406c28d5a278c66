"""Tests of gluon.nn convolution, pooling, normalization and embedding layers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mxtorch as mx
from mxtorch import autograd
from mxtorch.gluon import nn


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def _ready(layer: nn.HybridBlock, x: torch.Tensor) -> torch.Tensor:
    layer.initialize()
    return layer(x)


def _close(a: torch.Tensor, b: torch.Tensor | np.ndarray, tol: float = 1e-5) -> None:
    b_t = torch.as_tensor(b, dtype=a.dtype)
    assert a.shape == b_t.shape, (a.shape, b_t.shape)
    torch.testing.assert_close(a.detach(), b_t, rtol=tol, atol=tol)


# ---- convolution ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cls, fn, nd", [(nn.Conv1D, F.conv1d, 1), (nn.Conv2D, F.conv2d, 2), (nn.Conv3D, F.conv3d, 3)]
)
def test_conv_matches_torch_with_deferred_in_channels(cls, fn, nd) -> None:
    layer = cls(6, 3, strides=2, padding=1, dilation=1, groups=2)
    assert layer.weight.shape == (6, 0) + (3,) * nd
    x = torch.randn(2, 4, *([7] * nd))
    out = _ready(layer, x)
    w = layer.weight.data()
    assert tuple(w.shape) == (6, 2) + (3,) * nd  # (channels, in_channels // groups, *kernel)
    _close(out, fn(x, w, layer.bias.data(), 2, 1, 1, 2))
    assert "4 -> 6" in repr(layer) and "groups=2" in repr(layer)


def test_conv2d_options_activation_no_bias_dilation() -> None:
    layer = nn.Conv2D(5, (3, 2), strides=(1, 2), padding=(2, 0), dilation=(2, 1), activation="relu",
                      use_bias=False, in_channels=3)
    layer.initialize()
    assert layer.bias is None and layer.weight.is_initialized  # full shape known: no deferral
    x = torch.randn(2, 3, 9, 8)
    ref = torch.relu(F.conv2d(x, layer.weight.data(), None, (1, 2), (2, 0), (2, 1)))
    _close(layer(x), ref)
    assert "bias=False" in repr(layer) and "relu" in repr(layer)


def test_conv_gradients_reach_weight() -> None:
    layer = nn.Conv2D(2, 3)
    x = torch.randn(1, 3, 5, 5)
    layer.initialize()
    with autograd.record():
        loss = layer(x).sum()
    loss.backward()
    assert layer.weight.grad().abs().sum() > 0 and layer.bias.grad().shape == (2,)


@pytest.mark.parametrize("cls, layout, nd", [(nn.Conv1D, "NWC", 1), (nn.Conv2D, "NHWC", 2),
                                             (nn.Conv3D, "NDHWC", 3)])
def test_conv_channels_last_layout(cls, layout, nd) -> None:
    layer = cls(4, 3, padding=1, layout=layout)
    x = torch.randn(2, *([5] * nd), 3)
    out = _ready(layer, x)
    w = layer.weight.data()
    assert tuple(w.shape) == (4,) + (3,) * nd + (3,)  # MXNet: weight follows the data layout
    ref = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd](x.movedim(-1, 1), w.movedim(-1, 1), layer.bias.data(),
                                                       1, 1)
    _close(out, ref.movedim(1, -1))


def test_conv_bad_arguments() -> None:
    with pytest.raises(ValueError, match="layout"):
        nn.Conv2D(4, 3, layout="NCW")
    with pytest.raises(ValueError, match="kernel_size"):
        nn.Conv2D(4, (3, 3, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2D(5, 3, groups=2)
    with pytest.raises(ValueError, match="channels"):
        nn.Conv2D(0, 3)
    with pytest.raises(ValueError, match="strides"):
        nn.Conv2D(4, 3, strides=0)
    layer = nn.Conv2D(4, 3, in_channels=3)
    layer.initialize()
    with pytest.raises(mx.MXNetError, match="in_channels=3"):
        layer(torch.randn(1, 2, 5, 5))
    with pytest.raises(mx.MXNetError, match="4-D input"):
        layer(torch.randn(2, 3, 5))
    grouped = nn.Conv2D(4, 3, groups=2)
    grouped.initialize()
    with pytest.raises(mx.MXNetError, match="divisible by groups"):
        grouped(torch.randn(1, 3, 5, 5))


def test_numpy_integers_are_accepted() -> None:
    layer = nn.Conv2D(np.int64(4), np.int32(3), strides=(np.int64(1), 1), in_channels=np.int64(2))
    assert layer.weight.shape == (4, 2, 3, 3)
    assert nn.BatchNorm(in_channels=np.int64(3)).gamma.shape == (3,)
    assert nn.Embedding(np.int64(5), 2).weight.shape == (5, 2)


def test_conv_requires_initialize() -> None:
    layer = nn.Conv2D(4, 3)
    with pytest.raises(mx.MXNetError, match="initialize"):
        layer(torch.randn(1, 2, 5, 5))


# ---- transposed convolution ----------------------------------------------------------------
def test_conv2d_transpose_shape_weight_and_values() -> None:
    layer = nn.Conv2DTranspose(4, 3, strides=2, padding=1, output_padding=1)
    x = torch.randn(2, 6, 5, 5)
    out = _ready(layer, x)
    assert out.shape == (2, 4, 10, 10)  # (5-1)*2 - 2*1 + 3 + 1
    w = layer.weight.data()
    assert tuple(w.shape) == (6, 4, 3, 3)  # (in_channels, channels // groups, *kernel)
    _close(out, F.conv_transpose2d(x, w, layer.bias.data(), 2, 1, 1))
    assert "6 -> 4" in repr(layer) and "output_padding=(1, 1)" in repr(layer)


def test_conv_transpose_groups_dilation_1d_3d() -> None:
    layer = nn.Conv1DTranspose(6, 3, strides=3, padding=0, output_padding=2, dilation=2, groups=2)
    x = torch.randn(1, 4, 7)
    out = _ready(layer, x)
    w = layer.weight.data()
    assert tuple(w.shape) == (4, 3, 3)
    assert out.shape == (1, 6, (7 - 1) * 3 + 2 * (3 - 1) + 1 + 2)
    _close(out, F.conv_transpose1d(x, w, layer.bias.data(), 3, 0, 2, 2, 2))
    layer3 = nn.Conv3DTranspose(2, (2, 3, 1), strides=(2, 1, 1), in_channels=3)
    assert layer3.weight.shape == (3, 2, 2, 3, 1)
    assert _ready(layer3, torch.randn(1, 3, 4, 4, 4)).shape == (1, 2, 8, 6, 4)


def test_conv_transpose_channels_last_and_errors() -> None:
    layer = nn.Conv2DTranspose(4, 2, strides=2, layout="NHWC")
    x = torch.randn(1, 3, 3, 5)
    out = _ready(layer, x)
    w = layer.weight.data()
    assert tuple(w.shape) == (5, 2, 2, 4) and out.shape == (1, 6, 6, 4)
    ref = F.conv_transpose2d(x.movedim(-1, 1), w.movedim(-1, 1), layer.bias.data(), 2)
    _close(out, ref.movedim(1, -1))
    with pytest.raises(ValueError, match="output_padding"):
        nn.Conv2DTranspose(4, 3, strides=1, output_padding=1)
    with pytest.raises(ValueError, match="output_padding"):
        nn.Conv2DTranspose(4, 3, output_padding=(1, 1, 1))


# ---- pooling -------------------------------------------------------------------------------
def test_max_and_avg_pool2d_match_torch() -> None:
    x = torch.randn(2, 3, 7, 7)
    _close(nn.MaxPool2D()(x), F.max_pool2d(x, 2, 2))
    _close(nn.MaxPool2D(3, 2, 1)(x), F.max_pool2d(x, 3, 2, 1))
    _close(nn.AvgPool2D(3, 2, 1)(x), F.avg_pool2d(x, 3, 2, 1, count_include_pad=True))
    _close(nn.AvgPool2D(3, 2, 1, count_include_pad=False)(x),
           F.avg_pool2d(x, 3, 2, 1, count_include_pad=False))


def test_avg_pool_count_include_pad_numbers() -> None:
    x = torch.ones(1, 1, 2, 2)
    inc = nn.AvgPool2D(2, 1, 1)(x)
    exc = nn.AvgPool2D(2, 1, 1, count_include_pad=False)(x)
    assert inc[0, 0, 0, 0].item() == pytest.approx(0.25) and exc[0, 0, 0, 0].item() == pytest.approx(1.0)


def test_pool_output_shapes_and_ceil_mode() -> None:
    x = torch.randn(1, 2, 7, 7)
    assert nn.MaxPool2D(2)(x).shape == (1, 2, 3, 3)
    assert nn.MaxPool2D(2, ceil_mode=True)(x).shape == (1, 2, 4, 4)
    assert nn.AvgPool2D(3, 2, ceil_mode=True)(x).shape == (1, 2, 3, 3)
    assert nn.AvgPool2D(2, ceil_mode=True)(x).shape == (1, 2, 4, 4)
    assert nn.MaxPool1D(3, 2)(torch.randn(2, 3, 10)).shape == (2, 3, 4)
    assert nn.AvgPool1D(3, 2, ceil_mode=True)(torch.randn(2, 3, 10)).shape == (2, 3, 5)
    assert nn.MaxPool3D((2, 1, 2))(torch.randn(1, 2, 4, 5, 6)).shape == (1, 2, 2, 5, 3)
    assert nn.AvgPool3D(2, ceil_mode=True)(torch.randn(1, 2, 5, 5, 5)).shape == (1, 2, 3, 3, 3)


def test_pool_positional_order_follows_mxnet() -> None:
    x = torch.randn(1, 2, 7, 7)
    assert nn.MaxPool2D(2, 2, 0, "NCHW", True)(x).shape == (1, 2, 4, 4)  # layout before ceil_mode
    assert nn.AvgPool2D(2, 2, 0, True)(x).shape == (1, 2, 4, 4)  # ceil_mode before layout
    assert nn.MaxPool3D(2, 2, 0, True)(torch.randn(1, 1, 5, 5, 5)).shape == (1, 1, 3, 3, 3)
    assert nn.AvgPool1D(2, 2, 0, "NCW", True)(torch.randn(1, 1, 5)).shape == (1, 1, 3)


def test_pool_channels_last() -> None:
    x = torch.randn(2, 6, 6, 3)
    out = nn.MaxPool2D(2, layout="NHWC")(x)
    _close(out, F.max_pool2d(x.movedim(-1, 1), 2).movedim(1, -1))
    out = nn.AvgPool1D(2, layout="NWC")(torch.ones(1, 4, 3))
    assert out.shape == (1, 2, 3)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_global_pools_keep_spatial_dims(nd) -> None:
    x = torch.randn(2, 3, *([4] * nd))
    mx_out = getattr(nn, f"GlobalMaxPool{nd}D")()(x)
    avg_out = getattr(nn, f"GlobalAvgPool{nd}D")()(x)
    assert mx_out.shape == (2, 3) + (1,) * nd and avg_out.shape == (2, 3) + (1,) * nd
    flat = x.reshape(2, 3, -1)
    _close(mx_out.reshape(2, 3), flat.amax(-1))
    _close(avg_out.reshape(2, 3), flat.mean(-1))


def test_global_pool_channels_last() -> None:
    x = torch.randn(2, 4, 5, 3)
    out = nn.GlobalAvgPool2D(layout="NHWC")(x)
    assert out.shape == (2, 1, 1, 3)
    _close(out.reshape(2, 3), x.mean((1, 2)))


def test_pool_bad_arguments() -> None:
    with pytest.raises(ValueError, match="layout"):
        nn.MaxPool2D(layout="NCW")
    with pytest.raises(ValueError, match="pool_size"):
        nn.MaxPool2D((2, 2, 2))
    with pytest.raises(ValueError, match="half"):
        nn.AvgPool2D(2, 1, 2)
    with pytest.raises(mx.MXNetError, match="4-D input"):
        nn.MaxPool2D()(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="layout"):
        nn.GlobalAvgPool1D(layout="NCHW")
    assert "pool_type=max" in repr(nn.MaxPool2D()) and "global_pool=True" in repr(nn.GlobalAvgPool2D())


# ---- padding and pixel shuffle -------------------------------------------------------------
def test_reflection_pad2d() -> None:
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    out = nn.ReflectionPad2D(2)(x)
    assert out.shape == (2, 3, 8, 9)
    _close(out, F.pad(x, (2, 2, 2, 2), mode="reflect"))
    out = nn.ReflectionPad2D((0, 0, 0, 0, 1, 2, 0, 3))(x)
    _close(out, np.pad(x.numpy(), ((0, 0), (0, 0), (1, 2), (0, 3)), mode="reflect"))
    with pytest.raises(ValueError, match="first four"):
        nn.ReflectionPad2D((1, 1, 0, 0, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="8-tuple"):
        nn.ReflectionPad2D((1, 1))
    with pytest.raises(mx.MXNetError, match="smaller"):
        nn.ReflectionPad2D(4)(x)


def _np_pixel_shuffle_2d(x: np.ndarray, f1: int, f2: int) -> np.ndarray:
    n, c, h, w = x.shape
    out = np.zeros((n, c // (f1 * f2), h * f1, w * f2), dtype=x.dtype)
    for k in range(c // (f1 * f2)):
        for i in range(f1):
            for j in range(f2):
                out[:, k, i::f1, j::f2] = x[:, k * f1 * f2 + i * f2 + j]
    return out


def test_pixel_shuffle() -> None:
    x = torch.randn(2, 12, 3, 5)
    _close(nn.PixelShuffle2D(2)(x), F.pixel_shuffle(x, 2))
    _close(nn.PixelShuffle2D((2, 3))(x), _np_pixel_shuffle_2d(x.numpy(), 2, 3))
    x1 = torch.arange(8.0).reshape(1, 4, 2)
    out1 = nn.PixelShuffle1D(2)(x1)
    _close(out1, torch.tensor([[[0.0, 2.0, 1.0, 3.0], [4.0, 6.0, 5.0, 7.0]]]))
    assert nn.PixelShuffle3D((2, 3, 4))(torch.zeros(1, 48, 3, 5, 7)).shape == (1, 2, 6, 15, 28)
    x3 = torch.randn(1, 16, 2, 3, 2)
    ref = x3.reshape(1, 2, 2, 2, 2, 2, 3, 2).permute(0, 1, 5, 2, 6, 3, 7, 4).reshape(1, 2, 4, 6, 4)
    _close(nn.PixelShuffle3D(2)(x3), ref)
    with pytest.raises(mx.MXNetError, match="divisible"):
        nn.PixelShuffle2D(2)(torch.randn(1, 6, 2, 2))
    assert repr(nn.PixelShuffle2D((2, 3))) == "PixelShuffle2D((2, 3))"


# ---- BatchNorm -----------------------------------------------------------------------------
def _np_bn(x: np.ndarray, mean: np.ndarray, var: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
           eps: float, axis: int = 1) -> np.ndarray:
    shape = [1] * x.ndim
    shape[axis] = -1
    r = lambda v: v.reshape(shape)  # noqa: E731
    return (x - r(mean)) / np.sqrt(r(var) + eps) * r(gamma) + r(beta)


def test_batchnorm_predict_mode_uses_running_stats() -> None:
    bn = nn.BatchNorm(in_channels=3)
    bn.initialize()
    assert bn.running_mean.grad_req == "null" and bn.running_var.grad_req == "null"
    mean, var = np.array([0.5, -1.0, 2.0], "f"), np.array([2.0, 0.5, 1.5], "f")
    gamma, beta = np.array([1.5, 0.5, 2.0], "f"), np.array([0.1, 0.2, 0.3], "f")
    for p, v in ((bn.running_mean, mean), (bn.running_var, var), (bn.gamma, gamma), (bn.beta, beta)):
        p.set_data(torch.from_numpy(v))
    x = torch.randn(4, 3, 2, 2)
    _close(bn(x), _np_bn(x.numpy(), mean, var, gamma, beta, 1e-5))
    _close(bn.running_mean.data(), mean)  # unchanged outside training


def test_batchnorm_training_batch_stats_and_mxnet_momentum_update() -> None:
    bn = nn.BatchNorm(momentum=0.8)
    x = torch.randn(5, 3, 4) * 3 + 1
    bn.initialize()
    with autograd.record():
        out = bn(x)
    xn = x.numpy().astype("f8")
    bmean, bvar = xn.mean((0, 2)), xn.var((0, 2))  # biased variance, as MXNet
    _close(out, _np_bn(xn, bmean, bvar, np.ones(3), np.zeros(3), 1e-5), 1e-4)
    _close(bn.running_mean.data(), 0.8 * 0.0 + 0.2 * bmean)
    _close(bn.running_var.data(), 0.8 * 1.0 + 0.2 * bvar)
    with autograd.train_mode():  # training without recording updates too
        bn(x)
    _close(bn.running_mean.data(), 0.8 * (0.2 * bmean) + 0.2 * bmean)
    assert bn.gamma.shape == (3,) and bn.running_var.shape == (3,)


def test_batchnorm_gradients_and_train_predict_difference() -> None:
    bn = nn.BatchNorm()
    x = torch.randn(6, 2, 3)
    bn.initialize()
    with autograd.record():
        loss = (bn(x) * torch.arange(6.0).reshape(6, 1, 1)).sum()
    loss.backward()
    assert bn.gamma.grad().abs().sum() > 0 and bn.beta.grad().abs().sum() > 0
    with autograd.predict_mode():
        pred = bn(x)
    with autograd.train_mode():
        train = bn(x)
    assert not torch.allclose(pred, train)


def test_batchnorm_use_global_stats_in_training() -> None:
    bn = nn.BatchNorm(use_global_stats=True, in_channels=2)
    bn.initialize()
    bn.running_mean.set_data(torch.tensor([1.0, 2.0]))
    x = torch.randn(4, 2)
    with autograd.record():
        out = bn(x)
    _close(out, (x - torch.tensor([1.0, 2.0])) / np.sqrt(1 + 1e-5))
    _close(bn.running_mean.data(), np.array([1.0, 2.0]))


def test_batchnorm_scale_center_false() -> None:
    bn = nn.BatchNorm(scale=False, center=False, in_channels=2)
    bn.initialize()
    assert bn.gamma.grad_req == "null" and bn.beta.grad_req == "null"
    bn.gamma.set_data(torch.tensor([5.0, 5.0]))  # fix_gamma: ignored
    x = torch.randn(3, 2)
    _close(bn(x), x / np.sqrt(1 + 1e-5))
    assert "fix_gamma=True" in repr(bn)


@pytest.mark.parametrize("axis", [-1, 2])
def test_batchnorm_other_axis(axis) -> None:
    bn = nn.BatchNorm(axis=axis)
    x = torch.randn(4, 3, 5)
    bn.initialize()
    with autograd.record():
        out = bn(x)
    xn = x.numpy().astype("f8")
    ref = _np_bn(xn, xn.mean((0, 1)), xn.var((0, 1)), np.ones(5), np.zeros(5), 1e-5, axis=2)
    _close(out, ref, 1e-4)
    assert bn.gamma.shape == (5,)


def test_batchnorm_errors_and_repr() -> None:
    with pytest.raises(ValueError, match="momentum"):
        nn.BatchNorm(momentum=1.5)
    with pytest.raises(ValueError, match="in_channels"):
        nn.BatchNorm(in_channels=-1)
    bn = nn.BatchNorm(in_channels=3)
    assert "in_channels=3" in repr(bn) and "momentum=0.9" in repr(bn)
    bn.initialize()
    with pytest.raises(mx.MXNetError, match="in_channels=3"):
        bn(torch.randn(2, 4))
    with pytest.raises(mx.MXNetError, match="axis=3"):
        nn.BatchNorm(axis=3)(torch.randn(2, 3))
    assert "in_channels=None" in repr(nn.BatchNorm())


def test_batchnorm_training_with_one_value_per_channel() -> None:
    bn = nn.BatchNorm(in_channels=3, momentum=0.5)
    bn.initialize()
    bn.beta.set_data(torch.tensor([1.0, 2.0, 3.0]))
    x = torch.tensor([[4.0, 5.0, 6.0]], requires_grad=True)
    with autograd.record():
        out = bn(x)  # MXNet: batch variance 0, output = beta
    out.sum().backward()
    _close(out, np.array([[1.0, 2.0, 3.0]]))
    _close(x.grad, torch.zeros(1, 3))
    _close(bn.running_mean.data(), np.array([2.0, 2.5, 3.0]))
    _close(bn.running_var.data(), np.full(3, 0.5))


def test_batchnorm_relu_sync_batchnorm_and_cast() -> None:
    x = torch.randn(4, 3, 2)
    bnr = nn.BatchNormReLU()
    out = _ready(bnr, x)
    bn = nn.BatchNorm()
    _close(out, torch.relu(_ready(bn, x)))
    sync = nn.SyncBatchNorm()
    _close(_ready(sync, x), bn(x))
    with pytest.warns(UserWarning, match="does not synchronize"):
        nn.SyncBatchNorm(num_devices=2)
    bn.cast("float16")
    assert bn.gamma.dtype == np.float32  # BatchNorm stays float32, as MXNet (numpy dtype, as MXNet)


def test_batchnorm_save_load_roundtrip(tmp_path) -> None:
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3), nn.BatchNorm())
    net.initialize()
    x = torch.randn(2, 3, 6, 6)
    with autograd.record():
        net(x)
    path = str(tmp_path / "net.params")
    net.save_parameters(path)
    net2 = nn.HybridSequential()
    net2.add(nn.Conv2D(4, 3, in_channels=3), nn.BatchNorm(in_channels=4))
    net2.load_parameters(path)
    _close(net2(x), net(x))
    _close(net2[1].running_var.data(), net[1].running_var.data())


# ---- LayerNorm / GroupNorm / InstanceNorm ---------------------------------------------------
def _np_norm(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)


def test_layernorm_last_and_other_axis() -> None:
    x = torch.randn(2, 3, 4)
    ln = nn.LayerNorm()
    ln.initialize()
    ln(x)  # infers in_channels = 4
    g, b = torch.randn(4), torch.randn(4)
    ln.gamma.set_data(g)
    ln.beta.set_data(b)
    xn = x.numpy().astype("f8")
    _close(ln(x), _np_norm(xn, (2,), 1e-5) * g.numpy() + b.numpy(), 1e-4)
    ln1 = nn.LayerNorm(axis=1, epsilon=1e-3)
    out = _ready(ln1, x)
    assert ln1.gamma.shape == (3,)
    _close(out, _np_norm(xn, (1,), 1e-3), 1e-4)
    assert repr(ln1) == "LayerNorm(eps=0.001, axis=1, center=True, scale=True, in_channels=3)"


def test_layernorm_mxnet_example_and_flags() -> None:
    ln = nn.LayerNorm(scale=False, center=False)
    out = _ready(ln, torch.tensor([[1.0, 2, 3, 4, 5], [1, 1, 2, 2, 2]]))
    _close(out[0], np.array([-1.41421, -0.707105, 0.0, 0.707105, 1.41421]), 1e-4)
    assert ln.gamma.grad_req == "null" and ln.beta.grad_req == "null"


def test_groupnorm_matches_numpy_per_channel_affine() -> None:
    x = torch.randn(2, 6, 3, 2)
    gn = nn.GroupNorm(num_groups=3)
    gn.initialize()
    gn(x)
    assert gn.gamma.shape == (6,) and gn.beta.shape == (6,)
    g, b = torch.randn(6), torch.randn(6)
    gn.gamma.set_data(g)
    gn.beta.set_data(b)
    xn = x.numpy().astype("f8").reshape(2, 3, 2, 3, 2)
    ref = _np_norm(xn, (2, 3, 4), 1e-5).reshape(2, 6, 3, 2)
    _close(gn(x), ref * g.numpy().reshape(1, 6, 1, 1) + b.numpy().reshape(1, 6, 1, 1), 1e-4)
    with pytest.raises(mx.MXNetError, match="divisible by num_groups"):
        gn(torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match="num_groups"):
        nn.GroupNorm(0)
    assert "num_groups=3" in repr(gn) and "in_channels=6" in repr(gn)


def test_groupnorm_mxnet_example() -> None:
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    out = _ready(nn.GroupNorm(), x)
    _close(out[0, 0], np.array([-1.5932543, -1.3035717, -1.0138891, -0.7242065]), 1e-4)
    _close(out[1], out[0])


def test_instancenorm_matches_numpy_and_axis() -> None:
    x = torch.randn(2, 3, 4, 5)
    inorm = nn.InstanceNorm()
    out = _ready(inorm, x)
    assert inorm.gamma.grad_req == "null"  # MXNet's default scale=False
    xn = x.numpy().astype("f8")
    _close(out, _np_norm(xn, (2, 3), 1e-5), 1e-4)
    inorm2 = nn.InstanceNorm(axis=-1, scale=True)
    inorm2.initialize()
    inorm2(x)
    g = torch.randn(5)
    inorm2.gamma.set_data(g)
    _close(inorm2(x), _np_norm(xn, (1, 2), 1e-5) * g.numpy(), 1e-4)
    with pytest.raises(mx.MXNetError, match="at least 3"):
        inorm(torch.randn(2, 3))
    assert "scale=False" in repr(inorm) and "in_channels=3" in repr(inorm)


def test_instancenorm_mxnet_example() -> None:
    out = _ready(nn.InstanceNorm(), torch.tensor([[[1.1, 2.2]], [[3.3, 4.4]]]))
    _close(out, np.array([[[-0.99998355, 0.99998331]], [[-0.99998319, 0.99998361]]]), 1e-4)


def test_norm_gradients_flow() -> None:
    x = torch.randn(2, 4, 3, requires_grad=True)
    for layer in (nn.LayerNorm(), nn.GroupNorm(2), nn.InstanceNorm(scale=True)):
        layer.initialize()
        with autograd.record():
            loss = (layer(x) * torch.randn(2, 4, 3)).sum()
        loss.backward()
        assert layer.gamma.grad().abs().sum() > 0 and layer.beta.grad().abs().sum() > 0


# ---- Embedding -----------------------------------------------------------------------------
def test_embedding_lookup_float_indices_and_grad() -> None:
    emb = nn.Embedding(10, 4)
    emb.initialize()
    assert emb.weight.shape == (10, 4)
    idx = torch.tensor([[1.0, 2.0, 1.0], [9.0, 0.0, 3.0]])
    with autograd.record():
        out = emb(idx)
    assert out.shape == (2, 3, 4)
    _close(out, emb.weight.data()[idx.long()])
    out.sum().backward()
    grad = emb.weight.grad()
    _close(grad[1], torch.full((4,), 2.0))
    _close(grad[5], torch.zeros(4))
    assert repr(emb) == "Embedding(10 -> 4, float32)"


def test_embedding_dtype_and_errors() -> None:
    emb = nn.Embedding(5, 2, dtype="float64")
    emb.initialize()
    assert emb(torch.tensor([0, 4])).dtype == torch.float64
    with pytest.raises(mx.MXNetError, match="out of range"):
        emb(torch.tensor([5]))
    with pytest.raises(mx.MXNetError, match="out of range"):
        emb(torch.tensor([-1]))
    with pytest.raises(ValueError, match="input_dim"):
        nn.Embedding(0, 2)


# ---- composition ---------------------------------------------------------------------------
def test_small_cnn_deferred_end_to_end() -> None:
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(),
            nn.Conv2D(16, 3, padding=1, activation="relu"), nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(5))
    net.initialize()
    x = torch.randn(4, 3, 8, 8)
    with autograd.record():
        loss = net(x).square().mean()
    loss.backward()
    assert net[0].weight.shape == (8, 3, 3, 3) and net[4].weight.shape == (16, 8, 3, 3)
    assert net[1].running_mean.data().abs().sum() > 0
    assert net(x).shape == (4, 5)


def test_batchnorm_training_mode_under_compiled_hybridize() -> None:
    net = nn.HybridSequential()
    net.add(nn.BatchNorm(in_channels=3))
    net.initialize()
    net.hybridize(backend="aot_eager")
    x = torch.randn(4, 3) * 3 + 2
    net(x)
    pred = net(x)  # compiled in predict mode
    with autograd.record():
        train = net(x)
    assert not torch.allclose(pred, train)
    assert net[0].running_mean.data().abs().sum() > 0


def test_one_activation_table_serves_nd_and_gluon():
    from mxtorch.nd._nn import ACTIVATIONS

    x = torch.linspace(-3, 3, 13)
    for name in ACTIVATIONS:
        torch.testing.assert_close(nn.Activation(name)(x), mx.nd.Activation(x, act_type=name))
    assert {"relu", "sigmoid", "tanh", "softrelu", "softsign", "log_sigmoid", "mish"} <= set(ACTIVATIONS)
    for make in (lambda: nn.Activation("swishy"), lambda: mx.nd.Activation(x, act_type="swishy")):
        with pytest.raises(ValueError, match=r"unknown activation act_type 'swishy': expected one of"):
            make()
