"""``mx.nd.contrib``: MXNet's contributed operators that MXNet code reaches as ``mx.nd.contrib.<op>``.

``isinf``/``isfinite``/``isnan`` give 1/0 in the input's dtype (MXNet's comparison rule);
``boolean_mask`` keeps the rows whose index entry is non-zero (an output shape known only from the
data); ``DeformableConvolution`` / ``ModulatedDeformableConvolution`` sample each kernel tap at a
learned offset (:mod:`._deformable`); ``rand_zipfian`` draws classes from the log-uniform
(Zipfian) distribution that candidate sampling uses, with the expected count of each class;
``allclose`` is MXNet's one-element test.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..context import Context
from . import _contrib_ops
from ._adamw import adamw_update, mp_adamw_update, multi_adamw_update, multi_mp_adamw_update
from ._common import as_tensor, device_of, mx_operator
from ._contrib_ops import *  # noqa: F403 - quadratic, index_copy, AdaptiveAvgPooling2D ...

Tensor = torch.Tensor

__all__ = ["isinf", "isfinite", "isnan", "rand_zipfian", "allclose", "getnnz", "SparseEmbedding",
           "boolean_mask", "DeformableConvolution", "ModulatedDeformableConvolution", "quadratic",
           "adamw_update", "mp_adamw_update", "multi_adamw_update", "multi_mp_adamw_update",
           ] + _contrib_ops.__all__


@mx_operator
def isinf(data: Tensor) -> Tensor:
    """1 where ``data`` is +inf or -inf, else 0 (in ``data``'s dtype)."""
    return torch.isinf(data).to(data.dtype)


@mx_operator
def isfinite(data: Tensor) -> Tensor:
    """1 where ``data`` is neither inf nor NaN, else 0 (in ``data``'s dtype)."""
    return torch.isfinite(data).to(data.dtype)


@mx_operator
def isnan(data: Tensor) -> Tensor:
    """1 where ``data`` is NaN, else 0 (in ``data``'s dtype)."""
    return torch.isnan(data).to(data.dtype)


def _zipf_expected(classes: Tensor, num_sampled: int, range_max: int) -> Tensor:
    # P(class) = (log(class + 2) - log(class + 1)) / log(range_max + 1)
    c = classes.to(torch.float64)
    return (torch.log((c + 2.0) / (c + 1.0)) / math.log(range_max + 1) * num_sampled).to(torch.float32)


def zipfian_classes(shape: tuple[int, ...], range_max: int, device: torch.device) -> Tensor:
    """int64 classes in [0, range_max) with P(c) = log((c + 2) / (c + 1)) / log(range_max + 1)."""
    u = torch.rand(shape, dtype=torch.float64, device=device)
    return (torch.exp(u * math.log(range_max + 1)) - 1).to(torch.int64) % range_max


def rand_zipfian(
    true_classes: Any, num_sampled: int, range_max: int, ctx: Context | str | None = None
) -> list[Tensor]:
    """Draw ``num_sampled`` classes (with replacement) from the Zipfian distribution over
    [0, range_max); returns ``[sampled_classes (int64), expected count of each true class,
    expected count of each sampled class]`` (float32; count = num_sampled * P(class))."""
    if num_sampled < 1 or range_max < 1:
        raise ValueError(
            f"rand_zipfian: num_sampled ({num_sampled}) and range_max ({range_max}) must be positive"
        )
    true = as_tensor(true_classes)
    device = true.device if ctx is None else device_of(ctx)
    sampled = zipfian_classes((int(num_sampled),), int(range_max), device)
    return [
        sampled,
        _zipf_expected(true.to(device), num_sampled, range_max),
        _zipf_expected(sampled, num_sampled, range_max),
    ]


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = True) -> Tensor:
    """``[1.]`` when every pair satisfies ``|a - b| <= atol + rtol * |b|``, else ``[0.]``."""
    ta = as_tensor(a)
    tb = as_tensor(b, like=ta)
    ok = torch.allclose(ta.to(torch.float64), tb.to(torch.float64), rtol=rtol, atol=atol, equal_nan=equal_nan)
    return torch.tensor([1.0 if ok else 0.0], device=ta.device)


@mx_operator
def getnnz(data: Tensor, axis: int | None = None) -> Tensor:
    """MXNet's stored-value count of a csr matrix (explicit zeros count too), as int64: ``[nnz]``
    for ``axis=None``, per column for ``axis=0``, per row for ``axis=1``."""
    if data.layout != torch.sparse_csr:
        raise ValueError(f"getnnz: data must be a csr matrix, got layout {data.layout}; convert it with "
                         "x.tostype('csr')")
    if axis is None:
        return torch.tensor([data._nnz()], dtype=torch.int64, device=data.device)
    if axis in (1, -1):
        return data.crow_indices().diff().to(torch.int64)
    if axis in (0, -2):
        return torch.bincount(data.col_indices(), minlength=data.shape[1]).to(torch.int64)
    raise ValueError(f"getnnz: axis must be None, 0 or 1 for a csr matrix, got {axis!r}")


@mx_operator
def SparseEmbedding(data: Tensor, weight: Tensor, input_dim: int | None = None, output_dim: int | None = None,
                    dtype: Any = "float32", deterministic: bool = False) -> Tensor:
    """MXNet's contrib.SparseEmbedding: ``Embedding`` whose gradient with respect to ``weight`` is
    row_sparse; ``weight`` may be dense or row_sparse (rows it does not store read as zeros).
    ``deterministic`` is accepted: torch's lookup gives the same result every run."""
    from ._nn import Embedding

    return Embedding(data, weight, input_dim, output_dim, dtype, sparse_grad=True)


@mx_operator
def boolean_mask(data: Tensor, index: Tensor, axis: int = 0) -> Tensor:
    """The rows of ``data`` (slices along axis 0, the only axis MXNet 1.9 takes) whose entry in the
    1-D ``index`` is non-zero, in order; their gradient flows back to those rows, zeros elsewhere."""
    if axis != 0:
        raise ValueError(f"boolean_mask: only axis=0 is supported (as in MXNet), got axis={axis}")
    index = as_tensor(index)
    if data.dim() < 1 or index.dim() != 1 or index.shape[0] != data.shape[0]:
        raise ValueError(f"boolean_mask: index must be 1-D with one entry per row of data; got index shape "
                         f"{tuple(index.shape)} for data shape {tuple(data.shape)}")
    return data[index.to(data.device) != 0]


def _deformable(data: Tensor, offset: Tensor, weight: Tensor, bias: Tensor | None, mask: Tensor | None,
                kernel: Any, stride: Any, dilate: Any, pad: Any, num_filter: int, num_group: int,
                num_deformable_group: int, no_bias: bool, layout: str | None, op: str) -> Tensor:
    from ._deformable import deformable_conv2d

    if layout not in (None, "NCHW"):
        raise ValueError(f"{op}: layout must be 'NCHW', got {layout!r}")
    k = tuple(int(v) for v in kernel)
    if len(k) != 2 or tuple(weight.shape[2:]) != k or weight.shape[0] != int(num_filter):
        raise ValueError(f"{op}: weight {tuple(weight.shape)} must be (num_filter={num_filter}, "
                         f"channels / num_group, *kernel={k})")

    def pair(v: Any, default: int) -> tuple[int, int]:
        return (default, default) if not v else (int(v[0]), int(v[1]))

    return deformable_conv2d(data, offset, weight, None if no_bias else bias, pair(stride, 1), pair(pad, 0),
                             pair(dilate, 1), int(num_group), int(num_deformable_group), mask)


@mx_operator
def DeformableConvolution(data: Tensor, offset: Tensor, weight: Tensor, bias: Tensor | None = None,
                          kernel: Any = (), stride: Any = (), dilate: Any = (), pad: Any = (),
                          num_filter: int = 0, num_group: int = 1, num_deformable_group: int = 1,
                          workspace: int = 1024,
                          no_bias: bool = False, layout: str | None = None) -> Tensor:
    """MXNet's deformable convolution (v1): taps sampled at ``offset`` (N, 2 * G * kh * kw, Ho, Wo)
    from their regular positions; a position outside the input gives zero, one past the last row
    or column reads that row or column.  ``workspace`` is accepted."""
    return _deformable(data, offset, weight, bias, None, kernel, stride, dilate, pad, num_filter, num_group,
                       num_deformable_group, no_bias, layout, "DeformableConvolution")


@mx_operator
def ModulatedDeformableConvolution(data: Tensor, offset: Tensor, mask: Tensor, weight: Tensor,
                                   bias: Tensor | None = None, kernel: Any = (), stride: Any = (),
                                   dilate: Any = (), pad: Any = (), num_filter: int = 0, num_group: int = 1,
                                   num_deformable_group: int = 1, workspace: int = 1024,
                                   no_bias: bool = False, im2col_step: int = 64,
                                   layout: str | None = None) -> Tensor:
    """MXNet's modulated deformable convolution (v2): as DeformableConvolution with each tap's
    sample scaled by ``mask`` (N, G * kh * kw, Ho, Wo); bilinear corners outside the input are
    zero.  ``workspace`` and ``im2col_step`` are accepted."""
    return _deformable(data, offset, weight, bias, mask, kernel, stride, dilate, pad, num_filter, num_group,
                       num_deformable_group, no_bias, layout, "ModulatedDeformableConvolution")


@mx_operator
def quadratic(data: Tensor, a: float = 0.0, b: float = 0.0, c: float = 0.0) -> Tensor:
    """``a * data**2 + b * data + c`` element-wise (MXNet's contrib.quadratic); a csr ``data``
    stays csr when ``c == 0`` (zeros map to zeros), otherwise the result is dense."""
    from ._sparse_scatter import on_stored_values
    from .sparse import stype, tostype

    def f(x: Tensor, *_: Any) -> Tensor:
        return a * x * x + b * x + c

    kind = stype(data)
    if kind == "default":
        return f(data)
    return on_stored_values(data, f) if c == 0 else f(tostype(data, "default"))
