"""Small helpers shared by the ``mxtorch.nd`` modules (argument coercion, axis handling)."""

from __future__ import annotations

import builtins
import functools
import inspect
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .._dtype import to_torch_dtype
from .._recording import is_training  # autograd's train mode, kept below the operators
from ..base import MXNetError
from ..context import Context, as_context, context_of, num_gpus

Shape = int | Sequence[int]


def device_of(ctx: Context | str | torch.device | None) -> torch.device:
    """The torch device for ``ctx`` (None means the current context).

    A GPU context on a machine without that CUDA device is refused with MXNetError, as MXNet's
    CPU build refuses to run an operator there (code catching ``mx.MXNetError`` skips the GPU).
    """
    c = as_context(ctx)
    if c.device_type == "gpu" and c.device_id >= num_gpus():
        raise MXNetError(f"{c} was asked for but this machine has {num_gpus()} CUDA device(s): "
                         "use mx.cpu(), or check mx.context.num_gpus() first")
    return c.torch_device


def dtype_of(dtype: Any, default: torch.dtype | None = torch.float32) -> torch.dtype:
    """``dtype`` as a torch dtype (None gives ``default``)."""
    return to_torch_dtype(dtype, default)


def tag(t: torch.Tensor, ctx: Context | str | torch.device | None) -> torch.Tensor:
    """Tag ``t`` with its MXNet context when that context is not implied by its device (cpu(1))."""
    c = as_context(ctx)
    if c != context_of(t):
        t._mx_ctx = c  # type: ignore[attr-defined]
    return t


def mxnet_zero_dim(t: torch.Tensor) -> torch.Tensor:
    """Mark a 0-d ``t`` as one of MXNet's own 0-d arrays (``mx.nd.array(scalar)``, a loaded V3
    scalar): ``asnumpy()`` gives it back 0-d, where a torch 0-d result stands for shape (1,)."""
    if t.dim() == 0:
        t._mx_zero_dim = True  # type: ignore[attr-defined]
    return t


def as_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    """An int or a sequence of ints as a shape tuple; raises naming the bad value."""
    if shape is None:
        return ()
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (int(shape),)
    if isinstance(shape, torch.Size):
        return tuple(shape)
    try:
        out = tuple(int(s) for s in shape)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {shape!r}") from e
    for s, orig in zip(out, shape):
        if isinstance(orig, bool) or (isinstance(orig, float) and orig != s):
            raise TypeError(f"{what} must be an int or a sequence of ints, got {shape!r}")
    return out


def check_nonneg_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    if builtins.any(s < 0 for s in shape):
        raise ValueError(f"shape entries must be non-negative, got {shape}")
    return shape


def norm_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """Turn a possibly negative axis into ``0..ndim-1``; raises naming the value and the ndim."""
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError(f"{what} must be an int, got {axis!r}")
    a = int(axis)
    if not -ndim <= a < builtins.max(ndim, 1):
        raise ValueError(f"{what}={axis} is out of range for an array with {ndim} dimension(s)")
    return a % builtins.max(ndim, 1)


def norm_axes(axis: Any, ndim: int, exclude: bool = False) -> tuple[int, ...]:
    """Axes for a reduction: None means all; ``exclude`` gives the complement (MXNet's flag)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)) and len(axis) == 0:
        return () if exclude else tuple(range(ndim))
    if isinstance(axis, numbers.Integral):
        axis = (axis,)
    axes = tuple(sorted({norm_axis(a, ndim) for a in axis}))
    if exclude:
        axes = tuple(a for a in range(ndim) if a not in axes)
    return axes


def as_tensor(x: Any, like: torch.Tensor | None = None) -> torch.Tensor:
    """``x`` as a tensor: tensors pass through; numpy/scalars follow ``like``'s device."""
    if isinstance(x, torch.Tensor):
        return x
    device = like.device if like is not None else None
    if isinstance(x, np.ndarray):
        return torch.as_tensor(x, device=device)
    if like is not None and isinstance(x, numbers.Number):
        return torch.as_tensor(x, dtype=like.dtype, device=device)
    return torch.as_tensor(np.asarray(x), device=device)


def training_flag(training: bool | None) -> bool:
    """An operator's ``training`` argument; None means autograd's current train mode (MXNet's rule)."""
    if training is not None:
        return bool(training)
    return bool(is_training())


def is_float(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def to_index(t: Any, like: torch.Tensor | None = None) -> torch.Tensor:
    """Indices (MXNet passes them as float arrays) as int64, rounding float values toward zero."""
    t = as_tensor(t, like)
    if t.dtype != torch.int64:
        t = t.to(torch.int64)
    return t


def write_out(result: Any, out: Any, op: str) -> Any:
    """Write an operator's ``result`` into MXNet's ``out=`` array(s) and return them.

    ``out`` must match the result's shape and dtype (MXNet refuses a mismatch too); an operator
    with several outputs takes a list of as many arrays.  The write is recorded by autograd
    unless ``out`` is a leaf that requires grad (a parameter), which is written as data.
    """
    if isinstance(result, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(out) != len(result):
            got = f"a list of {len(out)}" if isinstance(out, (list, tuple)) else type(out).__name__
            raise ValueError(f"{op}: out= must be a list of {len(result)} arrays (one per output), got {got}")
        return [_write_one(r, o, op) for r, o in zip(result, out)]
    return _write_one(result, out, op)


def _write_one(result: Any, out: Any, op: str) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{op}: out= must be a tensor, got {type(out).__name__}")
    if result is out:
        return out
    if not isinstance(result, torch.Tensor):
        result = torch.as_tensor(result, dtype=out.dtype, device=out.device)
    if tuple(out.shape) != tuple(result.shape):
        raise ValueError(f"{op}: out= has shape {tuple(out.shape)} but the result has shape "
                         f"{tuple(result.shape)}; pass an array of the result's shape")
    if out.dtype != result.dtype:
        raise TypeError(f"{op}: out= has dtype {out.dtype} but the result has dtype {result.dtype}; "
                        "pass an array of the result's dtype")
    if result.requires_grad and torch.is_grad_enabled() and not (out.is_leaf and out.requires_grad):
        out.copy_(result)
    else:
        with torch.no_grad():
            out.copy_(result)
    return out


class OperatorArgumentError(MXNetError, ValueError):
    """An ``mx.nd`` operator refused its arguments: MXNet raises MXNetError there (the ValueError
    base keeps ``except ValueError`` working)."""


class OperatorIndexError(MXNetError, IndexError):
    """An ``mx.nd`` operator's index out of range (an MXNetError, as in MXNet; still an IndexError)."""


def _as_mxnet_error(e: Exception) -> Exception:
    # what an operator raised, as MXNet's error class with the same Python base (torch's own
    # RuntimeError subclasses, such as out-of-memory, pass unchanged)
    if isinstance(e, MXNetError):
        return e
    if isinstance(e, ValueError):
        return OperatorArgumentError(str(e))
    if isinstance(e, IndexError):
        return OperatorIndexError(str(e))
    return MXNetError(str(e)) if type(e) is RuntimeError else e


def mx_operator(fn: Callable[..., Any], parameterless: bool = False) -> Callable[..., Any]:
    """``fn`` taking MXNet's operator keywords too: ``out=`` (write the result there) and ``name=``.

    Every MXNet ``mx.nd`` operator accepts both; ``name`` only names a symbol node, so it is
    ignored here.  Functions that already take ``out`` are returned unchanged.  A
    ``parameterless`` operator also ignores keywords that are not its inputs, as MXNet's
    operators without parameters do (``broadcast_maximum(a, b, axis=1)``).  What the operator
    raises (a ValueError, IndexError or torch's RuntimeError) becomes an MXNetError of the same
    Python base, as MXNet raises MXNetError there.
    """
    sig = inspect.signature(fn)
    if "out" in sig.parameters:
        return fn
    op = fn.__name__
    inputs = frozenset(sig.parameters) if parameterless else None

    @functools.wraps(fn)
    def operator(*args: Any, out: Any = None, name: str | None = None, **kwargs: Any) -> Any:
        if kwargs and inputs is not None:
            kwargs = {k: v for k, v in kwargs.items() if k in inputs}
        try:
            result = fn(*args, **kwargs)
        except (ValueError, IndexError, RuntimeError) as e:
            raise _as_mxnet_error(e) from e
        return result if out is None else write_out(result, out, op)

    params = list(sig.parameters.values())
    var_kw = [p for p in params if p.kind == inspect.Parameter.VAR_KEYWORD]
    params = [p for p in params if p.kind != inspect.Parameter.VAR_KEYWORD and p.name != "name"]
    params += [inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None),
               inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default=None), *var_kw]
    operator.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    return operator
