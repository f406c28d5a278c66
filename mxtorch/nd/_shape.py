"""MXNet's shape operators (``reshape`` with its special codes, transpose, concat/split, tile, pad,
slicing) on torch tensors; MXNet 1.x semantics as described in :mod:`mxtorch.nd._ops`."""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError
from ._common import as_shape, as_tensor, norm_axes, norm_axis
from ._elemwise import _no0d

__all__ = [
    "infer_reshape",
    "reshape",
    "Reshape",
    "reshape_like",
    "transpose",
    "swapaxes",
    "SwapAxis",
    "expand_dims",
    "squeeze",
    "flatten",
    "Flatten",
    "concat",
    "Concat",
    "concatenate",
    "stack",
    "split",
    "SliceChannel",
    "split_v2",
    "tile",
    "repeat",
    "flip",
    "reverse",
    "broadcast_to",
    "broadcast_axis",
    "broadcast_axes",
    "broadcast_like",
    "pad",
    "Pad",
    "slice",
    "crop",
    "slice_axis",
    "slice_like",
]

_bslice = builtins.slice
_bmax = builtins.max

Tensor = torch.Tensor


# ----------------------------------------------------------------------------------------------
# shape manipulation
# ----------------------------------------------------------------------------------------------


def _reshape_tokens(target: tuple[int, ...]) -> list[tuple[int, ...]]:
    tokens: list[tuple[int, ...]] = []
    i = 0
    while i < len(target):
        v = target[i]
        if v == -4:
            if i + 2 >= len(target):
                raise MXNetError(f"reshape: -4 in {target} must be followed by two dimensions")
            tokens.append((-4, target[i + 1], target[i + 2]))
            i += 3
        else:
            if v < -4:
                raise MXNetError(f"reshape: invalid value {v} in shape {target}: codes are 0, -1, -2, -3, -4")
            tokens.append((v,))
            i += 1
    return tokens


def infer_reshape(src: Sequence[int], target: Sequence[int], reverse: bool = False) -> tuple[int, ...]:
    """The shape MXNet's reshape gives ``src`` for ``target`` (with codes 0, -1, -2, -3, -4)."""
    src_t, tgt = tuple(src), tuple(int(t) for t in target)
    tokens = _reshape_tokens(tgt)
    if reverse:
        tokens = tokens[::-1]
        src_t = src_t[::-1]
    out: list[int] = []
    infer_at = -1
    i = 0

    def need(n: int, code: int) -> None:
        if i + n > len(src_t):
            raise MXNetError(
                f"cannot reshape {tuple(src)} to {tgt}: code {code} needs input dimension(s) beyond the "
                f"{len(src_t)} the input has"
            )

    for tok in tokens:
        code = tok[0]
        if code == 0:
            need(1, 0)
            out.append(src_t[i])
            i += 1
        elif code == -1:
            if infer_at >= 0:
                raise MXNetError(f"cannot reshape {tuple(src)} to {tgt}: only one -1 is allowed")
            infer_at = len(out)
            out.append(-1)
            i += 1
        elif code == -2:
            out.extend(src_t[i:])
            i = len(src_t)
        elif code == -3:
            need(2, -3)
            out.append(src_t[i] * src_t[i + 1])
            i += 2
        elif code == -4:
            need(1, -4)
            d0, d1, d2 = src_t[i], tok[1], tok[2]
            if d1 == -1 and d2 == -1:
                raise MXNetError(f"cannot reshape {tuple(src)} to {tgt}: -4 split has two -1 entries")
            if d1 == -1:
                d1 = d0 // d2 if d2 else -1
            elif d2 == -1:
                d2 = d0 // d1 if d1 else -1
            if d1 * d2 != d0:
                raise MXNetError(
                    f"cannot reshape {tuple(src)} to {tgt}: -4 splits dimension {d0} "
                    f"into {tok[1]} x {tok[2]}, "
                    "which does not multiply back to it"
                )
            out.extend([d2, d1] if reverse else [d1, d2])
            i += 1
        else:
            out.append(code)
            i += 1
    total = math.prod(src_t)
    if infer_at >= 0:
        known = math.prod(d for j, d in enumerate(out) if j != infer_at)
        if known == 0 or total % known:
            raise MXNetError(f"cannot reshape {tuple(src)} (size {total}) to {tgt}: -1 cannot be inferred")
        out[infer_at] = total // known
    if reverse:
        out = out[::-1]
    if math.prod(out) != total:
        raise MXNetError(
            f"cannot reshape {tuple(src)} (size {total}) to {tgt}: the result {tuple(out)} has size "
            f"{math.prod(out)}"
        )
    return tuple(out)


def reshape(data: Tensor, shape: Any = None, reverse: bool = False, **kwargs: Any) -> Tensor:
    """``data`` with a new shape; MXNet's codes: 0 copy a dimension, -1 infer one, -2 copy the
    rest, -3 merge two, -4 split one into the next two values (one may be -1).
    ``reverse`` applies the codes from the right."""
    if shape is None:
        shape = kwargs.pop("target_shape", None)
    if shape is None:
        raise TypeError("reshape: shape is required")
    target = as_shape(shape)
    return data.reshape(infer_reshape(tuple(data.shape), target, reverse))


Reshape = reshape


def _range_of(begin: int | None, end: int | None, ndim: int, what: str) -> tuple[int, int]:
    b = 0 if begin is None else int(begin)
    e = ndim if end is None else int(end)
    b, e = (b + ndim if b < 0 else b), (e + ndim if e < 0 else e)
    if not 0 <= b <= e <= ndim:
        raise ValueError(f"reshape_like: {what}_begin={begin}, {what}_end={end} do not give a range of "
                         f"the {ndim} axes of {what}")
    return b, e


def reshape_like(
    lhs: Tensor,
    rhs: Tensor,
    lhs_begin: int | None = None,
    lhs_end: int | None = None,
    rhs_begin: int | None = None,
    rhs_end: int | None = None,
) -> Tensor:
    """lhs with rhs's shape; with the begin/end arguments, lhs's axes [lhs_begin, lhs_end) are
    replaced by rhs's axes [rhs_begin, rhs_end) (None: the start or the end; negatives count back)."""
    lb, le = _range_of(lhs_begin, lhs_end, lhs.dim(), "lhs")
    rb, re = _range_of(rhs_begin, rhs_end, rhs.dim(), "rhs")
    shape = (*lhs.shape[:lb], *rhs.shape[rb:re], *lhs.shape[le:])
    if math.prod(shape) != lhs.numel():
        raise ValueError(f"reshape_like: cannot give lhs of shape {tuple(lhs.shape)} the shape {shape} "
                         f"(from rhs of shape {tuple(rhs.shape)}): the sizes differ")
    return lhs.reshape(shape)


def transpose(data: Tensor, axes: Any = None) -> Tensor:
    """Permute the axes (reverse them when ``axes`` is None or empty)."""
    if axes is None or len(axes) == 0:
        return data.permute(*reversed(range(data.dim())))
    axes = tuple(norm_axis(a, data.dim()) for a in axes)
    if sorted(axes) != list(range(data.dim())):
        raise ValueError(f"transpose: axes {axes} are not a permutation of {data.dim()} axes")
    return data.permute(*axes)


def swapaxes(data: Tensor, dim1: int = 0, dim2: int = 0) -> Tensor:
    """Exchange two axes."""
    return data.transpose(norm_axis(dim1, data.dim()), norm_axis(dim2, data.dim()))


SwapAxis = swapaxes


def expand_dims(data: Tensor, axis: int) -> Tensor:
    """Insert a size-1 axis at ``axis`` (``-1`` appends)."""
    nd1 = data.dim() + 1
    if not -nd1 <= axis < nd1:
        raise ValueError(f"expand_dims: axis={axis} is out of range for an array with {data.dim()} dims")
    return data.unsqueeze(axis % nd1)


def squeeze(data: Tensor, axis: Any = None) -> Tensor:
    """Drop size-1 axes (those in ``axis``, or all); an all-ones shape gives shape (1,)."""
    if axis is None:
        out = data.squeeze()
    else:
        axes = norm_axes(axis, data.dim())
        for a in axes:
            if data.shape[a] != 1:
                raise ValueError(
                    f"squeeze: axis {a} of shape {tuple(data.shape)} has size {data.shape[a]}, not 1"
                )
        out = data.squeeze(axes) if axes else data
    return _no0d(out)


def flatten(data: Tensor) -> Tensor:
    """Collapse all axes but the first: (d1, d2, ..., dk) -> (d1, d2*...*dk)."""
    if data.dim() == 0:
        return data.reshape(1, 1)
    return data.reshape(data.shape[0], -1)


Flatten = flatten


def _tensor_list(data: Sequence[Any], name: str) -> list[Tensor]:
    if len(data) == 1 and isinstance(data[0], (list, tuple)):
        data = data[0]
    if not data:
        raise ValueError(f"{name} needs at least one array")
    return [as_tensor(d) for d in data]


def _join(join: Callable[..., Tensor], data: Sequence[Any], name: str, where: str, dim: int) -> Tensor:
    """``torch.cat``/``torch.stack`` of the arrays; shapes that do not fit raise MXNet's ValueError."""
    ts = _tensor_list(data, name)
    try:
        return join(ts, dim=dim)
    except (RuntimeError, IndexError) as e:
        shapes = [tuple(t.shape) for t in ts]
        raise ValueError(f"{name} along {where}: shapes {shapes} do not fit: {e}") from e


def concat(*data: Tensor, dim: int = 1, num_args: int | None = None) -> Tensor:
    """Join arrays along axis ``dim`` (MXNet's default is 1)."""
    return _join(torch.cat, data, "concat", f"dim {dim}", dim)


Concat = concat


def concatenate(arrays: Sequence[Tensor], axis: int = 0, always_copy: bool = True) -> Tensor:
    """Join arrays along ``axis`` (default 0)."""
    return concat(*arrays, dim=axis)


def stack(*data: Tensor, axis: int = 0, num_args: int | None = None) -> Tensor:
    """Join arrays of the same shape along a new axis."""
    return _join(torch.stack, data, "stack", f"axis {axis}", axis)


def split(data: Tensor, num_outputs: int, axis: int = 1, squeeze_axis: bool = False) -> Any:
    """Split into ``num_outputs`` equal parts along ``axis``; a list, or one tensor if num_outputs==1."""
    ax = norm_axis(axis, data.dim())
    n = data.shape[ax]
    if not isinstance(num_outputs, int) or num_outputs < 1 or n % num_outputs:
        raise ValueError(f"split: cannot split axis {axis} of size {n} into {num_outputs!r} equal parts")
    if squeeze_axis and n != num_outputs:
        raise ValueError(
            f"split: squeeze_axis needs num_outputs ({num_outputs}) == size of axis {axis} ({n})"
        )
    parts = list(torch.split(data, n // num_outputs, dim=ax))
    if squeeze_axis:
        parts = [p.squeeze(ax) for p in parts]
    return parts[0] if num_outputs == 1 else parts


SliceChannel = split


def split_v2(ary: Tensor, indices_or_sections: Any, axis: int = 0, squeeze_axis: bool = False) -> Any:
    """numpy-style split: a section count, or the indices to split before."""
    ax = norm_axis(axis, ary.dim())
    if isinstance(indices_or_sections, int):
        return split(ary, indices_or_sections, axis=ax, squeeze_axis=squeeze_axis)
    idx = [int(i) for i in indices_or_sections]
    bounds = [0] + idx + [ary.shape[ax]]
    parts = [ary.narrow(ax, b, _bmax(e - b, 0)) for b, e in zip(bounds[:-1], bounds[1:])]
    if squeeze_axis:
        parts = [p.squeeze(ax) for p in parts]
    return parts[0] if len(parts) == 1 else parts


def tile(data: Tensor, reps: Any) -> Tensor:
    """Repeat the whole array ``reps`` times along each axis (each at least once, as MXNet checks)."""
    shape = as_shape(reps, "reps")
    if any(r < 1 for r in shape):
        raise ValueError(f"tile: every entry of reps must be positive, got {shape}")
    return torch.tile(data, shape)


def repeat(data: Tensor, repeats: int, axis: int | None = None) -> Tensor:
    """Repeat each element ``repeats`` times along ``axis`` (flattened when None)."""
    if not isinstance(repeats, int) or repeats < 0:
        raise ValueError(f"repeat: repeats must be a non-negative int, got {repeats!r}")
    if axis is None:
        return data.reshape(-1).repeat_interleave(repeats)
    return data.repeat_interleave(repeats, dim=norm_axis(axis, data.dim()))


def flip(data: Tensor, axis: Any) -> Tensor:
    """Reverse the order of elements along ``axis`` (int or tuple)."""
    return torch.flip(data, norm_axes(axis, data.dim()))


reverse = flip


def broadcast_to(data: Tensor, shape: Any) -> Tensor:
    """Broadcast size-1 axes to ``shape`` (a 0 in ``shape`` keeps that dimension)."""
    tgt = as_shape(shape)
    if len(tgt) != data.dim():
        raise ValueError(
            f"broadcast_to: shape {tgt} must have {data.dim()} dims like the input {tuple(data.shape)}"
        )
    tgt = tuple(s if t == 0 else t for s, t in zip(data.shape, tgt))
    for s, t in zip(data.shape, tgt):
        if s != t and s != 1:
            raise ValueError(f"broadcast_to: cannot broadcast {tuple(data.shape)} to {tgt}")
    return data.expand(tgt).contiguous()


def broadcast_axis(data: Tensor, axis: Any = (), size: Any = ()) -> Tensor:
    """Broadcast the size-1 axes ``axis`` to ``size``."""
    axes = as_shape(axis, "axis")
    sizes = as_shape(size, "size")
    if len(axes) != len(sizes):
        raise ValueError(f"broadcast_axis: axis {axes} and size {sizes} must have the same length")
    tgt = list(data.shape)
    for a, s in zip(axes, sizes):
        a = norm_axis(a, data.dim())
        if data.shape[a] != 1:
            raise ValueError(
                f"broadcast_axis: axis {a} of {tuple(data.shape)} has size {data.shape[a]}, not 1"
            )
        tgt[a] = s
    return data.expand(tgt).contiguous()


broadcast_axes = broadcast_axis


def broadcast_like(lhs: Tensor, rhs: Tensor, lhs_axes: Any = None, rhs_axes: Any = None) -> Tensor:
    """Broadcast lhs to rhs's shape (or only ``lhs_axes`` to the sizes of ``rhs_axes``)."""
    if lhs_axes is None and rhs_axes is None:
        return broadcast_to(lhs, tuple(rhs.shape))
    la, ra = as_shape(lhs_axes, "lhs_axes"), as_shape(rhs_axes, "rhs_axes")
    if len(la) != len(ra):
        raise ValueError(f"broadcast_like: lhs_axes {la} and rhs_axes {ra} must have the same length")
    if not la:  # MXNet refuses an empty axes tuple (None means "all axes")
        raise MXNetError("broadcast_like: lhs_axes and rhs_axes are empty; name the axes to broadcast, or "
                         "leave both None to broadcast to rhs's whole shape")
    tgt = list(lhs.shape)
    for a, b in zip(la, ra):
        tgt[norm_axis(a, lhs.dim())] = rhs.shape[norm_axis(b, rhs.dim())]
    return broadcast_to(lhs, tuple(tgt))


def pad(data: Tensor, mode: str = "constant", pad_width: Any = (), constant_value: float = 0.0) -> Tensor:
    """Pad with MXNet's ``pad_width`` = (before_0, after_0, before_1, after_1, ...) per axis.

    ``mode``: 'constant' (any axes), 'edge' or 'reflect' (the first two axes unpadded, as MXNet).
    """
    pw = as_shape(pad_width, "pad_width")
    if len(pw) != 2 * data.dim():
        raise ValueError(
            f"pad: pad_width must have 2 entries per axis ({2 * data.dim()} for shape {tuple(data.shape)}), "
            f"got {len(pw)}: {pw}"
        )
    if mode not in ("constant", "edge", "reflect"):
        raise ValueError(f"pad: mode must be 'constant', 'edge' or 'reflect', got {mode!r}")
    if mode == "constant":
        tpad: list[int] = []
        for ax in reversed(range(data.dim())):
            tpad += [pw[2 * ax], pw[2 * ax + 1]]
        return F.pad(data, tpad, mode="constant", value=constant_value)
    if any(pw[:4]) or data.dim() not in (3, 4, 5):
        raise ValueError(
            f"pad: mode {mode!r} pads 3-D to 5-D arrays and leaves the first two axes unpadded; "
            f"got shape {tuple(data.shape)} with pad_width {pw}"
        )
    tpad = []
    for ax in reversed(range(2, data.dim())):
        tpad += [pw[2 * ax], pw[2 * ax + 1]]
    return F.pad(data, tpad, mode="replicate" if mode == "edge" else "reflect")


Pad = pad


def _slice_axis_index(data: Tensor, ax: int, start: int, stop: int, step: int) -> Tensor:
    if step > 0:
        idx: list[Any] = [_bslice(None)] * data.dim()
        idx[ax] = _bslice(start, stop, step)
        return data[tuple(idx)]
    ind = torch.arange(start, stop, step, device=data.device)
    return data.index_select(ax, ind)


def slice(data: Tensor, begin: Any, end: Any, step: Any = ()) -> Tensor:
    """``data[begin[0]:end[0]:step[0], ...]``; entries may be None; steps may be negative."""
    # an int is a 1-tuple (MXNet reads a Shape parameter "3" as (3,))
    begin, end = ((b,) if isinstance(b, int) else tuple(b) for b in (begin, end))
    step = ((step,) if isinstance(step, int) else tuple(step)) if step is not None else ()
    if len(begin) != len(end) or len(begin) > data.dim() or (step and len(step) != len(begin)):
        raise ValueError(
            f"slice: begin {begin}, end {end} and step {step} must have the same length, at most "
            f"{data.dim()} (the input's ndim)"
        )
    out = data
    for ax, (b, e) in enumerate(zip(begin, end)):
        st = step[ax] if step and step[ax] is not None else 1
        if st == 0:
            raise ValueError("slice: step must not be 0")
        start, stop, stp = _bslice(b, e, st).indices(data.shape[ax])
        out = _slice_axis_index(out, ax, start, stop, stp)
    return out


crop = slice


def slice_axis(data: Tensor, axis: int, begin: int, end: int | None) -> Tensor:
    """``data`` restricted to ``begin:end`` along ``axis`` (end None: to the end)."""
    ax = norm_axis(axis, data.dim())
    n = data.shape[ax]
    b = begin + n if begin < 0 else begin
    e = n if end is None else (end + n if end < 0 else end)
    if not (0 <= b <= n and 0 <= e <= n and b <= e):
        raise ValueError(
            f"slice_axis: begin={begin}, end={end} is not a valid range of axis {axis} (size {n})"
        )
    return data.narrow(ax, b, e - b)


def slice_like(data: Tensor, shape_like: Tensor, axes: Any = ()) -> Tensor:
    """``data`` cut to ``shape_like``'s size on ``axes`` (all axes when empty)."""
    if not axes:
        if shape_like.dim() != data.dim():
            raise ValueError(
                f"slice_like: shapes {tuple(data.shape)} and {tuple(shape_like.shape)} "
                "differ in ndim; give axes"
            )
        axes = tuple(range(data.dim()))
    out = data
    for a in as_shape(axes, "axes"):
        ax = norm_axis(a, data.dim())
        size = shape_like.shape[norm_axis(a, shape_like.dim())]
        if size > data.shape[ax]:
            raise ValueError(f"slice_like: axis {a} of data has size {data.shape[ax]} < {size}")
        out = out.narrow(ax, 0, size)
    return out

