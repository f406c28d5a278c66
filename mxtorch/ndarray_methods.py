"""MXNet's NDArray methods on ``torch.Tensor`` (``x.asnumpy()``, ``x.as_in_context(ctx)`` ...).

mxtorch tensors are plain ``torch.Tensor`` objects.  Code written for MXNet calls methods that
torch does not have; ``import mxtorch`` calls :func:`enable`, which adds exactly those (set
``MXTORCH_TENSOR_METHODS=0`` before the import to leave torch.Tensor untouched; :func:`disable`
removes them again)::

    x.asnumpy(); x.asscalar(); x.as_in_context(mx.gpu(0)); x.context; x.attach_grad()
    x.copy(); x.one_hot(10); x.pick(idx); x.slice_axis(axis=1, begin=0, end=2); x.tostype('csr')

Only names torch does not define are added; adding attributes costs torch's own calls nothing
(bench/tensor_methods.py).  Where torch already has the name (``size``, ``reshape``,
``flatten``, ``split``, ``sum``, ``dtype`` ...), torch's meaning stays: :data:`COLLISIONS`
lists each one with MXNet's meaning and where to get it (usually the ``mxtorch.nd``
function of the same name), and docs/migrating.md's table shows them.
The functions are also usable directly: ``ndarray_methods.asnumpy(x)``.

Sparse arrays (:mod:`mxtorch.nd.sparse`) get ``x.stype``, ``x.tostype(...)``, ``x.retain``,
``x.asscipy()``, ``x.check_format()`` and, for csr, ``x.indptr``.  The sparse arrays MXNet's API
makes (``RowSparseNDArray``, ``CSRNDArray``) also give ``x.data`` and ``x.indices`` MXNet's meaning;
on a plain torch sparse tensor they stay torch's (``mx.nd.sparse.data(x)``, ``indices(x)`` give MXNet's).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

import numpy as np
import torch

from . import _mxnet_methods, _recording, _tensor_overrides
from ._array_exchange import asnumpy, to_dlpack_for_read, to_dlpack_for_write, wait_to_read, wait_to_write
from ._dtype import to_torch_dtype
from .context import Context, as_context, context_of

__all__ = [
    "COLLISIONS",
    "ELEMENTWISE_SAME",
    "enable",
    "disable",
    "set_numpy_assignment",
    "numpy_assignment_enabled",
    "set_mxnet_methods",
    "mxnet_methods_enabled",
    "is_enabled",
    "added_names",
    "asnumpy",
    "asscalar",
    "as_in_context",
    "wait_to_read",
    "wait_to_write",
    "astype",
    "copyto",
    "attach_grad",
    "tostype",
    "stype",
    "indptr",
]

_GRAD_REQS = ("write", "add", "null")


def asscalar(self: torch.Tensor) -> Any:
    """The single element as a numpy scalar; an error if the tensor has more than one element."""
    if self.numel() != 1:
        raise ValueError(f"asscalar needs an array with exactly one element, got shape {tuple(self.shape)}")
    return asnumpy(self).reshape(())[()]


def as_in_context(self: torch.Tensor, context: Context | str | torch.device) -> torch.Tensor:
    """The tensor itself if it already belongs to ``context``, else a copy there (tagged with it)."""
    ctx = as_context(context)
    if context_of(self) == ctx:
        return self
    out = self.to(ctx.torch_device, copy=True)
    out._mx_ctx = ctx  # type: ignore[attr-defined]
    return out


def _context(self: torch.Tensor) -> Context:
    """The MXNet context this tensor belongs to."""
    return context_of(self)


def astype(self: torch.Tensor, dtype: Any, copy: bool = True) -> torch.Tensor:
    """The tensor converted to ``dtype``; with ``copy=False`` the tensor itself when it matches."""
    dt = to_torch_dtype(dtype, None)
    if dt == self.dtype and not copy:
        return self
    return self.to(dt, copy=True)


def copyto(self: torch.Tensor, other: torch.Tensor | Context | str) -> torch.Tensor:
    """Copy into the tensor ``other`` (same shape; returns it) or to a new tensor on a context."""
    if isinstance(other, torch.Tensor):
        if other is self:
            return other
        if tuple(other.shape) != tuple(self.shape):
            raise ValueError(
                f"copyto: target has shape {tuple(other.shape)}, the source {tuple(self.shape)}; "
                "they must match"
            )
        if other.layout != torch.strided or self.layout != torch.strided:
            from .nd._sparse_ndarray import assign  # in the target's storage type (MXNet's copyto)

            return assign(other, self)
        with torch.no_grad():
            other.copy_(self)
        return other
    ctx = as_context(other)
    out = self.detach().to(ctx.torch_device, copy=True)
    out._mx_ctx = ctx  # type: ignore[attr-defined]
    return out


def _zero_grad(t: torch.Tensor, grad_stype: str | None) -> torch.Tensor:
    from .nd import sparse

    kind = grad_stype or sparse.stype(t)
    if kind == "default":
        from .nd._ndarray_type import NDArray, new_ndarray

        grad = torch.zeros(t.shape, dtype=t.dtype, device=t.device)
        return new_ndarray(grad) if type(t) is NDArray else grad  # an MXNet array's gradient is one too
    return sparse.zeros(kind, tuple(t.shape), ctx=context_of(t), dtype=t.dtype)


def _keep_grad_buffer(t: torch.Tensor) -> None:
    # after torch accumulated a backward's gradient into t.grad: MXNet's gradient array is the
    # buffer attach_grad / mark_variables gave (in its storage type); torch may have replaced
    # t.grad by a new tensor (a sparse variable, a buffer of another layout), so write the
    # value back into the buffer
    t._mx_fresh = True  # type: ignore[attr-defined]
    buf = getattr(t, "_mx_grad_buf", None)
    from .nd import grad_storage

    if buf is not None and grad_storage.holds_grad(t):  # a gradient array torch cannot attach to t
        t._mx_grad_buf = grad_storage.take_backward_gradient(t, buf)  # type: ignore[attr-defined]
        return
    g = t.grad
    if buf is None or g is None or g is buf:
        return
    from .nd import sparse

    with torch.no_grad():
        if buf.layout == torch.strided:
            buf.copy_(g.to_dense() if g.layout != torch.strided else g)
        else:
            value = sparse.tostype(g.to_dense() if g.layout != torch.strided else g, sparse.stype(buf))
            try:
                buf.copy_(value)
            except RuntimeError:  # a csr buffer cannot change its number of stored values in place
                t._mx_grad_buf = buf = value  # type: ignore[attr-defined]
    t.grad = buf


def _fresh_grad_get(self: torch.Tensor) -> bool:
    return bool(getattr(self, "_mx_fresh", False))


def _fresh_grad_set(self: torch.Tensor, value: bool) -> None:
    self._mx_fresh = bool(value)  # type: ignore[attr-defined]


def attach_grad(self: torch.Tensor, grad_req: str = "write", stype: Any = None) -> None:
    """Make the tensor a variable to differentiate against, with a zero gradient array.

    ``grad_req`` ('write', 'add' or 'null') is kept in ``_mx_grad_req``; mxtorch.autograd
    reads it to decide whether a new backward overwrites or adds to ``.grad``.  ``stype``
    ('default', 'row_sparse' or 'csr'; default: the array's own) is the gradient's storage
    type, kept across backward passes.  A non-leaf tensor is detached in place first (it
    becomes a new leaf, as in MXNet).
    """
    if grad_req not in _GRAD_REQS:
        raise ValueError(f"attach_grad: grad_req must be one of {_GRAD_REQS}, got {grad_req!r}")
    if stype not in (None, "default", "row_sparse", "csr"):
        raise ValueError(f"attach_grad: stype must be 'default', 'row_sparse' or 'csr', got {stype!r}")
    if grad_req == "null":
        if not self.is_leaf:
            self.detach_()
        self.requires_grad_(False)
        self.grad = None
    else:
        if not (self.is_floating_point() or self.is_complex()):
            raise TypeError(f"attach_grad needs a floating-point tensor, got dtype {self.dtype}")
        if not self.is_leaf:
            self.detach_()
        self.requires_grad_(True)
        from .nd import grad_storage

        grad_storage.set_grad(self, _zero_grad(self, stype))
        self._mx_grad_buf = self.grad  # type: ignore[attr-defined]
        self._mx_fresh = False  # type: ignore[attr-defined]
        if not getattr(self, "_mx_write_hook", False):
            self.register_hook(_write_rule(weakref.ref(self)))
            self.register_post_accumulate_grad_hook(_keep_grad_buffer)
            self._mx_write_hook = True  # type: ignore[attr-defined]
    self._mx_grad_req = grad_req  # type: ignore[attr-defined]


def _write_rule(ref: weakref.ref[torch.Tensor]) -> Any:
    # grad_req='write': a backward replaces .grad instead of adding to it (MXNet's rule); the
    # hook sees the gradient just before torch accumulates it (not for autograd.grad calls)
    def hook(g: torch.Tensor) -> torch.Tensor:
        t = ref()
        if t is not None and t.grad is not None and getattr(t, "_mx_grad_req", None) == "write":
            if not _recording.grad_only.depth:
                t.grad.zero_()
        return g

    return hook


def tostype(self: torch.Tensor, stype: str) -> torch.Tensor:
    """The tensor in storage type ``stype`` ('default', 'row_sparse' or 'csr'; see mxtorch.nd.sparse).

    The tensor itself when it already has that storage type.
    """
    from .nd import sparse

    return sparse.tostype(self, stype)


def stype(self: torch.Tensor) -> str:
    """MXNet's storage type: 'default' (dense), 'row_sparse' (COO, one sparse dim) or 'csr'."""
    from .nd import sparse

    return sparse.stype(self)


def indptr(self: torch.Tensor) -> torch.Tensor:
    """Row pointers of a csr matrix (``crow_indices()``); an error for other storage types."""
    from .nd import sparse

    return sparse.indptr(self)


def copy(self: torch.Tensor) -> torch.Tensor:
    """A new tensor with the same values on the same context (MXNet's ``x.copy()``; not recorded)."""
    return copyto(self, context_of(self))


def as_nd_ndarray(self: torch.Tensor) -> torch.Tensor:
    """The tensor itself: mxtorch has one array type for MXNet's ``mx.nd`` and ``mx.np`` front ends."""
    return self


def slice_assign_scalar(
    self: torch.Tensor, value: float, begin: Any, end: Any, step: Any = ()
) -> torch.Tensor:
    """Write ``value`` into ``self[begin:end:step]`` in place; returns the tensor (MXNet's method)."""
    with torch.no_grad():
        self[_slices(self, begin, end, step)] = value
    return self


def slice_assign(self: torch.Tensor, rhs: Any, begin: Any, end: Any, step: Any = ()) -> torch.Tensor:
    """Write ``rhs`` into ``self[begin:end:step]`` in place; returns the tensor (MXNet's method)."""
    with torch.no_grad():
        self[_slices(self, begin, end, step)] = rhs if isinstance(rhs, torch.Tensor) else torch.as_tensor(rhs)
    return self


def _slices(t: torch.Tensor, begin: Any, end: Any, step: Any) -> tuple[slice, ...]:
    begin, end, step = tuple(begin), tuple(end), tuple(step or ())
    if len(begin) != len(end) or len(begin) > t.dim() or len(step) not in (0, len(begin)):
        raise ValueError(
            f"slice_assign: begin {begin}, end {end} and step {step} must have one entry per sliced axis "
            f"(at most {t.dim()}), step may be empty"
        )
    steps = step or (None,) * len(begin)
    return tuple(slice(b, e, s) for b, e, s in zip(begin, end, steps))


def asscipy(self: torch.Tensor) -> Any:
    """A csr matrix as a ``scipy.sparse.csr_matrix`` (MXNet's ``CSRNDArray.asscipy``)."""
    from .nd import sparse

    if sparse.stype(self) != "csr":
        raise ValueError(f"asscipy needs a csr matrix, got storage type {sparse.stype(self)!r}; "
                         "convert it with x.tostype('csr')")
    import scipy.sparse

    t = self.detach().cpu()
    vals = t.values()
    if vals.dtype == torch.bfloat16:
        vals = vals.float()
    return scipy.sparse.csr_matrix(
        (vals.numpy(), t.col_indices().numpy(), t.crow_indices().numpy()), shape=tuple(t.shape)
    )


def check_format(self: torch.Tensor, full_check: bool = True) -> None:
    """Raise ``ValueError`` unless the sparse array is well formed (sorted, in-range indices).

    A dense tensor is always well formed.  ``full_check=False`` checks only the shapes of the parts.
    """
    from .nd import sparse

    kind = sparse.stype(self)
    if kind == "default":
        return
    idx = sparse.indices(self)
    if kind == "row_sparse":
        rows = sparse.data(self)
        if rows.shape[0] != idx.shape[0] or tuple(rows.shape[1:]) != tuple(self.shape[1:]):
            raise ValueError(f"row_sparse array: {idx.shape[0]} row ids for data of shape "
                             f"{tuple(rows.shape)}")
        if full_check and idx.numel():
            if bool((idx[1:] <= idx[:-1]).any()) or int(idx.min()) < 0 or int(idx.max()) >= self.shape[0]:
                raise ValueError(f"row_sparse array: row ids {idx.tolist()} are not sorted, unique and "
                                 f"within [0, {self.shape[0]})")
        return
    ptr = self.crow_indices()
    if ptr.numel() != self.shape[0] + 1 or int(ptr[-1]) != idx.numel():
        raise ValueError(f"csr matrix: indptr has {ptr.numel()} entries ending at {int(ptr[-1])} for "
                         f"{self.shape[0]} rows and {idx.numel()} values")
    if full_check:
        if bool((ptr[1:] < ptr[:-1]).any()):
            raise ValueError("csr matrix: indptr is not non-decreasing")
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.shape[1]):
            raise ValueError(f"csr matrix: a column index is outside [0, {self.shape[1]})")
        for r in range(self.shape[0]):
            cols = idx[int(ptr[r]):int(ptr[r + 1])]
            if bool((cols[1:] <= cols[:-1]).any()):
                raise ValueError(f"csr matrix: the column indices of row {r} are not sorted and unique")


def retain(self: torch.Tensor, indices: Any) -> torch.Tensor:
    """The row_sparse array keeping only the listed rows (MXNet's ``RowSparseNDArray.retain``)."""
    from .nd import sparse

    return sparse.retain(self, indices)


def expand_dims(self: torch.Tensor, axis: int, inplace: bool = False) -> torch.Tensor:
    """The array with a size-1 axis inserted at ``axis``: a copy, or with ``inplace`` a view that
    shares this array's memory (MXNet's method)."""
    from .nd._shape import expand_dims as nd_expand_dims

    view = nd_expand_dims(self, axis)
    return view if inplace else view.clone()


def _basic_indexing_slice_is_contiguous(slc_key: Any, shape: Any) -> bool:
    """Whether basic indexing ``x[slc_key]`` (ints and slices) of a C-contiguous array of ``shape``
    gives a C-contiguous view (numpy's rule: size-1 axes do not matter, an empty result is
    contiguous)."""
    key = slc_key if isinstance(slc_key, tuple) else (slc_key,)
    dims = [int(n) for n in shape]
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    out: list[tuple[int, int]] = []
    for i, n in enumerate(dims):
        k = key[i] if i < len(key) else slice(None)
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            out.append((len(range(start, stop, step)), strides[i] * step))
        elif not isinstance(k, (int, np.integer)):
            raise TypeError(f"basic indexing takes ints and slices, got {type(k).__name__}")
    if any(size == 0 for size, _ in out):
        return True
    expected = 1
    for size, stride in reversed(out):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


# MXNet NDArray methods that are mx.nd operators applied to the array itself
# (x.one_hot(3) is mx.nd.one_hot(x, 3)); only names torch.Tensor does not define are added.
_ND_OPERATOR_METHODS = (
    "reshape_like", "zeros_like", "ones_like", "broadcast_axes", "broadcast_like", "pad", "split_v2",
    "slice", "slice_axis", "slice_like", "one_hot", "pick", "argmax_channel", "shape_array",
    "size_array", "depth_to_space", "space_to_depth", "nanprod", "rint", "degrees",
    "radians", "cbrt", "rcbrt", "softmin",
)


def _nd_method(name: str) -> Any:
    def method(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        from . import nd

        return getattr(nd, name)(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"MXNet's ``x.{name}(...)``: ``mxtorch.nd.{name}(x, ...)``."
    return method


def _table() -> dict[str, Any]:
    ctx_prop = property(_context, doc="The MXNet context this tensor belongs to (see mxtorch.context).")
    table: dict[str, Any] = {
        "asnumpy": asnumpy,
        "asscalar": asscalar,
        "as_in_context": as_in_context,
        "context": ctx_prop,
        "ctx": ctx_prop,
        "wait_to_read": wait_to_read,
        "wait_to_write": wait_to_write,
        "astype": astype,
        "copyto": copyto,
        "copy": copy,
        "attach_grad": attach_grad,
        "tostype": tostype,
        "stype": property(stype, doc="MXNet's storage type: 'default', 'row_sparse' or 'csr'."),
        "indptr": property(indptr, doc="Row pointers of a csr matrix (MXNet's CSRNDArray.indptr)."),
        "as_nd_ndarray": as_nd_ndarray,
        "as_np_ndarray": as_nd_ndarray,
        "slice_assign_scalar": slice_assign_scalar,
        "slice_assign": slice_assign,
        "to_dlpack_for_read": to_dlpack_for_read,
        "to_dlpack_for_write": to_dlpack_for_write,
        "asscipy": asscipy,
        "check_format": check_format,
        "retain": retain,
        "expand_dims": expand_dims,
        "_fresh_grad": property(
            _fresh_grad_get, _fresh_grad_set,
            doc="Whether a backward wrote this variable's gradient since it was last reset."),
        "_basic_indexing_slice_is_contiguous": staticmethod(_basic_indexing_slice_is_contiguous),
    }
    for name in _ND_OPERATOR_METHODS:
        table[name] = _nd_method(name)
    return table


# Every MXNet NDArray method or property whose name torch.Tensor already defines, with what
# MXNet's does and how mxtorch resolves it.  torch's own method always stays (replacing it, even
# by a thin Python wrapper that falls back to MXNet's meaning only for input torch rejects, costs
# every torch caller: bench/tensor_methods.py measures 1.3x on reshape); where the meanings
# differ, the mx.nd function gives MXNet's.  The table in docs/migrating.md lists
# these rows; tests keep the two in step.
COLLISIONS: dict[str, tuple[str, str]] = {
    "size": ("int property: the element count", "torch's method x.size(); MXNet's value is x.numel()"),
    "shape": ("tuple", "torch.Size, a tuple subclass: compares equal to MXNet's tuple"),
    "ndim": ("int", "the same (torch's)"),
    "dtype": ("numpy type (np.float32)", "torch dtype; x.asnumpy().dtype or mxtorch.nd.ndarray "
              "dtype tables give numpy's; mx.nd functions accept both"),
    "T": ("all axes reversed", "the same (torch's; torch warns for ndim != 2)"),
    "grad": ("gradient buffer after attach_grad()", "the same (torch's .grad, filled by backward)"),
    "detach": ("array cut from the graph", "the same (torch's)"),
    "backward": ("backward(out_grad=None, retain_graph=False, train_mode=True)",
                 "torch's backward(gradient, retain_graph); mxtorch.autograd supplies MXNet's "
                 "ones for a non-scalar head"),
    "reshape": ("codes 0/-1/-2/-3/-4, reverse=, shape= keyword", "torch's (-1 and shape= work); "
                "MXNet's codes: mx.nd.reshape(x, shape)"),
    "flatten": ("(d0, d1*...*dn): keeps the first axis", "torch's (all axes to 1-D); MXNet's: "
                "mx.nd.flatten(x) or x.flatten(1)"),
    "split": ("split(num_outputs, axis=1, squeeze_axis): that many pieces", "torch's split(size, dim): "
              "pieces of that size; MXNet's: mx.nd.split(x, num_outputs, axis)"),
    "repeat": ("repeat(repeats, axis=None): each element repeated (numpy's repeat)",
               "torch's repeat (tiles the array); MXNet's: mx.nd.repeat or x.repeat_interleave"),
    "take": ("take(indices, axis=0, mode='clip'): rows", "torch's take (flat indices); MXNet's: "
             "mx.nd.take(x, indices)"),
    "sort": ("sort(axis=-1, is_ascend=True): the sorted array", "torch's sort returns (values, indices); "
             "MXNet's: mx.nd.sort"),
    "topk": ("topk(axis=-1, k=1, ret_typ='indices'): float32 indices", "torch's topk(k) returns "
             "(values, indices); MXNet's: mx.nd.topk"),
    "argsort": ("float32 indices", "torch's (int64 indices, same order); MXNet's dtype: mx.nd.argsort"),
    "argmax": ("float32 index, shape (1,) without axis", "torch's (int64, 0-d); MXNet's: mx.nd.argmax"),
    "argmin": ("float32 index, shape (1,) without axis", "torch's (int64, 0-d); MXNet's: mx.nd.argmin"),
    "max": ("max(axis, keepdims, exclude): the array", "torch's (with dim: (values, indices)); MXNet's: "
            "mx.nd.max"),
    "min": ("min(axis, keepdims, exclude): the array", "torch's (with dim: (values, indices)); MXNet's: "
            "mx.nd.min"),
    "sum": ("full sum has shape (1,); exclude=", "torch's (0-d; axis=/keepdims= accepted); MXNet's: "
            "mx.nd.sum"),
    "mean": ("integer arrays give a truncated integer mean", "torch's (refuses integers); MXNet's: "
             "mx.nd.mean"),
    "prod": ("prod(axis, keepdims, exclude)", "torch's prod(dim) (one axis); MXNet's: mx.nd.prod"),
    "nansum": ("shape (1,) full sum", "torch's (0-d); MXNet's: mx.nd.nansum"),
    "norm": ("norm(ord=2, axis, keepdims), shape (1,)", "torch's norm(p, dim) (0-d, same value); MXNet's: "
             "mx.nd.norm"),
    "round": ("halves away from zero (-2.5 -> -3)", "torch's (halves to even); MXNet's: mx.nd.round"),
    "clip": ("clip(a_min, a_max)", "torch's clip(min, max): the same positionally"),
    "transpose": ("transpose(axes=None): all axes, reversed by default", "torch's transpose(dim0, dim1); "
                  "MXNet's: mx.nd.transpose(x, axes) or x.permute(...)"),
    "squeeze": ("all size-1 axes; an all-ones shape gives (1,)", "torch's (0-d for an all-ones shape); "
                "MXNet's: mx.nd.squeeze"),
    "softmax": ("softmax(axis=-1)", "torch's softmax(dim) needs the axis; MXNet's: mx.nd.softmax"),
    "log_softmax": ("log_softmax(axis=-1)", "torch's log_softmax(dim) needs the axis; MXNet's: "
                    "mx.nd.log_softmax"),
    "tile": ("tile(reps)", "the same (torch's tile(dims))"),
    "swapaxes": ("swapaxes(dim1, dim2)", "the same positionally (torch's)"),
    "flip": ("flip(axis)", "the same (torch's flip(dims) takes an int)"),
    "diag": ("diag(k=0)", "the same for 1-D and 2-D (torch's); axis1/axis2: mx.nd.diag"),
    "broadcast_to": ("broadcast_to(shape): a new array", "torch's (a view, same values)"),
    "abs": ("elementwise", "the same (torch's)"),
    "sign": ("elementwise", "the same (torch's)"),
    "fix": ("round toward zero", "the same (torch's)"),
    "floor": ("elementwise", "the same (torch's); likewise ceil, trunc, sin ... sqrt, rsqrt, square, "
              "reciprocal, relu, sigmoid"),
    "data": ("sparse: the stored values", "MXNet's on the sparse arrays MXNet's API makes (RowSparseNDArray, "
             "CSRNDArray: a copy of the values); torch's .data on torch tensors; mx.nd.sparse.data(x) for "
             "any"),
    "indices": ("sparse: row ids / column ids", "MXNet's on RowSparseNDArray / CSRNDArray; torch's indices() "
                "method on torch's COO tensors; mx.nd.sparse.indices(x) for any"),
    "__eq__": ("==, <, ... give 1/0 in the array's dtype", "torch's (bool); MXNet's: mx.nd.equal etc."),
    "__truediv__": ("int32 / int32 stays int32 (truncates)", "torch's (true division, float); MXNet's: "
                    "mx.nd.divide"),
    "__setitem__": ("x[k] = v takes numpy arrays, numpy scalars and lists too", "torch's (it refuses them); "
                    "MXNet's with MXTORCH_NUMPY_SETITEM=1 or ndarray_methods.set_numpy_assignment()"),
    "__setstate__": ("loads MXNet's pickled state {'handle': raw bytes}", "torch's, extended: MXNet's state "
                     "loads into the tensor (mxtorch._tensor_overrides)"),
}
"""MXNet NDArray names torch.Tensor already has: name -> (MXNet's meaning, mxtorch's resolution).
MXNet method mode (:func:`set_mxnet_methods`) gives MXNet's meaning to the names in
:data:`mxtorch._mxnet_methods.RULES` and says how for each."""

ELEMENTWISE_SAME = (
    "ceil", "trunc", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "exp", "expm1", "log", "log10", "log2", "log1p", "sqrt", "rsqrt", "square",
    "reciprocal", "relu", "sigmoid",
)
"""MXNet elementwise methods torch has with the same meaning (docs/migrating.md's ``floor`` row)."""


_lock = threading.Lock()
MXTORCH_NUMPY_SETITEM = "MXTORCH_NUMPY_SETITEM"  # documented in mxtorch.distributed.env
MXTORCH_MXNET_METHODS = "MXTORCH_MXNET_METHODS"  # documented in mxtorch.distributed.env
_added: dict[str, Any] = {}
_enabled = False
_numpy_assignment = False  # asked for on its own (set_numpy_assignment / MXTORCH_NUMPY_SETITEM)


def _switch(var: str, what_on: str) -> bool:
    raw = os.environ.get(var, "0").strip().lower()
    if raw in ("0", "false", "no", "off", ""):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{var}={raw!r} is not understood: set it to 1 ({what_on}) or 0 (torch's own methods, "
                     "the default)")


def _numpy_assignment_wanted() -> bool:
    return _switch(MXTORCH_NUMPY_SETITEM, "x[k] = v takes numpy arrays, numpy scalars and lists, MXNet's "
                   "rule")


def _mxnet_methods_wanted() -> bool:
    return _switch(MXTORCH_MXNET_METHODS, "MXNet's meaning for x.size, x.reshape(0, -1), bool(x) ... and "
                   "x[k] = numpy values: mxtorch._mxnet_methods")


def enable(numpy_assignment: bool | None = None, mxnet_methods: bool | None = None) -> list[str]:
    """Add the MXNet methods torch.Tensor lacks, MXNet's rule for ``backward()`` on a non-scalar
    head (:func:`mxtorch.autograd.install_backward`) and for loading MXNet's pickled NDArray state;
    idempotent.  Returns the names added.

    ``numpy_assignment`` (default: ``MXTORCH_NUMPY_SETITEM``, off) also gives ``x[k] = v`` MXNet's
    rule for numpy arrays, numpy scalars and lists (:func:`set_numpy_assignment`); ``mxnet_methods``
    (default: ``MXTORCH_MXNET_METHODS``, off) turns on MXNet method mode (:func:`set_mxnet_methods`).
    Both are off by default because every call of plain torch code would pay for them."""
    global _enabled
    with _lock:
        if not _enabled:
            _recording.install_backward(True)
            _tensor_overrides.install_setstate(True)
            for name, obj in _table().items():
                if hasattr(torch.Tensor, name):
                    continue
                setattr(torch.Tensor, name, obj)
                _added[name] = obj
            _enabled = True
    if numpy_assignment is None:
        numpy_assignment = _numpy_assignment_wanted()
    if numpy_assignment:
        set_numpy_assignment(True)
    if mxnet_methods is None:
        mxnet_methods = _mxnet_methods_wanted()
    if mxnet_methods:
        set_mxnet_methods(True)
    from . import numpy_dtypes  # MXTORCH_NUMPY_DTYPES=1: torch dtypes equal numpy's types

    numpy_dtypes.set_from_environment()
    return sorted(_added)


def set_numpy_assignment(on: bool = True) -> None:
    """``x[k] = v`` takes numpy arrays, numpy scalars and lists as MXNet's NDArray did (``on``), or
    torch's own assignment (the default: torch refuses them, and costs nothing extra).

    The switch is process-wide (it changes ``torch.Tensor.__setitem__``); ``MXTORCH_NUMPY_SETITEM=1``
    turns it on at ``import mxtorch``; MXNet method mode (:func:`set_mxnet_methods`) includes it.
    ``bench/tensor_methods.py`` measures its cost."""
    global _numpy_assignment
    _numpy_assignment = bool(on)
    _tensor_overrides.install_setitem(_numpy_assignment or _mxnet_methods.installed())


def numpy_assignment_enabled() -> bool:
    """True while ``x[k] = v`` follows MXNet's rule (:func:`set_numpy_assignment`)."""
    return _tensor_overrides.setitem_installed()


def set_mxnet_methods(on: bool = True) -> None:
    """MXNet method mode (``on``): MXNet's meaning for the NDArray methods torch.Tensor also defines
    (``x.size`` is the element count, ``x.reshape(0, -1)``, ``x.mean(axis=1, exclude=True)``,
    ``x.squeeze(inplace=True)``, ``bool(x)``, ``int / int`` ...: :data:`mxtorch._mxnet_methods.RULES`)
    and MXNet's assignment rule; off: torch's own methods (the default).

    A call torch accepts keeps torch's result unless it is spelled as only MXNet code spells it
    (``axis=``, ``exclude=`` ...), so torch code in the same process keeps working, but every such
    torch method then costs a Python call (``bench/tensor_methods.py --mxnet-mode``).  Process-wide;
    ``MXTORCH_MXNET_METHODS=1`` turns it on at ``import mxtorch``."""
    if on:
        from . import nd  # noqa: F401 - the rules call its operators (it hands them to _mxnet_methods)
    _mxnet_methods.install(bool(on))
    _tensor_overrides.install_setitem(bool(on) or _numpy_assignment)


def mxnet_methods_enabled() -> bool:
    """True while MXNet method mode is on (:func:`set_mxnet_methods`)."""
    return _mxnet_methods.installed()


def disable() -> None:
    """Remove exactly what :func:`enable` added, MXNet's assignment rule and method mode included
    (a no-op when not enabled)."""
    global _enabled, _numpy_assignment
    with _lock:
        _numpy_assignment = False
        if _enabled:
            _recording.install_backward(False)
            _tensor_overrides.install(False)
            _mxnet_methods.install(False)
        for name, obj in _added.items():
            if torch.Tensor.__dict__.get(name) is obj:
                delattr(torch.Tensor, name)
        _added.clear()
        _enabled = False


def is_enabled() -> bool:
    """True between :func:`enable` and :func:`disable`."""
    return _enabled


def added_names() -> list[str]:
    """The names :func:`enable` added to torch.Tensor (empty when disabled)."""
    return sorted(_added)
