"""torch functions applied to symbols (``F.relu(sym)``, ``torch.cat([a, b], 1)``): the MXNet
operators they stand for, so Gluon code written against torch still builds MXNet graphs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ..base import MXNetError

__all__ = ["lookup", "use_create"]

# mx.sym.create, handed down by the symbol module when it loads: Symbol.__torch_function__ is the
# only way here, and it calls this module's rules, which build Symbols with it
_symbolic: dict[str, Callable[..., Any]] = {}


def use_create(create: Callable[..., Any]) -> None:
    """Build the Symbols of the rules with ``create(op, *inputs, **attributes)``."""
    _symbolic["create"] = create


def _create(op: str, *args: Any, **kwargs: Any) -> Any:
    return _symbolic["create"](op, *args, **kwargs)


def _activation(kind: str) -> Callable[..., Any]:
    return lambda x, *a, **k: _create("Activation", x, act_type=kind)


def _softmax(op: str) -> Callable[..., Any]:
    def run(x: Any, dim: int | None = None, *a: Any, **k: Any) -> Any:
        return _create(op, x, axis=-1 if dim is None else int(k.get("dim", dim)))

    return run


def _reduce(op: str) -> Callable[..., Any]:
    def run(x: Any, dim: Any = None, keepdim: bool = False, *a: Any, **k: Any) -> Any:
        axis = k.get("dim", dim)
        kw: dict[str, Any] = {"keepdims": bool(k.get("keepdim", keepdim))}
        if axis is not None:
            kw["axis"] = axis
        return _create(op, x, **kw)

    return run


def _flatten(x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    if start_dim == 1 and end_dim == -1:
        return _create("Flatten", x)
    if start_dim == 0 and end_dim == -1:
        return _create("Reshape", x, shape=(-1,))
    raise MXNetError(
        f"flatten(start_dim={start_dim}, end_dim={end_dim}) has no MXNet operator; "
        "use start_dim=1 (Flatten) in code that also runs on symbols"
    )


def _reshape(x: Any, *shape: Any) -> Any:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return _create("Reshape", x, shape=tuple(int(s) for s in shape))


def _cat(tensors: Any, dim: int = 0) -> Any:
    return _create("Concat", *tensors, dim=dim)


def _dropout(x: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    return _create("Dropout", x, p=p) if p > 0 else x


def _unary(op: str) -> Callable[..., Any]:
    return lambda x, *a, **k: _create(op, x)


_TABLE: dict[Any, Callable[..., Any]] = {}
for _fns, _impl in (
    ((F.relu, torch.relu, torch.Tensor.relu), _activation("relu")),
    ((F.sigmoid, torch.sigmoid, torch.Tensor.sigmoid), _activation("sigmoid")),
    ((F.tanh, torch.tanh, torch.Tensor.tanh), _activation("tanh")),
    ((F.softplus,), _activation("softrelu")),
    ((F.softmax, torch.softmax, torch.Tensor.softmax), _softmax("softmax")),
    ((F.log_softmax, torch.log_softmax, torch.Tensor.log_softmax), _softmax("log_softmax")),
    ((torch.mean, torch.Tensor.mean), _reduce("mean")),
    ((torch.sum, torch.Tensor.sum), _reduce("sum")),
    ((torch.flatten, torch.Tensor.flatten), _flatten),
    ((torch.reshape, torch.Tensor.reshape, torch.Tensor.view), _reshape),
    ((torch.cat, torch.concat), _cat),
    ((F.dropout,), _dropout),
    ((torch.abs, torch.Tensor.abs), _unary("abs")),
    ((torch.exp, torch.Tensor.exp), _unary("exp")),
    ((torch.log, torch.Tensor.log), _unary("log")),
    ((torch.sqrt, torch.Tensor.sqrt), _unary("sqrt")),
    ((torch.square, torch.Tensor.square), _unary("square")),
):
    for _f in _fns:
        _TABLE[_f] = _impl


def lookup(func: Any) -> Callable[..., Any]:
    """The symbolic version of torch function ``func``; MXNetError naming it when there is none."""
    impl = _TABLE.get(func)
    if impl is None:
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
        raise MXNetError(
            f"torch function {name} cannot take a Symbol: it has no MXNet operator here. "
            "Write the block's hybrid_forward(F, x) with F's operators (F = mx.sym when "
            "building a graph), or use Gluon layers"
        )
    return impl
