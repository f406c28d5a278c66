"""Random inputs of ``mx.test_utils``: shapes, dense and sparse arrays (numpy's global generator,
so a test's ``np.random.seed`` makes them reproducible)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..base import MXNetError
from ..context import Context
from ._tolerance import default_context, default_dtype


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


def rand_coord_2d(x_low: int, x_high: int, y_low: int, y_high: int) -> tuple[int, int]:
    """A random integer point with x in [x_low, x_high) and y in [y_low, y_high)."""
    return int(np.random.randint(x_low, x_high)), int(np.random.randint(y_low, y_high))


def random_arrays(*shapes: Any) -> Any:
    """Standard-normal float32 numpy arrays of the given shapes (one array for one shape)."""
    arrays = [
        np.array(np.random.randn(), dtype=np.float32)
        if len(tuple(s)) == 0
        else np.random.randn(*tuple(s)).astype(np.float32)
        for s in shapes
    ]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(
    *shapes: Any, low: float = 0.0, high: float = 1.0, dtype: Any = None
) -> list[np.ndarray]:
    """numpy arrays uniform in ``[low, high)``, one per shape (``dtype`` default: float32)."""
    dt = np.float32 if dtype is None else dtype
    return [np.random.uniform(low, high, size=s).astype(dt) for s in shapes]


def random_sample(population: Sequence[Any], k: int) -> list[Any]:
    """``k`` distinct elements of ``population`` in random order (numpy's global generator)."""
    if not 0 <= k <= len(population):
        raise ValueError(f"random_sample: k must be in [0, {len(population)}], got {k!r}")
    picked = np.random.permutation(len(population))[:k]
    return [population[int(i)] for i in picked]


def assign_each(the_input: np.ndarray, function: Callable[[Any], Any] | None) -> np.ndarray:
    """``function`` applied to every element (a copy when ``function`` is None)."""
    if function is None:
        return np.array(the_input)
    return (
        np.vectorize(function, otypes=[np.float64])(the_input)
        if np.size(the_input)
        else np.zeros(np.shape(the_input))
    )


def assign_each2(
    input1: np.ndarray, input2: np.ndarray, function: Callable[[Any, Any], Any] | None
) -> np.ndarray:
    """``function`` applied to every pair of elements (a copy of ``input1`` when None)."""
    if function is None:
        return np.array(input1)
    if np.shape(input1) != np.shape(input2):
        raise ValueError(f"assign_each2: shapes differ, {np.shape(input1)} and {np.shape(input2)}")
    return (
        np.vectorize(function, otypes=[np.float64])(input1, input2)
        if np.size(input1)
        else np.zeros(np.shape(input1))
    )


def shuffle_csr_column_indices(csr: Any) -> None:
    """Shuffle the column indices inside each row of a scipy CSR matrix (unordered is still valid)."""
    for i in range(len(csr.indptr) - 1):
        start, end = int(csr.indptr[i]), int(csr.indptr[i + 1])
        part = np.array(csr.indices[start:end])
        np.random.shuffle(part)
        csr.indices[start:end] = part


def _uniform_csr(
    rows: int, cols: int, density: float, dtype: Any, data_init: float | None, shuffle: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, indices, indptr) with round(rows * cols * density) non-zeros at random positions."""
    nnz = int(rows * cols * density)
    flat = np.sort(np.random.choice(rows * cols, size=nnz, replace=False)) if nnz else np.zeros(0, np.int64)
    r, c = np.divmod(flat, cols)
    data = np.random.rand(nnz).astype(dtype) if data_init is None else np.full(nnz, data_init, dtype)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=rows))]).astype(np.int64)
    indices = c.astype(np.int64)
    if shuffle:
        for i in range(rows):
            np.random.shuffle(indices[indptr[i] : indptr[i + 1]])
    return data, indices, indptr


def _powerlaw_dense(rows: int, cols: int, density: float, dtype: Any) -> np.ndarray:
    """Row i holds about 2**i non-zeros (every row at least one) until rows*cols*density are placed."""
    left = int(rows * cols * density)
    if left < 2 * rows:
        raise ValueError(
            f"powerlaw needs rows * cols * density >= 2 * rows, got density {density} "
            f"for shape ({rows}, {cols})"
        )
    out = np.zeros((rows, cols), dtype=dtype)
    out[:, 0] = 1 + np.random.uniform(0.001, 2, size=rows)
    left -= rows
    width = 2
    for row in range(rows):
        n = min(cols, width) - 1
        take = min(n, left)
        out[row, 1 : 1 + take] = 1 + np.random.uniform(0.001, 2, size=take)
        left -= take
        width *= 2
        if left <= 0:
            return out
    raise ValueError(f"powerlaw: density {density} is too high for shape ({rows}, {cols})")


def rand_sparse_ndarray(
    shape: Any,
    stype: str,
    density: float | None = None,
    dtype: Any = None,
    distribution: str | None = None,
    data_init: float | None = None,
    rsp_indices: Any = None,
    modifier_func: Callable[[Any], Any] | None = None,
    shuffle_csr_indices: bool = False,
    ctx: Context | str | None = None,
) -> Any:
    """A random sparse array and its parts: ``(rsp, (values, row_ids))`` for 'row_sparse' (rows kept
    with probability ``density``, or the rows ``rsp_indices``), ``(csr, (indptr, indices, data))``
    for 'csr' ('uniform' or 'powerlaw' ``distribution``). Values are uniform in [0, 1)."""
    from ..nd import sparse as sp
    from ..nd._creation import array

    ctx = ctx if ctx else default_context()
    density = float(np.random.rand()) if density is None else float(density)
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"rand_sparse_ndarray: density must be in [0, 1], got {density!r}")
    dtype = default_dtype() if dtype is None else dtype
    distribution = distribution or "uniform"
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if stype == "row_sparse":
        if distribution != "uniform":
            raise ValueError(
                f"rand_sparse_ndarray: row_sparse takes the 'uniform' distribution only, got {distribution!r}"
            )
        ids = (
            np.asarray(rsp_indices)
            if rsp_indices is not None
            else np.argwhere(np.random.rand(shape[0]) < density).flatten()
        )
        if len(ids) > shape[0]:
            raise ValueError(f"rand_sparse_ndarray: {len(ids)} row ids for {shape[0]} rows")
        if ids.shape[0] == 0:
            return sp.zeros("row_sparse", shape, ctx=ctx, dtype=dtype), (
                np.array([], dtype=dtype),
                np.array([]),
            )
        val = np.random.rand(ids.shape[0], *shape[1:]).astype(dtype)
        if data_init is not None:
            val.fill(data_init)
        if modifier_func is not None:
            val = assign_each(val, modifier_func)
        return sp.row_sparse_array((val, ids), shape=shape, ctx=ctx, dtype=dtype), (val, ids)
    if stype != "csr":
        raise MXNetError(f"rand_sparse_ndarray: storage type must be 'row_sparse' or 'csr', got {stype!r}")
    if len(shape) != 2:
        raise ValueError(f"rand_sparse_ndarray: a csr array is 2-D, got shape {shape}")
    if distribution == "uniform":
        parts = _uniform_csr(shape[0], shape[1], density, dtype, data_init, shuffle_csr_indices)
        csr = sp.csr_matrix(parts, shape=shape, ctx=ctx, dtype=dtype)
    elif distribution == "powerlaw":
        csr = sp.tostype(
            array(_powerlaw_dense(shape[0], shape[1], density, dtype), ctx=ctx, dtype=dtype), "csr"
        )
    else:
        raise ValueError(
            f"rand_sparse_ndarray: distribution must be 'uniform' or 'powerlaw', got {distribution!r}"
        )
    return csr, (sp.indptr(csr), sp.indices(csr), sp.data(csr))


def rand_ndarray(
    shape: Any,
    stype: str = "default",
    density: float | None = None,
    dtype: Any = None,
    modifier_func: Callable[[Any], Any] | None = None,
    shuffle_csr_indices: bool = False,
    distribution: str | None = None,
    ctx: Context | str | None = None,
) -> torch.Tensor:
    """A random array: standard normal for 'default' storage, else :func:`rand_sparse_ndarray`'s."""
    if stype not in ("default", "row_sparse", "csr"):
        raise MXNetError(
            f"rand_ndarray: storage type must be 'default', 'row_sparse' or 'csr', got {stype!r}"
        )
    if stype != "default":
        return rand_sparse_ndarray(
            shape,
            stype,
            density=density,
            dtype=dtype,
            distribution=distribution,
            modifier_func=modifier_func,
            shuffle_csr_indices=shuffle_csr_indices,
            ctx=ctx,
        )[0]
    from ..nd._creation import array

    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    arr = np.asarray(random_arrays(shape), dtype=np.float32).reshape(shape)
    if density is not None:  # a dense array with about that fraction of non-zeros
        arr = np.where(np.random.uniform(size=shape) < density, arr, 0.0).astype(np.float32)
    if modifier_func is not None:
        arr = np.asarray(assign_each(arr, modifier_func))
    return array(arr, ctx=ctx or default_context(), dtype=dtype)


def create_sparse_array(
    shape: Any,
    stype: str,
    data_init: float | None = None,
    rsp_indices: Any = None,
    dtype: Any = None,
    modifier_func: Callable[[Any], Any] | None = None,
    density: float = 0.5,
    shuffle_csr_indices: bool = False,
) -> torch.Tensor:
    """A random sparse array (row ids of 'row_sparse' sorted, the canonical form)."""
    if stype not in ("row_sparse", "csr"):
        raise AssertionError(f"Unknown storage type: {stype}")
    ids = np.sort(np.asarray(rsp_indices)) if stype == "row_sparse" and rsp_indices is not None else None
    return rand_sparse_ndarray(
        shape,
        stype,
        density=density,
        data_init=data_init,
        rsp_indices=ids,
        dtype=dtype,
        modifier_func=modifier_func,
        shuffle_csr_indices=shuffle_csr_indices,
    )[0]


def create_sparse_array_zd(
    shape: Any,
    stype: str,
    density: float,
    data_init: float | None = None,
    rsp_indices: Any = None,
    dtype: Any = None,
    modifier_func: Callable[[Any], Any] | None = None,
    shuffle_csr_indices: bool = False,
) -> torch.Tensor:
    """create_sparse_array where a 'row_sparse' array's rows are exactly ``rsp_indices`` (density 0)."""
    if stype == "row_sparse":
        density = 0.0
    return create_sparse_array(
        shape,
        stype,
        data_init=data_init,
        rsp_indices=rsp_indices,
        dtype=dtype,
        modifier_func=modifier_func,
        density=density,
        shuffle_csr_indices=shuffle_csr_indices,
    )


def create_2d_tensor(rows: int, columns: int, dtype: Any = np.int64) -> torch.Tensor:
    """A (rows, columns) array whose row i is all i."""
    from ..nd._creation import arange

    return arange(0, rows, dtype=dtype).reshape(rows, 1).expand(rows, columns).contiguous()


def create_vector(size: int, dtype: Any = np.int64) -> torch.Tensor:
    """0, 1, ..., size - 1."""
    from ..nd._creation import arange

    return arange(0, size, dtype=dtype)


def get_identity_mat(size: int) -> torch.Tensor:
    """The float32 identity matrix of ``size``."""
    from ..nd._creation import eye

    return eye(size)


def get_identity_mat_batch(size: int) -> torch.Tensor:
    """Two stacked identity matrices, shape (2, size, size)."""
    eye = get_identity_mat(size)
    return torch.stack([eye, eye.clone()])
