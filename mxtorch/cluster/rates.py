"""Link rates as ``tc`` writes them: ``'10gbit'``, ``'1gbit'``, ``'100mbit'``, or no limit.

Example::

    >>> parse_rate("1gbit"), parse_rate("2.5Gbit"), parse_rate("none")
    (1000000000, 2500000000, None)
    >>> format_rate(10**9)
    '1gbit'
"""

from __future__ import annotations

import re

from .errors import ClusterError

__all__ = ["parse_rate", "format_rate", "UNLIMITED"]

UNLIMITED = ("none", "off", "unlimited")
"""Words that mean "do not shape this link"."""

_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?bit)\s*$", re.IGNORECASE)


def parse_rate(text: str | int | None) -> int | None:
    """Bits per second for ``text`` (``'1gbit'``, ``'100mbit'``, an int), or None for no limit.

    Only bit units are accepted: in ``tc``, ``'bps'`` means *bytes* per second, a classic
    source of 8x mistakes, so it is refused with a hint.
    """
    if text is None:
        return None
    if isinstance(text, bool):
        raise ClusterError(f"bandwidth {text!r} is not a rate: write e.g. '1gbit', '100mbit' or 'none'")
    if isinstance(text, int):
        if text <= 0:
            raise ClusterError(f"bandwidth {text} bit/s must be positive (or 'none' for no limit)")
        return text
    if text.strip().lower() in UNLIMITED:
        return None
    m = _RATE_RE.match(text)
    if m is None:
        hint = " ('bps' is bytes per second in tc: write bits, e.g. '8mbit' for 1 MB/s)" \
            if "bps" in text.lower() else ""
        raise ClusterError(f"bandwidth {text!r} is not a rate: write a number and one of bit, kbit, mbit, "
                           f"gbit, tbit (e.g. '1gbit', '100mbit'), or 'none' for no limit{hint}")
    bits = round(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if bits <= 0:
        raise ClusterError(f"bandwidth {text!r} must be positive (or 'none' for no limit)")
    return bits


def format_rate(bits: int | None) -> str:
    """``10**9`` -> ``'1gbit'``; None -> ``'unlimited'``; the largest unit that divides evenly."""
    if bits is None:
        return "unlimited"
    for unit in ("tbit", "gbit", "mbit", "kbit"):
        if bits % _UNITS[unit] == 0:
            return f"{bits // _UNITS[unit]}{unit}"
    return f"{bits}bit"
