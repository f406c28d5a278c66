"""A dependency-free progress bar with loss/accuracy, samples/s and ETA."""

from __future__ import annotations

import sys
import time
from typing import IO

__all__ = ["ProgressBar", "format_duration"]


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressBar:
    """Draws ``desc [#####.....] i/total  key value ...  N samples/s  ETA m:ss``.

    On a terminal it redraws one line (at most every ``min_interval`` seconds); otherwise it
    prints a line every ``log_every`` fraction of the total so logs stay readable.
    """

    def __init__(self, total: int, desc: str = "", width: int = 24, stream: IO[str] | None = None,
                 min_interval: float = 0.2, log_every: float = 0.25, enabled: bool = True) -> None:
        self.total = max(int(total), 1)
        self.desc = desc
        self.width = width
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval = min_interval
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._log_marks = {max(1, int(self.total * k * log_every)) for k in range(1, int(1 / log_every) + 1)}
        self.count = 0
        self.samples = 0
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self._metrics: dict[str, float] = {}

    def update(self, n: int = 1, samples: int = 0, **metrics: float) -> None:
        self.count += n
        self.samples += samples
        self._metrics.update(metrics)
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.tty:
            if now - self._last_draw >= self.min_interval or self.count >= self.total:
                self._last_draw = now
                self.stream.write("\r" + self.line(now))
                self.stream.flush()
        elif self.count in self._log_marks:
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def rate(self) -> float:
        """Samples per second so far."""
        return self.samples / max(self.elapsed, 1e-9)

    def line(self, now: float | None = None) -> str:
        now = time.perf_counter() if now is None else now
        elapsed = max(now - self.start, 1e-9)
        frac = min(self.count / self.total, 1.0)
        filled = int(self.width * frac)
        bar = "#" * filled + "." * (self.width - filled)
        eta = elapsed / max(self.count, 1) * (self.total - self.count)
        parts = [f"{self.desc} [{bar}] {self.count}/{self.total}"]
        parts += [f"{k} {v:.4f}" for k, v in self._metrics.items()]
        if self.samples:
            parts.append(f"{self.samples / elapsed:,.0f} samples/s")
        parts.append(f"ETA {format_duration(eta)}" if self.count < self.total else
                     f"took {format_duration(elapsed)}")
        return "  ".join(parts)

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
