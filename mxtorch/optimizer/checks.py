"""Argument checks shared by the optimizers' constructors (MXNet's hyper-parameter rules)."""

from __future__ import annotations

import math
import numbers
from typing import Any


def _check_real(
    name: str,
    value: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """Return ``float(value)`` after checking that it is a finite real number within the bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}, got {value!r}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi}, got {value!r}")
    return v


def _check_unit(name: str, value: Any) -> float:
    """A decay rate (beta, rho, momentum): a number in [0, 1)."""
    return _check_real(name, value, lo=0.0, hi=1.0, hi_open=True)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _check_optional_positive(name: str, value: Any) -> float | None:
    if value is None:
        return None
    return _check_real(name, value, lo=0.0, lo_open=True)


def _check_int(name: str, value: Any, lo: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value!r}")
    return int(value)


def _as_list(name: str, value: Any, n: int) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(
            f"index is a list of {n} entries, so {name} must be a list of the same length; "
            f"got {type(value).__name__}"
        )
    if len(value) != n:
        raise ValueError(f"index has {n} entries but {name} has {len(value)}")
    return list(value)


def _check_moment_rates(beta1: Any, beta2: Any, epsilon: Any) -> tuple[float, float, float]:
    """The Adam family's ``(beta1, beta2, epsilon)``, checked: decay rates in [0, 1), ``epsilon >= 0``."""
    return _check_unit("beta1", beta1), _check_unit("beta2", beta2), _check_real("epsilon", epsilon, lo=0.0)


def _check_step_lr(who: str, lr: float, index: Any) -> None:
    """Raise ValueError unless ``lr > 0``: ``who``'s update rule divides by the learning rate."""
    if lr <= 0.0:
        raise ValueError(f"{who} divides by the learning rate; got learning rate {lr!r} for index {index!r}")


# the checks lr schedulers share with the optimizers (another package: public names)
check_real = _check_real
check_int = _check_int
