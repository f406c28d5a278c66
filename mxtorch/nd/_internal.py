"""``mx.nd._internal``: MXNet's underscore operators that MXNet code calls directly."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._common import as_shape, device_of, mx_operator
from ._sparse_scatter import scatter_elemwise_div, scatter_minus_scalar, scatter_plus_scalar
from .contrib import zipfian_classes
from .sparse import square_sum

Tensor = torch.Tensor

__all__ = ["_sample_unique_zipfian", "_slice_assign", "_slice_assign_scalar", "_crop_assign",
           "_crop_assign_scalar", "_square_sum", "_scatter_elemwise_div", "_scatter_plus_scalar",
           "_scatter_minus_scalar"]


def _sample_unique_zipfian(range_max: int, shape: Any = None, ctx: Any = None, **kwargs: Any) -> list[Tensor]:
    """Per row of ``shape`` (batch, num_sampled): ``num_sampled`` distinct classes drawn from the
    Zipfian distribution over [0, range_max) by rejecting repeats, and how many draws that took.
    Returns ``[classes (batch, num_sampled) int64, num_tries (batch,) int64]``."""
    kwargs.pop("name", None)
    batch, num = as_shape(shape, "shape") if shape is not None else (1, 1)
    if num > range_max:
        raise ValueError(
            f"_sample_unique_zipfian: {num} distinct classes cannot come from range_max={range_max}"
        )
    device = device_of(ctx)
    classes = np.empty((batch, num), dtype=np.int64)
    tries = np.empty((batch,), dtype=np.int64)
    for row in range(batch):
        drawn = np.empty(0, dtype=np.int64)
        while True:
            more = zipfian_classes((max(2 * num, 1024),), range_max, torch.device("cpu")).numpy()
            drawn = np.concatenate([drawn, more])
            values, first = np.unique(drawn, return_index=True)
            if values.size >= num:
                order = np.sort(first)[:num]  # the first num distinct draws, in draw order
                classes[row] = drawn[order]
                tries[row] = order[-1] + 1
                break
    return [torch.from_numpy(classes).to(device), torch.from_numpy(tries).to(device)]


def _region(shape: Any, begin: Any, end: Any, step: Any, op: str) -> tuple[tuple[slice, ...], list[int]]:
    """Basic-index slices for MXNet's ``begin/end/step`` region (entries may be None) and the axes a
    negative step walks backwards (the region read forwards, to be flipped)."""
    begin, end = tuple(begin), tuple(end)
    step = tuple(step) if step is not None else ()
    if len(begin) != len(end) or len(begin) > len(shape) or (step and len(step) != len(begin)):
        raise ValueError(f"{op}: begin {begin}, end {end} and step {step} must have the same length, at "
                         f"most {len(shape)} (the array's ndim)")
    index: list[slice] = []
    flipped: list[int] = []
    for ax, (b, e) in enumerate(zip(begin, end)):
        st = step[ax] if step and step[ax] is not None else 1
        if st == 0:
            raise ValueError(f"{op}: step must not be 0")
        picked = range(*slice(b, e, st).indices(shape[ax]))
        if st < 0:
            flipped.append(ax)
            picked = picked[::-1]
        index.append(slice(picked.start, picked.stop, picked.step) if picked else slice(0, 0))
    return tuple(index), flipped


def _slice_assign(lhs: Tensor, rhs: Tensor, begin: Any, end: Any, step: Any = ()) -> Tensor:
    """A copy of ``lhs`` whose region ``begin:end:step`` (as ``nd.slice``) holds ``rhs``, which
    must have the region's shape; ``out=lhs`` writes in place (MXNet's ``x[region] = rhs``)."""
    index, flipped = _region(lhs.shape, begin, end, step, "_slice_assign")
    out = lhs.clone()
    region = out[index]
    if tuple(rhs.shape) != tuple(region.shape):
        raise ValueError(f"_slice_assign: rhs has shape {tuple(rhs.shape)}, the region of lhs "
                         f"{tuple(region.shape)}; they must match")
    out[index] = rhs.flip(flipped) if flipped else rhs
    return out


def _slice_assign_scalar(data: Tensor, scalar: float = 0.0, begin: Any = (), end: Any = (),
                         step: Any = ()) -> Tensor:
    """A copy of ``data`` whose region ``begin:end:step`` holds ``scalar``."""
    index, _ = _region(data.shape, begin, end, step, "_slice_assign_scalar")
    out = data.clone()
    out[index] = scalar
    return out


_slice_assign = mx_operator(_slice_assign)
_slice_assign_scalar = mx_operator(_slice_assign_scalar)
_crop_assign = _slice_assign
_crop_assign_scalar = _slice_assign_scalar
_square_sum = mx_operator(square_sum)  # MXNet's internal sum of squares (row_sparse aware)
# MXNet's scatter operators: the math only where a sparse lhs stores values (see _sparse_scatter)
_scatter_elemwise_div = mx_operator(scatter_elemwise_div)
_scatter_plus_scalar = mx_operator(scatter_plus_scalar)
_scatter_minus_scalar = mx_operator(scatter_minus_scalar)
