"""Opt-in MXNet NDArray methods on ``torch.Tensor`` (``x.asnumpy()``, ``x.as_in_context(ctx)`` ...).

mxtorch tensors are plain ``torch.Tensor`` objects.  Code written for MXNet calls methods that
torch does not have; :func:`enable` adds exactly those, and :func:`disable` removes them again::

    from mxtorch import ndarray_methods
    ndarray_methods.enable()
    x.asnumpy(); x.asscalar(); x.as_in_context(mx.gpu(0)); x.context; x.attach_grad()

Only names torch does not already define are added, so torch's own ``size``, ``shape``, ``T``,
``grad``, ``reshape``, ``flatten`` ... keep torch's meaning (note: ``x.size`` is torch's method,
not MXNet's int property, and ``x.reshape`` does not read MXNet's special codes; use
``mxtorch.nd.reshape`` for those).  The functions are also usable directly:
``ndarray_methods.asnumpy(x)``.

Sparse arrays (:mod:`mxtorch.nd.sparse`) get ``x.stype``, ``x.tostype(...)`` and, for csr,
``x.indptr``.  MXNet's ``x.data`` and ``x.indices`` keep torch's meaning (torch already has
them: ``x.values()`` and ``x.indices()`` / ``x.col_indices()``); use
``mx.nd.sparse.data(x)`` and ``mx.nd.sparse.indices(x)`` for MXNet's.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import torch

from ._dtype import to_torch_dtype
from .context import Context, as_context, context_of

__all__ = [
    "enable",
    "disable",
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


def asnumpy(self: torch.Tensor) -> np.ndarray:
    """A detached copy of the tensor as a numpy array on the CPU (bfloat16 becomes float32).

    A sparse tensor (row_sparse, csr) gives its dense value, as MXNet's ``asnumpy`` does.
    """
    t = self.detach()
    fresh = t.layout != torch.strided  # to_dense() already made a new tensor
    if fresh:
        t = t.to_dense()
    if t.dtype == torch.bfloat16:
        t = t.float()
    arr = t.cpu().numpy()
    return arr.copy() if not fresh and self.device.type == "cpu" and t.dtype == self.dtype else arr


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


def wait_to_read(self: torch.Tensor) -> None:
    """Block until pending device work that writes this tensor is done (CUDA synchronise)."""
    if self.device.type == "cuda":
        torch.cuda.synchronize(self.device)


def wait_to_write(self: torch.Tensor) -> None:
    """Block until pending device work on this tensor is done (CUDA synchronise)."""
    wait_to_read(self)


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
        with torch.no_grad():
            other.copy_(self)
        return other
    ctx = as_context(other)
    out = self.detach().to(ctx.torch_device, copy=True)
    out._mx_ctx = ctx  # type: ignore[attr-defined]
    return out


def attach_grad(self: torch.Tensor, grad_req: str = "write", stype: Any = None) -> None:
    """Make the tensor a variable to differentiate against, with a zero ``.grad``.

    ``grad_req`` ('write', 'add' or 'null') is kept in ``_mx_grad_req``; mxtorch.autograd
    reads it to decide whether a new backward overwrites or adds to ``.grad``.  A non-leaf
    tensor is detached in place first (it becomes a new leaf, as in MXNet).
    """
    if grad_req not in _GRAD_REQS:
        raise ValueError(f"attach_grad: grad_req must be one of {_GRAD_REQS}, got {grad_req!r}")
    if stype not in (None, "default"):
        raise ValueError(f"attach_grad: only stype 'default' is supported, got {stype!r}")
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
        self.grad = torch.zeros_like(self)
    self._mx_grad_req = grad_req  # type: ignore[attr-defined]


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


def _table() -> dict[str, Any]:
    ctx_prop = property(_context, doc="The MXNet context this tensor belongs to (see mxtorch.context).")
    return {
        "asnumpy": asnumpy,
        "asscalar": asscalar,
        "as_in_context": as_in_context,
        "context": ctx_prop,
        "ctx": ctx_prop,
        "wait_to_read": wait_to_read,
        "wait_to_write": wait_to_write,
        "astype": astype,
        "copyto": copyto,
        "attach_grad": attach_grad,
        "tostype": tostype,
        "stype": property(stype, doc="MXNet's storage type: 'default', 'row_sparse' or 'csr'."),
        "indptr": property(indptr, doc="Row pointers of a csr matrix (MXNet's CSRNDArray.indptr)."),
    }


_lock = threading.Lock()
_added: dict[str, Any] = {}
_enabled = False


def enable() -> list[str]:
    """Add the MXNet methods torch.Tensor lacks; idempotent.  Returns the names added."""
    global _enabled
    with _lock:
        if not _enabled:
            for name, obj in _table().items():
                if hasattr(torch.Tensor, name):
                    continue
                setattr(torch.Tensor, name, obj)
                _added[name] = obj
            _enabled = True
        return sorted(_added)


def disable() -> None:
    """Remove exactly what :func:`enable` added (a no-op when not enabled)."""
    global _enabled
    with _lock:
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
