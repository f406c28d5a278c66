"""MXNet's neural-network operators (``F.FullyConnected``, ``F.Convolution`` ...) on torch.

These are what MXNet 1.x ``hybrid_forward(F, x, ...)`` code calls; ``F`` is ``mxtorch.nd``.
Operators whose behaviour depends on training (``Dropout``, ``BatchNorm``, ``LeakyReLU``
with 'rrelu') take ``training``; None reads :func:`mxtorch.autograd.is_training`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError
from . import _norm
from ._common import dtype_of, norm_axis, to_index, training_flag
from ._norm import *  # noqa: F403
from ._ops import _no0d

__all__ = [
    "softmax",
    "log_softmax",
    "softmin",
    "SoftmaxActivation",
    "L2Normalization",
    "smooth_l1",
    "softmax_cross_entropy",
    "Activation",
    "LeakyReLU",
    "FullyConnected",
    "Convolution",
    "Deconvolution",
    "Pooling",
    "Dropout",
    "Embedding",
    "LRN",
    "UpSampling",
    "SequenceMask",
    "SequenceLast",
    "SequenceReverse",
    "log_sigmoid",
    "mish",
]
__all__ += _norm.__all__


Tensor = torch.Tensor




def _given(v: Any) -> bool:
    """True unless ``v`` is None or an empty sequence (MXNet's "not set")."""
    return v is not None and not (isinstance(v, (tuple, list)) and len(v) == 0)


def _tuple(v: Any, n: int, default: int, name: str) -> tuple[int, ...]:
    """An int or an n-tuple as an n-tuple (empty/None gives ``default`` everywhere)."""
    if v is None or (isinstance(v, (tuple, list)) and len(v) == 0):
        return (default,) * n
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    t = tuple(int(x) for x in v)
    if len(t) != n:
        raise ValueError(f"{name}={tuple(v)} must have {n} entries for {n}-D spatial data")
    return t


# ----------------------------------------------------------------------------------------------
# softmax family
# ----------------------------------------------------------------------------------------------


def _length_mask(data: Tensor, axis: int, length: Tensor) -> Tensor:
    n = data.shape[axis]
    pos_shape = [1] * data.dim()
    pos_shape[axis] = n
    pos = torch.arange(n, device=data.device).reshape(pos_shape)
    ln = to_index(length, data).to(data.device).unsqueeze(axis)
    return pos < ln


def softmax(
    data: Tensor,
    length: Tensor | None = None,
    axis: int = -1,
    temperature: float | None = None,
    dtype: Any = None,
    use_length: bool = False,
) -> Tensor:
    """exp(x/T) normalised along ``axis``; with ``use_length`` only the first length[i] entries
    take part and the rest are 0."""
    x = data if dtype is None else data.to(dtype_of(dtype))
    ax = norm_axis(axis, x.dim())
    if temperature is not None and temperature != 1.0:
        x = x / temperature
    if not use_length:
        return torch.softmax(x, dim=ax)
    if length is None:
        raise ValueError("softmax: use_length=True needs a length array")
    mask = _length_mask(x, ax, length)
    lowest = torch.finfo(x.dtype).min if x.is_floating_point() else -1e30
    out = torch.softmax(x.masked_fill(~mask, lowest), dim=ax)
    return out.masked_fill(~mask, 0.0)


def log_softmax(
    data: Tensor,
    axis: int = -1,
    temperature: float | None = None,
    dtype: Any = None,
    use_length: bool = False,
    length: Tensor | None = None,
) -> Tensor:
    """log(softmax(data)); with ``use_length`` the masked entries are -inf."""
    x = data if dtype is None else data.to(dtype_of(dtype))
    ax = norm_axis(axis, x.dim())
    if temperature is not None and temperature != 1.0:
        x = x / temperature
    if not use_length:
        return torch.log_softmax(x, dim=ax)
    if length is None:
        raise ValueError("log_softmax: use_length=True needs a length array")
    mask = _length_mask(x, ax, length)
    out = torch.log_softmax(x.masked_fill(~mask, torch.finfo(x.dtype).min), dim=ax)
    return out.masked_fill(~mask, float("-inf"))


def softmin(
    data: Tensor,
    axis: int = -1,
    temperature: float | None = None,
    dtype: Any = None,
    use_length: bool = False,
    length: Tensor | None = None,
) -> Tensor:
    """softmax(-data)."""
    return softmax(-data, length, axis=axis, temperature=temperature, dtype=dtype, use_length=use_length)


def SoftmaxActivation(data: Tensor, mode: str = "instance") -> Tensor:
    """Softmax over all but the first axis ('instance') or over axis 1 ('channel')."""
    if mode == "instance":
        return torch.softmax(data.reshape(data.shape[0], -1), dim=1).reshape(data.shape)
    if mode == "channel":
        return torch.softmax(data, dim=1)
    raise ValueError(f"SoftmaxActivation: mode must be 'instance' or 'channel', got {mode!r}")


def L2Normalization(data: Tensor, eps: float = 1e-10, mode: str = "instance") -> Tensor:
    """data / sqrt(sum(data**2) + eps), the sum over all but axis 0 ('instance'), over axis 1
    ('channel') or over axes 2.. ('spatial')."""
    if data.dim() <= 1:
        axes: tuple[int, ...] = tuple(range(data.dim()))
    elif mode == "instance":
        axes = tuple(range(1, data.dim()))
    elif mode == "channel":
        axes = (1,)
    elif mode == "spatial":
        axes = tuple(range(2, data.dim()))
        if not axes:
            raise ValueError(f"L2Normalization: mode 'spatial' needs >= 3-D data, got {tuple(data.shape)}")
    else:
        raise ValueError(f"L2Normalization: mode must be 'instance', 'channel' or 'spatial', got {mode!r}")
    return data / torch.sqrt(torch.sum(data * data, dim=axes, keepdim=True) + eps)


def smooth_l1(data: Tensor, scalar: float = 1.0) -> Tensor:
    """0.5*(s*x)^2 where |x| < 1/s^2, else |x| - 0.5/s^2 (s = ``scalar``)."""
    s2 = scalar * scalar
    ax = torch.abs(data)
    return torch.where(ax < 1.0 / s2, 0.5 * s2 * data * data, ax - 0.5 / s2)


def softmax_cross_entropy(data: Tensor, label: Tensor) -> Tensor:
    """Summed cross entropy of softmax(data) against integer labels, shape (1,)."""
    return _no0d(F.cross_entropy(data, to_index(label, data), reduction="sum"))


# ----------------------------------------------------------------------------------------------
# activations
# ----------------------------------------------------------------------------------------------


def log_sigmoid(data: Tensor) -> Tensor:
    return F.logsigmoid(data)


def mish(data: Tensor) -> Tensor:
    return F.mish(data)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    # MXNet 1.9's act_type values
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softrelu": F.softplus,
    "softsign": F.softsign,
    "log_sigmoid": F.logsigmoid,
    "mish": F.mish,
    # mxtorch's additions (MXNet has them as LeakyReLU act_types or layers of their own)
    "gelu": F.gelu,
    "silu": F.silu,
    "swish": F.silu,
    "elu": F.elu,
    "selu": F.selu,
}
"""The one activation table: ``nd.Activation(x, act_type)`` and ``gluon.nn.Activation(act_type)``."""


def activation_fn(act_type: str) -> Callable[[Tensor], Tensor]:
    """The function for the ``act_type`` name; an unknown name lists the known ones."""
    fn = ACTIVATIONS.get(act_type) if isinstance(act_type, str) else None
    if fn is None:
        raise ValueError(f"unknown activation act_type {act_type!r}: expected one of {sorted(ACTIVATIONS)}")
    return fn


def Activation(data: Tensor, act_type: str = "relu") -> Tensor:
    """Elementwise activation by name (:data:`ACTIVATIONS`): MXNet's 'relu', 'sigmoid', 'tanh',
    'softrelu' (softplus), 'softsign', 'log_sigmoid', 'mish', and 'gelu', 'silu'/'swish', 'elu',
    'selu'."""
    return activation_fn(act_type)(data)


def LeakyReLU(
    data: Tensor,
    gamma: Tensor | None = None,
    act_type: str = "leaky",
    slope: float = 0.25,
    lower_bound: float = 0.125,
    upper_bound: float = 0.334,
    training: bool | None = None,
) -> Tensor:
    """Leaky ReLU family: 'leaky' (slope), 'prelu' (learned ``gamma`` per channel, axis 1),
    'elu' (alpha = slope), 'selu', 'gelu' or 'rrelu' (random slope in training)."""
    if act_type == "leaky":
        return F.leaky_relu(data, slope)
    if act_type == "prelu":
        if gamma is None:
            raise ValueError("LeakyReLU: act_type 'prelu' needs gamma")
        g = gamma
        if gamma.numel() > 1 and data.dim() > 1:
            g = gamma.reshape((1, -1) + (1,) * (data.dim() - 2))
        return torch.where(data > 0, data, g * data)
    if act_type == "elu":
        return F.elu(data, alpha=slope)
    if act_type == "selu":
        return F.selu(data)
    if act_type == "gelu":
        return F.gelu(data)
    if act_type == "rrelu":
        return F.rrelu(data, lower_bound, upper_bound, training=training_flag(training))
    raise ValueError(
        f"LeakyReLU: unknown act_type {act_type!r}; "
        "expected 'leaky', 'prelu', 'elu', 'selu', 'gelu' or 'rrelu'"
    )


# ----------------------------------------------------------------------------------------------
# dense / conv / pooling
# ----------------------------------------------------------------------------------------------


def FullyConnected(
    data: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    num_hidden: int | None = None,
    no_bias: bool = False,
    flatten: bool = True,
) -> Tensor:
    """data @ weight.T + bias; weight is (num_hidden, in_units).  ``flatten`` first collapses
    all axes but the first, otherwise the product applies to the last axis."""
    if num_hidden is not None and weight.shape[0] != num_hidden:
        raise ValueError(
            f"FullyConnected: weight shape {tuple(weight.shape)} does not give num_hidden={num_hidden}"
        )
    x = data.reshape(data.shape[0], -1) if flatten else data
    if x.shape[-1] != weight.shape[-1]:
        raise ValueError(
            f"FullyConnected: input {tuple(data.shape)} (flatten={flatten}) has {x.shape[-1]} features, "
            f"weight {tuple(weight.shape)} expects {weight.shape[-1]}"
        )
    if bias is not None and bias.dim() == 2 and bias.shape[1] == 1:
        bias = bias.reshape(-1)  # MXNet takes a (num_hidden, 1) bias as well as (num_hidden,)
    return F.linear(x, weight, None if no_bias else bias)


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_DECONV = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_FIRST = {"NCW", "NCHW", "NCDHW", None}
_LAST = {"NWC", "NHWC", "NDHWC"}


def _to_channels_first(data: Tensor, layout: str | None) -> tuple[Tensor, bool]:
    if layout in _FIRST:
        return data, False
    if layout in _LAST:
        if len(layout) != data.dim():
            raise ValueError(f"layout {layout!r} does not fit data of shape {tuple(data.shape)}")
        return data.movedim(-1, 1), True
    raise ValueError(f"unknown layout {layout!r}: expected e.g. 'NCHW' or 'NHWC'")


def _spatial(data: Tensor, name: str) -> int:
    n = data.dim() - 2
    if n not in (1, 2, 3):
        raise ValueError(
            f"{name}: expected 3-D to 5-D data (N, C, spatial...), got shape {tuple(data.shape)}"
        )
    return n


def Convolution(
    data: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    kernel: Any = None,
    stride: Any = None,
    dilate: Any = None,
    pad: Any = None,
    num_filter: int | None = None,
    num_group: int = 1,
    workspace: int = 1024,
    no_bias: bool = False,
    cudnn_tune: Any = None,
    cudnn_off: bool = False,
    layout: str | None = None,
) -> Tensor:
    """1-D/2-D/3-D convolution; weight is (num_filter, C/num_group, *kernel) (channel-last
    layouts take (num_filter, *kernel, C/num_group))."""
    x, last = _to_channels_first(data, layout)
    w = weight.movedim(-1, 1) if last else weight
    n = _spatial(x, "Convolution")
    if _given(kernel) and _tuple(kernel, n, 0, "kernel") != tuple(w.shape[2:]):
        raise ValueError(f"Convolution: kernel={kernel!r} does not match weight shape {tuple(weight.shape)}")
    if num_filter is not None and w.shape[0] != num_filter:
        raise ValueError(
            f"Convolution: weight shape {tuple(weight.shape)} does not give num_filter={num_filter}"
        )
    if x.shape[1] != w.shape[1] * num_group:
        raise ValueError(
            f"Convolution: data has {x.shape[1]} channels but weight {tuple(weight.shape)} with "
            f"num_group={num_group} expects {w.shape[1] * num_group}"
        )
    out = _CONV[n](
        x,
        w,
        None if no_bias else bias,
        _tuple(stride, n, 1, "stride"),
        _tuple(pad, n, 0, "pad"),
        _tuple(dilate, n, 1, "dilate"),
        num_group,
    )
    return out.movedim(1, -1) if last else out


def Deconvolution(
    data: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    kernel: Any = None,
    stride: Any = None,
    dilate: Any = None,
    pad: Any = None,
    adj: Any = None,
    target_shape: Any = None,
    num_filter: int | None = None,
    num_group: int = 1,
    workspace: int = 512,
    no_bias: bool = True,
    cudnn_tune: Any = None,
    cudnn_off: bool = False,
    layout: str | None = None,
) -> Tensor:
    """Transposed convolution; weight is (C, num_filter/num_group, *kernel).  ``adj`` adds
    output padding; ``target_shape`` (spatial) picks pad and adj to reach that output size."""
    x, last = _to_channels_first(data, layout)
    w = weight.movedim(-1, 1) if last else weight
    n = _spatial(x, "Deconvolution")
    if x.shape[1] != w.shape[0]:
        raise ValueError(
            f"Deconvolution: data has {x.shape[1]} channels, "
            f"weight {tuple(weight.shape)} expects {w.shape[0]}"
        )
    if num_filter is not None and w.shape[1] * num_group != num_filter:
        raise ValueError(
            f"Deconvolution: weight shape {tuple(weight.shape)} with num_group={num_group} does not give "
            f"num_filter={num_filter}"
        )
    s = _tuple(stride, n, 1, "stride")
    d = _tuple(dilate, n, 1, "dilate")
    p = _tuple(pad, n, 0, "pad")
    a = _tuple(adj, n, 0, "adj")
    if _given(target_shape):
        tgt = _tuple(target_shape, n, 0, "target_shape")
        pads, adjs = [], []
        for i in range(n):
            k_eff = (w.shape[2 + i] - 1) * d[i] + 1
            total = s[i] * (x.shape[2 + i] - 1) + k_eff - tgt[i]
            if total < 0:
                raise ValueError(f"Deconvolution: target_shape {tgt} is larger than this layer can produce")
            pads.append((total + 1) // 2)
            adjs.append(total % 2)
        p, a = tuple(pads), tuple(adjs)
    out = _DECONV[n](x, w, None if no_bias else bias, s, p, a, num_group, d)
    return out.movedim(1, -1) if last else out


def _sum_pool(
    x: Tensor,
    n: int,
    k: tuple[int, ...],
    s: tuple[int, ...],
    p: tuple[int, ...],
    ceil_mode: bool,
    avg: bool,
    count_include_pad: bool,
) -> Tensor:
    lifted = n == 1
    if lifted:
        x = x.unsqueeze(2)
        k, s, p = (1,) + k, (1,) + s, (0,) + p
    fn = F.avg_pool2d if x.dim() == 4 else F.avg_pool3d
    if avg:
        out = fn(x, k, s, p, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    else:
        out = fn(x, k, s, p, ceil_mode=ceil_mode, count_include_pad=True, divisor_override=1)
    return out.squeeze(2) if lifted else out


def Pooling(
    data: Tensor,
    kernel: Any = None,
    pool_type: str = "max",
    global_pool: bool = False,
    cudnn_off: bool = False,
    pooling_convention: str = "valid",
    stride: Any = None,
    pad: Any = None,
    p_value: int | None = None,
    count_include_pad: bool | None = None,
    layout: str | None = None,
) -> Tensor:
    """Max/avg/sum/lp pooling over 1-3 spatial axes.  'valid' floors the output size, 'full'
    rounds it up; ``global_pool`` pools the whole spatial extent (output size 1)."""
    if pool_type not in ("max", "avg", "sum", "lp"):
        raise ValueError(f"Pooling: pool_type must be 'max', 'avg', 'sum' or 'lp', got {pool_type!r}")
    if pooling_convention not in ("valid", "full", "same"):
        raise ValueError(f"Pooling: pooling_convention must be 'valid', 'full' or 'same', "
                         f"got {pooling_convention!r}")
    x, last = _to_channels_first(data, layout)
    n = _spatial(x, "Pooling")
    pv = 2 if p_value is None else p_value
    if global_pool:
        dims = tuple(range(2, x.dim()))
        if pool_type == "max":
            out = torch.amax(x, dim=dims, keepdim=True)
        elif pool_type == "avg":
            out = torch.mean(x, dim=dims, keepdim=True)
        elif pool_type == "sum":
            out = torch.sum(x, dim=dims, keepdim=True)
        else:
            out = torch.sum(torch.abs(x) ** pv, dim=dims, keepdim=True) ** (1.0 / pv)
        return out.movedim(1, -1) if last else out
    if not _given(kernel):
        raise ValueError("Pooling: kernel is required unless global_pool=True")
    k = _tuple(kernel, n, 1, "kernel")
    s = _tuple(stride, n, 1, "stride")
    # 'same' takes no padding; MXNet checks three zero entries whatever the data's dimensions
    same_pad = pooling_convention == "same" and _given(pad)
    if same_pad and any(int(v) for v in ((pad,) if isinstance(pad, int) else pad)):
        raise ValueError(f"Pooling: pooling_convention='same' takes no pad, got pad={pad!r}")
    p = _tuple(None if same_pad else pad, n, 0, "pad")
    if pooling_convention == "same":
        x = _same_pad(x, k, s, pool_type)
    ceil_mode = pooling_convention == "full"
    cip = True if count_include_pad is None else bool(count_include_pad)
    if pool_type == "max":
        if any(pi > ki // 2 for pi, ki in zip(p, k)):
            pads: list[int] = []
            for pi in reversed(p):
                pads += [pi, pi]
            x = F.pad(x, pads, value=float("-inf"))
            p = (0,) * n
        fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
        out = fn(x, k, s, p, ceil_mode=ceil_mode)
    elif pool_type == "avg":
        out = _sum_pool(x, n, k, s, p, ceil_mode, True, cip)
    elif pool_type == "sum":
        out = _sum_pool(x, n, k, s, p, ceil_mode, False, True)
    else:
        out = _sum_pool(torch.abs(x) ** pv, n, k, s, p, ceil_mode, False, True) ** (1.0 / pv)
    return out.movedim(1, -1) if last else out



def _same_pad(x: Tensor, k: tuple[int, ...], s: tuple[int, ...], pool_type: str) -> Tensor:
    # MXNet's 'same' (1-d max pooling): ceil(width / stride) windows, the last ones clipped at the
    # end, i.e. the input padded at its end with -inf
    if x.dim() != 3 or pool_type != "max":
        raise ValueError("Pooling: pooling_convention='same' supports 1-d max pooling, got "
                         f"data of {x.dim()} dimensions, pool_type {pool_type!r}")
    width = int(x.shape[2])
    extra = max((-(-width // s[0]) - 1) * s[0] + k[0] - width, 0)
    return F.pad(x, [0, extra], value=float("-inf"))


def LRN(data: Tensor, alpha: float = 1e-4, beta: float = 0.75, knorm: float = 2.0, nsize: int = 5) -> Tensor:
    """Local response normalisation across ``nsize`` neighbouring channels."""
    return F.local_response_norm(data, nsize, alpha=alpha, beta=beta, k=knorm)


def UpSampling(
    *data: Tensor, scale: int = 1, sample_type: str = "nearest", num_args: int = 1, **kwargs: Any
) -> Tensor:
    """Nearest-neighbour upsampling of (N, C, H, W) by an integer ``scale``."""
    if sample_type != "nearest":
        raise MXNetError(f"UpSampling: only sample_type='nearest' is supported here, got {sample_type!r}")
    outs = [F.interpolate(d, scale_factor=scale, mode="nearest") for d in data]
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)


# ----------------------------------------------------------------------------------------------
# dropout / embedding
# ----------------------------------------------------------------------------------------------


def Dropout(
    data: Tensor,
    p: float = 0.5,
    mode: str = "training",
    axes: Any = (),
    cudnn_off: bool = False,
    training: bool | None = None,
) -> Tensor:
    """Zero entries with probability ``p`` and scale the rest by 1/(1-p), in training (or always
    with mode='always').  ``axes`` share one mask value along those axes."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"Dropout: p must be in [0, 1], got {p!r}")
    if mode not in ("training", "always"):
        raise ValueError(f"Dropout: mode must be 'training' or 'always', got {mode!r}")
    if p == 0.0 or not (mode == "always" or training_flag(training)):
        return data
    if not axes:
        return F.dropout(data, p, training=True)
    mshape = list(data.shape)
    for a in axes:
        mshape[norm_axis(a, data.dim())] = 1
    if p == 1.0:
        return data * 0.0
    keep = torch.empty(mshape, dtype=data.dtype, device=data.device).bernoulli_(1.0 - p)
    return data * keep / (1.0 - p)


def Embedding(
    data: Tensor,
    weight: Tensor,
    input_dim: int | None = None,
    output_dim: int | None = None,
    dtype: Any = "float32",
    sparse_grad: bool = False,
) -> Tensor:
    """Rows of ``weight`` (input_dim, output_dim) picked by ``data`` (indices clipped to range);
    ``sparse_grad=True`` makes the gradient with respect to ``weight`` row_sparse (MXNet's rule)."""
    if input_dim is not None and weight.shape[0] != input_dim:
        raise ValueError(f"Embedding: weight shape {tuple(weight.shape)} does not give input_dim={input_dim}")
    if output_dim is not None and weight.shape[1] != output_dim:
        raise ValueError(
            f"Embedding: weight shape {tuple(weight.shape)} does not give output_dim={output_dim}"
        )
    idx = to_index(data, weight).clamp(0, weight.shape[0] - 1)
    if weight.layout != torch.strided:  # a row_sparse weight (Parameter.row_sparse_data's rows)
        from .sparse import embedding_rows

        return embedding_rows(idx, weight)
    return F.embedding(idx, weight, sparse=bool(sparse_grad))  # sparse_grad: a row_sparse gradient


# ----------------------------------------------------------------------------------------------
# sequences
# ----------------------------------------------------------------------------------------------


def _seq_axes(data: Tensor, axis: int, op: str) -> tuple[int, int]:
    if axis not in (0, 1) or data.dim() < 2:
        raise ValueError(
            f"{op}: axis must be 0 or 1 on >= 2-D data, got axis={axis}, shape {tuple(data.shape)}"
        )
    return axis, 1 - axis


def rnn_sequence_lengths(sequence_length: Any, steps: int, batch: int, minimum: int, op: str,
                         error: type[Exception] = ValueError) -> Tensor:
    """A recurrent layer's ``sequence_length`` as int64 lengths on the CPU (what torch's packing
    takes), one per sample, each in ``[minimum, steps]``; else ``error`` naming ``op``."""
    lens = torch.as_tensor(sequence_length).detach().to("cpu")
    if lens.dim() != 1 or lens.shape[0] != batch:
        raise error(f"{op}: sequence_length must have shape ({batch},), got {tuple(lens.shape)}")
    lens = lens.round().to(torch.int64) if lens.is_floating_point() else lens.to(torch.int64)
    if bool((lens < minimum).any()) or bool((lens > steps).any()):
        raise error(f"{op}: sequence_length values must be in [{minimum}, {steps}], got {lens.tolist()}")
    return lens


def _seq_len(sequence_length: Tensor | None, batch: int, data: Tensor, op: str) -> Tensor:
    if sequence_length is None:
        raise ValueError(f"{op}: use_sequence_length=True needs sequence_length")
    ln = to_index(sequence_length, data).to(data.device).reshape(-1)
    if ln.numel() != batch:
        raise ValueError(f"{op}: sequence_length has {ln.numel()} entries, the batch has {batch}")
    return ln


def SequenceMask(
    data: Tensor,
    sequence_length: Tensor | None = None,
    use_sequence_length: bool = False,
    value: float = 0.0,
    axis: int = 0,
) -> Tensor:
    """Set entries past each sequence's length to ``value`` (time on ``axis``, batch on the other
    of axes 0/1)."""
    if not use_sequence_length:
        return data
    t_ax, b_ax = _seq_axes(data, axis, "SequenceMask")
    ln = _seq_len(sequence_length, data.shape[b_ax], data, "SequenceMask")
    t = torch.arange(data.shape[t_ax], device=data.device)
    mask = t.unsqueeze(1) < ln.unsqueeze(0) if t_ax == 0 else ln.unsqueeze(1) > t.unsqueeze(0)
    mask = mask.reshape(tuple(mask.shape) + (1,) * (data.dim() - 2))
    return torch.where(mask, data, torch.as_tensor(value, dtype=data.dtype, device=data.device))


def SequenceLast(
    data: Tensor, sequence_length: Tensor | None = None, use_sequence_length: bool = False, axis: int = 0
) -> Tensor:
    """The last valid step of each sequence (the final step without sequence lengths)."""
    t_ax, b_ax = _seq_axes(data, axis, "SequenceLast")
    if not use_sequence_length:
        return data.select(t_ax, data.shape[t_ax] - 1)
    ln = _seq_len(sequence_length, data.shape[b_ax], data, "SequenceLast")
    last = (ln - 1).clamp(min=0)
    b = torch.arange(data.shape[b_ax], device=data.device)
    return data[last, b] if t_ax == 0 else data[b, last]


def SequenceReverse(
    data: Tensor, sequence_length: Tensor | None = None, use_sequence_length: bool = False, axis: int = 0
) -> Tensor:
    """Reverse each sequence's first length[i] steps (all steps without sequence lengths)."""
    t_ax, b_ax = _seq_axes(data, axis, "SequenceReverse")
    if not use_sequence_length:
        return torch.flip(data, (t_ax,))
    ln = _seq_len(sequence_length, data.shape[b_ax], data, "SequenceReverse")
    x = data if t_ax == 0 else data.transpose(0, 1)
    steps = torch.arange(x.shape[0], device=x.device).unsqueeze(1)
    lens = ln.unsqueeze(0)
    src = torch.where(steps < lens, lens - 1 - steps, steps)
    idx = src.reshape(tuple(src.shape) + (1,) * (x.dim() - 2)).expand_as(x)
    out = torch.gather(x, 0, idx)
    return out if t_ax == 0 else out.transpose(0, 1)
