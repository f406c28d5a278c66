"""MXNet's autograd scopes on top of torch autograd.

``record()`` turns graph recording on (torch grad mode) and sets *training* mode, which
Gluon layers such as Dropout and BatchNorm read through :func:`is_training`; ``pause()``
turns recording off.  Outside every scope torch's own grad mode applies, so a Gluon block
still works inside a plain PyTorch training loop.

MXNet's ``head.backward()`` on a non-scalar head (a vector of per-sample losses) uses a head
gradient of ones (torch raises an error in that case).  :func:`mxtorch.ndarray_methods.enable`
-- run by ``import mxtorch`` unless ``MXTORCH_TENSOR_METHODS=0``, the one switch for what
mxtorch changes on torch classes -- gives ``torch.Tensor.backward`` that rule through
:func:`install_backward` and changes nothing else; :func:`mxtorch.ndarray_methods.disable`
restores torch's own.  :func:`backward` applies the rule either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

# the recording state, its scopes and MXNet's backward rules live below the arrays (the operators
# read the train mode there): MXNet's mx.autograd hands them out from here
from ._recording import as_list as _as_list
from ._recording import check_not_freed as _check_not_freed
from ._recording import default_head_grads as _default_head_grads
from ._recording import grad_only as _grad_only
from ._recording import install_backward as install_backward
from ._recording import (
    is_recording,
    is_training,
    pause,
    predict_mode,
    record,
    set_recording,
    set_training,
    train_mode,
)
from ._recording import mark_freed as _mark_freed
from ._recording import scope as _scope
from .base import MXNetError

__all__ = [
    "record",
    "pause",
    "train_mode",
    "predict_mode",
    "is_recording",
    "is_training",
    "set_recording",
    "set_training",
    "backward",
    "grad",
    "mark_variables",
    "Function",
    "get_symbol",
    "NDArray",
    "Symbol",  # noqa: F822 - provided by the module __getattr__ below
]

NDArray = torch.Tensor
"""MXNet's ``autograd`` module hands out ``NDArray`` (and ``Symbol``) with ``import *``: here the tensor."""


# What the symbolic layer above hands this module when mxtorch is imported (mxtorch._autograd_symbol
# registers both): get_symbol's reader of the recorded graph, and the Symbol class, loaded on first use.
_symbolic: dict[str, Callable[..., Any]] = {}


def _register_symbolic(build: Callable[[torch.Tensor], Any], symbol_class: Callable[[], type]) -> None:
    _symbolic.update(build=build, symbol_class=symbol_class)


def _symbolic_part(name: str) -> Callable[..., Any]:
    part = _symbolic.get(name)
    if part is None:  # only while mxtorch's own import is still under way
        raise MXNetError("mx.autograd: the symbolic layer is not registered yet (import mxtorch first)")
    return part


def __getattr__(name: str) -> Any:
    if name == "Symbol":
        return _symbolic_part("symbol_class")()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def backward(
    heads: torch.Tensor | Sequence[torch.Tensor],
    head_grads: torch.Tensor | Sequence[torch.Tensor | None] | None = None,
    retain_graph: bool = False,
    train_mode: bool = True,
) -> None:
    """Compute gradients of ``heads`` w.r.t. the recorded variables (head grads default to ones)."""
    hs = _as_list(heads)
    hg = _default_head_grads(hs, head_grads)
    rule = _check_not_freed(hs)
    if torch.autograd.profiler._is_profiler_enabled:  # a profiler records: mx.profiler's span of it
        with torch.autograd.profiler.record_function("mxtorch/backward"):
            torch.autograd.backward(hs, hg, retain_graph=retain_graph)
    else:
        torch.autograd.backward(hs, hg, retain_graph=retain_graph)
    if rule and not retain_graph:
        _mark_freed(hs)


def grad(
    heads: torch.Tensor | Sequence[torch.Tensor],
    variables: torch.Tensor | Sequence[torch.Tensor],
    head_grads: torch.Tensor | Sequence[torch.Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    train_mode: bool = True,
) -> list[torch.Tensor]:
    """Return the gradients of ``heads`` w.r.t. ``variables`` without touching ``.grad``.

    As in MXNet 1.9 (its ``grad`` wraps a lone variable in a list before it picks the return
    type): always a list, one gradient per variable, even for a single tensor -- hence MXNet's
    ``autograd.grad(y, x)[0]``; a variable the heads do not depend on gets zeros;
    ``retain_graph`` defaults to ``create_graph``.
    """
    hs = _as_list(heads)
    vs = _as_list(variables)
    if not vs:
        raise ValueError("grad(): variables cannot be an empty list")
    hg = _default_head_grads(hs, head_grads)
    rule = _check_not_freed(hs)
    _grad_only.depth += 1
    try:
        out = torch.autograd.grad(
            hs,
            vs,
            hg,
            retain_graph=retain_graph,
            create_graph=create_graph,
            allow_unused=True,
        )
    finally:
        _grad_only.depth -= 1
    if rule and not (create_graph if retain_graph is None else retain_graph):
        _mark_freed(hs)
    return [_recorded_grad(v, g, create_graph) for v, g in zip(vs, out)]


def _recorded_grad(variable: torch.Tensor, g: torch.Tensor | None, create_graph: bool) -> torch.Tensor:
    """One gradient as MXNet hands it out: real zeros for an unused variable (and for torch's lazy
    ZeroTensor, e.g. abs'' -- NumPy cannot read one), and with ``create_graph`` always in the graph."""
    if g is None or g._is_zerotensor():
        g = torch.zeros_like(variable)
    if create_graph and not g.requires_grad and (g.is_floating_point() or g.is_complex()):
        # MXNet records the backward pass itself, so a gradient that does not depend on the
        # variables (radians, clip, dropout: a constant times the head gradient) is still a head
        # that grad()/backward() accept, and its own gradient is zero, not an error.  detach(): torch
        # may hand back the caller's own head gradient, which must not start requiring grad
        g = g.detach().requires_grad_(True)
    return g


def mark_variables(
    variables: torch.Tensor | Sequence[torch.Tensor],
    gradients: torch.Tensor | Sequence[torch.Tensor] | None = None,
    grad_reqs: str | Sequence[str] = "write",
) -> None:
    """Mark tensors as variables to differentiate against, with the given gradient buffers.

    As ``x.attach_grad(grad_req)`` for each variable, except that ``gradients`` (one tensor of
    the variable's shape each) become the ``.grad`` buffers, so a later ``backward`` writes
    ('write') or adds ('add') into those very tensors; ``'null'`` stops tracking.  Without
    ``gradients`` zero buffers are made.
    """
    from .nd import grad_storage
    from .ndarray_methods import attach_grad

    vs = _as_list(variables)
    gs: list[torch.Tensor | None] = [None] * len(vs) if gradients is None else list(_as_list(gradients))
    reqs = [grad_reqs] * len(vs) if isinstance(grad_reqs, str) else list(grad_reqs)
    if len(gs) != len(vs) or len(reqs) != len(vs):
        raise ValueError(
            f"mark_variables: got {len(vs)} variables, {len(gs)} gradients and {len(reqs)} grad_reqs; "
            "give one gradient and one grad_req per variable (or one grad_req string for all)"
        )
    for i, (v, g, req) in enumerate(zip(vs, gs, reqs)):
        if g is not None and (g.shape != v.shape or g.dtype != v.dtype or g.device != v.device):
            raise ValueError(
                f"mark_variables: gradient {i} has shape {tuple(g.shape)}, dtype {g.dtype} on {g.device}, "
                f"but its variable has shape {tuple(v.shape)}, dtype {v.dtype} on {v.device}"
            )
        attach_grad(v, req)
        if g is not None and req != "null":
            grad_storage.set_grad(v, g)
            v._mx_grad_buf = g  # type: ignore[attr-defined]  # backward writes into this very array


def get_symbol(x: torch.Tensor) -> Any:
    """The recorded computation that produced ``x`` as a Symbol (see :mod:`mxtorch._autograd_symbol`)."""
    return _symbolic_part("build")(x)


class _FunctionBridge(torch.autograd.Function):
    """Runs an MXNet-style :class:`Function` instance inside torch's autograd graph."""

    @staticmethod
    def forward(ctx: Any, fn: Function, *inputs: Any) -> Any:  # type: ignore[override]
        ctx.fn = fn
        with _scope(False, None):  # MXNet runs forward with recording off
            outputs = fn.forward(*inputs)
        ctx.single = isinstance(outputs, torch.Tensor)
        if not ctx.single and not (isinstance(outputs, (tuple, list)) and
                                   all(isinstance(o, torch.Tensor) for o in outputs)):
            raise TypeError(f"{type(fn).__name__}.forward must return a tensor or a tuple of tensors, "
                            f"got {type(outputs).__name__}")
        ctx.n_in = len(inputs)
        return outputs if ctx.single else tuple(outputs)

    @staticmethod
    def backward(ctx: Any, *out_grads: Any) -> Any:
        fn: Function = ctx.fn
        in_grads = fn.backward(*out_grads)
        if isinstance(in_grads, torch.Tensor):
            in_grads = (in_grads,)
        in_grads = tuple(in_grads)
        if len(in_grads) != ctx.n_in:
            raise ValueError(f"{type(fn).__name__}.backward returned {len(in_grads)} gradient(s) for "
                             f"{ctx.n_in} forward input(s): return one per input")
        return (None, *in_grads)


class Function:
    """MXNet's customizable differentiable function: subclass, define ``forward`` and
    ``backward`` as methods, create an instance and call it once.

    ``forward(*inputs)`` runs without recording and returns a tensor or a tuple of tensors;
    ``backward(*output_grads)`` returns one gradient per input.  ``save_for_backward(*arrays)``
    keeps arrays for ``backward`` in ``self.saved_tensors``.  Under ``record()`` the call joins
    the autograd graph (as a ``torch.autograd.Function``); an instance can be called only once.
    PyTorch-style functions (static ``forward(ctx, ...)``) stay ``torch.autograd.Function``.
    """

    def __init__(self) -> None:
        self._used = False
        self.saved_tensors: tuple[Any, ...] = ()

    def save_for_backward(self, *args: Any) -> None:
        """Keep ``args`` for ``backward`` (read back as ``self.saved_tensors``)."""
        self.saved_tensors = args

    def __call__(self, *inputs: torch.Tensor) -> Any:
        if getattr(self, "_used", None) is None:
            raise TypeError(f"{type(self).__name__}.__init__ must call super().__init__()")
        if self._used:
            raise RuntimeError(f"each {type(self).__name__} instance can be called only once: "
                               "create another instance for the next call")
        self._used = True
        for i, x in enumerate(inputs):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"{type(self).__name__}: input {i} must be a tensor, got {type(x).__name__}")
        if not any(x.requires_grad for x in inputs) or not torch.is_grad_enabled():
            with _scope(False, None):
                return self.forward(*inputs)
        return _FunctionBridge.apply(self, *inputs)

    def forward(self, *inputs: Any) -> Any:
        """Forward computation; override it."""
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def backward(self, *output_grads: Any) -> Any:
        """Gradients of the inputs from those of the outputs; override it."""
        raise NotImplementedError(f"{type(self).__name__} must define backward()")
