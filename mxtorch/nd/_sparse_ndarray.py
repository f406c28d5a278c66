"""MXNet's sparse array classes, ``BaseSparseNDArray``, ``RowSparseNDArray`` and ``CSRNDArray``:
torch.Tensor subclasses of the sparse arrays made through MXNet's API (``mx.nd.sparse.*``,
``x.tostype(...)``), with MXNet's rules for the names torch also defines.

* ``x.data``, ``x.indices`` (and csr's ``x.indptr``) are MXNet's arrays (copies, as MXNet's are),
  not torch's ``.data`` / ``.indices()``; ``x.data = t`` still sets torch's data.
* ``x[:]``, ``x[k]`` / ``x[a:b]`` (csr rows) and ``x[:] = value`` follow MXNet; ``copyto`` writes
  into a dense or same-storage array; pickling keeps the class.
* every operation torch's sparse kernels refuse (``rsp - 1``, ``dense + csr`` ...) runs on the dense
  values (MXNet's storage fallback); a dense result is an ``mx.nd.NDArray``, a sparse one keeps
  its class.  The dense NDArray's method rules (``norm(axis=)``, ``clip(a_min, a_max)`` ...) hold.

Dense tensors never pass through these classes, so torch code pays nothing for them.
``isinstance(t, RowSparseNDArray)`` also holds for a plain torch COO tensor with one sparse
dimension (a gradient torch made), and ``isinstance(t, CSRNDArray)`` for any torch csr tensor.
"""

from __future__ import annotations

import copy
import numbers
from typing import Any

import numpy as np
import torch

from .. import _mxnet_methods

# Handed over, so that this module imports nothing of mx.nd above it (the import graph has no
# cycles): the storage conversions by _sparse_storage (which makes these arrays) when it loads,
# the dense array class by mx.nd's __init__ (dense results are plain tensors until then).
_storage: Any = None
_dense_class: type | None = None


def use_storage(storage: Any) -> None:
    """Take the conversions (``stype``, ``_tostype``, ``row_sparse_parts`` ...) from ``storage``."""
    global _storage
    _storage = storage


def use_dense_class(cls: type) -> None:
    """Make the dense results of operations on sparse arrays ``cls`` (``mx.nd.NDArray``)."""
    global _dense_class
    _dense_class = cls


def new_ndarray(t: torch.Tensor) -> torch.Tensor:
    # t was just made here and nobody else holds it: it changes class in place
    if _dense_class is not None and type(t) is torch.Tensor:
        t.__class__ = _dense_class
    return t

__all__ = ["BaseSparseNDArray", "RowSparseNDArray", "CSRNDArray", "SparseNDArray", "as_sparse_ndarray",
           "assign"]

_TensorMeta = type(torch.Tensor)
_torch_data: Any = torch._C.TensorBase.__dict__["data"]  # the getset descriptor torch's .data is


def _kind(t: torch.Tensor) -> str | None:
    layout = t.layout
    if layout == torch.sparse_csr:
        return "csr"
    if layout == torch.sparse_coo and t.sparse_dim() == 1:
        return "row_sparse"
    return None


class _SparseMeta(_TensorMeta):  # type: ignore[misc,valid-type]
    """``isinstance`` asks for the storage type: a torch sparse tensor of that layout counts, as
    it did when these classes had no instances (a gradient torch made is a RowSparseNDArray)."""

    _stypes: tuple[str, ...] = ()

    def __instancecheck__(cls, obj: Any) -> bool:
        if not isinstance(obj, torch.Tensor):
            return False
        if _TensorMeta.__instancecheck__(cls, obj):
            return True
        return _kind(obj) in cls._stypes


def _densified(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.layout != torch.strided:
        return value.to_dense()
    if isinstance(value, (list, tuple)):
        return type(value)(_densified(v) for v in value)
    return value


def _records_mixed_csr(args: Any, kwargs: Any) -> bool:
    """Whether a recorded op mixes a csr tensor with other layouts: torch's kernels compute it but
    its backward fails ("Sparse CSR tensors do not have is_contiguous", a gradient of the wrong
    layout), so such an op runs on the dense values, MXNet's storage fallback."""
    if not torch.is_grad_enabled():
        return False
    flat = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    flat += [t for a in args if isinstance(a, (list, tuple)) for t in a if isinstance(t, torch.Tensor)]
    layouts = {t.layout for t in flat}
    return torch.sparse_csr in layouts and len(layouts) > 1 and any(t.requires_grad for t in flat)


# what torch dispatches ==, !=, <, <=, >, >= of a tensor as (x.__ne__ arrives as TensorBase.ne)
_COMPARISONS = frozenset(getattr(torch._C.TensorBase, name) for op in ("eq", "ne", "lt", "le", "gt", "ge")
                         for name in (op, f"__{op}__"))


def _mx_comparison(func: Any, args: Any) -> torch.Tensor:
    """``a op b`` with a sparse operand, by MXNet's rules: 1/0 in the array's dtype; with a number
    the result keeps the array's storage type when ``0 op number`` is false (a stored zero stays
    an unstored one: ``rsp > 0``, ``rsp != 0``), else it is dense (``rsp >= 0``); two arrays: dense."""
    a, b = args[0], args[1]
    out = func(*_densified((a, b)))
    if not isinstance(out, torch.Tensor):
        return out  # NotImplemented: a type torch does not compare with
    out = out.to(a.dtype)
    if isinstance(b, (numbers.Number, np.generic)) and a.layout != torch.strided:
        if not bool(func(torch.zeros((), dtype=a.dtype), b)):
            return _storage._tostype(out, _storage.stype(a))
    return out


def _mutates_sparse(func: Any, args: Any) -> bool:
    """Whether ``func`` writes into its first argument (``x[k] = v``, ``copy_``, ``add_``, ``x += y``)
    and that argument is sparse: a dense fallback must then write the result back into it."""
    name = getattr(func, "__name__", "")
    writes = name == "__setitem__" or (name.endswith("_") and not name.endswith("__")) or (
        name.startswith("__i") and name[3:-2] in ("add", "sub", "mul", "truediv", "floordiv", "pow", "mod"))
    return writes and bool(args) and isinstance(args[0], torch.Tensor) and args[0].layout != torch.strided


def _store(target: torch.Tensor, value: torch.Tensor) -> None:
    """Write ``value`` (any storage type) into ``target``, which keeps its identity and storage type."""
    with torch._C.DisableTorchFunctionSubclass(), torch.no_grad():
        value = value.detach().to(device=target.device, dtype=target.dtype)
        if target.layout == torch.strided:
            target.copy_(value.to_dense() if value.layout != torch.strided else value)
            return
        value = _storage._tostype(value, _storage.stype(target))
        target.resize_as_sparse_(value)
        target.copy_(value)


def _in_place_on_dense(func: Any, args: Any, kwargs: Any) -> Any:
    """MXNet's storage fallback for a write torch's sparse kernels refuse (``csr[:] = 3``,
    ``dense.copyto(rsp)``): run it on the dense value, then store the result back in the target's
    storage type (the target keeps its identity; its stored entries may change)."""
    target = args[0]
    dense = target.detach().to_dense()
    out = func(dense, *_densified(args[1:]), **_densified(kwargs))
    _store(target, dense)
    return target if out is dense else out


def _result(out: Any, args: Any, kwargs: Any) -> Any:
    """An operation's result in MXNet's classes: a new sparse tensor is a sparse array, a new dense
    tensor an ``mx.nd.NDArray``; a tensor the call was given (``x.add_(y)``) is returned as it is."""
    if type(out) is torch.Tensor:
        if out.layout != torch.strided:
            return as_sparse_ndarray(out)
        if any(out is a for a in (*args, *kwargs.values())):
            return out
        return new_ndarray(out)
    if type(out) in (tuple, list):
        return type(out)(_result(v, args, kwargs) for v in out)
    return out


class BaseSparseNDArray(torch.Tensor, metaclass=_SparseMeta):  # type: ignore[metaclass]
    """MXNet's sparse array: a torch sparse tensor (row_sparse: COO with one sparse dimension; csr:
    ``torch.sparse_csr``) made through MXNet's API.  Make one with ``mx.nd.sparse.csr_matrix``,
    ``row_sparse_array``, ``zeros`` or ``x.tostype(...)``."""

    _stypes: tuple[str, ...] = ("row_sparse", "csr")

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{cls.__name__} is not made directly in mxtorch: make one with mx.nd.sparse.csr_matrix(...), "
            "row_sparse_array(...), zeros(stype, shape) or x.tostype(...)"
        )

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            if getattr(func, "__name__", "") == "__set__":  # x.grad = g: on x itself, never a dense copy
                return func(*args, **kwargs)
            if func in _COMPARISONS and len(args) == 2 and not kwargs:
                return _result(_mx_comparison(func, args), args, kwargs)
            if _records_mixed_csr(args, kwargs):
                return _result(func(*_densified(args), **_densified(kwargs)), args, kwargs)
            try:
                out = func(*args, **kwargs)
            except (RuntimeError, NotImplementedError, TypeError) as first:
                try:
                    if _mutates_sparse(func, args):
                        return _in_place_on_dense(func, args, kwargs)
                    out = func(*_densified(args), **_densified(kwargs))
                except Exception:
                    raise first from None
        return _result(out, args, kwargs)

    def __reduce_ex__(self, protocol: Any) -> Any:
        # torch rebuilds a subclass with as_subclass, which sparse storage refuses: rebuild from parts
        kind = _storage.stype(self)
        with torch._C.DisableTorchFunctionSubclass():
            if kind == "row_sparse":
                ids, rows = _storage.row_sparse_parts(self.detach())
                parts: tuple[torch.Tensor, ...] = (ids.clone(), rows.clone())
            else:
                t = self.detach()
                parts = (t.crow_indices().clone(), t.col_indices().clone(), t.values().clone())
        return (_rebuild, (kind, parts, tuple(self.shape)))

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        # torch's deepcopy clones a sparse tensor and wants the subclass back: clone the storage
        if id(self) in memo:
            return memo[id(self)]
        with torch._C.DisableTorchFunctionSubclass(), torch.no_grad():
            out = self.clone()
        out = torch.Tensor._make_subclass(type(self), out, self.requires_grad)
        out.__dict__.update(copy.deepcopy(self.__dict__, memo))
        memo[id(self)] = out
        return out

    @property
    def _num_aux(self) -> int:
        """How many auxiliary arrays the storage has (row_sparse: row ids; csr: indptr, indices)."""
        return 1 if _storage.stype(self) == "row_sparse" else 2

    @property
    def _aux_types(self) -> list[Any]:
        return [np.int64] * self._num_aux

    def _data(self) -> torch.Tensor:
        return self.data

    def _aux_data(self, i: int) -> torch.Tensor:
        names = ["indices"] if _storage.stype(self) == "row_sparse" else ["indptr", "indices"]
        out: torch.Tensor = getattr(self, names[i])
        return out

    def _at(self, idx: Any) -> Any:
        from ..base import NotSupportedForSparseNDArray

        raise NotSupportedForSparseNDArray(self._at, "[idx]", idx)

    def _slice(self, start: Any, stop: Any) -> Any:
        from ..base import NotSupportedForSparseNDArray

        raise NotSupportedForSparseNDArray(self._slice, None, start, stop)

    def copyto(self, other: Any) -> Any:
        """Copy into ``other`` (a dense array, or one of this storage type, of the same shape;
        returns it) or to a new array of this storage type on the context ``other``."""
        if isinstance(other, torch.Tensor):
            if other is self:
                return other
            kind = _storage.stype(other)
            if kind not in ("default", _storage.stype(self)):
                raise TypeError(f"copyto: cannot copy a {_storage.stype(self)} array into a {kind} array; "
                                f"copy into a dense or {_storage.stype(self)} array, or use tostype")
            if tuple(other.shape) != tuple(self.shape):
                raise ValueError(f"copyto: target has shape {tuple(other.shape)}, the source "
                                 f"{tuple(self.shape)}; they must match")
            _store(other, self)
            return other
        from ..context import as_context

        ctx = as_context(other)
        with torch._C.DisableTorchFunctionSubclass():
            out = self.detach().to(ctx.torch_device, copy=True)
        out = as_sparse_ndarray(out)
        out._mx_ctx = ctx  # type: ignore[attr-defined]
        return out

    def __iadd__(self, other: Any) -> Any:  # type: ignore[misc]
        return _assign_result(self, self + other)

    def __isub__(self, other: Any) -> Any:  # type: ignore[misc]
        return _assign_result(self, self - other)

    def __imul__(self, other: Any) -> Any:  # type: ignore[misc]
        return _assign_result(self, self * other)

    def __itruediv__(self, other: Any) -> Any:  # type: ignore[misc]
        return _assign_result(self, self / other)


def _assign_result(target: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    _store(target, value)
    return target


def _only_whole_slice(key: Any, what: str) -> None:
    if isinstance(key, slice) and key.start is None and key.stop is None and key.step is None:
        return
    raise ValueError(f"{what} supports only x[:] (the whole array), got key {key!r}; convert it with "
                     "tostype('default') for other indexing")


def _value_array(value: Any, target: torch.Tensor) -> torch.Tensor:
    # a number fills every entry (MXNet refuses it for csr; the dense fallback gives it there too)
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, np.ndarray):
        fill = float(value)  # type: ignore[arg-type]
        return torch.full(tuple(target.shape), fill, dtype=target.dtype, device=target.device)
    if isinstance(value, (np.ndarray, list, tuple)):
        return torch.as_tensor(np.asarray(value), device=target.device)
    raise TypeError(f"x[:] = value: value must be an array, a numpy array or a number, got "
                    f"{type(value).__name__}")


class RowSparseNDArray(BaseSparseNDArray):  # type: ignore[metaclass]
    """MXNet's ``RowSparseNDArray``: the rows ``indices`` of an array hold ``data``; others are 0."""

    _stypes = ("row_sparse",)

    @property  # type: ignore[override]
    def data(self) -> torch.Tensor:
        """A copy of the stored rows, shape (nnz, \\*row_shape) (MXNet's ``data``)."""
        return new_ndarray(_storage.row_sparse_parts(self)[1].detach().clone())

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        _torch_data.__set__(self, value)

    @property
    def indices(self) -> torch.Tensor:  # type: ignore[override]
        """A copy of the stored row ids, int64, sorted (MXNet's ``indices``)."""
        return new_ndarray(_storage.row_sparse_parts(self)[0].clone())

    def __getitem__(self, key: Any) -> Any:
        _only_whole_slice(key, "RowSparseNDArray indexing")
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        _only_whole_slice(key, "RowSparseNDArray assignment")
        if value is not self:
            _store(self, _value_array(value, self))


class CSRNDArray(BaseSparseNDArray):  # type: ignore[metaclass]
    """MXNet's ``CSRNDArray``: row ``i`` holds ``data[indptr[i]:indptr[i+1]]`` at the columns
    ``indices[indptr[i]:indptr[i+1]]``."""

    _stypes = ("csr",)

    @property  # type: ignore[override]
    def data(self) -> torch.Tensor:
        """A copy of the stored values, 1-D (MXNet's ``data``)."""
        return new_ndarray(torch.Tensor.values(self).detach().clone())

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        _torch_data.__set__(self, value)

    @property
    def indices(self) -> torch.Tensor:  # type: ignore[override]
        """A copy of the column id of each stored value, int64 (MXNet's ``indices``)."""
        return new_ndarray(torch.Tensor.col_indices(self).clone())

    @property
    def indptr(self) -> torch.Tensor:
        """A copy of the row pointers, int64, num_rows + 1 entries (MXNet's ``indptr``)."""
        return new_ndarray(torch.Tensor.crow_indices(self).clone())

    def __getitem__(self, key: Any) -> Any:
        n = self.shape[0]
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            k = int(key) + n if key < 0 else int(key)
            if not 0 <= k < n:
                raise IndexError(f"index {key} is out of range for a csr array with {n} rows")
            return csr_rows(self, k, k + 1)
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise ValueError(f"a csr array takes only contiguous row slices x[a:b], got step {key.step}")
            if key.start is None and key.stop is None:
                return self
            start, stop, _ = key.indices(n)
            return csr_rows(self, start, max(start, stop))
        if isinstance(key, tuple) and 1 <= len(key) <= 2 and all(
                isinstance(k, slice) and k.step in (None, 1) for k in key):
            # x[a:b, c:d] (what mx.nd.slice asks for): a csr array, as MXNet's slice of a csr array
            rows = key[0].indices(n)
            cols = key[1].indices(self.shape[1]) if len(key) == 2 else (0, self.shape[1], 1)
            return csr_slice(self, rows[0], max(rows[0], rows[1]), cols[0], max(cols[0], cols[1]))
        if isinstance(key, tuple) and all(isinstance(k, slice) for k in key):
            return self.to_dense()[key]  # strided slices (mx.nd.slice with step=): MXNet's dense fallback
        if isinstance(key, tuple):
            raise ValueError("a csr array takes x[k], x[a:b] or x[a:b, c:d]; other indexing needs "
                             "tostype('default') first")
        raise ValueError(f"a csr array takes x[k] or x[a:b] (rows), got key of type {type(key).__name__}")

    def _take_rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``ids`` (int64, in range) as a csr array (``mx.nd.take(csr, ids)``)."""
        return csr_take_rows(self, ids)

    def __setitem__(self, key: Any, value: Any) -> None:
        _only_whole_slice(key, "CSRNDArray assignment")
        if value is not self:
            _store(self, _value_array(value, self))


def csr_rows(x: torch.Tensor, begin: int, end: int) -> torch.Tensor:
    """Rows ``begin:end`` of a csr array, as a csr array (no dense copy)."""
    with torch._C.DisableTorchFunctionSubclass():
        ptr, cols, vals = x.crow_indices(), x.col_indices(), x.values()
        lo, hi = int(ptr[begin]), int(ptr[end])
        new_ptr = ptr[begin:end + 1] - lo
        with _storage._quiet_csr():
            out = torch.sparse_csr_tensor(new_ptr, cols[lo:hi].clone(), vals[lo:hi].clone(),
                                          (end - begin, x.shape[1]), check_invariants=False)
    return as_sparse_ndarray(out)


def csr_slice(x: torch.Tensor, r0: int, r1: int, c0: int, c1: int) -> torch.Tensor:
    """``x[r0:r1, c0:c1]`` of a csr array, as a csr array."""
    rows = csr_rows(x, r0, r1)
    if (c0, c1) == (0, x.shape[1]):
        return rows
    with torch._C.DisableTorchFunctionSubclass():
        ptr, cols, vals = rows.crow_indices(), rows.col_indices(), rows.values()
        keep = (cols >= c0) & (cols < c1)
        counts = torch.zeros(r1 - r0 + 1, dtype=ptr.dtype, device=ptr.device)
        row_of = torch.repeat_interleave(torch.arange(r1 - r0, device=ptr.device), ptr[1:] - ptr[:-1])
        counts[1:] = torch.bincount(row_of[keep], minlength=r1 - r0)
        with _storage._quiet_csr():
            out = torch.sparse_csr_tensor(torch.cumsum(counts, 0), cols[keep] - c0, vals[keep],
                                          (r1 - r0, c1 - c0), check_invariants=False)
    return as_sparse_ndarray(out)


def csr_take_rows(x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Rows ``ids`` (int64, in range) of a csr array, in that order, as a csr array."""
    with torch._C.DisableTorchFunctionSubclass():
        ptr, cols, vals = x.crow_indices(), x.col_indices(), x.values()
        starts, counts = ptr[ids], ptr[ids + 1] - ptr[ids]
        new_ptr = torch.zeros(ids.numel() + 1, dtype=ptr.dtype, device=ptr.device)
        new_ptr[1:] = torch.cumsum(counts, 0)
        # the position in x of each entry of the result: its row's start plus its offset in the row
        first = torch.repeat_interleave(new_ptr[:-1], counts)
        offset = torch.arange(int(new_ptr[-1]), device=ptr.device) - first
        src = torch.repeat_interleave(starts, counts) + offset
        with _storage._quiet_csr():
            out = torch.sparse_csr_tensor(new_ptr, cols[src], vals[src], (ids.numel(), x.shape[1]),
                                          check_invariants=False)
    return as_sparse_ndarray(out)


_CLASS_OF = {"row_sparse": RowSparseNDArray, "csr": CSRNDArray}

SparseNDArray = BaseSparseNDArray
"""The former name of :class:`BaseSparseNDArray` (every sparse array mxtorch makes is one)."""


def as_sparse_ndarray(t: torch.Tensor) -> torch.Tensor:
    """``t`` in its MXNet sparse class (the same storage) when it is sparse, else ``t``.  A tensor in
    the autograd graph stays in it (its class changed by an identity node)."""
    if t.layout == torch.strided or issubclass(type(t), BaseSparseNDArray):
        return t
    if t.grad_fn is not None:
        out: torch.Tensor = _InSparseClass.apply(t)
        return out
    cls = _CLASS_OF.get(_kind(t) or "", BaseSparseNDArray)
    return torch.Tensor._make_subclass(cls, t, t.requires_grad)


class _InSparseClass(torch.autograd.Function):
    """Identity that hands back its sparse input in MXNet's sparse class: ``_make_subclass`` makes a
    new leaf and ``as_subclass`` refuses sparse storage, so a graph node gets its class here."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        cls = _CLASS_OF.get(_kind(t) or "", BaseSparseNDArray)
        return torch.Tensor._make_subclass(cls, t.detach(), False)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad


def assign(target: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Write ``value`` into ``target`` in ``target``'s storage type (``value.copyto(target)``)."""
    _store(target, value)
    return target


def _rebuild(kind: str, parts: tuple[torch.Tensor, ...], shape: tuple[int, ...]) -> torch.Tensor:
    if kind == "row_sparse":
        return _storage.from_row_parts(parts[0], parts[1], shape)
    with _storage._quiet_csr():
        t = torch.sparse_csr_tensor(parts[0], parts[1], parts[2], shape, check_invariants=True)
    return as_sparse_ndarray(t)


def _install_rules() -> None:
    # the dense NDArray's method rules (norm(axis=), clip(a_min, a_max) ...); indexing is MXNet's own
    for name, rule in _mxnet_methods._rules().items():
        if name not in ("__getitem__", "__itruediv__"):  # MXNet's own below
            setattr(BaseSparseNDArray, name, rule)


_install_rules()

