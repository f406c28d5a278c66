"""MXNet's ``gluon.contrib.data``: IntervalSampler."""

from .sampler import IntervalSampler

__all__ = ["IntervalSampler"]
