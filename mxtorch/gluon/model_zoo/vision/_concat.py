"""Parallel branches whose outputs are concatenated along the channel axis: MXNet's
``HybridConcurrent`` (used by the Inception, SqueezeNet and DenseNet blocks)."""

from __future__ import annotations

from ...contrib.nn.basic_layers import HybridConcurrent as Concurrent

__all__ = ["Concurrent"]
