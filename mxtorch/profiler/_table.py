"""The aggregate statistics behind ``mx.profiler.dumps()``, printed as MXNet prints them.

Entries are grouped by category (``operator`` for torch's operators, ``mxtorch`` for our spans,
a :class:`~mxtorch.profiler.Domain`'s name for its tasks, frames and counters) and, inside a
category, sorted by ``sort_by`` (descending unless ``ascending``).  Durations are kept in
microseconds and printed in milliseconds; counters keep their smallest and largest value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["Stat", "AggregateStats", "SORT_KEYS"]

SORT_KEYS = ("total", "avg", "min", "max", "count")


@dataclass
class Stat:
    """One name's numbers: durations (us) or, for a counter, the values it was set to."""

    counter: bool = False
    count: int = 0
    total: float = 0.0
    min: float = float("inf")
    max: float = float("-inf")

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    @property
    def avg(self) -> float:
        if self.counter:  # MXNet's "average" of a counter: half its range
            return (self.max - self.min) / 2
        return self.total / self.count if self.count else 0.0


class AggregateStats:
    """Per category, per name: how often, how long in all, shortest, longest, mean."""

    def __init__(self) -> None:
        self.stats: dict[str, dict[str, Stat]] = {}

    def add(self, category: str, name: str, value: float, counter: bool = False) -> None:
        stat = self.stats.setdefault(category, {}).get(name)
        if stat is None:
            stat = self.stats[category][name] = Stat(counter=counter)
        stat.add(value)

    def clear(self) -> None:
        self.stats.clear()

    def _sorted(self, entries: dict[str, Stat], sort_by: str, ascending: bool) -> list[tuple[str, Stat]]:
        def key(item: tuple[str, Stat]) -> float:
            return float(getattr(item[1], sort_by))
        return sorted(entries.items(), key=key, reverse=not ascending)

    def table(self, sort_by: str = "total", ascending: bool = False) -> str:
        """MXNet's table: per category a header, then Name, Total Count, Time, Min/Max/Avg Time (ms)."""
        lines = ["", "Profile Statistics:", "\tNote the difference in units for different entries."]
        for category, entries in self.stats.items():
            lines += [category, "================="]
            lines.append(f"{'Name':<25}{'Total Count':>16} {'Time (ms)':>16} {'Min Time (ms)':>16} "
                         f"{'Max Time (ms)':>16} {'Avg Time (ms)':>16}")
            lines.append(f"{'----':<25}{'-----------':>16} {'---------':>16} {'-------------':>16} "
                         f"{'-------------':>16} {'-------------':>16}")
            for name, s in self._sorted(entries, sort_by, ascending):
                scale = 1.0 if s.counter else 1e-3  # a counter's values are shown as they are
                lines.append(f"{name:<25}{s.count:>16} {s.total * scale:>16.4f} {s.min * scale:>16.4f} "
                             f"{s.max * scale:>16.4f} {s.avg * scale:>16.4f}")
            lines.append("")
        return "\n".join(lines) + "\n"

    def json(self, sort_by: str = "total", ascending: bool = False) -> str:
        """MXNet's JSON form: {"Time": {category: {name: {Count, Total, Min, Max, Avg}}}, "Unit": ...}."""
        time: dict[str, dict[str, dict[str, float]]] = {}
        for category, entries in self.stats.items():
            time[category] = {}
            for name, s in self._sorted(entries, sort_by, ascending):
                scale = 1.0 if s.counter else 1e-3
                time[category][name] = {"Count": s.count, "Total": round(s.total * scale, 4),
                                        "Min": round(s.min * scale, 4), "Max": round(s.max * scale, 4),
                                        "Avg": round(s.avg * scale, 4)}
        return json.dumps({"Time": time, "Memory": {}, "Unit": {"Time": "ms", "Memory": "kB"}}, indent=4)
