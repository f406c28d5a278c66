"""MXNet's elementwise operators (unary math, broadcast binary ops, comparisons, ``where``) on torch
tensors; MXNet 1.x semantics as described in :mod:`mxtorch.nd._ops`."""

from __future__ import annotations

import builtins
import numbers
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ._common import as_tensor, is_float

__all__ = [
    "relu",
    "sigmoid",
    "hard_sigmoid",
    "tanh",
    "softsign",
    "exp",
    "log",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "cbrt",
    "rcbrt",
    "square",
    "reciprocal",
    "negative",
    "abs",
    "sign",
    "floor",
    "ceil",
    "round",
    "rint",
    "fix",
    "trunc",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "degrees",
    "radians",
    "erf",
    "erfinv",
    "gamma",
    "gammaln",
    "logical_not",
    "identity",
    "stop_gradient",
    "BlockGrad",
    "gelu",
    "broadcast_add",
    "broadcast_sub",
    "broadcast_mul",
    "broadcast_div",
    "broadcast_mod",
    "broadcast_power",
    "broadcast_maximum",
    "broadcast_minimum",
    "broadcast_hypot",
    "broadcast_equal",
    "broadcast_not_equal",
    "broadcast_greater",
    "broadcast_greater_equal",
    "broadcast_lesser",
    "broadcast_lesser_equal",
    "broadcast_logical_and",
    "broadcast_logical_or",
    "broadcast_logical_xor",
    "add",
    "subtract",
    "multiply",
    "divide",
    "modulo",
    "power",
    "maximum",
    "minimum",
    "hypot",
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "lesser",
    "lesser_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "broadcast_plus",
    "broadcast_minus",
    "elemwise_add",
    "elemwise_sub",
    "elemwise_mul",
    "elemwise_div",
    "add_n",
    "ElementWiseSum",
    "clip",
    "where",
]

# MXNet's generated operators without parameters store keyword attributes they are given and
# ignore them (MXNet's own CosineEmbeddingLoss passes ``axis=1`` to broadcast_maximum); mx.nd
# wraps these names to do the same.  MXNet's Python-level helpers (``maximum``, ``power``...)
# take no keywords and are not listed.
PARAMETERLESS = frozenset(
    n
    for n in __all__
    if n.startswith(("broadcast_", "elemwise_"))
    or n in ("where", "identity", "stop_gradient", "BlockGrad")
    or (__all__.index(n) < __all__.index("broadcast_add") and n not in ("hard_sigmoid", "gelu"))
)

_bslice = builtins.slice
_bmax = builtins.max

Tensor = torch.Tensor


def _no0d(t: Tensor) -> Tensor:
    """MXNet 1.x arrays are never 0-d: a scalar result has shape (1,)."""
    return t.reshape(1) if t.dim() == 0 else t


# ----------------------------------------------------------------------------------------------
# elementwise unary
# ----------------------------------------------------------------------------------------------


def relu(data: Tensor) -> Tensor:
    """max(data, 0)."""
    return torch.relu(data)


def sigmoid(data: Tensor) -> Tensor:
    """1 / (1 + exp(-data))."""
    return torch.sigmoid(data)


def hard_sigmoid(data: Tensor, alpha: float = 0.2, beta: float = 0.5) -> Tensor:
    """clip(alpha * data + beta, 0, 1)."""
    return torch.clamp(alpha * data + beta, 0.0, 1.0)


def tanh(data: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return torch.tanh(data)


def softsign(data: Tensor) -> Tensor:
    """data / (1 + |data|)."""
    return F.softsign(data)


def exp(data: Tensor) -> Tensor:
    return torch.exp(data)


def log(data: Tensor) -> Tensor:
    return torch.log(data)


def log2(data: Tensor) -> Tensor:
    return torch.log2(data)


def log10(data: Tensor) -> Tensor:
    return torch.log10(data)


def log1p(data: Tensor) -> Tensor:
    return torch.log1p(data)


def expm1(data: Tensor) -> Tensor:
    return torch.expm1(data)


def sqrt(data: Tensor) -> Tensor:
    return torch.sqrt(data)


def rsqrt(data: Tensor) -> Tensor:
    """1 / sqrt(data)."""
    return torch.rsqrt(data)


def cbrt(data: Tensor) -> Tensor:
    """Cube root (keeps the sign)."""
    return torch.sign(data) * torch.abs(data).pow(1.0 / 3.0)


def rcbrt(data: Tensor) -> Tensor:
    """1 / cbrt(data)."""
    return 1.0 / cbrt(data)


def square(data: Tensor) -> Tensor:
    return data * data


def reciprocal(data: Tensor) -> Tensor:
    return torch.reciprocal(data)


def negative(data: Tensor) -> Tensor:
    return torch.neg(data)


def abs(data: Tensor) -> Tensor:
    return torch.abs(data)


def sign(data: Tensor) -> Tensor:
    return torch.sign(data)


def floor(data: Tensor) -> Tensor:
    return torch.floor(data) if is_float(data) else data.clone()


def ceil(data: Tensor) -> Tensor:
    return torch.ceil(data) if is_float(data) else data.clone()


def round(data: Tensor) -> Tensor:
    """Nearest integer, halves away from zero (``round(-2.5) = -3``) as MXNet does."""
    if not is_float(data):
        return data.clone()
    return torch.sign(data) * torch.floor(torch.abs(data) + 0.5)


def rint(data: Tensor) -> Tensor:
    """Nearest integer, halves rounded down (``rint(1.5) = 1``, ``rint(-2.5) = -3``) as MXNet does."""
    if not is_float(data):
        return data.clone()
    fl = torch.floor(data)
    return fl + (data - fl > 0.5).to(data.dtype)


def fix(data: Tensor) -> Tensor:
    """Round toward zero."""
    return torch.trunc(data) if is_float(data) else data.clone()


trunc = fix


def sin(data: Tensor) -> Tensor:
    return torch.sin(data)


def cos(data: Tensor) -> Tensor:
    return torch.cos(data)


def tan(data: Tensor) -> Tensor:
    return torch.tan(data)


def arcsin(data: Tensor) -> Tensor:
    return torch.asin(data)


def arccos(data: Tensor) -> Tensor:
    return torch.acos(data)


def arctan(data: Tensor) -> Tensor:
    return torch.atan(data)


def sinh(data: Tensor) -> Tensor:
    return torch.sinh(data)


def cosh(data: Tensor) -> Tensor:
    return torch.cosh(data)


def arcsinh(data: Tensor) -> Tensor:
    return torch.asinh(data)


def arccosh(data: Tensor) -> Tensor:
    return torch.acosh(data)


def arctanh(data: Tensor) -> Tensor:
    return torch.atanh(data)


def degrees(data: Tensor) -> Tensor:
    return torch.rad2deg(data)


def radians(data: Tensor) -> Tensor:
    return torch.deg2rad(data)


def erf(data: Tensor) -> Tensor:
    return torch.erf(data)


def erfinv(data: Tensor) -> Tensor:
    return torch.erfinv(data)


def gamma(data: Tensor) -> Tensor:
    """The gamma function, elementwise."""
    return torch.exp(torch.lgamma(data)) * _gamma_sign(data)


def _gamma_sign(x: Tensor) -> Tensor:
    # Gamma is negative on (-2k-1, -2k) for k >= 0.
    neg = (x < 0) & (torch.remainder(torch.floor(x), 2) != 0)
    return torch.where(neg, -torch.ones_like(x), torch.ones_like(x))


def gammaln(data: Tensor) -> Tensor:
    return torch.lgamma(data)


def logical_not(data: Tensor) -> Tensor:
    """1 where data == 0 else 0, in data's dtype."""
    return (data == 0).to(data.dtype)


def identity(data: Tensor) -> Tensor:
    """A copy of data (differentiable)."""
    return data.clone()


def stop_gradient(data: Tensor) -> Tensor:
    """data with gradient flow cut (MXNet's BlockGrad)."""
    return data.detach()


BlockGrad = stop_gradient


def gelu(data: Tensor) -> Tensor:
    """Gaussian error linear unit (the erf form)."""
    return F.gelu(data)


# ----------------------------------------------------------------------------------------------
# elementwise binary (broadcasting)
# ----------------------------------------------------------------------------------------------


def _operands(lhs: Any, rhs: Any) -> tuple[Any, Any, torch.dtype]:
    """Tensors (or a tensor and a Python scalar) plus the dtype MXNet gives the result."""
    lt, rt = isinstance(lhs, Tensor), isinstance(rhs, Tensor)
    if lt and rt:
        return lhs, rhs, torch.result_type(lhs, rhs)
    if lt:
        if not isinstance(rhs, numbers.Number):
            rhs = as_tensor(rhs, lhs).to(lhs.dtype)
        return lhs, rhs, lhs.dtype
    if rt:
        if not isinstance(lhs, numbers.Number):
            lhs = as_tensor(lhs, rhs).to(rhs.dtype)
        return lhs, rhs, rhs.dtype
    lhs_t, rhs_t = torch.as_tensor(lhs, dtype=torch.float64), torch.as_tensor(rhs, dtype=torch.float64)
    return lhs_t, rhs_t, torch.float64


def _scalar_result(lhs: Any, rhs: Any, out: Tensor) -> Any:
    if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
        return out.item()
    return out


def _tensorize(x: Any, like: Tensor) -> Tensor:
    return x if isinstance(x, Tensor) else torch.as_tensor(x, dtype=like.dtype, device=like.device)


def _other(a: Any, b: Any) -> Tensor:
    return a if isinstance(a, Tensor) else b


def broadcast_add(lhs: Any, rhs: Any) -> Any:
    """lhs + rhs with broadcasting."""
    a, b, _ = _operands(lhs, rhs)
    return _scalar_result(lhs, rhs, a + b)


def broadcast_sub(lhs: Any, rhs: Any) -> Any:
    """lhs - rhs with broadcasting."""
    a, b, _ = _operands(lhs, rhs)
    return _scalar_result(lhs, rhs, a - b)


def broadcast_mul(lhs: Any, rhs: Any) -> Any:
    """lhs * rhs with broadcasting."""
    a, b, _ = _operands(lhs, rhs)
    return _scalar_result(lhs, rhs, a * b)


def broadcast_div(lhs: Any, rhs: Any) -> Any:
    """lhs / rhs with broadcasting (integer arrays divide truncating, keeping their dtype)."""
    a, b, dt = _operands(lhs, rhs)
    if dt.is_floating_point or dt.is_complex:
        out = a / b
    else:
        a, b = _tensorize(a, _other(a, b)), _tensorize(b, _other(a, b))
        out = torch.div(a, b, rounding_mode="trunc").to(dt)
    return _scalar_result(lhs, rhs, out)


def remainder(a: Tensor, b: Any) -> Tensor:
    """``a mod b`` with the sign of ``b`` (Python's rule), and 0 where ``b`` is 0: MXNet's mod, where
    torch raises (integers) or gives NaN (floats)."""
    if not isinstance(b, Tensor):
        return torch.zeros_like(a) if b == 0 else torch.remainder(a, b)
    zero = b == 0
    r = torch.remainder(a, torch.where(zero, torch.ones_like(b), b))
    return torch.where(zero, torch.zeros_like(r), r)


def broadcast_mod(lhs: Any, rhs: Any) -> Any:
    """lhs mod rhs, the result taking the sign of rhs (Python's rule); 0 where rhs is 0 (MXNet's)."""
    a, b, _ = _operands(lhs, rhs)
    a = _tensorize(a, _other(a, b)) if not isinstance(a, Tensor) else a
    return _scalar_result(lhs, rhs, remainder(a, b))


def broadcast_power(lhs: Any, rhs: Any) -> Any:
    """lhs ** rhs with broadcasting."""
    a, b, _ = _operands(lhs, rhs)
    return _scalar_result(lhs, rhs, torch.pow(a, b))


def broadcast_maximum(lhs: Any, rhs: Any) -> Any:
    """Elementwise maximum with broadcasting."""
    a, b, dt = _operands(lhs, rhs)
    t = _other(a, b)
    return _scalar_result(lhs, rhs, torch.maximum(_tensorize(a, t).to(dt), _tensorize(b, t).to(dt)))


def broadcast_minimum(lhs: Any, rhs: Any) -> Any:
    """Elementwise minimum with broadcasting."""
    a, b, dt = _operands(lhs, rhs)
    t = _other(a, b)
    return _scalar_result(lhs, rhs, torch.minimum(_tensorize(a, t).to(dt), _tensorize(b, t).to(dt)))


def broadcast_hypot(lhs: Any, rhs: Any) -> Any:
    """sqrt(lhs**2 + rhs**2) with broadcasting."""
    a, b, dt = _operands(lhs, rhs)
    t = _other(a, b)
    return _scalar_result(lhs, rhs, torch.hypot(_tensorize(a, t).to(dt), _tensorize(b, t).to(dt)))


def _named(fn: Callable[[Any, Any], Any], name: str) -> Callable[[Any, Any], Any]:
    fn.__name__ = fn.__qualname__ = f"broadcast_{name}"
    fn.__doc__ = f"Elementwise {name.replace('_', ' ')} with broadcasting: 1 or 0 in the input dtype."
    return fn


def _compare(name: str, op: Callable[[Any, Any], Tensor]) -> Callable[[Any, Any], Any]:
    def fn(lhs: Any, rhs: Any) -> Any:
        a, b, dt = _operands(lhs, rhs)
        if not isinstance(a, Tensor):
            a = _tensorize(a, b)
        return _scalar_result(lhs, rhs, op(a, b).to(dt))

    return _named(fn, name)


def _logical(name: str, op: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Any, Any], Any]:
    def fn(lhs: Any, rhs: Any) -> Any:
        a, b, dt = _operands(lhs, rhs)
        t = _other(a, b)
        return _scalar_result(lhs, rhs, op(_tensorize(a, t) != 0, _tensorize(b, t) != 0).to(dt))

    return _named(fn, name)


broadcast_equal = _compare("equal", lambda a, b: a == b)
broadcast_not_equal = _compare("not_equal", lambda a, b: a != b)
broadcast_greater = _compare("greater", lambda a, b: a > b)
broadcast_greater_equal = _compare("greater_equal", lambda a, b: a >= b)
broadcast_lesser = _compare("lesser", lambda a, b: a < b)
broadcast_lesser_equal = _compare("lesser_equal", lambda a, b: a <= b)
broadcast_logical_and = _logical("logical_and", torch.logical_and)
broadcast_logical_or = _logical("logical_or", torch.logical_or)
broadcast_logical_xor = _logical("logical_xor", torch.logical_xor)


add = broadcast_add
subtract = broadcast_sub
multiply = broadcast_mul
divide = broadcast_div
modulo = broadcast_mod


def power(base: Any, exp: Any) -> Any:
    """base ** exp with broadcasting (MXNet's ``nd.power(base, exp)``)."""
    return broadcast_power(base, exp)


maximum = broadcast_maximum
minimum = broadcast_minimum
hypot = broadcast_hypot
equal = broadcast_equal
not_equal = broadcast_not_equal
greater = broadcast_greater
greater_equal = broadcast_greater_equal
lesser = broadcast_lesser
lesser_equal = broadcast_lesser_equal
logical_and = broadcast_logical_and
logical_or = broadcast_logical_or
logical_xor = broadcast_logical_xor
broadcast_plus = broadcast_add
broadcast_minus = broadcast_sub


def _same_shape(lhs: Tensor, rhs: Tensor, name: str) -> None:
    if tuple(lhs.shape) != tuple(rhs.shape):
        raise ValueError(f"{name}: shapes must match, got {tuple(lhs.shape)} and {tuple(rhs.shape)}")


def elemwise_add(lhs: Tensor, rhs: Tensor) -> Tensor:
    """lhs + rhs for arrays of the same shape."""
    _same_shape(lhs, rhs, "elemwise_add")
    return lhs + rhs


def elemwise_sub(lhs: Tensor, rhs: Tensor) -> Tensor:
    _same_shape(lhs, rhs, "elemwise_sub")
    return lhs - rhs


def elemwise_mul(lhs: Tensor, rhs: Tensor) -> Tensor:
    _same_shape(lhs, rhs, "elemwise_mul")
    return lhs * rhs


def elemwise_div(lhs: Tensor, rhs: Tensor) -> Tensor:
    _same_shape(lhs, rhs, "elemwise_div")
    return broadcast_div(lhs, rhs)  # type: ignore[no-any-return]


def add_n(*args: Tensor) -> Tensor:
    """The sum of arrays of the same shape."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    if not args:
        raise ValueError("add_n needs at least one array")
    out = args[0]
    for a in args[1:]:
        _same_shape(out, a, "add_n")
        out = out + a
    return out if len(args) > 1 else out.clone()


ElementWiseSum = add_n


def clip(data: Tensor, a_min: float, a_max: float) -> Tensor:
    """data limited to ``[a_min, a_max]``."""
    if a_min > a_max:
        raise ValueError(f"clip: a_min ({a_min}) must not exceed a_max ({a_max})")
    return torch.clamp(data, a_min, a_max)


def where(condition: Tensor, x: Any, y: Any) -> Tensor:
    """x where condition is non-zero, else y; a 1-D condition selects rows of x and y."""
    cond = as_tensor(condition)
    xt = x if isinstance(x, Tensor) else None
    yt = y if isinstance(y, Tensor) else None
    ref = xt if xt is not None else yt
    if ref is None:
        raise TypeError("where: x or y must be a tensor")
    if cond.dim() == 1 and ref.dim() > 1 and tuple(cond.shape) != tuple(ref.shape):
        if cond.shape[0] != ref.shape[0]:
            raise ValueError(
                f"where: a 1-D condition must have length {ref.shape[0]} (x's first dimension), "
                f"got {cond.shape[0]}"
            )
        cond = cond.reshape((-1,) + (1,) * (ref.dim() - 1))
    x = _tensorize(x, ref)
    y = _tensorize(y, ref)
    return torch.where(cond != 0, x, y)

