"""``mx.test_utils``: helpers MXNet users' own tests rely on.

Comparison helpers accept torch tensors, numpy arrays and Python scalars alike.  Default
tolerances follow MXNet's per-dtype table (the looser of the two operands' dtypes is used):

=========  =======  =======
dtype      rtol     atol
=========  =======  =======
float16    1e-2     1e-1
bfloat16   2e-2     1e-1   (not in MXNet 1.x; chosen for bfloat16's 8-bit mantissa)
float32    1e-4     1e-3
float64    1e-5     1e-20
integers   0        0
=========  =======  =======

A pair ``a, b`` matches where ``|a - b| <= atol + rtol * |b|``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from . import context as _context
from .base import MXNetError
from .context import Context, as_context, current_context
from .nd import array, sparse
from .nd import random as _nd_random
from .util import use_np, use_np_array, use_np_shape

__all__ = [
    "default_context",
    "set_default_context",
    "default_device",
    "set_default_device",
    "default_dtype",
    "default_rtols",
    "default_atols",
    "get_rtol",
    "get_atol",
    "get_tols",
    "assert_almost_equal",
    "assert_almost_equal_ignore_nan",
    "almost_equal",
    "same",
    "assert_exception",
    "rand_shape_2d",
    "rand_shape_3d",
    "rand_shape_nd",
    "rand_ndarray",
    "random_arrays",
    "set_env_var",
    "environment",
    "check_numeric_gradient",
    "use_np",
    "use_np_array",
    "use_np_shape",
    "compare_optimizer",
    "compare_ndarray_tuple",
    "array",
    "assert_allclose",
    "same_array",
    "retry",
    "list_gpus",
    "random_sample",
    "random_uniform_arrays",
]

# ----------------------------------------------------------------------------------------------
# contexts and dtypes
# ----------------------------------------------------------------------------------------------


def default_context() -> Context:
    """The context tests run on: the one set by :func:`set_default_context`, else cpu(0)."""
    return current_context()


def set_default_context(ctx: Context | str) -> None:
    """Make ``ctx`` the default context of this thread (what ``current_context()`` returns)."""
    _context._state.ctx = as_context(ctx)


default_device = default_context
set_default_device = set_default_context


def default_dtype() -> type:
    """MXNet's default floating-point type, numpy.float32."""
    return np.float32


_RTOLS: dict[str, float] = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-4, "float64": 1e-5}
_ATOLS: dict[str, float] = {"float16": 1e-1, "bfloat16": 1e-1, "float32": 1e-3, "float64": 1e-20}


def default_rtols() -> dict[str, float]:
    """Default relative tolerance by dtype name (integer and bool dtypes: 0)."""
    return dict(_RTOLS)


def default_atols() -> dict[str, float]:
    """Default absolute tolerance by dtype name (integer and bool dtypes: 0)."""
    return dict(_ATOLS)


def _dtype_name(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return str(x.dtype).replace("torch.", "")
    if isinstance(x, np.ndarray | np.generic):
        return x.dtype.name
    if isinstance(x, float):
        return "float64"
    if isinstance(x, (bool, int)):
        return "int64"
    return np.asarray(x).dtype.name


def _tol(table: dict[str, float], *dtypes: str) -> float:
    return max(table.get(d, 0.0) for d in dtypes) if dtypes else 0.0


def get_rtol(rtol: float | None = None, dtype: Any = np.float32) -> float:
    """``rtol`` if given, else the default for ``dtype``."""
    return (
        rtol
        if rtol is not None
        else _tol(_RTOLS, np.dtype(dtype).name if not isinstance(dtype, str) else dtype)
    )


def get_atol(atol: float | None = None, dtype: Any = np.float32) -> float:
    """``atol`` if given, else the default for ``dtype``."""
    return (
        atol
        if atol is not None
        else _tol(_ATOLS, np.dtype(dtype).name if not isinstance(dtype, str) else dtype)
    )


def get_tols(x: Any, y: Any, rtol: float | None, atol: float | None) -> tuple[float, float]:
    """(rtol, atol) for comparing x and y: given values, else the looser default of the two."""
    names = (_dtype_name(x), _dtype_name(y))
    return (
        rtol if rtol is not None else _tol(_RTOLS, *names),
        atol if atol is not None else _tol(_ATOLS, *names),
    )


# ----------------------------------------------------------------------------------------------
# comparisons
# ----------------------------------------------------------------------------------------------


def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.cpu().numpy()
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
    both = nan_a & nan_b
    v = np.where(nan_a | nan_b, np.inf, v)
    if equal_nan:
        v = np.where(both, 0.0, v)
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


def almost_equal(
    a: Any,
    b: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    use_broadcast: bool = True,
) -> bool:
    """True when every pair satisfies ``|a - b| <= atol + rtol * |b|``."""
    rtol, atol = get_tols(a, b, rtol, atol)
    try:
        an, bn = _prepare(a, b, ("a", "b"), use_broadcast)
    except AssertionError:
        return False
    if _all_close(an, bn, rtol, atol):
        return True
    return bool(np.all(_violation(an, bn, rtol, atol, equal_nan) <= 1.0))


def assert_almost_equal(
    a: Any,
    b: Any,
    rtol: float | None = None,
    atol: float | None = None,
    names: Sequence[str] = ("a", "b"),
    equal_nan: bool = False,
    use_broadcast: bool = True,
    mismatches: Sequence[int] = (10, 10),
) -> None:
    """Raise AssertionError unless ``a`` and ``b`` agree within tolerance.

    The message gives the worst mismatch (its index and both values), how many elements
    mismatch, and the first few mismatching positions.
    """
    rtol, atol = get_tols(a, b, rtol, atol)
    an, bn = _prepare(a, b, names, use_broadcast)
    if _all_close(an, bn, rtol, atol):
        return
    v = _violation(an, bn, rtol, atol, equal_nan)
    bad = v > 1.0
    if not bad.any():
        return
    worst = np.unravel_index(int(np.argmax(v)), v.shape) if v.ndim else ()
    n_bad = int(bad.sum())
    lines = [
        "Items are not equal:",
        f"Error {float(v[worst]):.6g} exceeds tolerance rtol={rtol:.6g}, atol={atol:.6g} "
        f"({n_bad} of {v.size} elements mismatch, {100.0 * n_bad / max(v.size, 1):.4g}%).",
        f"Location of maximum error: {tuple(int(i) for i in worst)}, "
        f"{names[0]}={an[worst]!r}, {names[1]}={bn[worst]!r}",
    ]
    limit = int(mismatches[0]) if mismatches else 10
    if v.ndim:
        shown = [tuple(int(i) for i in idx) for idx in np.argwhere(bad)[:limit]]
        lines.append("First mismatches: " + ", ".join(f"{idx}: {an[idx]!r} vs {bn[idx]!r}" for idx in shown))
    lines.append(f" {names[0]}: {np.array2string(an, threshold=40)}")
    lines.append(f" {names[1]}: {np.array2string(bn, threshold=40)}")
    raise AssertionError("\n".join(lines))


def assert_almost_equal_ignore_nan(
    a: Any, b: Any, rtol: float | None = None, atol: float | None = None, names: Sequence[str] = ("a", "b")
) -> None:
    """assert_almost_equal, skipping every position where either side is NaN."""
    an, bn = _np(a).astype(np.float64), _np(b).astype(np.float64)
    rtol, atol = get_tols(a, b, rtol, atol)
    mask = np.isnan(an) | np.isnan(bn)
    assert_almost_equal(np.where(mask, 0.0, an), np.where(mask, 0.0, bn), rtol, atol, names)


def same(a: Any, b: Any) -> bool:
    """True when a and b have the same shape and exactly equal values."""
    an, bn = _np(a), _np(b)
    return an.shape == bn.shape and bool(np.array_equal(an, bn))


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


# ----------------------------------------------------------------------------------------------
# random inputs
# ----------------------------------------------------------------------------------------------


def rand_shape_2d(dim0: int = 10, dim1: int = 10, allow_zero_size: bool = False) -> tuple[int, int]:
    """A random 2-D shape with sizes in [1, dim] (0 allowed if ``allow_zero_size``)."""
    low = 0 if allow_zero_size else 1
    return int(np.random.randint(low, dim0 + 1)), int(np.random.randint(low, dim1 + 1))


def rand_shape_3d(
    dim0: int = 10, dim1: int = 10, dim2: int = 10, allow_zero_size: bool = False
) -> tuple[int, int, int]:
    """A random 3-D shape with sizes in [1, dim]."""
    low = 0 if allow_zero_size else 1
    return (
        int(np.random.randint(low, dim0 + 1)),
        int(np.random.randint(low, dim1 + 1)),
        int(np.random.randint(low, dim2 + 1)),
    )


def rand_shape_nd(num_dim: int, dim: int = 10, allow_zero_size: bool = False) -> tuple[int, ...]:
    """A random ``num_dim``-D shape with sizes in [1, dim]."""
    if num_dim < 0:
        raise ValueError(f"num_dim must be non-negative, got {num_dim}")
    low = 0 if allow_zero_size else 1
    return tuple(int(s) for s in np.random.randint(low, dim + 1, size=num_dim))


def random_arrays(*shapes: Any) -> Any:
    """Standard-normal float32 numpy arrays of the given shapes (one array for one shape)."""
    arrays = [
        np.array(np.random.randn(), dtype=np.float32)
        if len(tuple(s)) == 0
        else np.random.randn(*tuple(s)).astype(np.float32)
        for s in shapes
    ]
    return arrays[0] if len(arrays) == 1 else arrays


def rand_ndarray(
    shape: Any,
    stype: str = "default",
    density: float | None = None,
    dtype: Any = None,
    modifier_func: Callable[[np.ndarray], np.ndarray] | None = None,
    shuffle_csr_indices: bool = False,
    distribution: Any = None,
    ctx: Context | str | None = None,
) -> torch.Tensor:
    """A random tensor (standard normal; with ``density``, that fraction kept non-zero).

    ``stype`` 'row_sparse' keeps whole rows with probability ``density`` and 'csr' single entries
    (a random density when none is given, as in MXNet); the result has that storage type.
    """
    if stype not in ("default", "row_sparse", "csr"):
        raise MXNetError(f"rand_ndarray: storage type must be 'default', 'row_sparse' or 'csr', "
                         f"got {stype!r}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    arr = np.asarray(random_arrays(shape), dtype=np.float32).reshape(shape)
    if density is None and stype != "default":
        density = float(np.random.uniform())
    if density is not None:
        if not 0.0 <= density <= 1.0:
            raise ValueError(f"rand_ndarray: density must be in [0, 1], got {density!r}")
        keep_shape = shape[:1] + (1,) * (len(shape) - 1) if stype == "row_sparse" and shape else shape
        arr = np.where(np.random.uniform(size=keep_shape) < density, arr, 0.0).astype(np.float32)
    if modifier_func is not None:
        arr = np.asarray(modifier_func(arr))
    from .nd._creation import array

    out = array(arr, ctx=ctx, dtype=dtype)
    if stype != "default":
        out = sparse.tostype(out, stype)
    return out


# ----------------------------------------------------------------------------------------------
# environment variables
# ----------------------------------------------------------------------------------------------


def set_env_var(key: str, val: str | None, default_val: str = "") -> str:
    """Set (or, with None, unset) an environment variable; returns its previous value."""
    prev = os.environ.get(key, default_val)
    if val is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = str(val)
    return prev


@contextmanager
def environment(*args: Any) -> Iterator[None]:
    """Set environment variables inside a ``with`` block, restoring them afterwards.

    ``environment('KEY', 'value')`` or ``environment({'A': '1', 'B': None})`` (None unsets).
    """
    if len(args) == 2 and isinstance(args[0], str):
        changes: Mapping[str, Any] = {args[0]: args[1]}
    elif len(args) == 1 and isinstance(args[0], Mapping):
        changes = args[0]
    else:
        raise TypeError(f"environment() takes (key, value) or a dict, got {args!r}")
    saved = {k: os.environ.get(k) for k in changes}
    try:
        for k, v in changes.items():
            set_env_var(k, v)
        yield
    finally:
        for k, old in saved.items():
            set_env_var(k, old)


# ----------------------------------------------------------------------------------------------
# gradients
# ----------------------------------------------------------------------------------------------


def _projected(out: Any, projs: list[torch.Tensor] | None) -> tuple[torch.Tensor, list[torch.Tensor]]:
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    if projs is None:
        g = torch.Generator().manual_seed(0)
        projs = [torch.rand(o.shape, generator=g, dtype=torch.float64).to(o.device) + 0.5 for o in outs]
    total = sum((o.to(torch.float64) * p).sum() for o, p in zip(outs, projs))
    return total, projs  # type: ignore[return-value]


def check_numeric_gradient(
    f: Callable[..., Any],
    inputs: Any,
    eps: float = 1e-3,
    rtol: float = 1e-2,
    atol: float | None = None,
    grad_nodes: Sequence[int] | None = None,
    numeric_eps: float | None = None,
) -> None:
    """Check torch autograd's gradient of ``f(*inputs)`` against central differences.

    ``f`` returns a tensor (or a list of tensors); the check differentiates a fixed random
    projection of the outputs to a scalar.  ``grad_nodes`` picks the inputs to check (default:
    every floating-point one).  ``atol`` defaults to 1e-4 for float64 inputs, 1e-3 otherwise.
    Each input element costs two calls of ``f``: keep the inputs small.
    """
    if numeric_eps is not None:
        eps = numeric_eps
    if isinstance(inputs, (torch.Tensor, np.ndarray)):
        inputs = [inputs]
    xs = [
        (
            x.detach().clone(memory_format=torch.contiguous_format)
            if isinstance(x, torch.Tensor)
            else torch.as_tensor(np.array(x))
        )
        for x in inputs
    ]
    nodes = (
        list(grad_nodes) if grad_nodes is not None else [i for i, x in enumerate(xs) if x.is_floating_point()]
    )
    for i in nodes:
        if not xs[i].is_floating_point():
            raise TypeError(
                f"check_numeric_gradient: input {i} has dtype {xs[i].dtype}; it must be floating point"
            )
    if atol is None:
        atol = 1e-4 if all(xs[i].dtype == torch.float64 for i in nodes) else 1e-3

    leaves = [x.clone().requires_grad_(True) if i in nodes else x for i, x in enumerate(xs)]
    with torch.enable_grad():
        loss, projs = _projected(f(*leaves), None)
        wrt = [leaves[i] for i in nodes]
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    analytic = [torch.zeros_like(w) if g is None else g.detach() for w, g in zip(wrt, grads)]

    with torch.no_grad():
        for k, i in enumerate(nodes):
            x = xs[i]
            flat = x.view(-1)
            numeric = torch.zeros(x.numel(), dtype=torch.float64)
            for j in range(x.numel()):
                old = flat[j].item()
                flat[j] = old + eps
                plus = _projected(f(*xs), projs)[0].item()
                flat[j] = old - eps
                minus = _projected(f(*xs), projs)[0].item()
                flat[j] = old
                numeric[j] = (plus - minus) / (2.0 * eps)
            assert_almost_equal(
                numeric.reshape(x.shape).numpy(),
                analytic[k].to(torch.float64).cpu().numpy(),
                rtol=rtol,
                atol=atol,
                names=(f"NUMERICAL_input{i}", f"BACKWARD_input{i}"),
            )


# ----------------------------------------------------------------------------------------------
# optimizers
# ----------------------------------------------------------------------------------------------


def compare_ndarray_tuple(t1: Any, t2: Any, rtol: float | None = None, atol: float | None = None) -> None:
    """Assert two optimizer states are equal: tensors, or (nested) tuples/lists of them.

    As MXNet's helper, a None on either side compares nothing there (a reference optimizer may
    keep no state, or no master copy, where the other does)."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, (tuple, list)) or isinstance(t2, (tuple, list)):
        if not (isinstance(t1, (tuple, list)) and isinstance(t2, (tuple, list))) or len(t1) != len(t2):
            raise AssertionError(f"states differ in structure: {type(t1).__name__} of "
                                 f"{len(t1) if isinstance(t1, (tuple, list)) else 1} against "
                                 f"{type(t2).__name__} of {len(t2) if isinstance(t2, (tuple, list)) else 1}")
        for a, b in zip(t1, t2):
            compare_ndarray_tuple(a, b, rtol, atol)
        return
    assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def _opt_pair(shape: Any, dtype: Any, stype: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(dense copy, value in storage type ``stype``) of one random array for compare_optimizer."""
    ctx = default_context()
    if stype == "default":
        second = _nd_random.uniform(shape=shape, ctx=ctx, dtype=dtype)
        return second.detach().clone(), second
    if stype not in ("row_sparse", "csr"):
        raise MXNetError(f"compare_optimizer: storage type must be 'default', 'row_sparse' or 'csr', "
                         f"got {stype!r}")
    second = rand_ndarray(shape, stype, dtype=dtype)
    return second.detach().to_dense().clone(), second


def compare_optimizer(opt1: Any, opt2: Any, shape: Any, dtype: Any, w_stype: str = "default",
                      g_stype: str = "default", rtol: float = 1e-4, atol: float = 1e-5,
                      compare_states: bool = True, ntensors: int = 1) -> None:
    """Run one update of ``opt1`` and ``opt2`` on the same random weight and gradient and assert that
    their states and weights agree (``opt1`` sees dense copies; ``opt2`` the storage types asked for).

    With a list of shapes, ``opt2`` updates ``ntensors`` weights in one call and ``opt1`` one at a
    time (its reference).
    """
    if isinstance(shape, list):
        ctx = default_context()
        ws1 = [_nd_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape[:ntensors]]
        gs1 = [_nd_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape[:ntensors]]
        ws2 = [w.clone() for w in ws1]
        gs2 = [g.clone() for g in gs1]
        states2 = [opt2.create_state_multi_precision(i, ws2[i]) for i in range(ntensors)]
        opt2.update_multi_precision(list(range(ntensors)), ws2, gs2, states2)
        for i in range(ntensors):
            state = opt1.create_state_multi_precision(i, ws1[i])
            opt1.update_multi_precision(i, ws1[i], gs1[i], state)
            if compare_states:
                compare_ndarray_tuple(state, states2[i], rtol, atol)
            assert_almost_equal(ws1[i], ws2[i], rtol=rtol, atol=atol)
        return
    if ntensors != 1:
        raise MXNetError("compare_optimizer: ntensors > 1 needs a list of shapes")
    if w_stype == "default":
        w1, w2 = _opt_pair(shape, dtype, "default")
    else:  # the sparse weight has every row (density 1), the reference its dense form
        w2 = rand_ndarray(shape, w_stype, density=1, dtype=dtype)
        w1 = w2.detach().to_dense().clone()
    g1, g2 = _opt_pair(shape, dtype, g_stype)
    state1 = opt1.create_state_multi_precision(0, w1)
    state2 = opt2.create_state_multi_precision(0, w2)
    if compare_states:
        compare_ndarray_tuple(state1, state2)
    opt1.update_multi_precision(0, w1, g1, state1)
    opt2.update_multi_precision(0, w2, g2, state2)
    if compare_states:
        compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
    assert_almost_equal(w1, w2, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------------------------
# smaller helpers MXNet's tests import with ``from mxnet.test_utils import *``
# ----------------------------------------------------------------------------------------------
def assert_allclose(a: Any, b: Any, rtol: float = 1e-07, atol: float = 0.0, equal_nan: bool = True) -> None:
    """numpy's ``assert_allclose`` defaults on :func:`assert_almost_equal`."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def same_array(array1: torch.Tensor, array2: torch.Tensor) -> bool:
    """Whether the two tensors are views of the same memory (same storage, offset, shape and strides)."""
    if not (isinstance(array1, torch.Tensor) and isinstance(array2, torch.Tensor)):
        raise TypeError(f"same_array compares two tensors, got {type(array1).__name__} and "
                        f"{type(array2).__name__}")
    if array1.layout != torch.strided or array2.layout != torch.strided:
        return array1 is array2
    return (array1.untyped_storage().data_ptr() == array2.untyped_storage().data_ptr()
            and array1.storage_offset() == array2.storage_offset()
            and array1.shape == array2.shape and array1.stride() == array2.stride())


def retry(n: int) -> Callable[[Callable[..., Any]], Callable[..., None]]:
    """Decorator: run a test up to ``n`` times until it passes without an AssertionError."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"retry needs a positive number of attempts, got {n!r}")

    def decorate(f: Callable[..., Any]) -> Callable[..., None]:
        def wrapper(*args: Any, **kwargs: Any) -> None:
            for attempt in range(n):
                try:
                    f(*args, **kwargs)
                    return
                except AssertionError:
                    if attempt == n - 1:
                        raise

        wrapper.__name__ = getattr(f, "__name__", "wrapper")
        wrapper.__doc__ = f.__doc__
        return wrapper

    return decorate


def list_gpus() -> range:
    """``range(number of CUDA devices)``."""
    return range(torch.cuda.device_count() if torch.cuda.is_available() else 0)


def random_sample(population: Sequence[Any], k: int) -> list[Any]:
    """``k`` distinct elements of ``population`` in random order (numpy's global generator)."""
    if not 0 <= k <= len(population):
        raise ValueError(f"random_sample: k must be in [0, {len(population)}], got {k!r}")
    picked = np.random.permutation(len(population))[:k]
    return [population[int(i)] for i in picked]


def random_uniform_arrays(
    *shapes: Any, low: float = 0.0, high: float = 1.0, dtype: Any = None
) -> list[np.ndarray]:
    """numpy arrays uniform in ``[low, high)``, one per shape (``dtype`` default: float32)."""
    dt = np.float32 if dtype is None else dtype
    return [np.random.uniform(low, high, size=s).astype(dt) for s in shapes]
