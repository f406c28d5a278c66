"""Comparison helpers of ``mx.test_utils``: tensors, numpy arrays and Python scalars alike.

A pair ``a, b`` matches where ``|a - b| <= atol + rtol * |b|`` (numpy's ``allclose`` rule).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ._tolerance import get_atol, get_etol, get_rtol, get_tols


def _np(x: Any) -> np.ndarray:
    """A numpy view of ``x``: tensors (sparse ones densified, bfloat16 widened), arrays, scalars."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.layout != torch.strided:
            t = t.to_dense()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.cpu().numpy()
    if hasattr(x, "asnumpy") and not isinstance(x, np.ndarray):
        return np.asarray(x.asnumpy())
    return np.asarray(x)


def _all_close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    """Fast check that every pair satisfies ``|a - b| <= atol + rtol * |b|`` (False on NaN/inf, which
    :func:`_violation` then judges)."""
    if a.dtype.kind not in "fiub" or b.dtype.kind not in "fiub":
        return False
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        np.subtract(a64, b64, out=a64)
        np.abs(a64, out=a64)
        np.abs(b64, out=b64)
        b64 *= rtol
        b64 += atol
        return bool(np.all(a64 <= b64))


def _violation(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    """How far each pair is beyond tolerance: <= 1 means it matches; inf for NaN mismatches."""
    a64 = a.astype(np.float64) if a.dtype.kind != "c" else a
    b64 = b.astype(np.float64) if b.dtype.kind != "c" else b
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.abs(a64 - b64)
        tol = atol + rtol * np.abs(b64)
        v = np.where(diff == 0, 0.0, np.where(tol > 0, diff / np.where(tol > 0, tol, 1.0), np.inf))
    v = np.where(np.isinf(a64) & np.isinf(b64) & (a64 == b64), 0.0, v)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    v = np.where(nan_a | nan_b, np.inf, v)
    if equal_nan:
        v = np.where(nan_a & nan_b, 0.0, v)
    return np.asarray(v, dtype=np.float64)


def _prepare(a: Any, b: Any, names: Sequence[str], use_broadcast: bool) -> tuple[np.ndarray, np.ndarray]:
    an, bn = _np(a), _np(b)
    if an.shape != bn.shape:
        if not use_broadcast:
            raise AssertionError(f"shapes differ: {names[0]} {an.shape} vs {names[1]} {bn.shape}")
        try:
            an, bn = np.broadcast_arrays(an, bn)
        except ValueError as e:
            raise AssertionError(
                f"shapes cannot be compared: {names[0]} {an.shape} vs {names[1]} {bn.shape}"
            ) from e
    return an, bn


def checkShapes(a: Any, b: Any) -> None:  # noqa: N802 - MXNet's name
    """Raise AssertionError when ``a`` and ``b`` differ in shape."""
    _prepare(a, b, ("a", "b"), use_broadcast=False)


def almost_equal(
    a: Any,
    b: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    use_broadcast: bool = True,
) -> bool:
    """True when every pair satisfies ``|a - b| <= atol + rtol * |b|``; unset tolerances are
    float64's (rtol 1e-5, atol 1e-20), as MXNet's ``almost_equal``."""
    rtol, atol = get_rtol(rtol), get_atol(atol)
    try:
        an, bn = _prepare(a, b, ("a", "b"), use_broadcast)
    except AssertionError:
        return False
    if _all_close(an, bn, rtol, atol):
        return True
    return bool(np.all(_violation(an, bn, rtol, atol, equal_nan) <= 1.0))


def _mismatch_report(
    an: np.ndarray, bn: np.ndarray, v: np.ndarray, rtol: float, atol: float, names: Sequence[str], limit: int
) -> str:
    bad = v > 1.0
    worst = np.unravel_index(int(np.argmax(v)), v.shape) if v.ndim else ()
    n_bad = int(bad.sum())
    lines = [
        "Items are not equal:",
        f"Error {float(v[worst]):.6g} exceeds tolerance rtol={rtol:.6g}, atol={atol:.6g} "
        f"({n_bad} of {v.size} elements mismatch, {100.0 * n_bad / max(v.size, 1):.4g}%).",
        f"Location of maximum error: {tuple(int(i) for i in worst)}, "
        f"{names[0]}={an[worst]!r}, {names[1]}={bn[worst]!r}",
    ]
    if v.ndim:
        shown = [tuple(int(i) for i in idx) for idx in np.argwhere(bad)[:limit]]
        lines.append("First mismatches: " + ", ".join(f"{idx}: {an[idx]!r} vs {bn[idx]!r}" for idx in shown))
    lines.append(f" {names[0]}: {np.array2string(an, threshold=40)}")
    lines.append(f" {names[1]}: {np.array2string(bn, threshold=40)}")
    return "\n".join(lines)


def assert_almost_equal(
    a: Any,
    b: Any,
    rtol: Any = None,
    atol: Any = None,
    names: Sequence[str] = ("a", "b"),
    equal_nan: bool = False,
    use_broadcast: bool = True,
    mismatches: Sequence[int] = (10, 10),
) -> None:
    """Raise AssertionError unless ``a`` and ``b`` agree within tolerance.

    ``rtol``/``atol``: a number, None (the per-dtype default, the looser of the two operands'),
    or a dict of dtype to float. Two bool arrays must be equal. The message gives the worst
    mismatch (its index and both values), how many elements mismatch, and the first few.
    """
    rtol, atol = get_tols(a, b, rtol, atol)
    an, bn = _prepare(a, b, names, use_broadcast)
    if an.dtype == np.bool_ and bn.dtype == np.bool_:
        rtol = atol = 0.0
    if _all_close(an, bn, rtol, atol):
        return
    v = _violation(an, bn, rtol, atol, equal_nan)
    if not (v > 1.0).any():
        return
    raise AssertionError(
        _mismatch_report(an, bn, v, rtol, atol, names, int(mismatches[0]) if mismatches else 10)
    )


def assert_almost_equal_with_err(
    a: Any,
    b: Any,
    rtol: Any = None,
    atol: Any = None,
    etol: float | None = None,
    names: Sequence[str] = ("a", "b"),
    equal_nan: bool = False,
    mismatches: Sequence[int] = (10, 10),
) -> None:
    """assert_almost_equal that tolerates a fraction ``etol`` of mismatching elements."""
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol, atol, names, equal_nan, mismatches=mismatches)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    an, bn = _prepare(a, b, names, True)
    v = _violation(an, bn, rtol, atol, equal_nan)
    frac = float((v > 1.0).mean()) if v.size else 0.0
    if frac > etol:
        raise AssertionError(
            f"{100 * frac:.4g}% of elements mismatch, more than etol={etol:g}\n"
            + _mismatch_report(an, bn, v, rtol, atol, names, int(mismatches[0]))
        )


def assert_almost_equal_ignore_nan(
    a: Any, b: Any, rtol: Any = None, atol: Any = None, names: Sequence[str] = ("a", "b")
) -> None:
    """assert_almost_equal, skipping every position where either side is NaN."""
    rtol, atol = get_tols(a, b, rtol, atol)
    an, bn = _np(a).astype(np.float64), _np(b).astype(np.float64)
    mask = np.isnan(an) | np.isnan(bn)
    assert_almost_equal(np.where(mask, 0.0, an), np.where(mask, 0.0, bn), rtol, atol, names)


def assert_allclose(a: Any, b: Any, rtol: float = 1e-07, atol: float = 0.0, equal_nan: bool = True) -> None:
    """numpy's ``assert_allclose`` defaults on :func:`assert_almost_equal`."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def same(a: Any, b: Any) -> bool:
    """True when a and b have the same shape and exactly equal values."""
    an, bn = _np(a), _np(b)
    return an.shape == bn.shape and bool(np.array_equal(an, bn))


def same_array(array1: torch.Tensor, array2: torch.Tensor) -> bool:
    """Whether the two tensors are views of the same memory (same storage, offset, shape and strides)."""
    if not (isinstance(array1, torch.Tensor) and isinstance(array2, torch.Tensor)):
        raise TypeError(
            f"same_array compares two tensors, got {type(array1).__name__} and {type(array2).__name__}"
        )
    if array1.layout != torch.strided or array2.layout != torch.strided:
        return array1 is array2
    return (
        array1.untyped_storage().data_ptr() == array2.untyped_storage().data_ptr()
        and array1.storage_offset() == array2.storage_offset()
        and array1.shape == array2.shape
        and array1.stride() == array2.stride()
    )


def assert_exception(
    f: Callable[..., Any], exception_type: type[BaseException], *args: Any, **kwargs: Any
) -> None:
    """Assert that ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    name = getattr(f, "__name__", repr(f))
    raise AssertionError(f"{name} did not raise {exception_type.__name__}")


def np_reduce(
    dat: np.ndarray, axis: Any, keepdims: bool, numpy_reduce_func: Callable[..., np.ndarray]
) -> np.ndarray:
    """Reduce ``dat`` over ``axis`` (None: all; an int or a sequence of ints) one axis at a time
    with ``numpy_reduce_func`` (e.g. ``np.sum``), the reference MXNet's reduction tests compare
    with; ``keepdims`` keeps each reduced axis as size 1."""
    axes = (
        [axis]
        if isinstance(axis, int | np.integer)
        else list(range(dat.ndim))
        if axis is None
        else list(axis)
    )
    axes = [int(a) % dat.ndim if dat.ndim else int(a) for a in axes]
    ret = dat
    for ax in sorted(axes, reverse=True):
        ret = numpy_reduce_func(ret, axis=ax)
    if keepdims:
        shape = list(dat.shape)
        for ax in axes:
            shape[ax] = 1
        ret = np.reshape(ret, tuple(shape))
    return ret


def collapse_sum_like(a: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Sum ``a`` over the axes broadcasting added to reach its shape from ``shape`` (the gradient
    of a broadcast back to its input's shape)."""
    shape = tuple(shape)
    if a.shape == shape:
        return a
    lead = a.ndim - len(shape)
    if lead < 0:
        raise ValueError(f"collapse_sum_like: shape {a.shape} has fewer axes than {shape}")
    out = a.sum(axis=tuple(range(lead))) if lead else a
    axes = tuple(i for i, (n, m) in enumerate(zip(out.shape, shape)) if m == 1 and n != 1)
    if any(n != m and m != 1 for n, m in zip(out.shape, shape)):
        raise ValueError(f"collapse_sum_like: {a.shape} is not a broadcast of {shape}")
    return out.sum(axis=axes, keepdims=True) if axes else out
