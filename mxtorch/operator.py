"""``mx.operator``: MXNet's Python custom operators on torch autograd.

MXNet code defines an operator as two classes and registers the second by name::

    class Square(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0] * in_data[0])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], 2 * in_data[0] * out_grad[0])

    @mx.operator.register("square")
    class SquareProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, shapes, dtypes):
            return Square()

    y = mx.nd.Custom(x, op_type="square")                 # imperative, autograd.record() too
    s = mx.sym.Custom(mx.sym.var("x"), op_type="square")   # a graph node (JSON: op "Custom")

Here the arrays are torch tensors: ``forward`` and ``backward`` run inside one
``torch.autograd.Function``, on output and input-gradient arrays allocated with the shapes
``infer_shape`` gives.  The property class gets the operator's keyword arguments as strings
(as MXNet passes them); ``need_top_grad=False`` makes the operator a loss whose backward
needs no head gradient.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ._dtype import to_torch_dtype
from ._recording import is_training
from .base import MXNetError, attr_string
from .context import Context, as_context, context_of
from .registry import Registry

__all__ = ["CustomOp", "CustomOpProp", "register", "get_all_registered_operators", "Custom"]

Tensor = torch.Tensor
Shape = tuple[int, ...]

_REQS = ("null", "write", "inplace", "add")


class CustomOp:
    """The computation of a custom operator: override :meth:`forward` and :meth:`backward`."""

    def forward(self, is_train: bool, req: list[str], in_data: list[Tensor], out_data: list[Tensor],
                aux: list[Tensor]) -> None:
        """Write the outputs into ``out_data`` (with :meth:`assign` and ``req``); ``aux`` are the
        auxiliary states, updated in place."""
        raise NotImplementedError(f"{type(self).__name__} must override CustomOp.forward")

    def backward(self, req: list[str], out_grad: list[Tensor], in_data: list[Tensor],
                 out_data: list[Tensor], in_grad: list[Tensor], aux: list[Tensor]) -> None:
        """Write the input gradients into ``in_grad`` (with :meth:`assign` and ``req``)."""
        raise NotImplementedError(f"{type(self).__name__} must override CustomOp.backward to be trained")

    def assign(self, dst: Tensor, req: str, src: Any) -> None:
        """Write ``src`` (a tensor, numpy array or scalar) into ``dst`` as ``req`` says: 'write' and
        'inplace' overwrite, 'add' adds, 'null' leaves ``dst`` alone."""
        if req == "null":
            return
        if req not in _REQS:
            raise MXNetError(f"CustomOp.assign: req must be one of {_REQS}, got {req!r}")
        value = torch.as_tensor(src, device=dst.device)
        with torch.no_grad():
            if req == "add":
                dst.add_(value.to(dst.dtype))
            else:
                dst.copy_(value.to(dst.dtype).expand_as(dst))


class CustomOpProp:
    """How a custom operator looks from outside: its inputs, outputs, shapes, types, and the
    :class:`CustomOp` that computes it (:meth:`create_operator`).

    Subclasses take the operator's keyword arguments in ``__init__`` (strings, as in MXNet) and
    call ``super().__init__(need_top_grad=...)``: ``False`` for a loss whose gradient does not
    depend on a head gradient.
    """

    def __init__(self, need_top_grad: bool = True) -> None:
        self.need_top_grad_ = bool(need_top_grad)

    def list_arguments(self) -> list[str]:
        return ["data"]

    def list_outputs(self) -> list[str]:
        return ["output"]

    def list_auxiliary_states(self) -> list[str]:
        return []

    def infer_shape(self, in_shape: list[list[int]]) -> tuple[Any, ...]:
        """``(input shapes, output shapes, aux shapes)``; by default every one is the first input's."""
        first = in_shape[0]
        return (
            [first] * len(self.list_arguments()),
            [first] * len(self.list_outputs()),
            [first] * len(self.list_auxiliary_states()),
        )

    def infer_type(self, in_type: list[Any]) -> tuple[Any, ...]:
        """``(input types, output types, aux types)`` as numpy types; by default the first input's."""
        first = in_type[0]
        return (
            [first] * len(in_type),
            [first] * len(self.list_outputs()),
            [first] * len(self.list_auxiliary_states()),
        )

    def infer_storage_type(self, in_stype: list[str]) -> tuple[Any, ...]:
        return (
            ["default"] * len(in_stype),
            ["default"] * len(self.list_outputs()),
            ["default"] * len(self.list_auxiliary_states()),
        )

    def infer_storage_type_backward(self, ograd_stype: list[str], in_stype: list[str], out_stype: list[str],
                                    igrad_stype: list[str], aux_stype: list[str]) -> tuple[Any, ...]:
        return (
            ["default"] * len(ograd_stype),
            ["default"] * len(in_stype),
            ["default"] * len(out_stype),
            ["default"] * len(igrad_stype),
            ["default"] * len(aux_stype),
        )

    def declare_backward_dependency(self, out_grad: list[int], in_data: list[int],
                                    out_data: list[int]) -> list[int]:
        """What backward reads: the head gradients (when ``need_top_grad``), inputs and outputs."""
        deps = list(out_grad) if self.need_top_grad_ else []
        return deps + list(in_data) + list(out_data)

    def create_operator(self, ctx: Context, shapes: list[list[int]], dtypes: list[Any]) -> CustomOp:
        raise NotImplementedError(f"{type(self).__name__} must override CustomOpProp.create_operator")


# ----------------------------------------------------------------------------------------------
# the registry
# ----------------------------------------------------------------------------------------------

def _check_prop(obj: Any) -> None:
    if not (isinstance(obj, type) and issubclass(obj, CustomOpProp)):
        raise MXNetError(f"operator.register decorates a subclass of mx.operator.CustomOpProp, got {obj!r}")


# the project's one registry type (case-insensitive names, replacing warns naming both classes)
_REGISTRY: Registry[type[CustomOpProp]] = Registry("custom operator", error=MXNetError, check=_check_prop)
_lock = threading.Lock()
_generation = [0]  # bumped on every registration: cached specs of an older class are stale


def register(reg_name: str) -> Callable[[type[CustomOpProp]], type[CustomOpProp]]:
    """Class decorator: register a :class:`CustomOpProp` subclass as custom operator ``reg_name``
    (``mx.nd.Custom(..., op_type=reg_name)``).  Registering a name again replaces the class, with a
    warning (a re-run notebook cell or a reloaded module)."""
    if not isinstance(reg_name, str) or not reg_name:
        raise MXNetError(f"operator.register: the name must be a non-empty str, got {reg_name!r}")

    def do_register(prop_cls: type[CustomOpProp]) -> type[CustomOpProp]:
        with _lock:
            _REGISTRY.register(prop_cls, name=reg_name)
            _generation[0] += 1
        return prop_cls

    return do_register


def get_all_registered_operators() -> list[str]:
    """The names of the registered custom operators."""
    return _REGISTRY.names()


def _prop_class(op_type: str) -> type[CustomOpProp]:
    cls = _REGISTRY.find(op_type)
    if cls is None:
        raise _REGISTRY.unknown(
            op_type,
            f"import (or define) the module whose @mx.operator.register({op_type!r}) class it is before "
            "using or loading it",
        )
    return cls


# ----------------------------------------------------------------------------------------------
# one configured operator: the property object of an op_type and its keyword strings
# ----------------------------------------------------------------------------------------------


def _np_type(dtype: torch.dtype) -> Any:
    return np.dtype(str(dtype).replace("torch.", "")).type


def _shapes(value: Any, count: int, what: str, op_type: str) -> list[Shape]:
    items = list(value)
    if len(items) != count:
        raise MXNetError(f"custom operator {op_type!r}: {what} has {len(items)} shapes, expected {count}")
    return [tuple(int(d) for d in s) for s in items]


class CustomSpec:
    """Custom operator ``op_type`` configured with ``kwargs`` (strings): the property object and
    what the graph and the autograd function need from it."""

    def __init__(self, op_type: str, kwargs: Mapping[str, str]) -> None:
        self.op_type = op_type
        self.kwargs = dict(kwargs)
        cls: Any = _prop_class(op_type)  # its __init__ takes the operator's own keywords
        try:
            self.prop: CustomOpProp = cls(**self.kwargs)
        except TypeError as e:
            raise MXNetError(
                f"custom operator {op_type!r}: {cls.__qualname__}({', '.join(sorted(self.kwargs))}) "
                f"failed: {e}"
            ) from e
        self.generation = _generation[0]
        self.arguments = [str(n) for n in self.prop.list_arguments()]
        self.outputs = [str(n) for n in self.prop.list_outputs()]
        self.aux = [str(n) for n in self.prop.list_auxiliary_states()]
        self.need_top_grad = bool(getattr(self.prop, "need_top_grad_", True))

    def infer_shape(self, arg_shapes: Sequence[Shape]) -> tuple[list[Shape], list[Shape], list[Shape]]:
        """``(argument, output, aux)`` shapes from the argument shapes (``()`` where unknown)."""
        ret = self.prop.infer_shape([list(s) for s in arg_shapes])
        aux: Any
        if len(ret) == 2:
            ins, outs, aux = ret[0], ret[1], []
        elif len(ret) == 3:
            ins, outs, aux = ret
        else:
            raise MXNetError(
                f"custom operator {self.op_type!r}: infer_shape must return (in_shapes, out_shapes"
                f"[, aux_shapes]), got {len(ret)} items"
            )
        return (
            _shapes(ins, len(self.arguments), "infer_shape's input shapes", self.op_type),
            _shapes(outs, len(self.outputs), "infer_shape's output shapes", self.op_type),
            _shapes(aux, len(self.aux), "infer_shape's aux shapes", self.op_type),
        )

    def infer_type(self, arg_types: Sequence[torch.dtype]) -> tuple[list[Any], list[Any], list[Any]]:
        """``(argument, output, aux)`` torch dtypes from the argument dtypes."""
        ret = self.prop.infer_type([_np_type(t) for t in arg_types])
        ins, outs = ret[0], ret[1]
        aux = ret[2] if len(ret) > 2 else [arg_types[0]] * len(self.aux)
        return (
            [to_torch_dtype(t) for t in ins],
            [to_torch_dtype(t) for t in outs],
            [to_torch_dtype(t) for t in aux],
        )

    def create_operator(self, inputs: Sequence[Tensor]) -> CustomOp:
        ctx = context_of(inputs[0]) if inputs else as_context(None)
        op = self.prop.create_operator(
            ctx, [list(x.shape) for x in inputs], [_np_type(x.dtype) for x in inputs]
        )
        if not isinstance(op, CustomOp):
            raise MXNetError(
                f"custom operator {self.op_type!r}: create_operator returned {type(op).__name__}, "
                "not an mx.operator.CustomOp"
            )
        return op


class CustomCall:
    """Runs one configured operator (the :class:`CustomOp` made once per input shapes and dtypes,
    as MXNet makes it once per bound graph) forward and backward."""

    def __init__(self, spec: CustomSpec) -> None:
        self.spec = spec
        self._ops: dict[tuple[Any, ...], tuple[CustomOp, list[Shape], list[torch.dtype]]] = {}

    def _operator(self, args: Sequence[Tensor], aux: Sequence[Tensor]) -> tuple[CustomOp, list[Shape],
                                                                               list[torch.dtype]]:
        key = tuple((tuple(x.shape), x.dtype, x.device) for x in (*args, *aux))
        hit = self._ops.get(key)
        if hit is None:
            spec = self.spec
            _, out_shapes, _ = spec.infer_shape([tuple(x.shape) for x in args])
            _, out_types, _ = spec.infer_type([x.dtype for x in args])
            hit = (spec.create_operator([*args, *aux]), out_shapes, out_types)
            self._ops[key] = hit
        return hit

    def __call__(self, inputs: Sequence[Tensor], is_train: bool) -> list[Tensor]:
        """The outputs for ``inputs`` (arguments, then auxiliary states); differentiable in the
        arguments when autograd records."""
        nargs = len(self.spec.arguments)
        if len(inputs) != nargs + len(self.spec.aux):
            raise MXNetError(
                f"custom operator {self.spec.op_type!r} takes {nargs} argument(s) {self.spec.arguments} "
                f"and {len(self.spec.aux)} auxiliary state(s) {self.spec.aux}, got {len(inputs)} arrays"
            )
        args, aux = list(inputs[:nargs]), list(inputs[nargs:])
        if torch.is_grad_enabled() and any(a.requires_grad for a in args):
            outs = _CustomFunction.apply(self, bool(is_train), aux, *args)
            return list(outs)
        with torch.no_grad():
            return self.forward(args, aux, bool(is_train))

    def forward(self, args: list[Tensor], aux: list[Tensor], is_train: bool) -> list[Tensor]:
        op, shapes, types = self._operator(args, aux)
        device = args[0].device if args else torch.device("cpu")
        out_data = [torch.zeros(s, dtype=t, device=device) for s, t in zip(shapes, types, strict=True)]
        op.forward(is_train, ["write"] * len(out_data), list(args), out_data, list(aux))
        return out_data

    def backward(self, reqs: list[str], out_grad: list[Tensor], args: list[Tensor], outs: list[Tensor],
                 aux: list[Tensor]) -> list[Tensor]:
        op, _, _ = self._operator(args, aux)
        in_grad = [torch.zeros_like(a) for a in args]
        op.backward(reqs, out_grad, list(args), list(outs), in_grad, list(aux))
        return in_grad


class _CustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, call: CustomCall, is_train: bool, aux: list[Tensor], *args: Tensor) -> Any:
        outs = call.forward(list(args), aux, is_train)
        ctx.call, ctx.aux, ctx.nargs = call, aux, len(args)
        ctx.save_for_backward(*args, *outs)
        return tuple(outs)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor | None) -> Any:
        saved = ctx.saved_tensors
        args, outs = list(saved[: ctx.nargs]), list(saved[ctx.nargs :])
        # an output nothing depended on gets a zero head gradient, as MXNet's zero-filled buffer
        out_grad = [
            torch.zeros_like(o) if g is None else g.contiguous() for g, o in zip(grads, outs, strict=True)
        ]
        reqs = ["write" if ctx.needs_input_grad[3 + i] else "null" for i in range(ctx.nargs)]
        in_grad = ctx.call.backward(reqs, out_grad, args, outs, ctx.aux)
        return (None, None, None, *(g if r != "null" else None for g, r in zip(in_grad, reqs, strict=True)))


# ----------------------------------------------------------------------------------------------
# the imperative operator: mx.nd.Custom
# ----------------------------------------------------------------------------------------------

_specs: dict[tuple[Any, ...], CustomSpec] = {}


def kwarg_strings(kwargs: Mapping[str, Any]) -> dict[str, str]:
    """Operator keywords as MXNet passes them to the property class: strings (``(2, 3)``, ``True``)."""
    return {k: attr_string(v) for k, v in kwargs.items()}


def spec_for(op_type: str, kwargs: Mapping[str, str]) -> CustomSpec:
    """The :class:`CustomSpec` of ``op_type`` with ``kwargs`` (made once per registration)."""
    key = (op_type, tuple(sorted(kwargs.items())))
    spec = _specs.get(key)
    if spec is None or spec.generation != _generation[0]:
        spec = _specs[key] = CustomSpec(op_type, kwargs)
    return spec


def Custom(*inputs: Tensor, op_type: str | None = None, out: Any = None, name: str | None = None,
           **kwargs: Any) -> Any:
    """Apply the registered custom operator ``op_type`` to ``inputs`` (arguments, then auxiliary
    states); the other keywords go to its property class as strings.  One output is returned as an
    array, several as a list.  Under ``autograd.record()`` the result is differentiable."""
    if op_type is None:
        raise MXNetError("Custom: op_type is required (the name given to @mx.operator.register)")
    spec = spec_for(str(op_type), kwarg_strings(kwargs))
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor):
            raise TypeError(f"Custom({op_type!r}): input {i} must be an NDArray, got {type(x).__name__}")
    outs = CustomCall(spec)(list(inputs), is_training())
    result: Any = outs[0] if len(outs) == 1 else outs
    if out is not None:
        targets = out if isinstance(out, (list, tuple)) else [out]
        with torch.no_grad():
            for dst, src in zip(targets, outs, strict=True):
                dst.copy_(src)
        return out
    return result
