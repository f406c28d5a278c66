"""``mx.sym.power`` / ``pow``, ``maximum``, ``minimum`` and ``hypot``: MXNet's two-argument symbol
functions that take a symbol or a number on either side, as MXNet's ``symbol.py`` defines them.

Two symbols make the elementwise node (``_power``, ``_maximum`` ...: same shapes, no broadcasting);
a symbol and a number the scalar node (``_power_scalar``, ``_rpower_scalar`` for ``2 ** x``; the
others are symmetric); two numbers give the Python result.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from .symbol import Symbol

__all__ = ["power", "pow", "maximum", "minimum", "hypot"]


def _ufunc(name: str, on_numbers: Callable[[Any, Any], Any], symmetric: bool) -> Callable[[Any, Any], Any]:
    def fn(left: Any, right: Any) -> Any:
        if isinstance(left, Symbol):
            return left._binary(right, name)
        if isinstance(right, Symbol):
            if not isinstance(left, numbers.Real):
                raise TypeError(f"{fn.__name__}: left must be a Symbol or a number, "
                                f"got {type(left).__name__}")
            return right._binary(left, name, reverse=not symmetric)
        if isinstance(left, numbers.Real) and isinstance(right, numbers.Real):
            return on_numbers(left, right)
        raise TypeError(f"{fn.__name__}: needs Symbols or numbers, got {type(left).__name__} and "
                        f"{type(right).__name__}")

    return fn


power = _ufunc("power", lambda a, b: a**b, symmetric=False)
power.__name__ = "power"
pow = power  # noqa: A001 - MXNet's name
maximum = _ufunc("maximum", max, symmetric=True)
maximum.__name__ = "maximum"
minimum = _ufunc("minimum", min, symmetric=True)
minimum.__name__ = "minimum"
hypot = _ufunc("hypot", math.hypot, symmetric=True)
hypot.__name__ = "hypot"
