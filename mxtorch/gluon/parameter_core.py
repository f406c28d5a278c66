"""The Parameter itself: one logical weight with a copy per context, and Constant.

A :class:`Parameter` owns one ``torch.nn.Parameter`` per context it was initialized on.
The copy of the first context is also registered with the owning block's torch module
machinery, so ``block.parameters()``, ``state_dict()`` and torch optimizers see it.
This module knows nothing of blocks, parameter dicts or files.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .. import initializer as _init
from .._dtype import dtype_name, to_torch_dtype
from ..base import DeferredInitializationError, MXNetError
from ..context import Context, as_context, context_of, current_context
from ..nd import sparse
from ..nd._common import tag
from ..nd._ndarray_type import plain
from ._row_sparse_weight import RowSparseWeight, row_ids, rows_of

__all__ = ["Parameter", "Constant", "DeferredInitializationError", "GluonUsageError", "forward_context"]


class GluonUsageError(MXNetError, AssertionError):
    """A Gluon API used against its rules (an invalid storage type, a summary of a hybridized
    network...): MXNet asserted these, so MXNet code catches them as ``AssertionError``."""

_GRAD_REQS = ("write", "add", "null")
_STYPES = ("default", "row_sparse")


class _ForwardState(threading.local):
    ctx: Context | None = None
    depth: int = 0


_fwd = _ForwardState()


def forward_context() -> Context | None:
    """The context of the input of the outermost block call now running (None outside)."""
    return _fwd.ctx


_BFLOAT16_NP = np.dtype([("bfloat16", np.uint16)])  # MXNet's numpy stand-in for bfloat16


def numpy_dtype(dtype: torch.dtype) -> np.dtype[Any]:
    """The numpy dtype MXNet reports for the torch dtype ``dtype``."""
    if dtype == torch.bfloat16:
        return _BFLOAT16_NP
    return np.dtype(dtype_name(dtype))


def _shape_known(shape: tuple[int, ...] | None) -> bool:
    return shape is not None and all(int(s) > 0 for s in shape)


class Parameter:
    """A trainable (or fixed, ``grad_req='null'``) tensor of a block, with a copy per context.

    ``shape`` may contain 0 or -1 for dimensions that are inferred at the first forward
    pass (``allow_deferred_init=True``).  ``lr_mult``/``wd_mult`` scale the optimizer's
    learning rate and weight decay for this parameter.

    ``grad_stype='row_sparse'`` declares row-sparse gradients (torch sparse COO tensors, as
    ``F.embedding(..., sparse=True)`` produces; ``nn.Embedding(sparse_grad=True)`` sets it):
    the optimizer and the KVStores then touch only the rows a gradient holds.
    ``stype='row_sparse'`` marks a weight that is read by rows with :meth:`row_sparse_data`;
    its local copy stays a dense tensor (so ``data()`` works too).  'csr' parameters do not
    exist here.
    """

    def __init__(
        self,
        name: str = "weight",
        grad_req: str = "write",
        shape: int | Sequence[int] | None = None,
        dtype: Any = "float32",
        lr_mult: float = 1.0,
        wd_mult: float = 1.0,
        init: Any = None,
        allow_deferred_init: bool = False,
        differentiable: bool = True,
        stype: str = "default",
        grad_stype: str = "default",
    ) -> None:
        self.name = name
        self._shape: tuple[int, ...] | None = None
        self.shape = shape  # type: ignore[assignment]
        self._dtype = to_torch_dtype(dtype)
        self.lr_mult = float(lr_mult)
        self.wd_mult = float(wd_mult)
        self.init = init
        self.allow_deferred_init = allow_deferred_init
        self._differentiable = differentiable
        for what, value in (("stype", stype), ("grad_stype", grad_stype)):
            if value not in _STYPES:
                raise GluonUsageError(
                    f"Parameter {name!r}: {what}={value!r} is not available; use one of {_STYPES} "
                    "('csr' parameters are not supported)"
                )
        self.stype, self.grad_stype = stype, grad_stype
        self._on_initialized: list[Callable[[Parameter], None]] = []  # on_deferred_init
        self._trainer_ref: weakref.ref[Any] | None = None  # the Trainer, held weakly (see _trainer)
        self._data: list[torch.nn.Parameter] | None = None
        self._grad_req = "null"
        self.grad_req = grad_req if differentiable else "null"
        self._ctx_list: list[Context] = []
        self._ctx_index: dict[Context, int] = {}
        self._deferred: tuple[Any, list[Context], Any] | None = None
        self._owners: list[tuple[weakref.ref[torch.nn.Module], str]] = []
        # True once a ParameterDict (a block's ``params``) gave this parameter its full name; a
        # parameter made on its own and assigned to a block joins that block's ParameterDict
        self._named = False

    # ---- descriptive properties --------------------------------------------------------
    def __repr__(self) -> str:
        return f"Parameter {self.name} (shape={self.shape}, dtype={dtype_name(self._dtype)})"

    @property
    def shape(self) -> tuple[int, ...] | None:
        return self._shape

    @shape.setter
    def shape(self, new: int | Sequence[int] | None) -> None:
        if new is None:
            self._shape = None
            return
        new_t = (int(new),) if isinstance(new, int) else tuple(int(s) for s in new)
        old = self._shape
        if old is not None and _shape_known(old) and old != new_t:
            raise MXNetError(f"Parameter {self.name!r}: cannot change shape from {old} to {new_t}")
        if old is not None and len(old) == len(new_t):
            for o, n in zip(old, new_t):
                if o > 0 and n > 0 and o != n:
                    raise MXNetError(
                        f"Parameter {self.name!r}: expected shape compatible with {old}, got {new_t}"
                    )
            new_t = tuple(n if n > 0 else o for o, n in zip(old, new_t))
        self._shape = new_t

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype, as MXNet gives it (``p.dtype == np.float16``, ``== 'float16'``).

        bfloat16 is MXNet's numpy record type for it; ``p.data().dtype`` is the torch dtype.
        """
        return numpy_dtype(self._dtype)

    @dtype.setter
    def dtype(self, dtype: Any) -> None:
        self.cast(dtype)

    @property
    def grad_req(self) -> str:
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req: str) -> None:
        if req not in _GRAD_REQS:
            raise ValueError(f"grad_req must be one of {_GRAD_REQS}, got {req!r}")
        if not self._differentiable:
            req = "null"
        self._grad_req = req
        if self._data is not None:
            for d in self._data:
                d.requires_grad_(req != "null" and (d.is_floating_point() or d.is_complex()))
                if req == "null":
                    d.grad = None

    # ---- initialization ----------------------------------------------------------------
    def initialize(
        self,
        init: Any = None,
        ctx: Context | Sequence[Context] | None = None,
        default_init: Any = None,
        force_reinit: bool = False,
    ) -> None:
        """Create this parameter's data on ``ctx`` (a context or a list of them).

        ``init`` overrides the parameter's own initializer, which overrides ``default_init``
        (Uniform when nothing is given).  Shapes with unknown dimensions are initialized at
        the first forward pass when ``allow_deferred_init`` is set.
        """
        if self._data is not None and not force_reinit:
            return
        ctx_list = _ctx_list(ctx)
        chosen = init if init is not None else self.init
        if default_init is None:
            default_init = "uniform"
        if not _shape_known(self._shape):
            if not self.allow_deferred_init:
                raise MXNetError(
                    f"cannot initialize Parameter {self.name!r}: its shape {self._shape} is not fully "
                    "known; give the full shape (e.g. in_units/in_channels) or allow deferred init"
                )
            self._deferred = (chosen, ctx_list, default_init)
            return
        self._init_impl(chosen, ctx_list, default_init)

    def _init_impl(self, init: Any, ctx_list: list[Context], default_init: Any) -> None:
        assert self._shape is not None
        # MXNet's rule: values are drawn on the CPU and copied to every context, so one seed gives
        # the same initial weights whatever the contexts (a GPU's generator draws other numbers).
        first = torch.empty(self._shape, dtype=self._dtype)
        # Gluon's rule: the initializer given here, else the parameter's own, else the global
        # default fills the tensor whatever its name; initializers that dispatch on the name
        # themselves (Mixed, Load) are called with it.
        initializer = _init.create(init if init is not None else default_init)
        desc = _init.InitDesc(self.name)
        if type(initializer).__call__ is not _init.Initializer.__call__:
            initializer(desc, first)
        else:
            initializer._init_weight(desc, first)
        self._set_copies([first.to(c.torch_device, copy=(i > 0)) for i, c in enumerate(ctx_list)], ctx_list)
        self._deferred = None

    def _set_copies(self, tensors: list[torch.Tensor], ctx_list: list[Context]) -> None:
        # integer parameters (MXNet allows them) hold values only: torch gives them no gradient
        req = self._grad_req != "null" and (tensors[0].is_floating_point() or tensors[0].is_complex())
        # an NDArray's data goes in as a plain tensor: a parameter is torch's (torch.nn.Parameter of
        # a tensor subclass would keep the subclass, and every layer op would pay its dispatch)
        kind = RowSparseWeight if self.stype == "row_sparse" else torch.nn.Parameter
        self._data = [kind(plain(t.detach()), requires_grad=req) for t in tensors]
        for d, c in zip(self._data, ctx_list):
            tag(d, c)  # p.data(mx.cpu(1)).context is cpu(1), as the copy was made for it
        self._ctx_list = list(ctx_list)
        self._ctx_index = {c: i for i, c in enumerate(ctx_list)}
        self._sync_owners()

    def _sync_owners(self) -> None:
        primary = self._data[0] if self._data else None
        live = []
        for ref, attr in self._owners:
            mod = ref()
            if mod is None:
                continue
            mod._parameters[attr] = primary
            live.append((ref, attr))
        self._owners = live

    def _add_owner(self, module: torch.nn.Module, attr: str) -> None:
        self._owners.append((weakref.ref(module), attr))
        module._parameters[attr] = self._data[0] if self._data else None

    def _finish_deferred_init(self) -> None:
        """Initialize now that the shape is known (called by layers at the first forward)."""
        if self._data is not None:
            return
        if self._deferred is None:
            raise MXNetError(
                f"Parameter {self.name!r} has not been initialized: call block.initialize() "
                "(or param.initialize()) before using it"
            )
        if not _shape_known(self._shape):
            raise DeferredInitializationError(
                f"Parameter {self.name!r}: shape {self._shape} still has unknown dimensions"
            )
        init, ctx_list, default_init = self._deferred
        self._init_impl(init, ctx_list, default_init)
        callbacks, self._on_initialized = self._on_initialized, []
        for callback in callbacks:
            callback(self)

    def infer_shape(self, shape: Sequence[int]) -> None:
        """Fill unknown dimensions from ``shape`` and finish a pending deferred init."""
        self.shape = tuple(shape)
        if self._data is None and self._deferred is not None:
            self._finish_deferred_init()

    @property
    def is_initialized(self) -> bool:
        return self._data is not None

    @property
    def init_deferred(self) -> bool:
        """Whether ``initialize`` was called and waits for the shape (known at the first forward)."""
        return self._data is None and self._deferred is not None

    def on_deferred_init(self, callback: Callable[[Parameter], None]) -> None:
        """Call ``callback(self)`` once, right after the pending deferred initialization (every rank
        of a job runs the same forward pass: ``horovod.broadcast_parameters`` broadcasts there)."""
        if not self.init_deferred:
            raise MXNetError(f"Parameter {self.name!r} has no deferred initialization pending")
        self._on_initialized.append(callback)

    # MXNet code reads these private fields; they are views of this parameter's state
    @property
    def _grad(self) -> list[torch.Tensor] | None:
        """The gradient buffers, one per context (None without data or with grad_req 'null')."""
        if self._data is None or self._grad_req == "null":
            return None
        return self.list_grad()

    @property
    def _deferred_init(self) -> tuple[Any, ...]:
        """``(init, ctx_list, default_init, None)`` while initialization waits for the shape, else ``()``."""
        return () if self._deferred is None else (*self._deferred, None)

    # ---- access ------------------------------------------------------------------------
    def _check(self) -> list[torch.nn.Parameter]:
        if self._data is not None:
            return self._data
        if self._deferred is not None:
            raise DeferredInitializationError(
                f"Parameter {self.name!r} has not been initialized yet because its shape {self._shape} "
                "is inferred from the data: run a forward pass first (or give the full shape)"
            )
        raise MXNetError(
            f"Parameter {self.name!r} has not been initialized: call net.initialize() (or "
            "param.initialize()) before using it"
        )

    def _index(self, ctx: Context | None) -> int:
        if ctx is None:
            ctx = _fwd.ctx
            if ctx is None:
                return 0
        idx = self._ctx_index.get(ctx)
        if idx is not None:
            return idx
        dev = ctx.torch_device
        for i, c in enumerate(self._ctx_list):
            if c.torch_device == dev:
                return i
        raise MXNetError(
            f"Parameter {self.name!r} was not initialized on context {ctx}; it lives on "
            f"{self._ctx_list}. Initialize it there or move the data with split_and_load/as_in_context"
        )

    def data(self, ctx: Context | None = None) -> torch.nn.Parameter:
        """The copy on ``ctx`` (default: the context of the running forward pass, or the first).

        A parameter with ``stype='row_sparse'`` is read by rows: :meth:`row_sparse_data` (MXNet's
        rule; so a HybridBlock, whose graph reads whole arrays, cannot use one).
        """
        data = self._data
        if data is not None and len(data) == 1 and ctx is None and self.stype == "default":
            return data[0]
        self._dense_only("data()")
        return self._copy_on(ctx)

    def list_data(self) -> list[torch.nn.Parameter]:
        self._dense_only("list_data()")
        return list(self._check())

    def _dense_only(self, what: str) -> None:
        if self.stype != "default":
            raise MXNetError(f"Parameter {self.name!r} has stype {self.stype!r}: it is read by rows with "
                             f"row_sparse_data(row_ids), not {what}")

    def _copy_on(self, ctx: Context | None) -> torch.nn.Parameter:
        """The local copy on ``ctx`` whatever the storage type (for the framework's own use)."""
        return self._check()[self._index(ctx)]

    def grad(self, ctx: Context | None = None) -> torch.Tensor:
        """The gradient buffer on ``ctx`` (zeros before the first backward; with
        ``grad_stype='row_sparse'`` a row_sparse tensor, empty before the first backward)."""
        if self._grad_req == "null":
            raise MXNetError(f"Parameter {self.name!r} has grad_req='null': it has no gradient")
        d = self._copy_on(ctx)
        if d.grad is None:
            d.grad = self._zero_grad_like(d)
        return d.grad

    def _zero_grad_like(self, d: torch.Tensor) -> torch.Tensor:
        if self.grad_stype == "row_sparse":
            return sparse.zeros("row_sparse", tuple(d.shape), ctx=d.device, dtype=d.dtype)
        return torch.zeros_like(d)

    def list_grad(self) -> list[torch.Tensor]:
        self._check()
        return [self.grad(c) for c in self._ctx_list]

    def list_ctx(self) -> list[Context]:
        if self._data is None and self._deferred is not None:
            return list(self._deferred[1])
        self._check()
        return list(self._ctx_list)

    def set_data(self, data: Any) -> None:
        """Copy ``data`` into every context's copy.

        When this parameter's Trainer keeps the weights in its KVStore (update on kvstore), the
        store's copy would overwrite the new value: the Trainer forgets its store and gives it the
        new values at the next step (MXNet's rule); a distributed store cannot be reset, which
        raises an error (a ``RuntimeError``) before anything changes.
        """
        trainer = self._trainer
        if trainer is not None and trainer.updated_in_store(self):
            trainer._reset_kvstore()
        src = torch.as_tensor(data)
        if self._data is None:
            self.shape = tuple(src.shape)
            if self._deferred is not None:
                self._finish_deferred_init()
            else:
                self._check()
        assert self._data is not None
        if tuple(src.shape) != tuple(self._data[0].shape):
            raise MXNetError(
                f"Parameter {self.name!r}: set_data got shape {tuple(src.shape)}, expected "
                f"{tuple(self._data[0].shape)}"
            )
        with torch.no_grad():
            for d in self._data:
                d.copy_(src)

    def replace_data(self, data: torch.Tensor | Sequence[torch.Tensor]) -> None:
        """Give this parameter a value of a new shape, on the contexts it lives on: one tensor
        (copied to each context) or one per context.  For code that reshapes a model (pruning's
        compaction, tensor-parallel shards); :meth:`set_data` keeps the shape."""
        ctx = list(self.list_ctx())
        self._check()
        tensors = [data.to(c.torch_device) for c in ctx] if isinstance(data, torch.Tensor) else list(data)
        if len(tensors) != len(ctx) or len({tuple(t.shape) for t in tensors}) != 1:
            raise MXNetError(f"Parameter {self.name!r}: replace_data needs one tensor, or one per context "
                             f"({len(ctx)}) all of one shape, got {[tuple(t.shape) for t in tensors]}")
        self._shape = tuple(tensors[0].shape)
        self._set_copies(tensors, ctx)

    def release_data(self) -> None:
        """Drop this parameter's value on every context; its shape and dtype stay (a pipeline rank
        keeps only its own stages' weights).  It reads as not initialized until it is given one."""
        self._data = None
        self._deferred = None
        self._sync_owners()

    def zero_grad(self) -> None:
        """Reset gradients to zero (needed between steps with ``grad_req='add'``)."""
        if self._data is None:
            return
        for d in self._data:
            if d.grad is not None:
                if d.grad.layout != torch.strided:  # sparse: drop the stored rows
                    d.grad = self._zero_grad_like(d)
                else:
                    d.grad.zero_()

    # ---- row-sparse access ---------------------------------------------------------------
    @property
    def trainer(self) -> Any:
        """The ``gluon.Trainer`` that updates this parameter (the latest one created with it), or None."""
        ref = self._trainer_ref
        return ref() if ref is not None else None

    @property
    def _trainer(self) -> Any:
        """MXNet's attribute for :attr:`trainer` (held weakly)."""
        return self.trainer

    def _set_trainer(self, trainer: Any) -> None:
        """Remember the Trainer that updates this parameter (``None``: forget it).

        A row_sparse parameter lives in its Trainer's store, so a second Trainer may not take it
        (MXNet's rule); a dense one belongs to the latest Trainer.
        """
        current = self._trainer
        if trainer is not None and self.stype != "default" and current is not None and current is not trainer:
            raise MXNetError(
                f"Parameter {self.name!r} (stype={self.stype!r}) is already updated by another Trainer; "
                "a row_sparse parameter can belong to one Trainer only"
            )
        self._trainer_ref = None if trainer is None else weakref.ref(trainer)

    def _fresh_rows(self, row_ids: torch.Tensor, indices: list[int]) -> None:
        # When the Trainer's KVStore holds the weights (update on kvstore), pull these rows from it.
        trainer = self._trainer
        if trainer is not None:
            trainer._row_sparse_pull(self, [self._check()[i] for i in indices], row_ids)

    def row_sparse_data(self, row_id: Any) -> torch.Tensor:
        """Rows ``row_id`` of this parameter on the context of ``row_id``: a row_sparse array.

        ``row_id`` (ints, any order, repeats allowed) names the rows a batch needs; the result
        holds those rows only (MXNet's rule).  When a Trainer whose KVStore holds the weights
        (update on kvstore) updates this parameter, those rows are first pulled from the store
        with ``row_sparse_pull``, so a distributed worker reads their latest value.  The result is
        in the autograd graph of the local copy: a loss computed from it (``mx.nd.contrib.
        SparseEmbedding(x, w)``) fills ``p.grad()`` at those rows.  For parameters with ``stype``
        or ``grad_stype`` 'row_sparse'; with ``stype='row_sparse'`` a Trainer must hold it.
        """
        return self._row_sparse_arrays(row_id, all_contexts=False)[0]

    def list_row_sparse_data(self, row_id: Any) -> list[torch.Tensor]:
        """:meth:`row_sparse_data` for every context, in the order of :meth:`list_ctx`."""
        return self._row_sparse_arrays(row_id, all_contexts=True)

    def _row_sparse_arrays(self, row_id: Any, all_contexts: bool) -> list[torch.Tensor]:
        if self.stype != "row_sparse" and self.grad_stype != "row_sparse":
            raise MXNetError(
                f"Parameter {self.name!r} has stype {self.stype!r} and grad_stype {self.grad_stype!r}: "
                "row_sparse_data() is for row_sparse parameters; use data() instead"
            )
        data = self._check()
        if self.stype == "row_sparse" and self._trainer is None:
            # MXNet's rule: the rows live in the Trainer's store, so there must be one
            raise MXNetError(f"Parameter {self.name!r} (stype='row_sparse'): cannot get row_sparse data "
                             "before a Trainer is created with it")
        if all_contexts:
            indices = list(range(len(data)))
        else:
            ctx = context_of(row_id) if isinstance(row_id, torch.Tensor) else None
            indices = [self._index(ctx)]
        ids = row_ids(row_id, data[0].shape[0], data[indices[0]].device, self.name)
        self._fresh_rows(ids, indices)
        sparse_grad = self.grad_stype == "row_sparse"
        return [rows_of(data[i], ids.to(data[i].device), sparse_grad) for i in indices]

    def _reduce(self) -> torch.Tensor:
        """The value to save: the mean of the copies (they agree unless updated apart), on cpu."""
        data = self._check()
        if data[0].numel() == 0 and self._shape and all(self._shape):  # a zero=3 slice's placeholder
            raise MXNetError(f"Parameter {self.name!r} of shape {self._shape} holds none of its values on "
                             "this rank: a ZeroTrainer(zero=3) keeps slices between steps; save inside "
                             "`with trainer.full_parameters():` on every rank")
        if len(data) == 1:
            return data[0].detach().to("cpu")
        return torch.stack([d.detach().to("cpu") for d in data]).mean(0).to(data[0].dtype)

    def _check_load(self, data: torch.Tensor, cast_dtype: bool, dtype_source: str,
                    source: str, key: str | None = None) -> torch.Tensor:
        """``data`` (saved as ``key``) checked against this parameter's shape and dtype; nothing
        is changed yet."""
        what = repr(self.name) if key is None or key == self.name else f"{key!r} ({self.name})"
        shape = self._shape
        if shape is not None:
            if len(shape) != data.dim() or any(s > 0 and s != d for s, d in zip(shape, data.shape)):
                raise MXNetError(f"shape mismatch for parameter {what}: the model expects {shape}, "
                                 f"{source} has {tuple(data.shape)}")
        if data.dtype != self._dtype:
            if not cast_dtype:
                raise MXNetError(f"dtype mismatch for parameter {what}: model "
                                 f"{dtype_name(self._dtype)}, {source} {dtype_name(data.dtype)}; pass "
                                 "cast_dtype=True to convert")
            if dtype_source == "current":
                data = data.to(self._dtype)
        return data

    def _load_init(self, data: torch.Tensor, ctx: Any, cast_dtype: bool = False,
                   dtype_source: str = "current") -> None:
        """(Re)initialize from loaded ``data`` (checked by :meth:`_check_load`) on ``ctx``:
        an uninitialized parameter is created there (its deferred contexts, else ``ctx``, else the
        current context); an initialized one gets the value, moved to ``ctx`` when given."""
        if data.dtype != self._dtype:  # cast_dtype with dtype_source='saved'
            self.cast(data.dtype)
        self.shape = tuple(data.shape)
        if self._data is None:
            if self._deferred is not None:
                init, ctx_list, default_init = self._deferred
                if ctx is not None:
                    ctx_list = _ctx_list(ctx)
            else:
                ctx_list = _ctx_list(ctx)
            self._set_copies([data.to(c.torch_device, self._dtype, copy=True) for c in ctx_list], ctx_list)
            self._deferred = None
            return
        if ctx is not None and _ctx_list(ctx) != self._ctx_list:
            self.reset_ctx(ctx)
        self.set_data(data)

    def reset_ctx(self, ctx: Context | Sequence[Context]) -> None:
        """Move the parameter to other contexts, keeping its value."""
        ctx_list = _ctx_list(ctx)
        if self._data is None:
            if self._deferred is not None:
                self._deferred = (self._deferred[0], ctx_list, self._deferred[2])
                return
            self._check()
        assert self._data is not None
        src = self._data[0].detach()
        self._set_copies([src.to(c.torch_device, copy=True) for c in ctx_list], ctx_list)

    def cast(self, dtype: Any) -> None:
        """Cast every copy (and its gradient) to ``dtype``."""
        self._dtype = to_torch_dtype(dtype)
        if self._data is None:
            return
        dt = self._dtype
        req = self._grad_req != "null" and (dt.is_floating_point or dt.is_complex)
        with torch.no_grad():
            for d in self._data:
                if not req:  # an integer copy cannot require a gradient (or keep a float one)
                    d.requires_grad_(False)
                    d.grad = None
                d.data = d.data.to(dt)
                if d.grad is not None:
                    d.grad = d.grad.to(dt)
                d.requires_grad_(req)

    def var(self) -> Any:
        """This parameter as a graph variable (``mx.sym.var``) with its shape, dtype, initializer and
        lr/wd multipliers; the same variable every call."""
        cached = self.__dict__.get("_var")
        if cached is not None and cached.name == self.name:
            return cached
        from ..symbol import Variable

        init = self.init
        v = Variable(self.name, shape=tuple(self.shape) if self.shape else None, dtype=self.dtype,
                     lr_mult=self.lr_mult, wd_mult=self.wd_mult,
                     stype=None if self.stype == "default" else self.stype,
                     init=init if init is None or isinstance(init, str) or hasattr(init, "dumps") else None)
        self.__dict__["_var"] = v
        return v


class Constant(Parameter):
    """A parameter that is never updated (``grad_req='null'``), with a fixed value."""

    def __init__(self, name: str, value: Any) -> None:
        t = torch.as_tensor(value)
        if not t.is_floating_point():
            t = t.float()
        self._value = t
        super().__init__(name, grad_req="null", shape=tuple(t.shape), dtype=t.dtype, init="zeros",
                         differentiable=False)

    def _init_impl(self, init: Any, ctx_list: list[Context], default_init: Any) -> None:
        self._set_copies([self._value.to(c.torch_device, copy=True) for c in ctx_list], ctx_list)
        self._deferred = None

    @property
    def value(self) -> torch.Tensor:
        """The constant's value (MXNet's ``Constant.value``)."""
        return self._value

    def __repr__(self) -> str:
        return f"Constant {self.name} (shape={self.shape}, dtype={dtype_name(self._dtype)})"


def _ctx_list(ctx: Context | Sequence[Context] | None) -> list[Context]:
    if ctx is None:
        return [current_context()]
    if isinstance(ctx, (list, tuple)):
        if not ctx:
            raise ValueError("ctx list is empty: give at least one context")
        out = [as_context(c) for c in ctx]
    else:
        out = [as_context(ctx)]  # type: ignore[arg-type]
    if len(set(out)) != len(out):
        raise ValueError(f"ctx list {out} contains duplicates")
    return out


def wrap_torch_parameter(tp: torch.nn.Parameter, name: str) -> Parameter:
    """A gluon Parameter view of a plain torch parameter (one context: its device)."""
    p = getattr(tp, "_mx_param", None)
    if p is None:
        p = Parameter(name, grad_req="write" if tp.requires_grad else "null", shape=tuple(tp.shape),
                      dtype=tp.dtype)
        p._data = [tp]
        ctx = context_of(tp)
        p._ctx_list = [ctx]
        p._ctx_index = {ctx: 0}
        tp._mx_param = p  # type: ignore[attr-defined]
    return p
