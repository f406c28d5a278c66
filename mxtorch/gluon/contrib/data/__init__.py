"""MXNet's ``gluon.contrib.data``: IntervalSampler, and ``text`` (the WikiText datasets, read from
disk)."""

from . import text
from .sampler import IntervalSampler

__all__ = ["IntervalSampler", "text"]
