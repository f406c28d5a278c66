"""IntervalSampler: every ``interval``-th index, then (with ``rollover``) the same from 1, 2, ..."""

from __future__ import annotations

from collections.abc import Iterator

from ...data.sampler import _ArgumentsOnlySampler

__all__ = ["IntervalSampler"]


class IntervalSampler(_ArgumentsOnlySampler):
    """Indices ``0, interval, 2*interval, ...`` below ``length``; with ``rollover`` (default)
    followed by ``1, 1+interval, ...`` and so on, so every index comes once
    (``IntervalSampler(6, 3)``: 0, 3, 1, 4, 2, 5)."""

    def __init__(self, length: int, interval: int, rollover: bool = True) -> None:
        super().__init__()
        for what, v in (("length", length), ("interval", interval)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"IntervalSampler: {what} must be a positive int, got {v!r}")
        if interval >= length:
            raise ValueError(f"IntervalSampler: interval ({interval}) must be smaller than length ({length})")
        self._length, self._interval, self._rollover = length, interval, bool(rollover)

    def __iter__(self) -> Iterator[int]:
        for start in range(self._interval if self._rollover else 1):
            yield from range(start, self._length, self._interval)

    def __len__(self) -> int:
        return self._length if self._rollover else len(range(0, self._length, self._interval))

    def __repr__(self) -> str:
        return f"IntervalSampler(length={self._length}, interval={self._interval}, rollover={self._rollover})"
